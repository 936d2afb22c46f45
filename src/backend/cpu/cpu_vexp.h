/*
 * cpu_vexp.h — e^x for the elementwise ops that are mostly exponentials (SiLU in every MLP
 * and after every GDN conv, sigmoid, exp), in three forms that give the same bits: one float
 * (portable C), 8 floats (AVX2 + FMA) and 16 floats (AVX-512). libm's expf is a scalar call
 * per element (~10% of a forward) and its last bit differs from this one, so no path uses it.
 *
 * Method, identical in every form: in double precision, n = rint(x log2 e) (ties to even),
 * r = x - n ln2 with ln2 in two parts (two fused multiply-adds; |r| <= ln2 / 2, nearly exact),
 * e^r by its Taylor series to r^10 in Horner form (ten fused multiply-adds; truncation < 3e-13
 * relative), times 2^n (exact: the result is a normal double for every clamped input), then
 * one rounding to float. Every step is a correctly rounded IEEE operation (fma() in C,
 * vfmadd in the vector forms), so the forms agree bit for bit; the file is compiled with
 * -ffp-contract=off so the compiler fuses nothing else. The double result is within ~1e-12
 * relative of e^x, so the float is the correctly rounded value except where e^x lies within
 * that of a rounding boundary: error <= 0.5 ulp + 1e-12 (test_backbone_cpu_ops checks it
 * against double exp over the whole range, and checks the forms against each other).
 * x > 89 gives +inf, x < -104 gives +0, NaN stays NaN.
 */
#ifndef CLEF_BACKEND_CPU_VEXP_H
#define CLEF_BACKEND_CPU_VEXP_H

#include "backend/cpu/cpu_isa.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#if CPU_HAVE_X86
#include <immintrin.h>
#endif

#define CPU_EXP_LOG2E 1.4426950408889634
#define CPU_EXP_LN2_HI 6.93147180369123816490e-01
#define CPU_EXP_LN2_LO 1.90821492927058770002e-10
#define CPU_EXP_X_MAX 89.0f
#define CPU_EXP_X_MIN (-104.0f)

/* 1 / k! for k = 0..10, the Taylor coefficients */
#define CPU_EXP_C(k)                                                                          \
    ((const double[11]){1.0, 1.0, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720,          \
                        1.0 / 5040, 1.0 / 40320, 1.0 / 362880, 1.0 / 3628800}[k])

static inline float cpu_exp1(float x) {
    if (isnan(x))
        return x + x;
    float xc = x < CPU_EXP_X_MAX ? x : CPU_EXP_X_MAX;
    xc = xc > CPU_EXP_X_MIN ? xc : CPU_EXP_X_MIN;
    double xd = (double)xc;
    double n = rint(xd * CPU_EXP_LOG2E);
    double r = fma(-n, CPU_EXP_LN2_HI, xd);
    r = fma(-n, CPU_EXP_LN2_LO, r);
    double p = CPU_EXP_C(10);
    for (int k = 9; k >= 0; k--)
        p = fma(p, r, CPU_EXP_C(k));
    uint64_t bits = (uint64_t)((int64_t)n + 1023) << 52; /* 2^n, n in [-151, 129] */
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return (float)(p * scale);
}

#if CPU_HAVE_X86
CPU_TARGET_AVX2 static inline __m256d cpu_exp4d_avx2(__m256d x) {
    __m256d n = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(CPU_EXP_LOG2E)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(CPU_EXP_LN2_HI), x);
    r = _mm256_fnmadd_pd(n, _mm256_set1_pd(CPU_EXP_LN2_LO), r);
    __m256d p = _mm256_set1_pd(CPU_EXP_C(10));
    for (int k = 9; k >= 0; k--)
        p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(CPU_EXP_C(k)));
    __m256i e = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)); /* n is an integer: exact */
    e = _mm256_slli_epi64(_mm256_add_epi64(e, _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

CPU_TARGET_AVX2 static inline __m256 cpu_exp8_avx2(__m256 x) {
    __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    __m256 xc = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(CPU_EXP_X_MAX)),
                              _mm256_set1_ps(CPU_EXP_X_MIN));
    __m128 lo = _mm256_cvtpd_ps(cpu_exp4d_avx2(_mm256_cvtps_pd(_mm256_castps256_ps128(xc))));
    __m128 hi = _mm256_cvtpd_ps(cpu_exp4d_avx2(_mm256_cvtps_pd(_mm256_extractf128_ps(xc, 1))));
    __m256 y = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    return _mm256_blendv_ps(y, _mm256_add_ps(x, x), nan);
}

CPU_TARGET_AVX512 static inline __m512d cpu_exp8d_avx512(__m512d x) {
    __m512d n = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(CPU_EXP_LOG2E)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(n, _mm512_set1_pd(CPU_EXP_LN2_HI), x);
    r = _mm512_fnmadd_pd(n, _mm512_set1_pd(CPU_EXP_LN2_LO), r);
    __m512d p = _mm512_set1_pd(CPU_EXP_C(10));
    for (int k = 9; k >= 0; k--)
        p = _mm512_fmadd_pd(p, r, _mm512_set1_pd(CPU_EXP_C(k)));
    return _mm512_scalef_pd(p, n); /* p 2^n, exact like the multiply of the other forms */
}

CPU_TARGET_AVX512 static inline __m512 cpu_exp16_avx512(__m512 x) {
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    __m512 xc = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(CPU_EXP_X_MAX)),
                              _mm512_set1_ps(CPU_EXP_X_MIN));
    __m512d lo = cpu_exp8d_avx512(_mm512_cvtps_pd(_mm512_castps512_ps256(xc)));
    __m512d hi = cpu_exp8d_avx512(_mm512_cvtps_pd(_mm512_extractf32x8_ps(xc, 1)));
    __m512 y = _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
    return _mm512_mask_mov_ps(y, nan, _mm512_add_ps(x, x));
}
#endif

#endif /* CLEF_BACKEND_CPU_VEXP_H */
