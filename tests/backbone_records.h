/*
 * backbone_records.h — the CLEFBB01 record files of scripts/backbone/make_fixtures.py and
 * scripts/quant/make_backbone_oracle.py (token ids, the rows kept, the reference's fp32 last
 * hidden states at those rows). Layout, little-endian: "CLEFBB01", u32 n, u32 D, then per
 * record u32 T, T x i32 ids, u32 n_rows, n_rows x i32 rows, n_rows * D f32 hidden.
 * The one reader of tests/backbone (test_qwen35_parity), tests/quant (test_quant_backbone)
 * and tests/cuda (test_cuda_model, test_cuda_quant_model).
 */
#ifndef CLEF_TESTS_BACKBONE_RECORDS_H
#define CLEF_TESTS_BACKBONE_RECORDS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct record {
    int64_t T, n_rows;
    int32_t *ids, *rows;
    float *hidden; /* [n_rows, D] */
} record;

static inline int read_u32(FILE *f, uint32_t *v) { return fread(v, 4, 1, f) == 1; }

/* 1 and the n records of a D-wide model, or 0 when the file is missing or short (what was
 * read is still in *out: records_free it). */
static inline int load_records(const char *path, int64_t *n_out, int64_t *D_out, record **out) {
    FILE *f = fopen(path, "rb");
    char magic[8];
    uint32_t n, D;
    if (!f || fread(magic, 8, 1, f) != 1 || memcmp(magic, "CLEFBB01", 8) || !read_u32(f, &n) || !read_u32(f, &D)) {
        if (f)
            fclose(f);
        return 0;
    }
    record *r = calloc(n, sizeof(record));
    *n_out = n, *D_out = D, *out = r;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t T, nr;
        if (!read_u32(f, &T))
            return fclose(f), 0;
        r[i].T = T;
        r[i].ids = malloc(4 * (size_t)T);
        if (fread(r[i].ids, 4, T, f) != T || !read_u32(f, &nr))
            return fclose(f), 0;
        r[i].n_rows = nr;
        r[i].rows = malloc(4 * (size_t)nr);
        r[i].hidden = malloc(4 * (size_t)nr * D);
        if (fread(r[i].rows, 4, nr, f) != nr || fread(r[i].hidden, 4, (size_t)nr * D, f) != (size_t)nr * D)
            return fclose(f), 0;
    }
    fclose(f);
    return 1;
}

static inline void records_free(record *r, int64_t n) {
    for (int64_t i = 0; r && i < n; i++)
        free(r[i].ids), free(r[i].rows), free(r[i].hidden);
    free(r);
}

#endif /* CLEF_TESTS_BACKBONE_RECORDS_H */
