-- requests.lua — wrk script of bench/serve: POSTs the bodies of BODIES_FILE (one JSON body per
-- line) to /v1/systemone in turn, each thread starting at its own offset so that concurrent
-- requests mix the records.
local bodies = {}
local next_index = 1
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("offset", counter)
end

function init(args)
  local path = os.getenv("BODIES_FILE")
  for line in io.lines(path) do
    if #line > 0 then bodies[#bodies + 1] = line end
  end
  next_index = ((offset or 1) - 1) % #bodies + 1
end

function request()
  local body = bodies[next_index]
  next_index = next_index % #bodies + 1
  return wrk.format("POST", "/v1/systemone", {["Content-Type"] = "application/json"}, body)
end
