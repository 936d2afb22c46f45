/*
 * buffer_set.h — the backend buffers one model (or head) owns: allocate through the set, free
 * them all at once. Saves every model its own "array of buffers + release loop", and counts
 * the bytes so the model can report its footprint.
 *
 *   clef_buffer_set set = clef_buffer_set_init(be);
 *   float *w = clef_buffer_set_alloc(&set, bytes);   // NULL: out of memory (nothing leaked)
 *   ...
 *   clef_buffer_set_release_one(&set, w);            // one buffer early (a load's temporary)
 *   clef_buffer_set_release(&set);                   // every buffer, then the set is empty
 */
#ifndef CLEF_BACKEND_BUFFER_SET_H
#define CLEF_BACKEND_BUFFER_SET_H

#include "backend/backend.h"

#include <stddef.h>

typedef struct clef_buffer_set {
    clef_backend *be;
    void **items;
    size_t *sizes;  /* bytes asked for each item */
    size_t n, cap;
    size_t bytes; /* sum of the sizes asked for */
    void **host_items; /* host companions of the buffers (quantization descriptors) */
    size_t n_host, cap_host;
} clef_buffer_set;

clef_buffer_set clef_buffer_set_init(clef_backend *be);

/* A backend buffer of bytes (at least 1), owned by the set; NULL when out of memory. */
void *clef_buffer_set_alloc(clef_buffer_set *set, size_t bytes);

/* Zeroed host memory of bytes that lives as long as the set's buffers (what describes them:
 * a weight's clef_quant descriptor); NULL when out of memory. Freed by release. */
void *clef_buffer_set_host_alloc(clef_buffer_set *set, size_t bytes);

/* Release buf, a buffer of the set, now (e.g. a weight's stored form once its prepared form
 * exists). Returns 1, or 0 if buf is not in the set (nothing released). */
int clef_buffer_set_release_one(clef_buffer_set *set, void *buf);

/* Release every buffer (and host companion) of the set; it stays usable (empty). Accepts a
 * zeroed set. */
void clef_buffer_set_release(clef_buffer_set *set);

#endif /* CLEF_BACKEND_BUFFER_SET_H */
