/*
 * nf4_quantize.c — bitsandbytes' NF4 quantizer with double quant, on the CPU (see
 * nf4_quantize.h for the arithmetic, step by step). The project builds with
 * -ffp-contract=off, so every product and sum below is rounded on its own, as the library's
 * torch ops round them.
 */
#include "quant/nf4_quantize.h"

#include "core/error.h"
#include "core/numeric.h"
#include "quant/nf4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* create_dynamic_map(signed=True) of bitsandbytes (sorted ascending), exact fp32 values;
 * test_quantize_release checks it against every nested_quant_map of the NF4 fixture. */
const float clef_bnb_dynamic_map[256] = {
    -0x1.fc66660000000p-1f, -0x1.f533340000000p-1f, -0x1.ee00000000000p-1f, -0x1.e6cccc0000000p-1f,
    -0x1.df999a0000000p-1f, -0x1.d866660000000p-1f, -0x1.d133340000000p-1f, -0x1.ca00000000000p-1f,
    -0x1.c2cccc0000000p-1f, -0x1.bb999a0000000p-1f, -0x1.b466660000000p-1f, -0x1.ad33340000000p-1f,
    -0x1.a600000000000p-1f, -0x1.9ecccc0000000p-1f, -0x1.97999a0000000p-1f, -0x1.9066660000000p-1f,
    -0x1.8933340000000p-1f, -0x1.8200000000000p-1f, -0x1.7acccc0000000p-1f, -0x1.73999a0000000p-1f,
    -0x1.6c66680000000p-1f, -0x1.6533340000000p-1f, -0x1.5e00000000000p-1f, -0x1.56cccc0000000p-1f,
    -0x1.4f999a0000000p-1f, -0x1.4866680000000p-1f, -0x1.4133340000000p-1f, -0x1.3a00000000000p-1f,
    -0x1.32cccc0000000p-1f, -0x1.2b999a0000000p-1f, -0x1.2466680000000p-1f, -0x1.1d33340000000p-1f,
    -0x1.1600000000000p-1f, -0x1.0ecccc0000000p-1f, -0x1.0799980000000p-1f, -0x1.0066660000000p-1f,
    -0x1.f266640000000p-2f, -0x1.e400000000000p-2f, -0x1.d599980000000p-2f, -0x1.c733340000000p-2f,
    -0x1.b8cccc0000000p-2f, -0x1.aa66660000000p-2f, -0x1.9c00000000000p-2f, -0x1.8d99980000000p-2f,
    -0x1.7f33340000000p-2f, -0x1.70cccc0000000p-2f, -0x1.6266660000000p-2f, -0x1.5400000000000p-2f,
    -0x1.4599980000000p-2f, -0x1.3733340000000p-2f, -0x1.28cccc0000000p-2f, -0x1.1a66680000000p-2f,
    -0x1.0c00000000000p-2f, -0x1.fb33320000000p-3f, -0x1.de66660000000p-3f, -0x1.c1999a0000000p-3f,
    -0x1.a4cccc0000000p-3f, -0x1.8800000000000p-3f, -0x1.6b33340000000p-3f, -0x1.4e66660000000p-3f,
    -0x1.31999a0000000p-3f, -0x1.14cccc0000000p-3f, -0x1.f000000000000p-4f, -0x1.b666680000000p-4f,
    -0x1.93d70a0000000p-4f, -0x1.8851ee0000000p-4f, -0x1.7cccce0000000p-4f, -0x1.7147ae0000000p-4f,
    -0x1.65c2900000000p-4f, -0x1.5a3d700000000p-4f, -0x1.4eb8540000000p-4f, -0x1.4333340000000p-4f,
    -0x1.37ae140000000p-4f, -0x1.2c28f60000000p-4f, -0x1.20a3d60000000p-4f, -0x1.151eba0000000p-4f,
    -0x1.09999a0000000p-4f, -0x1.fc28f60000000p-5f, -0x1.e51eba0000000p-5f, -0x1.ce147a0000000p-5f,
    -0x1.b70a3e0000000p-5f, -0x1.a000000000000p-5f, -0x1.88f5c20000000p-5f, -0x1.71eb860000000p-5f,
    -0x1.5ae1460000000p-5f, -0x1.43d70a0000000p-5f, -0x1.2cccce0000000p-5f, -0x1.15c2900000000p-5f,
    -0x1.fd70a40000000p-6f, -0x1.cf5c2a0000000p-6f, -0x1.a147ae0000000p-6f, -0x1.7333340000000p-6f,
    -0x1.451eba0000000p-6f, -0x1.170a3e0000000p-6f, -0x1.d1eb860000000p-7f, -0x1.75c2900000000p-7f,
    -0x1.3e76c80000000p-7f, -0x1.2c08300000000p-7f, -0x1.19999a0000000p-7f, -0x1.072b020000000p-7f,
    -0x1.e978d40000000p-8f, -0x1.c49ba60000000p-8f, -0x1.9fbe760000000p-8f, -0x1.7ae1480000000p-8f,
    -0x1.56041a0000000p-8f, -0x1.3126e80000000p-8f, -0x1.0c49ba0000000p-8f, -0x1.ced9140000000p-9f,
    -0x1.851eb80000000p-9f, -0x1.3b645a0000000p-9f, -0x1.e353f80000000p-10f, -0x1.4fdf3a0000000p-10f,
    -0x1.eecbfe0000000p-11f, -0x1.b3d07c0000000p-11f, -0x1.78d5000000000p-11f, -0x1.3dd9820000000p-11f,
    -0x1.02de020000000p-11f, -0x1.8fc5060000000p-12f, -0x1.19ce0a0000000p-12f, -0x1.47ae160000000p-13f,
    -0x1.743e960000000p-14f, -0x1.15df660000000p-14f, -0x1.6f00680000000p-15f, -0x1.64840c0000000p-16f,
    -0x1.040bfe0000000p-17f, -0x1.b435280000000p-19f, -0x1.27476e0000000p-21f, 0x0.0p+0f,
    0x1.27476e0000000p-21f, 0x1.b435280000000p-19f, 0x1.040bfe0000000p-17f, 0x1.64840c0000000p-16f,
    0x1.6f00680000000p-15f, 0x1.15df660000000p-14f, 0x1.743e960000000p-14f, 0x1.47ae160000000p-13f,
    0x1.19ce0a0000000p-12f, 0x1.8fc5060000000p-12f, 0x1.02de020000000p-11f, 0x1.3dd9820000000p-11f,
    0x1.78d5000000000p-11f, 0x1.b3d07c0000000p-11f, 0x1.eecbfe0000000p-11f, 0x1.4fdf3a0000000p-10f,
    0x1.e353f80000000p-10f, 0x1.3b645a0000000p-9f, 0x1.851eb80000000p-9f, 0x1.ced9140000000p-9f,
    0x1.0c49ba0000000p-8f, 0x1.3126e80000000p-8f, 0x1.56041a0000000p-8f, 0x1.7ae1480000000p-8f,
    0x1.9fbe760000000p-8f, 0x1.c49ba60000000p-8f, 0x1.e978d40000000p-8f, 0x1.072b020000000p-7f,
    0x1.19999a0000000p-7f, 0x1.2c08300000000p-7f, 0x1.3e76c80000000p-7f, 0x1.75c2900000000p-7f,
    0x1.d1eb860000000p-7f, 0x1.170a3e0000000p-6f, 0x1.451eba0000000p-6f, 0x1.7333340000000p-6f,
    0x1.a147ae0000000p-6f, 0x1.cf5c2a0000000p-6f, 0x1.fd70a40000000p-6f, 0x1.15c2900000000p-5f,
    0x1.2cccce0000000p-5f, 0x1.43d70a0000000p-5f, 0x1.5ae1460000000p-5f, 0x1.71eb860000000p-5f,
    0x1.88f5c20000000p-5f, 0x1.a000000000000p-5f, 0x1.b70a3e0000000p-5f, 0x1.ce147a0000000p-5f,
    0x1.e51eba0000000p-5f, 0x1.fc28f60000000p-5f, 0x1.09999a0000000p-4f, 0x1.151eba0000000p-4f,
    0x1.20a3d60000000p-4f, 0x1.2c28f60000000p-4f, 0x1.37ae140000000p-4f, 0x1.4333340000000p-4f,
    0x1.4eb8540000000p-4f, 0x1.5a3d700000000p-4f, 0x1.65c2900000000p-4f, 0x1.7147ae0000000p-4f,
    0x1.7cccce0000000p-4f, 0x1.8851ee0000000p-4f, 0x1.93d70a0000000p-4f, 0x1.b666680000000p-4f,
    0x1.f000000000000p-4f, 0x1.14cccc0000000p-3f, 0x1.31999a0000000p-3f, 0x1.4e66660000000p-3f,
    0x1.6b33340000000p-3f, 0x1.8800000000000p-3f, 0x1.a4cccc0000000p-3f, 0x1.c1999a0000000p-3f,
    0x1.de66660000000p-3f, 0x1.fb33320000000p-3f, 0x1.0c00000000000p-2f, 0x1.1a66680000000p-2f,
    0x1.28cccc0000000p-2f, 0x1.3733340000000p-2f, 0x1.4599980000000p-2f, 0x1.5400000000000p-2f,
    0x1.6266660000000p-2f, 0x1.70cccc0000000p-2f, 0x1.7f33340000000p-2f, 0x1.8d99980000000p-2f,
    0x1.9c00000000000p-2f, 0x1.aa66660000000p-2f, 0x1.b8cccc0000000p-2f, 0x1.c733340000000p-2f,
    0x1.d599980000000p-2f, 0x1.e400000000000p-2f, 0x1.f266640000000p-2f, 0x1.0066660000000p-1f,
    0x1.0799980000000p-1f, 0x1.0ecccc0000000p-1f, 0x1.1600000000000p-1f, 0x1.1d33340000000p-1f,
    0x1.2466680000000p-1f, 0x1.2b999a0000000p-1f, 0x1.32cccc0000000p-1f, 0x1.3a00000000000p-1f,
    0x1.4133340000000p-1f, 0x1.4866680000000p-1f, 0x1.4f999a0000000p-1f, 0x1.56cccc0000000p-1f,
    0x1.5e00000000000p-1f, 0x1.6533340000000p-1f, 0x1.6c66680000000p-1f, 0x1.73999a0000000p-1f,
    0x1.7acccc0000000p-1f, 0x1.8200000000000p-1f, 0x1.8933340000000p-1f, 0x1.9066660000000p-1f,
    0x1.97999a0000000p-1f, 0x1.9ecccc0000000p-1f, 0x1.a600000000000p-1f, 0x1.ad33340000000p-1f,
    0x1.b466660000000p-1f, 0x1.bb999a0000000p-1f, 0x1.c2cccc0000000p-1f, 0x1.ca00000000000p-1f,
    0x1.d133340000000p-1f, 0x1.d866660000000p-1f, 0x1.df999a0000000p-1f, 0x1.e6cccc0000000p-1f,
    0x1.ee00000000000p-1f, 0x1.f533340000000p-1f, 0x1.fc66660000000p-1f, 0x1.0000000000000p+0f,
};

/* ---- torch's float sum (aten/src/ATen/native/cpu/SumKernel.cpp, cascade_sum) ------------
 * A row of `size` items, each `lanes` floats wide (a vector register, or 1 float on the
 * scalar path), is summed four items at a time into four accumulators (item 4 i + k into
 * accumulator k), themselves cascaded over four levels of 2^level_power items; the leftover
 * items go into accumulator 0, then accumulators 1..3 are added into it. */

enum { SUM_MAX_LANES = 16, SUM_LEVELS = 4, SUM_ILP = 4 };

static int64_t ceil_log2(int64_t x) {
    if (x <= 2)
        return 1;
    int64_t last = 63 - __builtin_clzll((unsigned long long)(x - 1));
    return last + 1;
}

static void lanes_add(float *acc, const float *v, int lanes) {
    for (int l = 0; l < lanes; l++)
        acc[l] = acc[l] + v[l];
}

/* multi_row_sum over rows [0, size): row i, column k is the item at x + (i * 4 + k) * lanes. */
static void multi_row_sum(const float *x, int64_t size, int lanes, float out[SUM_ILP][SUM_MAX_LANES]) {
    int64_t level_power = ceil_log2(size) / SUM_LEVELS;
    if (level_power < 4)
        level_power = 4;
    const int64_t level_step = (int64_t)1 << level_power;
    const int64_t level_mask = level_step - 1;
    float acc[SUM_LEVELS][SUM_ILP][SUM_MAX_LANES];
    memset(acc, 0, sizeof acc);
    int64_t i = 0;
    while (i + level_step <= size) {
        for (int64_t j = 0; j < level_step; j++, i++)
            for (int k = 0; k < SUM_ILP; k++)
                lanes_add(acc[0][k], x + (i * SUM_ILP + k) * lanes, lanes);
        for (int j = 1; j < SUM_LEVELS; j++) {
            for (int k = 0; k < SUM_ILP; k++) {
                lanes_add(acc[j][k], acc[j - 1][k], lanes);
                memset(acc[j - 1][k], 0, sizeof acc[j - 1][k]);
            }
            if ((i & (level_mask << (j * level_power))) != 0)
                break;
        }
    }
    for (; i < size; i++)
        for (int k = 0; k < SUM_ILP; k++)
            lanes_add(acc[0][k], x + (i * SUM_ILP + k) * lanes, lanes);
    for (int j = 1; j < SUM_LEVELS; j++)
        for (int k = 0; k < SUM_ILP; k++)
            lanes_add(acc[0][k], acc[j][k], lanes);
    memcpy(out, acc[0], sizeof acc[0]);
}

/* row_sum: `size` items of `lanes` floats -> one item (out[lanes]). */
static void row_sum(const float *x, int64_t size, int lanes, float *out) {
    float partial[SUM_ILP][SUM_MAX_LANES];
    const int64_t size_ilp = size / SUM_ILP;
    multi_row_sum(x, size_ilp, lanes, partial);
    for (int64_t i = size_ilp * SUM_ILP; i < size; i++)
        lanes_add(partial[0], x + i * lanes, lanes);
    for (int k = 1; k < SUM_ILP; k++)
        lanes_add(partial[0], partial[k], lanes);
    memcpy(out, partial[0], (size_t)lanes * sizeof(float));
}

/* One serial reduction of x[0, n) (what one thread of torch computes). */
static float serial_sum(const float *x, int64_t n, int lanes) {
    float r;
    if (n < lanes) { /* scalar_inner_sum: too short for one vector */
        row_sum(x, n, 1, &r);
        return 0.0f + r;
    }
    float vec[SUM_MAX_LANES];
    const int64_t vec_size = n / lanes;
    row_sum(x, vec_size, lanes, vec);
    r = 0.0f;
    for (int64_t k = vec_size * lanes; k < n; k++)
        r = r + x[k];
    for (int l = 0; l < lanes; l++)
        r = r + vec[l];
    return 0.0f + r; /* the output starts at 0 and the kernel adds into it */
}

float clef_torch_sum_f32(const float *x, int64_t n, clef_torch_sum_mode mode) {
    const int lanes = mode.lanes == 8 ? 8 : 16;
    const int64_t grain = 32768; /* at::internal::GRAIN_SIZE */
    if (n < grain || mode.threads <= 1)
        return serial_sum(x, n, lanes);
    /* two_pass_reduction: at::parallel_for splits [0, n) into chunks of divup(n, used) for
     * used = min(threads, divup(n, grain)) threads, each summed into its own slot; the
     * `threads` slots (unused ones 0) are then summed by the same kernel. */
    int64_t used = (n + grain - 1) / grain;
    if (used > mode.threads)
        used = mode.threads;
    const int64_t chunk = (n + used - 1) / used;
    float *slots = calloc((size_t)mode.threads, sizeof *slots);
    if (!slots)
        return serial_sum(x, n, lanes); /* only on OOM; callers check sizes first */
    for (int64_t t = 0; t < used; t++) {
        int64_t begin = t * chunk, end = begin + chunk < n ? begin + chunk : n;
        if (begin < end)
            slots[t] = serial_sum(x + begin, end - begin, lanes);
    }
    float r = serial_sum(slots, mode.threads, lanes);
    free(slots);
    return r;
}

/* ---- step 1: 4-bit codes (bitsandbytes backends/default quantize_4bit) ------------------- */

static uint8_t nf4_code(float s, const float *midpoints) {
    uint8_t q = 0;
    while (q < 15 && midpoints[q] < s) /* torch.bucketize, right=False */
        q++;
    return q;
}

static float clamp_unit(float v) {
    return v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
}

void clef_nf4_quantize_blocks(const uint16_t *w, int64_t first, int64_t count, int64_t n,
                              int64_t blocksize, uint8_t *packed, float *absmax) {
    float midpoints[15];
    for (int i = 0; i < 15; i++)
        midpoints[i] = (clef_nf4_table[i] + clef_nf4_table[i + 1]) / 2.0f;
    const int64_t full_end = n - n % blocksize; /* elements in full blocks */
    uint8_t pending = 0;                        /* high nibble waiting for its low one */
    int64_t n_out = 0;
    for (int64_t b0 = 0; b0 < count; b0 += blocksize) {
        const int64_t len = count - b0 < blocksize ? count - b0 : blocksize;
        const int partial = first + b0 >= full_end;
        float am = 0.0f;
        for (int64_t i = 0; i < len; i++) {
            float a = fabsf(clef_bf16_to_f32(w[b0 + i]));
            am = a > am ? a : am;
        }
        const float am_clamped = am < 1e-38f ? 1e-38f : am;
        const float recip = 1.0f / am_clamped;
        absmax[b0 / blocksize] = partial ? am_clamped : am;
        for (int64_t i = 0; i < len; i++) {
            float x = clef_bf16_to_f32(w[b0 + i]);
            float s = clamp_unit(partial ? x / am_clamped : x * recip);
            uint8_t q = nf4_code(s, midpoints);
            if (((b0 + i) & 1) == 0)
                pending = (uint8_t)(q << 4);
            else
                packed[n_out++] = (uint8_t)(pending | q);
        }
    }
    if (count & 1) /* odd element count: padded with 0.0, whose code is 7 */
        packed[n_out] = (uint8_t)(pending | nf4_code(0.0f, midpoints));
}

/* ---- step 2: double quant (bitsandbytes csrc/cpu_ops.cpp quantize_cpu, 8-bit blockwise) -- */

enum { LUT_SIZE = 65536 };

/* Entry i: the dynamic-map entry nearest -1 + 2 i / 65535 (first of two on a tie). */
static void build_dynamic_lut(uint8_t *lut) {
    float mid[255];
    for (int i = 0; i < 255; i++)
        mid[i] = 0.5f * (clef_bnb_dynamic_map[i] + clef_bnb_dynamic_map[i + 1]);
    int code = 0;
    for (int i = 0; i < LUT_SIZE; i++) {
        float val = -1.0f + (2.0f * (float)i) / (float)(LUT_SIZE - 1);
        while (code < 255 && mid[code] < val)
            code++;
        lut[i] = (uint8_t)code;
    }
}

static uint16_t lut_index(float v) {
    v = clamp_unit(v);
    float t = (v + 1.0f) * 0.5f;
    t = t * (float)(LUT_SIZE - 1);
    return (uint16_t)(t + 0.5f);
}

int clef_nf4_double_quant(const float *absmax, int64_t n_blocks, int64_t nested_blocksize,
                          clef_torch_sum_mode mode, uint8_t *codes, float *nested_absmax,
                          float *offset) {
    uint8_t *lut = malloc(LUT_SIZE); /* 64 KiB, rebuilt per weight: cheap next to the weight */
    if (!lut)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "nf4 double quant: out of memory");
    build_dynamic_lut(lut);
    const float mean = clef_torch_sum_f32(absmax, n_blocks, mode) / (float)n_blocks;
    *offset = mean;
    for (int64_t c = 0; c * nested_blocksize < n_blocks; c++) {
        const int64_t begin = c * nested_blocksize;
        const int64_t end = begin + nested_blocksize < n_blocks ? begin + nested_blocksize : n_blocks;
        float am = 0.0f;
        for (int64_t i = begin; i < end; i++) {
            float a = fabsf(absmax[i] - mean);
            am = a > am ? a : am;
        }
        nested_absmax[c] = am;
        if (am == 0.0f) {
            memset(codes + begin, 0, (size_t)(end - begin));
            continue;
        }
        const float inv = 1.0f / am;
        for (int64_t i = begin; i < end; i++)
            codes[i] = lut[lut_index((absmax[i] - mean) * inv)];
    }
    free(lut);
    return CLEF_OK;
}
