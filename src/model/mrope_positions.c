/*
 * mrope_positions.c — 3-D RoPE positions of a sequence with media runs (see
 * mrope_positions.h; transformers: Qwen3_5Model.get_rope_index and get_vision_position_ids).
 */
#include "model/mrope_positions.h"

#include "core/error.h"

int clef_mrope_positions(const int32_t *ids, int64_t n, int32_t image_token, int32_t video_token,
                         const clef_media_grid *grids, int64_t n_grids, int64_t merge,
                         int32_t *pos, int64_t ld) {
    int64_t cur = 0, g = 0, i = 0;
    while (i < n) {
        const int is_media = ids[i] == image_token || ids[i] == video_token;
        int64_t end = i + 1;
        while (end < n && (ids[end] == image_token || ids[end] == video_token) == is_media)
            end++;
        if (!is_media) {
            /* text: arange(len) + cur on all three axes */
            for (int64_t k = i; k < end; k++)
                pos[k] = pos[ld + k] = pos[2 * ld + k] = (int32_t)(cur + (k - i));
            cur += end - i;
        } else {
            if (g >= n_grids)
                return clef_fail(CLEF_ERR_INTERNAL, "media run %lld at token %lld has no grid (%lld "
                                 "grids)", (long long)g, (long long)i, (long long)n_grids);
            const clef_media_grid *gr = &grids[g++];
            const int64_t lt = gr->t, lh = gr->h / merge, lw = gr->w / merge;
            if (lt * lh * lw != end - i)
                return clef_fail(CLEF_ERR_INTERNAL, "media run %lld at token %lld has %lld tokens, "
                                 "its grid (%lld, %lld, %lld) makes %lld", (long long)(g - 1),
                                 (long long)i, (long long)(end - i), (long long)gr->t,
                                 (long long)gr->h, (long long)gr->w, (long long)(lt * lh * lw));
            /* meshgrid(arange(t), arange(h) + cur, arange(w) + cur), T += cur */
            int64_t k = i;
            for (int64_t f = 0; f < lt; f++)
                for (int64_t r = 0; r < lh; r++)
                    for (int64_t c = 0; c < lw; c++, k++) {
                        pos[k] = (int32_t)(cur + f);
                        pos[ld + k] = (int32_t)(cur + r);
                        pos[2 * ld + k] = (int32_t)(cur + c);
                    }
            cur += lh > lw ? lh : lw;
        }
        i = end;
    }
    if (g != n_grids)
        return clef_fail(CLEF_ERR_INTERNAL, "%lld media grids for %lld media runs",
                         (long long)n_grids, (long long)g);
    return CLEF_OK;
}
