/*
 * buffer_set.c — see buffer_set.h.
 */
#include "backend/buffer_set.h"

#include <stdlib.h>

clef_buffer_set clef_buffer_set_init(clef_backend *be) {
    clef_buffer_set set = {.be = be};
    return set;
}

void *clef_buffer_set_alloc(clef_buffer_set *set, size_t bytes) {
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 64;
        void **items = realloc(set->items, cap * sizeof *items);
        if (!items)
            return NULL;
        set->items = items;
        size_t *sizes = realloc(set->sizes, cap * sizeof *sizes);
        if (!sizes)
            return NULL;
        set->sizes = sizes;
        set->cap = cap;
    }
    void *p = clef_backend_alloc(set->be, bytes ? bytes : 1);
    if (p) {
        set->items[set->n] = p;
        set->sizes[set->n++] = bytes;
        set->bytes += bytes;
    }
    return p;
}

void *clef_buffer_set_host_alloc(clef_buffer_set *set, size_t bytes) {
    if (set->n_host == set->cap_host) {
        size_t cap = set->cap_host ? 2 * set->cap_host : 16;
        void **items = realloc(set->host_items, cap * sizeof *items);
        if (!items)
            return NULL;
        set->host_items = items;
        set->cap_host = cap;
    }
    void *p = calloc(1, bytes ? bytes : 1);
    if (p)
        set->host_items[set->n_host++] = p;
    return p;
}

int clef_buffer_set_release_one(clef_buffer_set *set, void *buf) {
    for (size_t i = set->n; i-- > 0;) {
        if (set->items[i] != buf)
            continue;
        clef_backend_release(set->be, buf);
        set->bytes -= set->sizes[i];
        set->items[i] = set->items[set->n - 1];
        set->sizes[i] = set->sizes[set->n - 1];
        set->n--;
        return 1;
    }
    return 0;
}

void clef_buffer_set_release(clef_buffer_set *set) {
    for (size_t i = 0; i < set->n; i++)
        clef_backend_release(set->be, set->items[i]);
    free(set->items);
    free(set->sizes);
    for (size_t i = 0; i < set->n_host; i++)
        free(set->host_items[i]);
    free(set->host_items);
    set->host_items = NULL;
    set->n_host = set->cap_host = 0;
    set->items = NULL;
    set->sizes = NULL;
    set->n = set->cap = 0;
    set->bytes = 0;
}
