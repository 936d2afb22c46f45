/*
 * error.c — per-thread failure messages and the status names of the public API.
 */
#include "core/error.h"

#include <stdarg.h>
#include <string.h>

#define CLEF_ERROR_CAP 2048

static _Thread_local char last_error[CLEF_ERROR_CAP];

int clef_fail(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

int clef_fail_prefix(int status, const char *fmt, ...) {
    char prefix[CLEF_ERROR_CAP];
    char old[CLEF_ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, last_error, sizeof old);
    /* Truncation of an over-long message is acceptable; the start names the object. */
    size_t n = strlen(prefix);
    if (n > sizeof last_error - 3)
        n = sizeof last_error - 3;
    memcpy(last_error, prefix, n);
    last_error[n] = ':';
    last_error[n + 1] = ' ';
    size_t rest = sizeof last_error - (n + 2) - 1;
    size_t m = strnlen(old, rest);
    memcpy(last_error + n + 2, old, m);
    last_error[n + 2 + m] = '\0';
    return status;
}

void clef_error_clear(void) { last_error[0] = '\0'; }

const char *clef_last_error(void) { return last_error; }

const char *clef_version(void) { return "0.1.0"; }

const char *clef_status_str(int status) {
    switch ((clef_status)status) {
    case CLEF_OK: return "ok";
    case CLEF_ERR_INVALID_ARG: return "invalid argument";
    case CLEF_ERR_OUT_OF_MEMORY: return "out of memory";
    case CLEF_ERR_IO: return "i/o error";
    case CLEF_ERR_UNSUPPORTED: return "unsupported";
    case CLEF_ERR_INTERNAL: return "internal error";
    case CLEF_ERR_NOT_REGULAR: return "not a regular file";
    case CLEF_ERR_FILE_MISSING: return "release file missing";
    case CLEF_ERR_ST_TRUNCATED: return "safetensors file truncated";
    case CLEF_ERR_ST_HEADER_SIZE: return "safetensors header length invalid";
    case CLEF_ERR_ST_HEADER_JSON: return "safetensors header not valid JSON";
    case CLEF_ERR_ST_HEADER_SCHEMA: return "safetensors header malformed";
    case CLEF_ERR_ST_DUPLICATE_TENSOR: return "duplicate tensor name";
    case CLEF_ERR_ST_UNKNOWN_DTYPE: return "unknown dtype";
    case CLEF_ERR_ST_OFFSETS_RANGE: return "tensor data offsets out of range";
    case CLEF_ERR_ST_OFFSETS_OVERLAP: return "tensor data overlaps another tensor";
    case CLEF_ERR_ST_SIZE_MISMATCH: return "tensor data size does not match shape and dtype";
    case CLEF_ERR_INDEX_JSON: return "shard index invalid";
    case CLEF_ERR_SHARD_MISSING: return "shard missing";
    case CLEF_ERR_SHARD_PATH: return "release file path escapes the release directory";
    case CLEF_ERR_INDEX_TENSOR_ABSENT: return "indexed tensor absent from its shard";
    case CLEF_ERR_INDEX_UNLISTED: return "tensor not listed in the index";
    case CLEF_ERR_INDEX_TOTAL_SIZE: return "index total_size mismatch";
    case CLEF_ERR_CONFIG_JSON: return "config not valid JSON";
    case CLEF_ERR_CONFIG_INVALID: return "config invalid";
    case CLEF_ERR_TENSOR_MISSING: return "tensor missing";
    case CLEF_ERR_TENSOR_UNEXPECTED: return "unexpected tensor";
    case CLEF_ERR_TENSOR_SHAPE: return "tensor shape mismatch";
    case CLEF_ERR_TENSOR_DTYPE: return "tensor dtype not allowed";
    case CLEF_ERR_SCALE_INVALID: return "invalid quantization scale";
    case CLEF_ERR_QUANT_CONFIG: return "quantization config invalid";
    case CLEF_ERR_TENSOR_VALUES: return "weight holds NaN or Inf";
    case CLEF_ERR_MANIFEST_JSON: return "complete.json invalid";
    case CLEF_ERR_MANIFEST_SIZE: return "file size differs from complete.json";
    case CLEF_ERR_MANIFEST_HASH: return "file SHA-256 differs from complete.json";
    case CLEF_ERR_MANIFEST_FILE: return "file listed in complete.json is missing";
    case CLEF_ERR_TOKENIZER_FORMAT: return "tokenizer.json malformed";
    case CLEF_ERR_TOKENIZER_UNSUPPORTED: return "tokenizer feature not supported";
    case CLEF_ERR_INVALID_UTF8: return "invalid UTF-8";
    case CLEF_ERR_REQUEST_JSON: return "request not valid JSON";
    case CLEF_ERR_REQUEST_INVALID: return "request invalid";
    case CLEF_ERR_REQUEST_TOO_LONG: return "request too long";
    case CLEF_ERR_MODEL_STATE: return "call does not fit the model state";
    }
    return "unknown status";
}
