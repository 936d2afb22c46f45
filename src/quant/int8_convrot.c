/*
 * int8_convrot.c — INT8 ConvRot (comfy-kitchen): weight decode with the inverse rotation,
 * per-token rotate-and-quantize, reference int8 GEMM; see int8_convrot.h for the arithmetic.
 *
 * comfy-kitchen rotates with torch.matmul against the dense 256 x 256 matrix, so its numbers
 * carry the rounding of torch's CPU matmul in ITS summation order; the reference functions
 * here rotate with clef_hadamard256_torch_f32 (that order), which is what makes the decoded
 * weights bit-identical to the library's (tests/quant checks every weight of the fixture
 * releases). The CPU backend quantizes its activations with clef_convrot_quantize_tokens too
 * (fp32: the amax and the codes 16 or 8 per vector, the C loop's bits); the butterfly
 * (clef_fht256_f32) is the same transform up to the last fp32 bit.
 */
#include "quant/int8_convrot.h"

#include "backend/cpu/cpu_isa.h"
#include "core/numeric.h"

#include <math.h>

#if CPU_HAVE_X86
#include <immintrin.h>
#endif

/* one 256-group of a weight row rotated back: fp32(q * s), then the library's fp32 product
 * with H */
static void dequant_group(const int8_t *q, float scale, float *rot) {
    float t[CLEF_CONVROT_GROUP];
    for (int k = 0; k < CLEF_CONVROT_GROUP; k++)
        t[k] = (float)q[k] * scale;
    clef_hadamard256_torch_f32(t, rot);
}

void clef_convrot_dequant_bf16(const int8_t *q, const float *scale, int64_t K, int64_t first_row,
                               int64_t n_rows, uint16_t *out) {
    float rot[CLEF_CONVROT_GROUP];
    for (int64_t n = first_row; n < first_row + n_rows; n++) {
        for (int64_t g = 0; g < K; g += CLEF_CONVROT_GROUP) {
            dequant_group(q + n * K + g, scale[n], rot);
            for (int i = 0; i < CLEF_CONVROT_GROUP; i++)
                *out++ = clef_f32_to_bf16(rot[i]);
        }
    }
}

void clef_convrot_dequant_f32(const int8_t *q, const float *scale, int64_t K, int64_t first_row,
                              int64_t n_rows, float *out) {
    float rot[CLEF_CONVROT_GROUP];
    for (int64_t n = first_row; n < first_row + n_rows; n++) {
        for (int64_t g = 0; g < K; g += CLEF_CONVROT_GROUP) {
            dequant_group(q + n * K + g, scale[n], rot);
            for (int i = 0; i < CLEF_CONVROT_GROUP; i++)
                *out++ = clef_bf16_to_f32(clef_f32_to_bf16(rot[i]));
        }
    }
}

static inline float act_round(float v, clef_quant_act act) {
    return act == CLEF_QUANT_ACT_BF16 ? clef_bf16_to_f32(clef_f32_to_bf16(v)) : v;
}

/* fp32 activations: the largest |r| and the codes clamp(rint(r / divisor), -128, 127), in C and
 * in vector forms with the same bits. Max is exact in any order; max_ps(|r|, m) returns m
 * where |r| is NaN, as fmaxf(m, |r|) does; max_ps(v, -128) returns -128 for a NaN v, as
 * fmaxf(v, -128); the division is IEEE's in every form and the rounding to nearest even is
 * rintf's in the default rounding mode. */
static float amax_c(const float *r, int64_t K) {
    float amax = 0.0f;
    for (int64_t k = 0; k < K; k++)
        amax = fmaxf(amax, fabsf(r[k]));
    return amax;
}

static void codes_c(const float *r, int64_t K, float divisor, int8_t *q) {
    for (int64_t k = 0; k < K; k++) {
        float v = rintf(r[k] / divisor);
        v = fminf(fmaxf(v, -128.0f), 127.0f);
        q[k] = (int8_t)v;
    }
}

#if CPU_HAVE_X86
/* K a multiple of 16 (the callers' 256) */
CPU_TARGET_AVX512 static float amax_avx512(const float *r, int64_t K) {
    __m512 m = _mm512_setzero_ps();
    for (int64_t k = 0; k < K; k += 16)
        m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(r + k)), m);
    return _mm512_reduce_max_ps(m);
}

CPU_TARGET_AVX512 static void codes_avx512(const float *r, int64_t K, float divisor, int8_t *q) {
    const __m512 d = _mm512_set1_ps(divisor), lo = _mm512_set1_ps(-128.0f), hi = _mm512_set1_ps(127.0f);
    for (int64_t k = 0; k < K; k += 16) {
        __m512 v = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(r + k), d),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
        _mm_storeu_si128((__m128i *)(void *)(q + k), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(v)));
    }
}

CPU_TARGET_AVX2 static float amax_avx2(const float *r, int64_t K) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += 8)
        m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(r + k), abs_mask), m);
    float lanes[8], amax = 0.0f;
    _mm256_storeu_ps(lanes, m);
    for (int i = 0; i < 8; i++)
        amax = fmaxf(amax, lanes[i]);
    return amax;
}

/* K a multiple of 32: four vectors of codes packed to 32 bytes (the packs interleave 128-bit
 * lanes; the permute puts them back in order) */
CPU_TARGET_AVX2 static void codes_avx2(const float *r, int64_t K, float divisor, int8_t *q) {
    const __m256 d = _mm256_set1_ps(divisor), lo = _mm256_set1_ps(-128.0f), hi = _mm256_set1_ps(127.0f);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t k = 0; k < K; k += 32) {
        __m256i c[4];
        for (int j = 0; j < 4; j++) {
            __m256 v = _mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(r + k + 8 * j), d),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            c[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
        }
        const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(c[0], c[1]), _mm256_packs_epi32(c[2], c[3]));
        _mm256_storeu_si256((__m256i *)(void *)(q + k), _mm256_permutevar8x32_epi32(b, order));
    }
}
#endif

static float amax_f32(const float *r, int64_t K) {
#if CPU_HAVE_X86
    const cpu_isa isa = cpu_isa_active();
    if (isa == CPU_ISA_AVX512 && K % 16 == 0)
        return amax_avx512(r, K);
    if (isa == CPU_ISA_AVX2 && K % 8 == 0)
        return amax_avx2(r, K);
#endif
    return amax_c(r, K);
}

static void codes_f32(const float *r, int64_t K, float divisor, int8_t *q) {
#if CPU_HAVE_X86
    const cpu_isa isa = cpu_isa_active();
    if (isa == CPU_ISA_AVX512 && K % 16 == 0) {
        codes_avx512(r, K, divisor, q);
        return;
    }
    if (isa == CPU_ISA_AVX2 && K % 32 == 0) {
        codes_avx2(r, K, divisor, q);
        return;
    }
#endif
    codes_c(r, K, divisor, q);
}

void clef_convrot_quantize_tokens(const float *x, int64_t ldx, int64_t M, int64_t K,
                                  clef_quant_act act, int8_t *q, float *scale, float *rot) {
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * ldx;
        for (int64_t g = 0; g < K; g += CLEF_CONVROT_GROUP)
            clef_hadamard256_torch_f32(xm + g, rot + g);
        float amax;
        if (act == CLEF_QUANT_ACT_F32) {
            amax = amax_f32(rot, K);
        } else {
            amax = 0.0f;
            for (int64_t k = 0; k < K; k++) {
                rot[k] = act_round(rot[k], act); /* a bf16 matmul rounds its fp32 sums to bf16 */
                amax = fmaxf(amax, fabsf(rot[k]));
            }
        }
        float s = fmaxf(amax / 127.0f, 1e-30f);
        scale[m] = s;
        /* the divisor is the scale in the activations' dtype; 0 there becomes the smallest
         * normal (comfy-kitchen's _int8_scale_for_math) */
        float divisor = act_round(s, act);
        if (divisor == 0.0f)
            divisor = 1.17549435e-38f;
        if (act == CLEF_QUANT_ACT_F32) {
            codes_f32(rot, K, divisor, q + m * K);
            continue;
        }
        for (int64_t k = 0; k < K; k++) {
            float v = rintf(act_round(rot[k] / divisor, act));
            v = fminf(fmaxf(v, -128.0f), 127.0f);
            q[m * K + k] = (int8_t)v;
        }
    }
}

void clef_convrot_quantize_weight(const uint16_t *w, int64_t N, int64_t K, int8_t *q,
                                  float *scale, float *rot) {
    float *row = rot + K; /* the widened row; rot[0, K) is the quantizer's own scratch */
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++)
            row[k] = clef_bf16_to_f32(w[n * K + k]);
        clef_convrot_quantize_tokens(row, K, 1, K, CLEF_QUANT_ACT_BF16, q + n * K, scale + n, rot);
    }
}

void clef_int8_gemm_ref(const int8_t *qw, const float *sw, int64_t N, int64_t K,
                        const int8_t *qx, const float *sx, int64_t M, float *y) {
    for (int64_t m = 0; m < M; m++) {
        const int8_t *xm = qx + m * K;
        for (int64_t n = 0; n < N; n++) {
            const int8_t *wn = qw + n * K;
            int32_t acc = 0;
            for (int64_t k = 0; k < K; k++)
                acc += (int32_t)xm[k] * (int32_t)wn[k];
            y[m * N + n] = (float)acc * (sx[m] * sw[n]);
        }
    }
}
