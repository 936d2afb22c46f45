/*
 * clef.h — the public C API of libclef, an engine for Cloudflare's Clef decision models.
 *
 * A Clef model reads a state and a schema of typed questions and returns a probability for
 * every allowed option of every question, in one forward pass. This header is the whole
 * public surface: opaque handles, params structs, functions and status codes.
 *
 * Usage (error handling shortened):
 *
 *     clef_model_params mp = clef_model_default_params();
 *     clef_model *model = NULL;
 *     if (clef_model_load("releases/clef-flash", &mp, &model) != CLEF_OK) {
 *         fprintf(stderr, "%s\n", clef_last_error());
 *         return 1;
 *     }
 *     ...
 *     clef_model_free(model);
 *
 * Thread safety: a loaded clef_model is read-only and may be shared by threads; each thread
 * decides on its own clef_context (see "models, contexts and decisions" below).
 * clef_last_error() is per thread.
 * The library never prints to stdout and never exits the process; log lines go through the
 * callback set by clef_log_set().
 */
#ifndef CLEF_H
#define CLEF_H

#include <stddef.h>
#include <stdint.h>

/* CLEF_API marks what libclef exports. The library is built with hidden visibility, so the
 * functions declared with it in include/ are the only symbols the shared library exports and
 * the only global symbols of the installed static archive. */
#ifndef CLEF_API
#if defined(__GNUC__)
#define CLEF_API __attribute__((visibility("default")))
#else
#define CLEF_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CLEF_VERSION_MAJOR 0
#define CLEF_VERSION_MINOR 1
#define CLEF_VERSION_PATCH 0

/* Library version as "MAJOR.MINOR.PATCH". Static string. */
CLEF_API const char *clef_version(void);

/*
 * Status codes. 0 is success; every failure is negative and distinct, so scripts and
 * clients can tell one refusal from another. Ranges: -1..-99 general, -100..-199 release
 * files, -200..-299 tokenizer, -300..-399 requests and records, -400..-499 model/runtime.
 * Codes are stable once released: add new ones at the end of their range.
 */
typedef enum clef_status {
    CLEF_OK = 0,

    /* general */
    CLEF_ERR_INVALID_ARG = -1,      /* a NULL or out-of-range argument from the caller */
    CLEF_ERR_OUT_OF_MEMORY = -2,    /* an allocation failed */
    CLEF_ERR_IO = -3,               /* a read, open or map failed (errno text in the message) */
    CLEF_ERR_UNSUPPORTED = -4,      /* a valid input this build does not implement */
    CLEF_ERR_INTERNAL = -5,         /* a bug: please report with the message */
    CLEF_ERR_NOT_REGULAR = -6,      /* a file is a FIFO, device, directory or socket: refused
                                       at open, nothing read from it */

    /* release files: safetensors */
    CLEF_ERR_FILE_MISSING = -100,       /* a required release file does not exist */
    CLEF_ERR_ST_TRUNCATED = -101,       /* file shorter than its 8-byte header length field or its data area */
    CLEF_ERR_ST_HEADER_SIZE = -102,     /* header length past EOF or absurdly large */
    CLEF_ERR_ST_HEADER_JSON = -103,     /* header is not valid UTF-8 JSON */
    CLEF_ERR_ST_HEADER_SCHEMA = -104,   /* header JSON has wrong fields or types */
    CLEF_ERR_ST_DUPLICATE_TENSOR = -105,/* a tensor name appears twice */
    CLEF_ERR_ST_UNKNOWN_DTYPE = -106,   /* a dtype string the engine does not know */
    CLEF_ERR_ST_OFFSETS_RANGE = -107,   /* data_offsets outside the data area, or begin > end */
    CLEF_ERR_ST_OFFSETS_OVERLAP = -108, /* two tensors' data overlap */
    CLEF_ERR_ST_SIZE_MISMATCH = -109,   /* data_offsets span != product(shape) * dtype size */
    /* release files: index and layout */
    CLEF_ERR_INDEX_JSON = -110,         /* model.safetensors.index.json is not valid */
    CLEF_ERR_SHARD_MISSING = -111,      /* a shard named by the index does not exist */
    CLEF_ERR_SHARD_PATH = -112,         /* a release file's path escapes the release (.., absolute,
                                           symlink out): shards, configs, tokenizer files,
                                           complete.json and the files it lists */
    CLEF_ERR_INDEX_TENSOR_ABSENT = -113,/* the index maps a tensor to a shard that lacks it */
    CLEF_ERR_INDEX_UNLISTED = -114,     /* a shard holds a tensor the index does not list */
    CLEF_ERR_INDEX_TOTAL_SIZE = -115,   /* metadata.total_size != sum of tensor bytes */
    /* release files: config and model contents */
    CLEF_ERR_CONFIG_JSON = -120,        /* config.json / joint_head_config.json not valid JSON */
    CLEF_ERR_CONFIG_INVALID = -121,     /* a config field missing, mistyped or inconsistent */
    CLEF_ERR_TENSOR_MISSING = -122,     /* a tensor the model needs is in no shard */
    CLEF_ERR_TENSOR_UNEXPECTED = -123,  /* a tensor the model does not know */
    CLEF_ERR_TENSOR_SHAPE = -124,       /* a tensor's shape does not match the config */
    CLEF_ERR_TENSOR_DTYPE = -125,       /* a tensor's dtype is not allowed for its role */
    CLEF_ERR_SCALE_INVALID = -126,      /* a quantization scale is NaN, Inf, zero or negative */
    CLEF_ERR_QUANT_CONFIG = -127,       /* quantization metadata missing or inconsistent */
    CLEF_ERR_TENSOR_VALUES = -128,      /* a weight holds NaN or Inf (the message names it) */
    /* release files: complete.json manifest */
    CLEF_ERR_MANIFEST_JSON = -130,      /* complete.json not valid or wrong shape */
    CLEF_ERR_MANIFEST_SIZE = -131,      /* a file's size differs from complete.json */
    CLEF_ERR_MANIFEST_HASH = -132,      /* a file's SHA-256 differs from complete.json */
    CLEF_ERR_MANIFEST_FILE = -133,      /* complete.json lists a file that is missing */

    /* tokenizer */
    CLEF_ERR_TOKENIZER_FORMAT = -200,     /* tokenizer.json malformed */
    CLEF_ERR_TOKENIZER_UNSUPPORTED = -201,/* tokenizer.json uses a feature not implemented (named) */
    CLEF_ERR_INVALID_UTF8 = -202,         /* input text is not valid UTF-8 */

    /* requests and records */
    CLEF_ERR_REQUEST_JSON = -300,       /* request body is not valid JSON */
    CLEF_ERR_REQUEST_INVALID = -301,    /* request fails validation (HTTP 422) */
    CLEF_ERR_REQUEST_TOO_LONG = -302,   /* prompt over max_length, or body over its cap (HTTP 413) */

    /* model and runtime */
    CLEF_ERR_MODEL_STATE = -400,        /* the call does not fit the model's state (e.g. batch too large) */
} clef_status;

/* A short, static, human name for a status ("tensor shape mismatch"). Never NULL. */
CLEF_API const char *clef_status_str(int status);

/*
 * The detailed message of the last failure on this thread, naming the file, tensor or field,
 * with expected vs got. Valid until the next libclef call on this thread. Never NULL.
 */
CLEF_API const char *clef_last_error(void);

/* Log levels for the callback. */
typedef enum clef_log_level {
    CLEF_LOG_ERROR = 0,
    CLEF_LOG_WARN = 1,
    CLEF_LOG_INFO = 2,
    CLEF_LOG_DEBUG = 3,
} clef_log_level;

/* Receives every log line (no trailing newline). user is passed through unchanged. */
typedef void (*clef_log_callback)(clef_log_level level, const char *text, void *user);

/* Route log lines to cb (NULL: the default, which writes WARN and ERROR to stderr). */
CLEF_API void clef_log_set(clef_log_callback cb, void *user);

/* ==== models, contexts and decisions ==========================================================
 *
 * A clef_model is a loaded release: weights placed once on a backend, and the tokenizer. It is
 * read-only after clef_model_load. A clef_context is what runs forwards: a workspace planned at
 * creation for its largest packed batch, and its own handle on the backend (later a GPU
 * stream). Deciding runs the backbone once over each record (at its own length: a batch is
 * never padded), then the joint schema head, and returns the SystemOne answer body.
 *
 *     clef_model_params mp = clef_model_default_params();
 *     mp.n_threads = 8;
 *     clef_model *model = NULL;
 *     if (clef_model_load("demo/clef-demo", &mp, &model) != CLEF_OK) { ...clef_last_error()... }
 *     clef_context *ctx = NULL;
 *     if (clef_context_create(model, NULL, &ctx) != CLEF_OK) { ... }
 *     char *answer = NULL;
 *     if (clef_context_decide(ctx, request, strlen(request), &answer) != CLEF_OK) { ... }
 *     puts(answer);                 // {"model":...,"answers":{...},"usage":{...}}
 *     clef_string_free(answer);
 *     clef_context_free(ctx);
 *     clef_model_free(model);
 *
 * Thread safety: many contexts over one model decide at the same time, with no lock between
 * them (the weights are held once and only read). One context runs one call at a time: give
 * each thread its own. The clef_model_decide* functions are the one-call path: they share one
 * default context, created at their first call, and take turns on it.
 */

typedef struct clef_model clef_model;
typedef struct clef_context clef_context;

/* What to do when a record's prompt is longer than max_length tokens. */
typedef enum clef_truncation {
    CLEF_TRUNCATION_TRUNCATE = 0, /* cut the state from its END to fit (the reference encoder's
                                     behaviour); the cut is reported in usage.truncated_tokens */
    CLEF_TRUNCATION_REFUSE = 1,   /* refuse the record with CLEF_ERR_REQUEST_TOO_LONG */
} clef_truncation;

/* Load progress: stage is a static string ("weights", "head", ...); done and total are bytes
 * (total 0 when unknown). Called on the loading thread. */
typedef void (*clef_progress_callback)(const char *stage, uint64_t done, uint64_t total,
                                       void *user);

/* Where a model's weights are placed (docs/model-api.md, "Placement profiles"). On the CPU
 * every profile is the same: everything is host memory. */
typedef enum clef_profile {
    CLEF_PROFILE_RESIDENT = 0,   /* every backbone and head weight in device memory. lm_head is
                                    never resident: each record's option rows are read from
                                    the release file at prepare */
    CLEF_PROFILE_HOST_EMBED = 1, /* as RESIDENT, but embed_tokens stays in host RAM: each
                                    forward gathers its tokens' rows there and copies only
                                    those to the device (vocab x hidden x 2 bytes less on it) */
    CLEF_PROFILE_24GB = 2,       /* the NF4 27B release's "24gb" profile: RESIDENT's placement,
                                    and the model's device memory plus each context's must stay
                                    within 24 GiB: a load or context create past it is refused
                                    (CLEF_ERR_OUT_OF_MEMORY, naming the bytes) */
    CLEF_PROFILE_16GB = 3,       /* the "16gb" profile: HOST_EMBED's placement within 16 GiB */
} clef_profile;

typedef struct clef_model_params {
    const char *backend;     /* the older name of `device` below, used when device is NULL:
                                "cpu", "cuda" or "cuda:N"; NULL = "cpu" */
    int32_t n_threads;       /* CPU threads of each forward (every context's); 0 = all available */
    int32_t max_length;      /* tokens per record, prompt included; 0 = 16384 (the reference
                                default). Records over it are truncated or refused. */
    int32_t max_questions;   /* questions per record; 0 = 64 (docs/encoding.md) */
    int32_t max_options;     /* options per record, all questions together; 0 = 16320
                                (64 questions x 255 options). Sizes the head's workspace. */
    clef_truncation truncation; /* default CLEF_TRUNCATION_TRUNCATE */
    int32_t verify_hashes;   /* 1: check every SHA-256 listed in complete.json (slow); 0: sizes */
    clef_progress_callback progress; /* NULL: no progress reports */
    void *progress_user;     /* passed to progress unchanged */
    const char *device;      /* where weights live and forwards run: "cpu", "cuda" (= "cuda:0")
                                or "cuda:N" (GPU N, 0-based, as CUDA numbers them); NULL = the
                                backend field. A build without the CUDA backend, no GPU, or no
                                GPU N: CLEF_ERR_UNSUPPORTED; a malformed name:
                                CLEF_ERR_INVALID_ARG. docs/model-api.md */
    clef_profile profile;    /* weight placement; default CLEF_PROFILE_RESIDENT */
    /* The vision processors' pixel bounds (docs/media.md), replacing the release's: images are
     * resized to between min_pixels and max_pixels pixels (size.shortest_edge / longest_edge of
     * preprocessor_config.json; Qwen3.5's 65,536 and 16,777,216 when the release has none),
     * videos to between video_min_pixels and video_max_pixels over all sampled frames
     * (video_preprocessor_config.json; Qwen3-VL's 131,072 and 786,432). 0 = the release's.
     * Negative, or a minimum over its maximum after the release's values are filled in:
     * CLEF_ERR_INVALID_ARG naming both. */
    int64_t min_pixels, max_pixels;
    int64_t video_min_pixels, video_max_pixels;
} clef_model_params;

/* The defaults above (every "0 = ..." field zero, backend and device NULL). */
CLEF_API clef_model_params clef_model_default_params(void);

/* Open, validate and load the release in directory dir (see docs/release.md for what is
 * refused). params may be NULL (defaults). On success *out owns the model (free with
 * clef_model_free); on failure returns a negative status, clef_last_error() names the file,
 * tensor or field, and *out is NULL. An unknown params->backend is CLEF_ERR_UNSUPPORTED and
 * the message lists the backends this build has. */
CLEF_API int clef_model_load(const char *dir, const clef_model_params *params, clef_model **out);

/* Free a model and everything it holds. Accepts NULL. Free its contexts first. */
CLEF_API void clef_model_free(clef_model *model);

/* Facts about a loaded model. Strings live until clef_model_free. */
CLEF_API const char *clef_model_name(const clef_model *model);   /* the release directory's base name */
CLEF_API int32_t clef_model_max_length(const clef_model *model); /* tokens per record */
CLEF_API uint64_t clef_model_weight_bytes(const clef_model *model);    /* weights held in memory, once */
/* The device the model lives on, normalized: "cpu" or "cuda:N". Static or model-owned. */
CLEF_API const char *clef_model_device(const clef_model *model);

/* Memory of a model's or a context's backend handle. On a GPU: device bytes this handle has
 * allocated (the model's: its weights; a context's: its workspaces, stream scratch and GEMM
 * workspace), counted by the backend itself, and the whole device as its driver reports it.
 * On the CPU only weights is set (the rest is 0). */
typedef struct clef_memory_info {
    uint64_t weights;       /* bytes of weights held (clef_model_weight_bytes; 0 for a context) */
    uint64_t resident;      /* device bytes held now by this handle */
    uint64_t peak;          /* the most device bytes this handle ever held */
    uint64_t device_used;   /* the device's used bytes, every process (cudaMemGetInfo) */
    uint64_t device_total;  /* the device's memory */
} clef_memory_info;

/* Fill *out for model / ctx. CLEF_OK, or CLEF_ERR_INVALID_ARG (NULL) or a device error. */
CLEF_API int clef_model_memory(const clef_model *model, clef_memory_info *out);
CLEF_API int clef_context_memory(const clef_context *ctx, clef_memory_info *out);

/* Workspace bytes of the one-call path's default context: 0 until the first
 * clef_model_decide* call creates it (clef_context_workspace_bytes for any other context). */
CLEF_API uint64_t clef_model_workspace_bytes(const clef_model *model);

/* ---- contexts ---- */

typedef struct clef_context_params {
    int32_t max_tokens;      /* tokens of one packed forward, all its records together; 0 = the
                                model's max_length (one record of full length). Sizes the
                                backbone's workspace. */
} clef_context_params;

/* The defaults above (every "0 = ..." field zero). */
CLEF_API clef_context_params clef_context_default_params(void);

/* A context on model (which must outlive it) with its workspace planned for params (NULL:
 * defaults). On success *out owns it (clef_context_free); on failure a negative status
 * (CLEF_ERR_INVALID_ARG, CLEF_ERR_OUT_OF_MEMORY) and *out NULL. */
CLEF_API int clef_context_create(clef_model *model, const clef_context_params *params,
                        clef_context **out);
CLEF_API void clef_context_free(clef_context *ctx); /* accepts NULL */

CLEF_API uint64_t clef_context_workspace_bytes(const clef_context *ctx); /* planned at creation */
CLEF_API int32_t clef_context_max_tokens(const clef_context *ctx);       /* tokens of one forward */

/* ---- deciding ---- */

/* Decide one request on ctx. request_json[0..len) is a SystemOne body or a record
 * (docs/encoding.md): {"model"?, "id"?, "state", "questions", "images"?, "videos"?}; a missing
 * "model" is answered with clef_model_name(). On success *response_json is the SystemOne
 * response body {"model","answers","usage"} as Python's json.dumps would write it
 * (NUL-terminated, owned by the caller: free with clef_string_free). On failure returns
 * CLEF_ERR_REQUEST_JSON, CLEF_ERR_REQUEST_INVALID (the message names the field),
 * CLEF_ERR_REQUEST_TOO_LONG, CLEF_ERR_UNSUPPORTED (images or videos for a release without a
 * vision tower, or videos in a build without video decoding) or
 * another negative status; *response_json is NULL then. */
CLEF_API int clef_context_decide(clef_context *ctx, const char *request_json, size_t len,
                        char **response_json);

/* Decide n requests on ctx. Each record runs at its own length and gets exactly the answer it
 * would get alone; accepted records are packed in order into backbone forwards of at most
 * clef_context_max_tokens tokens together (no padding). For every i: statuses[i] is set,
 * responses[i] is the answer or NULL where statuses[i] < 0, and, when messages is not NULL,
 * messages[i] is that record's error message (NULL where it succeeded; free each with
 * clef_string_free). Returns CLEF_OK when every request succeeded, else the first failing
 * status (clef_last_error() then holds the LAST failure's message). */
CLEF_API int clef_context_decide_batch(clef_context *ctx, size_t n, const char *const *requests,
                              const size_t *lens, char **responses, int *statuses,
                              char **messages);

/* The one-call path: clef_context_decide / _batch on the model's default context. */
CLEF_API int clef_model_decide(clef_model *model, const char *request_json, size_t len,
                      char **response_json);
CLEF_API int clef_model_decide_batch(clef_model *model, size_t n, const char *const *requests,
                            const size_t *lens, char **responses, int *statuses,
                            char **messages);

/* The raw result of one record: logits and probabilities of every option of every question. */
typedef struct clef_question_result {
    const char *id;                 /* the question id, as in the request */
    const char *type;               /* "noul", "choice" or "score" */
    int32_t n_options;
    const char *const *option_ids;  /* [n_options] in PRESENTED order: noul true, false;
                                       choice sorted by id (code points); score "0".."n-1" */
    const float *logits;            /* [n_options] the head's logits */
    const float *probabilities;     /* [n_options] softmax of logits */
} clef_question_result;

typedef struct clef_result {
    int32_t n_questions;
    const clef_question_result *questions; /* [n_questions] in request (document) order */
    int32_t input_tokens;           /* prompt tokens the model read */
    int32_t truncated_tokens;       /* state tokens cut to fit max_length (0 if none) */
} clef_result;

/* Like clef_context_decide, but returns the raw numbers. *out is owned by the caller (free
 * with clef_result_free); every pointer inside it lives until then. On failure *out is NULL.
 * clef_model_decide_result does the same on the model's default context. */
CLEF_API int clef_context_decide_result(clef_context *ctx, const char *request_json, size_t len,
                               clef_result **out);
CLEF_API int clef_model_decide_result(clef_model *model, const char *request_json, size_t len,
                             clef_result **out);
CLEF_API void clef_result_free(clef_result *result); /* accepts NULL */

/* The last hidden state of a record decided on ctx: the backbone's output after its final
 * norm (transformers' last_hidden_state), n_tokens x hidden_size fp32, row-major, one row per
 * prompt token. `record` numbers the records of ctx's last backbone forward in order: after
 * clef_context_decide or clef_context_decide_result it is 0; after clef_context_decide_batch,
 * the records of its last packed forward. *n_tokens and *hidden_size (either may be NULL) get
 * the shape; out (NULL: only the shape is asked) gets the values and must hold cap >= n_tokens
 * x hidden_size floats. On a GPU the rows are copied to host memory. Valid until the next
 * forward on ctx (a record refused before its forward runs none and leaves them). CLEF_OK; CLEF_ERR_INVALID_ARG (NULL ctx, cap too small); CLEF_ERR_MODEL_STATE
 * (no such record: nothing decided yet, the record was refused before the forward, or the
 * index is past the last forward's records). For evaluations (`clef eval`), not for serving. */
CLEF_API int clef_context_hidden(const clef_context *ctx, size_t record, float *out, size_t cap,
                                 int32_t *n_tokens, int32_t *hidden_size);

/* ==== checking input without a model ===========================================================
 *
 * Validate a request before anything is loaded, so that a bad record costs milliseconds rather
 * than a release load: `clef run` calls clef_request_check before clef_model_load.
 */

/* Parse and validate request_json[0..len) as a record (the body clef_model_decide takes)
 * with the default limits (64 questions, ids of at most 100 characters, 2-255 choice
 * options, 2-10 score levels, JSON nesting depth 64; docs/encoding.md). Reads no file and
 * needs no model. Returns CLEF_OK, or CLEF_ERR_REQUEST_JSON / CLEF_ERR_REQUEST_INVALID /
 * CLEF_ERR_REQUEST_TOO_LONG (body over 13 MiB) / CLEF_ERR_OUT_OF_MEMORY with the field named
 * in clef_last_error(). A record that passes can still be refused by a model: for its
 * length in tokens, or by a model loaded with a smaller max_questions. */
CLEF_API int clef_request_check(const char *request_json, size_t len);

/* CLEF_OK if text[0..len) is exactly one JSON value under the engine's parser (Python's
 * json.loads rules, nesting depth at most 64), else CLEF_ERR_REQUEST_JSON with the line,
 * column and byte of the problem in clef_last_error(). */
CLEF_API int clef_json_check(const char *text, size_t len);

/* Free a string returned by libclef. Accepts NULL. */
CLEF_API void clef_string_free(char *s);

#ifdef __cplusplus
}
#endif

#endif /* CLEF_H */
