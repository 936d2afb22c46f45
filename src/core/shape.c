/*
 * shape.c — see shape.h.
 */
#include "core/shape.h"

#include <stdio.h>

char *clef_shape_str(const int64_t *shape, int n_dims, char *buf, size_t cap) {
    if (cap == 0)
        return buf;
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n_dims && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
    return buf;
}
