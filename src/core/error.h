/*
 * error.h — how every module reports a failure.
 *
 * A fallible function returns a clef_status (0 ok, negative error) and, before returning,
 * records a message with clef_fail(): "file 'x': tensor 'y' has shape [a, b], config says
 * [c, d]". The message lives in a per-thread buffer that clef_last_error() returns. Callers
 * that add context wrap the message with clef_fail_prefix() rather than replacing it.
 *
 * CLEF_ASSERT is only for programmer errors (impossible states); it prints file:line and
 * aborts. Bad files, bad requests and bad bytes always get a status, never an assert.
 */
#ifndef CLEF_CORE_ERROR_H
#define CLEF_CORE_ERROR_H

#include "clef.h"

#include <stdio.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define CLEF_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define CLEF_PRINTF(fmt_idx, arg_idx)
#endif

/* Record a formatted message for this thread and return status (so callers can
 * `return clef_fail(CLEF_ERR_X, "...")`). */
int clef_fail(int status, const char *fmt, ...) CLEF_PRINTF(2, 3);

/* Prepend "<prefix>: " to the current message of this thread; returns status unchanged. */
int clef_fail_prefix(int status, const char *fmt, ...) CLEF_PRINTF(2, 3);

/* Forget the current message (used by code that tries an alternative after a failure). */
void clef_error_clear(void);

#define CLEF_ASSERT(cond)                                                                  \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: CLEF_ASSERT(%s) failed\n", __FILE__, __LINE__, #cond); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

#endif /* CLEF_CORE_ERROR_H */
