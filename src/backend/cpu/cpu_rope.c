/*
 * cpu_rope.c — rotary position embedding with Qwen3.5's partial, interleaved multimodal
 * sections. The table is computed exactly as transformers does in fp32 (inv_freq =
 * 1 / theta^(2j/r), phi = pos * inv_freq rounded once, cos/sin of [phi, phi]) so positions in
 * the thousands keep the same phase to the last bit that fp32 allows.
 */
#include "backend/cpu/cpu_internal.h"

#include <math.h>

/* Which position axis (0 = T, 1 = H, 2 = W) frequency j of n_freq takes. */
static int mrope_axis(int64_t j, const int64_t sections[3], int interleaved) {
    if (interleaved) {
        if (j % 3 == 1 && j < 3 * sections[1])
            return 1;
        if (j % 3 == 2 && j < 3 * sections[2])
            return 2;
        return 0;
    }
    if (j < sections[0])
        return 0;
    return j < sections[0] + sections[1] ? 1 : 2;
}

void cpu_rope_table(clef_backend *be, int64_t T, const int32_t *pos, int64_t rot_dims,
                    double theta, const int64_t sections[3], int mrope_interleaved,
                    float *cos_out, float *sin_out) {
    const int64_t half = rot_dims / 2;
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
    for (int64_t t = 0; t < T; t++) {
        for (int64_t j = 0; j < half; j++) {
            /* torch: 1.0 / (theta ** (arange(0, r, 2).float() / r)) in fp32 */
            float exponent = (float)(2 * j) / (float)rot_dims;
            float inv_freq = 1.0f / (float)pow(theta, (double)exponent);
            int axis = mrope_axis(j, sections, mrope_interleaved);
            float phi = (float)pos[axis * T + t] * inv_freq;
            float c = cosf(phi), s = sinf(phi);
            cos_out[t * rot_dims + j] = cos_out[t * rot_dims + half + j] = c;
            sin_out[t * rot_dims + j] = sin_out[t * rot_dims + half + j] = s;
        }
    }
}

void cpu_rope_apply(clef_backend *be, int64_t T, int64_t n_heads, float *x, int64_t ldx,
                    int64_t head_stride, int64_t rot_dims, const float *cos_t, const float *sin_t) {
    const int64_t half = rot_dims / 2;
#pragma omp parallel for num_threads(be->n_threads) schedule(static)
    for (int64_t t = 0; t < T; t++) {
        const float *c = cos_t + t * rot_dims, *s = sin_t + t * rot_dims;
        for (int64_t h = 0; h < n_heads; h++) {
            float *v = x + t * ldx + h * head_stride;
            for (int64_t i = 0; i < half; i++) {
                float a = v[i], b = v[i + half];
                /* x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1] */
                v[i] = a * c[i] + (-b) * s[i];
                v[i + half] = b * c[i + half] + a * s[i + half];
            }
        }
    }
}
