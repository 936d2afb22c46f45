/*
 * numeric.h — scalar conversions between the storage formats of the releases and fp32:
 * bf16, fp16, fp8 e4m3fn. Bit-exact, round-to-nearest-even where rounding happens.
 */
#ifndef CLEF_CORE_NUMERIC_H
#define CLEF_CORE_NUMERIC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float clef_bits_to_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t clef_f32_to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float clef_bf16_to_f32(uint16_t h) { return clef_bits_to_f32((uint32_t)h << 16); }

/* fp32 -> bf16, round to nearest even; NaN stays a (quiet) NaN. */
static inline uint16_t clef_f32_to_bf16(float f) {
    uint32_t u = clef_f32_to_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* IEEE half -> fp32, exact (subnormals included). */
static inline float clef_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0) {
        float v = ldexpf((float)man, -24);
        return sign ? -v : v;
    }
    if (exp == 31)
        return clef_bits_to_f32(sign | 0x7f800000u | (man << 13));
    return clef_bits_to_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* fp8 e4m3fn -> fp32, exact: bias 7, no infinities, 0x7f/0xff are NaN, max 448. */
static inline float clef_fp8e4m3_to_f32(uint8_t b) {
    uint32_t exp = (b >> 3) & 0xfu;
    uint32_t man = b & 0x7u;
    float v;
    if (exp == 0xf && man == 0x7)
        v = NAN;
    else if (exp == 0)
        v = ldexpf((float)man, -9);
    else
        v = ldexpf((float)(8 + man), (int)exp - 10);
    return (b & 0x80u) ? -v : v;
}

#endif /* CLEF_CORE_NUMERIC_H */
