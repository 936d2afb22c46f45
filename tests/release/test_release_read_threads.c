/*
 * test_release_read_threads.c — clef_release_read_threads (pieces of one tensor read by
 * several threads) returns exactly the bytes of clef_release_read, for 1..4 threads and for
 * piece boundaries that do not fall on a page. The release is the committed bf16-single
 * fixture's configs with its model.safetensors replaced by one written here: a 24 MiB U8
 * tensor (over the 16 MiB threshold) of known bytes, opened with skip_model_checks and
 * allow_unknown_tensors (the tensor is not a model weight), without the fixture's
 * complete.json (which describes the replaced file).
 */
#include "fixture_util.h"
#include "release/release.h"
#include "test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BIG = (24u << 20) + 12345 }; /* odd size: pieces end mid-page */

static int write_big_shard(const scratch *s) {
    char header[160];
    int hl = snprintf(header, sizeof header,
                      "{\"big.weight\":{\"dtype\":\"U8\",\"shape\":[%u],\"data_offsets\":[0,%u]}}",
                      (unsigned)BIG, (unsigned)BIG);
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
        }
        free(want);
        free(got);
    }
    clef_release_free(rel);
    scratch_remove(&s);
    return test_summary();
}
