/*
 * strbuf.c — the growable byte string of strbuf.h: doubling growth, sticky OOM flag.
 */
#include "core/strbuf.h"

#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clef_strbuf_free(clef_strbuf *b) {
    if (!b)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

/* Make room for `extra` more bytes plus the NUL. Returns 0 (and sets oom) on failure. */
static int reserve(clef_strbuf *b, size_t extra) {
    if (b->oom)
        return 0;
    if (extra > (size_t)-1 / 2 - b->len) {
        b->oom = 1;
        return 0;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 1;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p) {
        b->oom = 1;
        return 0;
    }
    b->data = p;
    b->cap = cap;
    return 1;
}

void clef_strbuf_append(clef_strbuf *b, const char *s, size_t n) {
    if (!reserve(b, n))
        return;
    if (n)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void clef_strbuf_append_str(clef_strbuf *b, const char *s) { clef_strbuf_append(b, s, strlen(s)); }

void clef_strbuf_append_char(clef_strbuf *b, char c) { clef_strbuf_append(b, &c, 1); }

void clef_strbuf_appendf(clef_strbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
    } else if (reserve(b, (size_t)n)) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
    }
    va_end(ap2);
}

int clef_strbuf_status(const clef_strbuf *b) {
    if (b->oom)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory while building a %zu-byte string",
                         b->len);
    return CLEF_OK;
}

char *clef_strbuf_take(clef_strbuf *b, size_t *len) {
    if (!b->data && reserve(b, 0))
        b->data[0] = '\0';
    char *p = b->oom ? NULL : b->data;
    if (b->oom)
        free(b->data);
    if (len)
        *len = p ? b->len : 0;
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
    return p;
}
