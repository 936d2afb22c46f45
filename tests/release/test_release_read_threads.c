/*
 * test_release_read_threads.c — clef_release_read_threads (pieces of one tensor read by
 * several threads) and clef_release_read_checked (chunks read and scanned for NaN / Inf by
 * several threads) return exactly the bytes of clef_release_read, for 1..4 threads and for
 * piece boundaries that do not fall on a page; read_checked's verdict equals the one-thread
 * scan's (clef_count_nonfinite) on a clean BF16 tensor and on ones with one NaN or one Inf in
 * a chunk past the first. The release is the committed bf16-single fixture's configs with its
 * model.safetensors replaced by one written here: a 24 MiB U8 tensor (over the 16 MiB
 * threshold) of known bytes and three BF16 tensors of 1 Mi + 3 elements, opened with
 * skip_model_checks and allow_unknown_tensors (the tensors are not model weights), without
 * the fixture's complete.json (which describes the replaced file).
 */
#include "fixture_util.h"
#include "release/release.h"
#include "release/values.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BIG = (24u << 20) + 12345 }; /* odd size: pieces end mid-page */

enum { N16 = (1u << 20) + 3, BAD_AT = 700001 }; /* BF16 elements; BAD_AT past the first chunk */
static const char *bf16_names[3] = {"clean.bf16", "nan.bf16", "inf.bf16"};

/* Finite BF16 values (exponents 0x3c..0x42: |v| in [2^-3, 2^4)), one NaN or +Inf at BAD_AT. */
static uint16_t bf16_value(int tensor, uint32_t i) {
    if (i == BAD_AT && tensor == 1)
        return 0x7fc1;
    if (i == BAD_AT && tensor == 2)
        return 0x7f80;
    uint32_t h = i * 2654435761u;
    return (uint16_t)(((h >> 31) << 15) | ((0x3cu + (h >> 8) % 7u) << 7) | ((h >> 16) & 0x7f));
}

static int write_big_shard(const scratch *s) {
    char header[512];
    const uint64_t b16 = 2ull * N16;
    int hl = snprintf(header, sizeof header,
                      "{\"big.weight\":{\"dtype\":\"U8\",\"shape\":[%u],\"data_offsets\":[0,%u]},"
                      "\"%s\":{\"dtype\":\"BF16\",\"shape\":[%u],\"data_offsets\":[%llu,%llu]},"
                      "\"%s\":{\"dtype\":\"BF16\",\"shape\":[%u],\"data_offsets\":[%llu,%llu]},"
                      "\"%s\":{\"dtype\":\"BF16\",\"shape\":[%u],\"data_offsets\":[%llu,%llu]}}",
                      (unsigned)BIG, (unsigned)BIG, bf16_names[0], (unsigned)N16, (unsigned long long)BIG,
                      (unsigned long long)(BIG + b16), bf16_names[1], (unsigned)N16,
                      (unsigned long long)(BIG + b16), (unsigned long long)(BIG + 2 * b16), bf16_names[2],
                      (unsigned)N16, (unsigned long long)(BIG + 2 * b16), (unsigned long long)(BIG + 3 * b16));
    while (hl % 8)
        header[hl++] = ' '; /* safetensors pads the header with spaces */
    char *path = scratch_path(s, "model.safetensors");
    FILE *f = path ? fopen(path, "wb") : NULL;
    free(path);
    if (!f)
        return -1;
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    int ok = fwrite(len, 1, 8, f) == 8 && fwrite(header, 1, (size_t)hl, f) == (size_t)hl;
    unsigned char block[4096];
    for (uint32_t off = 0; ok && off < BIG; off += sizeof block) {
        size_t n = BIG - off < sizeof block ? BIG - off : sizeof block;
        for (size_t i = 0; i < n; i++)
            block[i] = (unsigned char)((off + i) * 2654435761u >> 13); /* not periodic in 4 KiB */
        ok = fwrite(block, 1, n, f) == n;
    }
    for (int k = 0; k < 3; k++)
        for (uint32_t i = 0; ok && i < N16; i++) {
            uint16_t v = bf16_value(k, i);
            unsigned char le[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
            ok = fwrite(le, 1, 2, f) == 2;
        }
    return fclose(f) == 0 && ok ? 0 : -1;
}

int main(void) {
    scratch s;
    CHECK_EQ_INT(scratch_copy(&s, "bf16-single"), 0);
    CHECK_EQ_INT(write_big_shard(&s), 0);
    file_remove(&s, "complete.json"); /* it lists the fixture's own model.safetensors */
    clef_release_opts opts = clef_release_default_opts();
    opts.skip_model_checks = 1;
    opts.allow_unknown_tensors = 1;
    clef_release *rel = NULL;
    int st = clef_release_open(s.rel, &opts, &rel);
    CHECK_MSG(st == CLEF_OK, "open: %s", clef_last_error());
    const clef_tensor_info *t = rel ? clef_release_tensor_at(rel, 0) : NULL;
    for (size_t i = 0; rel && i < clef_release_tensor_count(rel); i++)
        if (clef_release_tensor_at(rel, i)->n_bytes == BIG)
            t = clef_release_tensor_at(rel, i);
    CHECK(t && t->n_bytes == BIG);
    if (t && t->n_bytes == BIG) {
        unsigned char *want = malloc(BIG), *got = malloc(BIG);
        CHECK_EQ_INT(clef_release_read(rel, t, want), CLEF_OK);
        for (int threads = 0; threads <= 4; threads++) {
            memset(got, 0xA5, BIG);
            CHECK_EQ_INT(clef_release_read_threads(rel, t, got, threads), CLEF_OK);
            CHECK_MSG(memcmp(got, want, BIG) == 0, "%d threads: bytes differ", threads);
            /* integers have no NaN: finite; chunks of 1 MiB + 5 bytes end mid-page */
            int finite = -1;
            memset(got, 0xA5, BIG);
            CHECK_EQ_INT(clef_release_read_checked(rel, t, got, threads, (1u << 20) + 5, &finite), CLEF_OK);
            CHECK_MSG(memcmp(got, want, BIG) == 0 && finite == 1, "read_checked, %d threads: bytes differ "
                      "or finite %d", threads, finite);
        }
        free(want);
        free(got);
    }
    /* the BF16 tensors: read_checked's bytes and verdict against read + the one-thread scan,
     * with the default chunk (4 MiB: one chunk, the caller's thread) and with 64 KiB chunks
     * (33 of them; the bad element in chunk 21) */
    for (int k = 0; rel && k < 3; k++) {
        const clef_tensor_info *b = clef_release_find(rel, bf16_names[k]);
        CHECK_MSG(b && b->n_bytes == 2ull * N16, "%s missing", bf16_names[k]);
        if (!b || b->n_bytes != 2ull * N16)
            continue;
        unsigned char *want = malloc(b->n_bytes), *got = malloc(b->n_bytes);
        CHECK_EQ_INT(clef_release_read(rel, b, want), CLEF_OK);
        uint64_t first = 0;
        int nan = 0;
        uint64_t n_bad = clef_count_nonfinite(CLEF_DTYPE_BF16, want, N16, &first, &nan);
        CHECK_MSG(n_bad == (k ? 1u : 0u) && (!k || first == BAD_AT), "%s: the scan found %llu", bf16_names[k],
                  (unsigned long long)n_bad);
        for (int threads = 0; threads <= 4; threads++)
            for (int c = 0; c < 2; c++) {
                int finite = -1;
                memset(got, 0xA5, b->n_bytes);
                CHECK_EQ_INT(clef_release_read_checked(rel, b, got, threads, c ? 65536 : 0, &finite), CLEF_OK);
                CHECK_MSG(memcmp(got, want, b->n_bytes) == 0, "%s, %d threads, chunk %d: bytes differ",
                          bf16_names[k], threads, c);
                CHECK_MSG(finite == (n_bad == 0), "%s, %d threads, chunk %d: finite %d, the scan found %llu",
                          bf16_names[k], threads, c, finite, (unsigned long long)n_bad);
            }
        free(want);
        free(got);
    }
    clef_release_free(rel);
    scratch_remove(&s);
    return test_summary();
}
