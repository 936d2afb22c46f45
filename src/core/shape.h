/*
 * shape.h — a tensor shape as text for messages: "[33, 64]", "[]" for a scalar. One spelling
 * for every module that names shapes in its errors (release reader, models).
 */
#ifndef CLEF_CORE_SHAPE_H
#define CLEF_CORE_SHAPE_H

#include <stddef.h>
#include <stdint.h>

/* Write the n_dims sizes of shape into buf (cap bytes, always NUL-terminated when cap > 0;
 * cut short if too small) and return buf. */
char *clef_shape_str(const int64_t *shape, int n_dims, char *buf, size_t cap);

#endif /* CLEF_CORE_SHAPE_H */
