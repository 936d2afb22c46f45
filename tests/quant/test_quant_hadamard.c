/*
 * test_quant_hadamard.c — the ConvRot rotation's two forms and the e4m3 encoder, checked
 * against their definitions:
 *  - clef_hadamard256_torch_f32 against H256 built from its definition (the Kronecker power
 *    of H4 over 16) in double: the products are exact, so the fp32 sums may differ from the
 *    double result only by fp32 accumulation error, |err| <= gamma_256 sum |x| / 16; and bit
 *    for bit the order hadamard.h states (two K-blocks of 128 summed in order from zero,
 *    then added), spelled out here one output at a time, on every instruction-set level the
 *    machine has (the vector forms share partial sums between outputs, hadamard.c), on 200
 *    seeded rows and on rows whose partial sums cancel to zero (the sign of a zero);
 *  - the butterfly (clef_fht256_f32) against the same double product: an output is built by
 *    4 stages of 3 fp32 additions (the halvings are exact), and every intermediate is a signed
 *    sum of inputs times 2^-stage, so |intermediate| <= sum |x| and |err| <= gamma_12 sum |x|;
 *  - H256 is orthogonal and symmetric: the butterfly applied twice returns x (same bound x 2);
 *  - clef_f32_to_fp8e4m3 inverts clef_fp8e4m3_to_f32 on every finite code, rounds each
 *    midpoint between neighbouring codes to the even one, and gives NaN from 480 up (torch's
 *    cast; the codes of compressed-tensors' quantizer are checked bit for bit against the
 *    library in test_quant_linear).
 * (comfy-kitchen's own rotation is checked through the bit-identical weight decode of
 * test_quant_dequant.)
 */
#include "test.h"

#include "backend/cpu/cpu_isa.h"
#include "core/numeric.h"
#include "quant/fp8.h"
#include "quant/hadamard.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const int H4[4][4] = {{1, 1, 1, -1}, {1, 1, -1, 1}, {1, -1, 1, 1}, {-1, 1, 1, 1}};

static double h256(int k, int j) {
    double v = 1.0;
    for (int d = 0; d < 4; d++, k >>= 2, j >>= 2)
        v *= H4[k & 3][j & 3];
    return v / 16.0;
}

static double gamma_n(int n) {
    double nu = n * ldexp(1.0, -24);
    return nu / (1 - nu);
}

/* The order hadamard.h states, one output at a time, with the exact products. */
static void torch_order(const float *x, float *y) {
    for (int j = 0; j < 256; j++) {
        float sum = 0.0f;
        for (int k0 = 0; k0 < 256; k0 += 128) {
            float block = 0.0f;
            for (int k = k0; k < k0 + 128; k++)
                block += x[k] * (float)h256(k, j);
            sum += block;
        }
        y[j] = sum;
    }
}

static void check_torch_order(unsigned seed) {
    srand(seed);
    float x[256], want[256], got[256];
    for (int k = 0; k < 256; k++)
        x[k] = (float)((rand() / (double)RAND_MAX - 0.5) * ldexp(1.0, rand() % 40 - 20));
    torch_order(x, want);
    for (int level = CPU_ISA_SCALAR; level <= (int)cpu_isa_best(); level++) {
        cpu_isa saved = cpu_isa_set_limit((cpu_isa)level);
        clef_hadamard256_torch_f32(x, got);
        int differ = 0;
        for (int j = 0; j < 256; j++)
            differ += memcmp(&want[j], &got[j], sizeof(float)) != 0;
        CHECK_MSG(differ == 0, "seed %u, %s: dense rotation differs from torch's order in %d",
                  seed, cpu_isa_name(cpu_isa_active()), differ);
        cpu_isa_set_limit(saved);
    }
}

/* Rows whose partial sums hit exact zeros, where the sign of a zero depends on the order of the
 * operations: all +0, all -0, a row of H256 (every other output's sums cancel to zero exactly),
 * small integers, +-0 mixed with values, a constant row; each must give torch's order's bits
 * (zeros' signs included) on every level. */
static void check_torch_order_zeros(void) {
    float rows[8][256], want[256], got[256];
    for (int k = 0; k < 256; k++) {
        rows[0][k] = 0.0f;
        rows[1][k] = -0.0f;
        rows[2][k] = (float)(16.0 * h256(k, 37));
        rows[3][k] = (float)(16.0 * h256(k, 200) + 16.0 * h256(k, 3));
        rows[4][k] = (float)((k * 7) % 5 - 2);
        rows[5][k] = k % 3 == 0 ? -0.0f : k % 3 == 1 ? 0.25f : -0.25f;
        rows[6][k] = 1.0f;
        rows[7][k] = k < 128 ? 3.0f : -0.0f;
    }
    for (int i = 0; i < 8; i++) {
        torch_order(rows[i], want);
        for (int level = CPU_ISA_SCALAR; level <= (int)cpu_isa_best(); level++) {
            cpu_isa saved = cpu_isa_set_limit((cpu_isa)level);
            clef_hadamard256_torch_f32(rows[i], got);
            int differ = 0;
            for (int j = 0; j < 256; j++)
                differ += memcmp(&want[j], &got[j], sizeof(float)) != 0;
            CHECK_MSG(differ == 0, "zero-sum row %d, %s: dense rotation differs from torch's order in %d",
                      i, cpu_isa_name(cpu_isa_active()), differ);
            cpu_isa_set_limit(saved);
        }
    }
}

static void check_rotation(unsigned seed) {
    srand(seed);
    float x[256], dense[256], fly[256], twice[256];
    double abs_sum = 0;
    for (int k = 0; k < 256; k++) {
        x[k] = (float)((rand() / (double)RAND_MAX - 0.5) * ldexp(1.0, rand() % 40 - 20));
        abs_sum += fabs(x[k]);
        fly[k] = x[k];
    }
    clef_hadamard256_torch_f32(x, dense);
    clef_fht256_f32(fly);
    for (int k = 0; k < 256; k++)
        twice[k] = fly[k];
    clef_fht256_f32(twice);
    int bad_dense = 0, bad_fly = 0, bad_twice = 0;
    for (int j = 0; j < 256; j++) {
        double exact = 0;
        for (int k = 0; k < 256; k++)
            exact += x[k] * h256(k, j);
        bad_dense += fabs(dense[j] - exact) > gamma_n(256) * abs_sum / 16;
        bad_fly += fabs(fly[j] - exact) > gamma_n(12) * abs_sum;
        bad_twice += fabs(twice[j] - x[j]) > 2 * gamma_n(12) * abs_sum;
    }
    CHECK_MSG(bad_dense == 0, "seed %u: dense rotation off in %d outputs", seed, bad_dense);
    CHECK_MSG(bad_fly == 0, "seed %u: butterfly off in %d outputs", seed, bad_fly);
    CHECK_MSG(bad_twice == 0, "seed %u: butterfly twice is not the identity in %d", seed,
              bad_twice);
}

static void check_fp8_encode(void) {
    int bad_roundtrip = 0, bad_mid = 0;
    for (int c = 0; c < 256; c++) {
        float v = clef_fp8e4m3_to_f32((uint8_t)c);
        if (isnan(v))
            continue;
        uint8_t back = clef_f32_to_fp8e4m3(v);
        /* -0.0 encodes to 0x80, +0 to 0x00: the sign is kept */
        bad_roundtrip += back != c;
        /* the midpoint to the next code up in magnitude rounds to the even code of the two */
        if ((c & 0x7f) < 0x7e) {
            float next = clef_fp8e4m3_to_f32((uint8_t)(c + 1));
            float mid = (v + next) / 2; /* exact in fp32 */
            uint8_t even = (c & 1) ? (uint8_t)(c + 1) : (uint8_t)c;
            bad_mid += clef_f32_to_fp8e4m3(mid) != even;
        }
    }
    CHECK_MSG(bad_roundtrip == 0, "%d finite codes do not round-trip", bad_roundtrip);
    CHECK_MSG(bad_mid == 0, "%d midpoints not rounded to even", bad_mid);
    CHECK_EQ_INT(clef_f32_to_fp8e4m3(448.0f), 0x7e);
    CHECK_EQ_INT(clef_f32_to_fp8e4m3(464.0f), 0x7e);   /* tie between 448 and 480: even */
    CHECK_EQ_INT(clef_f32_to_fp8e4m3(470.0f), 0x7f);   /* rounds to 480: NaN */
    CHECK_EQ_INT(clef_f32_to_fp8e4m3(-1e6f), 0xff);
    CHECK_EQ_INT(clef_f32_to_fp8e4m3(NAN) & 0x7f, 0x7f);
    CHECK_EQ_INT(clef_f32_to_fp8e4m3(ldexpf(1.0f, -10)), 0x00); /* half the smallest: to 0 */
    CHECK_EQ_INT(clef_f32_to_fp8e4m3(ldexpf(3.0f, -10)), 0x02); /* 1.5 steps: even, 2 */
}

int main(void) {
    for (unsigned seed = 1; seed <= 20; seed++) {
        check_rotation(seed);
        check_torch_order(seed);
    }
    for (unsigned seed = 21; seed <= 200; seed++)
        check_torch_order(seed);
    check_torch_order_zeros();
    check_fp8_encode();
    return test_summary();
}
