/*
 * test_numeric.c — the scalar format conversions against their definitions: every fp8
 * e4m3fn code is checked against the formula of the OCP spec (sign, 4-bit exponent with
 * bias 7, 3-bit mantissa, subnormals, NaN at 0x7f/0xff), bf16 rounding against
 * round-half-even computed in double, and every fp16 code against ldexp of its fields.
 */
#include "core/numeric.h"
#include "test.h"

int main(void) {
    /* fp8 e4m3fn: all 256 codes. */
    for (int b = 0; b < 256; b++) {
        int sign = b >> 7, e = (b >> 3) & 15, m = b & 7;
        float got = clef_fp8e4m3_to_f32((uint8_t)b);
        if (e == 15 && m == 7) {
            CHECK(isnan(got));
            continue;
        }
        double want = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
        if (sign)
            want = -want;
        CHECK_MSG((double)got == want, "fp8 0x%02x: got %g want %g", b, got, want);
    }
    CHECK(clef_fp8e4m3_to_f32(0x7e) == 448.0f);

    /* fp16: all 65536 codes. */
    for (int h = 0; h < 65536; h++) {
        int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
        float got = clef_f16_to_f32((uint16_t)h);
        if (e == 31) {
            CHECK(m ? isnan(got) : isinf(got));
            continue;
        }
        double want = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
        if (sign)
            want = -want;
        if ((double)got != want)
            CHECK_MSG(0, "fp16 0x%04x: got %g want %g", h, got, want);
    }
    CHECK(1);

    /* bf16: round trip of every bf16 value, and round-half-even on midpoints. */
    for (int h = 0; h < 65536; h++) {
        float f = clef_bf16_to_f32((uint16_t)h);
        if (isnan(f))
            continue;
        if (clef_f32_to_bf16(f) != h)
            CHECK_MSG(0, "bf16 0x%04x does not round-trip", h);
    }
    /* 1 + 2^-8 is the midpoint between 1 and 1 + 2^-7: ties to even -> 1.0 (0x3f80). */
    CHECK_EQ_INT(clef_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);
    /* 1 + 3*2^-8 is the midpoint between 1+2^-7 (odd) and 1+2^-6 (even) -> 0x3f82. */
    CHECK_EQ_INT(clef_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);
    /* just above a midpoint rounds up */
    CHECK_EQ_INT(clef_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    CHECK(isnan(clef_bf16_to_f32(clef_f32_to_bf16(NAN))));
    return test_summary();
}
