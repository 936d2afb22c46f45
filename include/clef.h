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
 * Thread safety: a loaded clef_model is read-only and may be shared by threads. Functions
 * that take a handle report failures on that handle; clef_last_error() is per thread.
 * The library never prints to stdout and never exits the process; log lines go through the
 * callback set by clef_log_set().
 */
#ifndef CLEF_H
#define CLEF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CLEF_VERSION_MAJOR 0
#define CLEF_VERSION_MINOR 1
#define CLEF_VERSION_PATCH 0

/* Library version as "MAJOR.MINOR.PATCH". Static string. */
const char *clef_version(void);

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
    CLEF_ERR_SHARD_PATH = -112,         /* a shard path escapes the release (.., absolute, symlink out) */
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
const char *clef_status_str(int status);

/*
 * The detailed message of the last failure on this thread, naming the file, tensor or field,
 * with expected vs got. Valid until the next libclef call on this thread. Never NULL.
 */
const char *clef_last_error(void);

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
void clef_log_set(clef_log_callback cb, void *user);

#ifdef __cplusplus
}
#endif

#endif /* CLEF_H */
