/*
 * strbuf.h — a growable byte string for building output text (JSON answers, prompts,
 * error lists) without fixed-size buffers.
 *
 * Appends never fail loudly: on an allocation failure the buffer remembers it (oom = 1),
 * later appends are ignored, and the caller checks clef_strbuf_status() once at the end.
 * This keeps long chains of appends readable while still turning OOM into a status.
 * data is always NUL-terminated when non-NULL (len excludes the NUL).
 */
#ifndef CLEF_CORE_STRBUF_H
#define CLEF_CORE_STRBUF_H

#include <stddef.h>

typedef struct clef_strbuf {
    char *data;   /* malloc'd, NUL-terminated; NULL until the first append */
    size_t len;   /* bytes used, without the NUL */
    size_t cap;   /* bytes allocated */
    int oom;      /* 1 once an allocation failed; the content is then incomplete */
} clef_strbuf;

/* A zeroed clef_strbuf is empty and ready; clef_strbuf_free returns it to that state. */
void clef_strbuf_free(clef_strbuf *b);

void clef_strbuf_append(clef_strbuf *b, const char *s, size_t n);
void clef_strbuf_append_str(clef_strbuf *b, const char *s);
void clef_strbuf_append_char(clef_strbuf *b, char c);
void clef_strbuf_appendf(clef_strbuf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* CLEF_OK, or CLEF_ERR_OUT_OF_MEMORY (with a message) if any append failed. */
int clef_strbuf_status(const clef_strbuf *b);

/* Hand the buffer to the caller (malloc'd, NUL-terminated, never NULL unless OOM) and
 * leave b empty. */
char *clef_strbuf_take(clef_strbuf *b, size_t *len);

#endif /* CLEF_CORE_STRBUF_H */
