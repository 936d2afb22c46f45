/*
 * safetensors.h — one safetensors file's header, parsed and checked, without its data.
 *
 * Layout: 8-byte little-endian header length N, N bytes of UTF-8 JSON (an object mapping
 * tensor name -> {"dtype", "shape", "data_offsets": [begin, end]}, plus an optional
 * "__metadata__" object of strings), then the data area; offsets are relative to the data
 * area. A header that parses here is known to describe tensors that tile the data area
 * exactly: each span equals product(shape) * dtype size, spans do not overlap, leave no hole,
 * and end where the file ends (the rules of the safetensors crate itself, so a truncated or
 * padded file is refused rather than read short).
 *
 * The parser works on bytes (st_parse_bytes, the libFuzzer entry) or on an open file
 * (st_read_header: reads the 8 bytes and the header only, never the data).
 */
#ifndef CLEF_RELEASE_SAFETENSORS_H
#define CLEF_RELEASE_SAFETENSORS_H

#include "core/io.h"
#include "release/release.h"

#include <stddef.h>
#include <stdint.h>

/* The safetensors crate refuses headers over 100 MB; the largest real ones are ~1 MB. */
#define ST_HEADER_MAX ((uint64_t)100 << 20)

typedef struct st_tensor {
    const char *name;             /* points into the header's JSON document */
    clef_dtype dtype;
    int n_dims;
    int64_t shape[CLEF_MAX_DIMS];
    uint64_t begin, end;          /* relative to the data area */
} st_tensor;

typedef struct st_header {
    st_tensor *tensors;           /* in header order */
    size_t n_tensors;
    uint64_t data_start;          /* 8 + N: absolute offset of the data area */
    uint64_t data_size;           /* bytes of the data area */
    size_t n_metadata;            /* entries of __metadata__ */
    struct json_doc *doc;         /* owns the names */
} st_header;

/* Parse the N header bytes given the data area's size; file names the file in messages. */
int st_header_parse(const char *json, size_t len, uint64_t data_size, const char *file,
                    st_header *out);

/* Parse a whole safetensors image (8-byte length + header + data) held in memory. */
int st_parse_bytes(const uint8_t *bytes, size_t size, const char *file, st_header *out);

/* Read and parse the header of an open file (8 + N bytes read; the data is not touched). */
int st_read_header(const clef_file *f, const char *file, st_header *out);

void st_header_free(st_header *h); /* accepts a zeroed header */

/* Number of elements of a shape (1 for a scalar); 0 with *overflow set past 2^63. */
uint64_t st_shape_elements(const int64_t *shape, int n_dims, int *overflow);

#endif /* CLEF_RELEASE_SAFETENSORS_H */
