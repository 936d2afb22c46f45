/*
 * cmd_serve.c — `clef serve`: serve a release over HTTP (the SystemOne API and the Cloudflare
 * Workers AI route) until SIGTERM or SIGINT. Parses the flags into clef_server_params
 * (include/clef_server.h), starts the server, reports readiness on stderr, and shuts down
 * gracefully on a signal. docs/server.md describes the routes and every flag.
 * Exit status: 0 stopped by a signal after a graceful shutdown, 1 the server could not
 * start or the model could not be loaded, 2 bad usage.
 */
#include "clef.h"
#include "clef_server.h"
#include "cli_util.h"
#include "commands.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static void serve_usage(FILE *out) {
    fprintf(out,
            "usage: clef serve --model DIR [--name NAME] [--device D] [--profile P] [--host ADDR] [--port N]\n"
            "                  [--token T | --token-file F] [--insecure-no-token]\n"
            "                  [--contexts N] [--threads N] [--max-batch-tokens N]\n"
            "                  [--max-batch-requests N] [--max-queue N] [--max-length N]\n"
            "                  [--max-body-bytes N] [--truncation refuse|truncate] [--timeout S]\n"
            "                  [--client-timeout S] [--max-connections N] [--http-threads N]\n"
            "                  [--quiet]\n"
            "\n"
            "Serve the Clef release in DIR over HTTP: POST /v1/systemone, the Workers AI routes\n"
            "POST [/client/v4]/accounts/{account}/ai/run/@cf/cloudflare/{model}, GET /v1/models,\n"
            "/health, /metrics and /openapi.json (docs/server.md). Stops on SIGTERM or SIGINT\n"
            "after answering every request it accepted.\n"
            "\n"
            "  --model DIR            release directory\n"
            "  --name NAME            the model name served (GET /v1/models; the Workers AI route\n"
            "                         answers only @cf/cloudflare/NAME); default: DIR's base name\n"
            "  --device D             where the model runs: cpu (default), cuda (GPU 0) or\n"
            "                         cuda:N; each context gets its own CUDA stream\n"
            "  --profile P            weight placement on a GPU: resident (default) or\n"
            "                         host-embed (embed_tokens in host RAM); 24gb / 16gb:\n"
            "                         those placements within 24 / 16 GiB of device memory\n"
            "  --host ADDR            address to listen on (default 127.0.0.1)\n"
            "  --port N               TCP port (default 8080; 0 = any free port, printed on stderr)\n"
            "  --token T              require 'Authorization: Bearer T' (all routes but /health\n"
            "                         and /openapi.json)\n"
            "  --token-file F         the token is the first line of file F (keeps it out of ps)\n"
            "  --insecure-no-token    allow a non-loopback --host without a token\n"
            "  --contexts N           concurrent forwards: contexts on the one loaded model, a\n"
            "                         workspace each (default 1)\n"
            "  --threads N            CPU threads per context (default: all cores)\n"
            "  --max-batch-tokens N   prompt tokens decided together in one batch (default:\n"
            "                         --max-length)\n"
            "  --max-batch-requests N requests in one batch (default 64; 1 = one at a time)\n"
            "  --max-queue N          requests waiting for a context before 429 (default 256)\n"
            "  --max-length N         tokens per record, prompt included (default 16384)\n"
            "  --max-body-bytes N     body cap in bytes; larger bodies get 413 (default 13 MiB)\n"
            "  --truncation P         a record over --max-length: 'refuse' answers 413 (the\n"
            "                         default), 'truncate' cuts the state from its end and reports\n"
            "                         usage.truncated_tokens\n"
            "  --timeout S            a request still queued S seconds after it arrived gets 503\n"
            "                         with Retry-After (default 60); also the drain time on shutdown\n"
            "  --client-timeout S     a connection idle for S seconds, or whose body takes longer,\n"
            "                         is closed (default 30)\n"
            "  --max-connections N    open connections at most (default 4096)\n"
            "  --http-threads N       threads reading and validating requests (default 4)\n"
            "  --quiet                no access log (one INFO line per request on stderr)\n"
            "\n"
            "Exit status: 0 stopped by SIGTERM/SIGINT, 1 could not start or load, 2 bad usage.\n");
}

static int parse_long_arg(const char *flag, const char *text, long min, long max, long *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) {
        fprintf(stderr, "clef serve: %s expects an integer in [%ld, %ld], got '%s'\n", flag, min,
                max, text);
        return 2;
    }
    *out = v;
    return 0;
}

static int parse_seconds_arg(const char *flag, const char *text, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v <= 0 || v > 86400) {
        fprintf(stderr, "clef serve: %s expects seconds in (0, 86400], got '%s'\n", flag, text);
        return 2;
    }
    *out = v;
    return 0;
}

/* The first line of path, without its newline; refuses an empty token. */
static int read_token_file(const char *path, char **out) {
    char *text = NULL;
    size_t len = 0;
    if (cli_read_input("serve", "--token-file", path, &text, &len))
        return 1;
    text[strcspn(text, "\r\n")] = 0;
    if (!text[0]) {
        free(text);
        fprintf(stderr, "clef serve: --token-file '%s': the first line is empty\n", path);
        return 1;
    }
    *out = text;
    return 0;
}

static int quiet_log;

static void serve_log(clef_log_level level, const char *text, void *user) {
    if (level > CLEF_LOG_INFO || (quiet_log && level > CLEF_LOG_WARN))
        return;
    char stamp[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    static const char *const names[] = {"error", "warn", "info", "debug"};
    fprintf(stderr, "%s %s %s\n", stamp, names[level], text);
}

/* Idle connections cost a descriptor each: lift the soft limit to the hard one. */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int cmd_serve(int argc, char **argv) {
    clef_server_params p = clef_server_default_params();
    p.port = 8080;
    p.truncation = CLEF_TRUNCATION_REFUSE;
    char *token_from_file = NULL;
    const char *token_file = NULL;
    long v;
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            serve_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--insecure-no-token")) {
            p.allow_insecure = 1;
            continue;
        }
        if (!strcmp(a, "--quiet")) {
            p.access_log = 0;
            quiet_log = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "clef serve: unknown option or missing value: '%s'\n"
                            "(see clef serve --help)\n", a);
            return 2;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--model"))
            p.model_dir = val;
        else if (!strcmp(a, "--name"))
            p.served_name = val;
        else if (!strcmp(a, "--device"))
            p.device = val; /* a device that cannot run is refused by the load (exit 1) */
        else if (!strcmp(a, "--profile")) {
            if ((rc = cli_parse_profile("serve", val, &p.profile)))
                return rc;
        }
        else if (!strcmp(a, "--host"))
            p.host = val;
        else if (!strcmp(a, "--port")) {
            if (!(rc = parse_long_arg(a, val, 0, 65535, &v)))
                p.port = (uint16_t)v;
        } else if (!strcmp(a, "--token"))
            p.token = val;
        else if (!strcmp(a, "--token-file"))
            token_file = val;
        else if (!strcmp(a, "--contexts")) {
            if (!(rc = parse_long_arg(a, val, 1, 256, &v)))
                p.n_contexts = (int32_t)v;
        } else if (!strcmp(a, "--threads")) {
            if (!(rc = parse_long_arg(a, val, 1, 4096, &v)))
                p.n_threads = (int32_t)v;
        } else if (!strcmp(a, "--max-batch-tokens")) {
            if (!(rc = parse_long_arg(a, val, 1, INT_MAX, &v)))
                p.max_batch_tokens = v;
        } else if (!strcmp(a, "--max-batch-requests")) {
            if (!(rc = parse_long_arg(a, val, 1, 4096, &v)))
                p.max_batch_requests = (int32_t)v;
        } else if (!strcmp(a, "--max-queue")) {
            if (!(rc = parse_long_arg(a, val, 1, 1000000, &v)))
                p.max_queue = (int32_t)v;
        } else if (!strcmp(a, "--max-length")) {
            if (!(rc = parse_long_arg(a, val, 16, 1 << 20, &v)))
                p.max_length = (int32_t)v;
        } else if (!strcmp(a, "--max-body-bytes")) {
            if (!(rc = parse_long_arg(a, val, 1, LONG_MAX, &v)))
                p.max_body_bytes = (size_t)v;
        } else if (!strcmp(a, "--truncation")) {
            if (!strcmp(val, "refuse"))
                p.truncation = CLEF_TRUNCATION_REFUSE;
            else if (!strcmp(val, "truncate"))
                p.truncation = CLEF_TRUNCATION_TRUNCATE;
            else {
                fprintf(stderr, "clef serve: --truncation expects 'refuse' or 'truncate', got '%s'\n",
                        val);
                return 2;
            }
        } else if (!strcmp(a, "--timeout"))
            rc = parse_seconds_arg(a, val, &p.timeout_s);
        else if (!strcmp(a, "--client-timeout"))
            rc = parse_seconds_arg(a, val, &p.client_timeout_s);
        else if (!strcmp(a, "--max-connections")) {
            if (!(rc = parse_long_arg(a, val, 1, 1000000, &v)))
                p.max_connections = (int32_t)v;
        } else if (!strcmp(a, "--http-threads")) {
            if (!(rc = parse_long_arg(a, val, 1, 256, &v)))
                p.http_threads = (int32_t)v;
        } else {
            fprintf(stderr, "clef serve: unknown option '%s'\n(see clef serve --help)\n", a);
            return 2;
        }
        if (rc)
            return rc;
    }
    if (!p.model_dir) {
        fprintf(stderr, "clef serve: --model DIR is required\n(see clef serve --help)\n");
        return 2;
    }
    if (p.token && token_file) {
        fprintf(stderr, "clef serve: give --token or --token-file, not both\n");
        return 2;
    }
    if (token_file) {
        if ((rc = read_token_file(token_file, &token_from_file)))
            return rc;
        p.token = token_from_file;
    }

    /* Signals are taken by sigtimedwait below; every thread started after this inherits the
     * mask. A client that hangs up must not kill the process through SIGPIPE. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();
    clef_log_set(serve_log, NULL);

    clef_server *srv = NULL;
    if (clef_server_start(&p, &srv) != CLEF_OK) {
        fprintf(stderr, "clef serve: %s\n", clef_last_error());
        free(token_from_file);
        return 1;
    }
    fprintf(stderr, "clef serve: listening on http://%s:%u (loading %s)\n",
            p.host ? p.host : "127.0.0.1", (unsigned)clef_server_port(srv), p.model_dir);
    int announced = 0, status = 0;
    for (;;) {
        struct timespec tick = {0, 100 * 1000 * 1000};
        int sig = sigtimedwait(&stop_signals, NULL, &tick);
        if (sig == SIGTERM || sig == SIGINT) {
            fprintf(stderr, "clef serve: %s: shutting down (finishing accepted requests)\n",
                    sig == SIGTERM ? "SIGTERM" : "SIGINT");
            break;
        }
        clef_server_state st = clef_server_get_state(srv);
        if (st == CLEF_SERVER_FAILED) {
            fprintf(stderr, "clef serve: loading failed: %s\n", clef_server_error(srv));
            status = 1;
            break;
        }
        if (st == CLEF_SERVER_READY && !announced) {
            fprintf(stderr, "clef serve: ready on http://%s:%u\n", p.host ? p.host : "127.0.0.1",
                    (unsigned)clef_server_port(srv));
            announced = 1;
        }
    }
    clef_server_free(srv);
    free(token_from_file);
    if (!status)
        fprintf(stderr, "clef serve: stopped\n");
    return status;
}
