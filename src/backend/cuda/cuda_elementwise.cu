/*
 * cuda_elementwise.cu — the pointwise and near-pointwise ops: causal depthwise conv1d + SiLU,
 * the GDN gates, the RoPE table and its application, unary functions, the attention output
 * gate, SwiGLU, add, and the normal-distribution fill the GPU bench makes weights with.
 * fp32 throughout, with the CPU reference's formulas (cpu_elementwise.c, cpu_conv.c,
 * cpu_rope.c); expf/log1pf/erff/tanhf differ from glibc's in the last ulp at most.
 *
 * SwiGLU (down_proj's input) and the attention output gate (o_proj's input) also write each
 * value's bf16 rounding into the matmul staging when it has room and mark it as holding them
 * (cuda_staging_claim, cuda_matmul.cu): the matmul after them converts nothing. Their fp32
 * outputs are written as before. When the matmul after them is FP8 or INT8 ConvRot (the
 * quantized hand-off, cuda_quant_stage.cu), a row kernel (one block per token row) writes the
 * fp32 output, the staging's bf16 and that matmul's codes + per-token scale instead: each
 * value by the same expression as the elementwise kernel (the same fp32 bits), the row kept in
 * shared memory for the quantizer (cuda_quant_row.cuh). The MLP's SwiGLU comes with its down
 * projection (swiglu_matmul): when that matmul takes the codes, the kernel writes only them.
 */
#include "backend/cuda/cuda_internal.cuh"
#include "backend/cuda/cuda_quant_row.cuh"

#define EW_THREADS 256

__device__ __forceinline__ float sigmoid_f(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ __forceinline__ float softplus_f(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

/* ---- conv1d + SiLU ---------------------------------------------------------------------- */

/* The packed sequence that holds `row`: the last s < n_seqs with start[s] <= row (binary search
 * in the n_seqs + 1 row offsets; empty sequences share an offset with the next one). */
__device__ __forceinline__ int64_t conv_seq_of(const int32_t *start, int64_t n_seqs, int64_t row) {
    int64_t lo = 0, hi = n_seqs - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        if (start[mid] <= row)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* With packed sequences (start: n_seqs + 1 row offsets in device memory), row i of sequence s
 * is its token i - start[s]: taps never reach into the previous sequence; prev holds
 * [n_seqs, K-1, C]. A thread owns one channel of the rows blockIdx.y, blockIdx.y + gridDim.y,
 * ... (no 64-bit division per element: it cost more than the taps). */
__global__ void k_conv1d_silu(int64_t T, int64_t C, int64_t K, const float *x, int64_t ldx, const float *w,
                              const float *prev, float *y, int64_t ldy, const int32_t *start, int64_t n_seqs) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int64_t row = blockIdx.y; row < T; row += gridDim.y) {
        int64_t s = 0, t = row;
        if (start) /* the sequence of this row */
            s = conv_seq_of(start, n_seqs, row), t = row - start[s];
        const float *xs0 = x + (row - t) * ldx;
        const float *ps = prev ? prev + s * (K - 1) * C : NULL;
        float acc = 0.0f;
        for (int64_t k = 0; k < K; k++) {
            int64_t src = t - K + 1 + k;
            float v;
            if (src >= 0)
                v = xs0[src * ldx + c];
            else if (ps)
                v = ps[(K - 1 + src) * C + c];
            else
                continue;
            acc += w[c * K + k] * v;
        }
        y[row * ldy + c] = silu_f(acc);
    }
}

/* The same for K = 3 or 4 taps (Qwen3.5 has 4), CONV_RUN consecutive rows per thread: the
 * taps and the last K inputs stay in registers, so each input is read once instead of K
 * times. Same products in the same order as k_conv1d_silu, so the same results. */
#define CONV_RUN 16
template <int K>
__global__ void k_conv1d_silu_run(int64_t T, int64_t C, const float *x, int64_t ldx, const float *w,
                                  const float *prev, float *y, int64_t ldy, const int32_t *start, int64_t n_seqs) {
    const int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t r0 = (int64_t)blockIdx.y * CONV_RUN, r1 = T - r0 < CONV_RUN ? T : r0 + CONV_RUN;
    if (c >= C)
        return;
    float wk[K], win[K]; /* win[k]: the input of row - (K - 1) + k */
#pragma unroll
    for (int k = 0; k < K; k++)
        wk[k] = w[c * K + k];
    int64_t s = 0, begin = 0, next = INT64_MAX;
    if (start) /* the sequence of row r0 */
        s = conv_seq_of(start, n_seqs, r0), begin = start[s], next = start[s + 1];
#pragma unroll
    for (int k = 1; k < K; k++) { /* rows r0 - K + 1 .. r0 - 1 (masked below where outside the sequence) */
        const int64_t src = r0 - K + k;
        win[k] = src >= 0 ? x[src * ldx + c] : 0.0f;
    }
    for (int64_t row = r0; row < r1; row++) {
        while (row >= next) /* a new sequence starts (empty ones are skipped) */
            s++, begin = next, next = start[s + 1];
#pragma unroll
        for (int k = 0; k < K - 1; k++)
            win[k] = win[k + 1];
        win[K - 1] = x[row * ldx + c];
        const int64_t t = row - begin;
        const float *ps = prev ? prev + s * (K - 1) * C : NULL;
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int64_t src = t - K + 1 + k;
            float v;
            if (src >= 0)
                v = win[k];
            else if (ps)
                v = ps[(K - 1 + src) * C + c];
            else
                continue;
            acc += wk[k] * v;
        }
        y[row * ldy + c] = silu_f(acc);
    }
}

/* k_conv1d_silu_run over 4 channels a thread (C, ldx, ldy and x, y, prev multiples of 4 floats):
 * 16-byte loads and stores, and every input of the run loaded before any arithmetic, so a
 * thread has CONV_RUN + K - 1 loads in flight instead of one row's at a time (the one-channel
 * kernel ran at half the memory floor: 79 us for the 27B's 2,270 x 10,240 against 39). Per
 * channel the same products in the same order as k_conv1d_silu_run: the same bits. */
#define CONV_VEC_THREADS 128
template <int K>
__global__ void __launch_bounds__(CONV_VEC_THREADS)
    k_conv1d_silu_run4(int64_t T, int64_t C, const float *x, int64_t ldx, const float *w, const float *prev, float *y,
                       int64_t ldy, const int32_t *start, int64_t n_seqs) {
    const int64_t c = 4 * ((int64_t)blockIdx.x * blockDim.x + threadIdx.x);
    const int64_t r0 = (int64_t)blockIdx.y * CONV_RUN;
    if (c >= C)
        return;
    const int n = T - r0 < CONV_RUN ? (int)(T - r0) : CONV_RUN;
    float wk[4][K];
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int k = 0; k < K; k++)
            wk[j][k] = w[(c + j) * K + k];
    float4 in[CONV_RUN + K - 1]; /* in[i]: the input of row r0 - (K - 1) + i (0 before row 0, past the run) */
#pragma unroll
    for (int i = 0; i < CONV_RUN + K - 1; i++) {
        const int64_t src = r0 - (K - 1) + i;
        in[i] = src >= 0 && i < n + K - 1 ? *(const float4 *)(x + src * ldx + c) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    int64_t s = 0, begin = 0, next = INT64_MAX;
    if (start) /* the sequence of row r0 */
        s = conv_seq_of(start, n_seqs, r0), begin = start[s], next = start[s + 1];
#pragma unroll
    for (int i = 0; i < CONV_RUN; i++) {
        if (i >= n)
            break;
        const int64_t row = r0 + i;
        while (row >= next) /* a new sequence starts (empty ones are skipped) */
            s++, begin = next, next = start[s + 1];
        const int64_t t = row - begin;
        const float *ps = prev ? prev + s * (K - 1) * C : NULL;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
#pragma unroll
        for (int k = 0; k < K; k++) {
            const int64_t src = t - K + 1 + k;
            float4 v;
            if (src >= 0)
                v = in[i + k];
            else if (ps)
                v = *(const float4 *)(ps + (K - 1 + src) * C + c);
            else
                continue;
            a0 += wk[0][k] * v.x;
            a1 += wk[1][k] * v.y;
            a2 += wk[2][k] * v.z;
            a3 += wk[3][k] * v.w;
        }
        *(float4 *)(y + row * ldy + c) = make_float4(silu_f(a0), silu_f(a1), silu_f(a2), silu_f(a3));
    }
}

void cuda_conv1d_causal_silu(clef_backend *be, int64_t T, int64_t C, int64_t K, const float *x, int64_t ldx,
                             const float *w, const float *prev, float *y, int64_t ldy, const clef_seqs *seqs) {
    if (cuda_ctx(be)->status != CLEF_OK || T * C <= 0)
        return;
    const int32_t *start = seqs ? seqs->start_dev : NULL;
    const int64_t n_seqs = seqs ? seqs->n_seqs : 1;
    const int64_t runs = (T + CONV_RUN - 1) / CONV_RUN;
    const int vec = C % 4 == 0 && ldx % 4 == 0 && ldy % 4 == 0 && ((uintptr_t)x | (uintptr_t)y | (uintptr_t)prev) % 16 == 0;
    if ((K == 3 || K == 4) && runs < 65535 && x != y && vec) {
        dim3 vgrid(cuda_blocks(C / 4, CONV_VEC_THREADS), (unsigned)runs);
        if (K == 4)
            k_conv1d_silu_run4<4><<<vgrid, CONV_VEC_THREADS, 0, cuda_ctx(be)->stream>>>(T, C, x, ldx, w, prev, y, ldy,
                                                                                       start, n_seqs);
        else
            k_conv1d_silu_run4<3><<<vgrid, CONV_VEC_THREADS, 0, cuda_ctx(be)->stream>>>(T, C, x, ldx, w, prev, y, ldy,
                                                                                       start, n_seqs);
        CUDA_CHECK_LAUNCH(be, "conv1d kernel");
        return;
    }
    if ((K == 3 || K == 4) && runs < 65535 && x != y) {
        dim3 rgrid(cuda_blocks(C, EW_THREADS), (unsigned)runs);
        if (K == 4)
            k_conv1d_silu_run<4><<<rgrid, EW_THREADS, 0, cuda_ctx(be)->stream>>>(T, C, x, ldx, w, prev, y, ldy, start, n_seqs);
        else
            k_conv1d_silu_run<3><<<rgrid, EW_THREADS, 0, cuda_ctx(be)->stream>>>(T, C, x, ldx, w, prev, y, ldy, start, n_seqs);
        CUDA_CHECK_LAUNCH(be, "conv1d kernel");
        return;
    }
    dim3 grid(cuda_blocks(C, EW_THREADS), (unsigned)(T < 65535 ? T : 65535));
    k_conv1d_silu<<<grid, EW_THREADS, 0, cuda_ctx(be)->stream>>>(T, C, K, x, ldx, w, prev, y, ldy,
                                                                 seqs ? seqs->start_dev : NULL, seqs ? seqs->n_seqs : 1);
    CUDA_CHECK_LAUNCH(be, "conv1d kernel");
}

/* ---- GDN gates ------------------------------------------------------------------------- */

__global__ void k_gdn_gates(int64_t T, int64_t H, const float *a, int64_t lda, const float *b, int64_t ldb,
                            const float *a_log, const float *dt_bias, float *g, float *beta) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * H)
        return;
    int64_t t = i / H, h = i - t * H;
    beta[i] = sigmoid_f(b[t * ldb + h]);
    g[i] = -expf(a_log[h]) * softplus_f(a[t * lda + h] + dt_bias[h]);
}

void cuda_gdn_gates(clef_backend *be, int64_t T, int64_t H, const float *a, int64_t lda, const float *b, int64_t ldb,
                    const float *a_log, const float *dt_bias, float *g, float *beta) {
    if (cuda_ctx(be)->status != CLEF_OK || T * H <= 0)
        return;
    k_gdn_gates<<<cuda_blocks(T * H, EW_THREADS), EW_THREADS, 0, cuda_ctx(be)->stream>>>(T, H, a, lda, b, ldb, a_log,
                                                                                         dt_bias, g, beta);
    CUDA_CHECK_LAUNCH(be, "gdn_gates kernel");
}

/* ---- RoPE ------------------------------------------------------------------------------- */

__device__ int mrope_axis(int64_t j, int64_t s0, int64_t s1, int64_t s2, int interleaved) {
    if (interleaved) {
        if (j % 3 == 1 && j < 3 * s1)
            return 1;
        if (j % 3 == 2 && j < 3 * s2)
            return 2;
        return 0;
    }
    if (j < s0)
        return 0;
    return j < s0 + s1 ? 1 : 2;
}

/* inv_freq is computed on the host in double exactly as the CPU does (then rounded to fp32)
 * and passed per frequency, so the device table matches the reference to the ulp of cos/sin. */
__global__ void k_rope_table(int64_t T, const int32_t *pos, int64_t rot, const float *inv_freq, int64_t s0, int64_t s1,
                             int64_t s2, int interleaved, float *cos_out, float *sin_out) {
    const int64_t half = rot / 2;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * half)
        return;
    int64_t t = i / half, j = i - t * half;
    int axis = mrope_axis(j, s0, s1, s2, interleaved);
    float phi = (float)pos[axis * T + t] * inv_freq[j];
    float c = cosf(phi), s = sinf(phi);
    cos_out[t * rot + j] = cos_out[t * rot + half + j] = c;
    sin_out[t * rot + j] = sin_out[t * rot + half + j] = s;
}

/* The device copy of the inverse frequencies for (theta, rot_dims), uploaded on first use and
 * kept (a handful per backend: one per model the handle runs), so a forward's rope_table
 * launches one kernel and copies nothing from the host: it can be recorded (cuda_graph.cu). */
static const float *rope_inv_freq(clef_backend *be, int64_t rot_dims, double theta) {
    cuda_context *ctx = cuda_ctx(be);
    for (int i = 0; i < ctx->n_rope_inv; i++)
        if (ctx->rope_inv[i].theta == theta && ctx->rope_inv[i].rot_dims == rot_dims)
            return ctx->rope_inv[i].dev;
    if (cuda_capture_refuse(be, "a new RoPE table"))
        return NULL;
    if (ctx->n_rope_inv == CUDA_ROPE_TABLES) {
        ctx->status = clef_fail(CLEF_ERR_UNSUPPORTED, "CUDA rope_table: more than %d (theta, rot_dims) pairs on one backend",
                                CUDA_ROPE_TABLES);
        return NULL;
    }
    const int64_t half = rot_dims / 2;
    float *inv = (float *)malloc(sizeof(float) * (size_t)(half > 0 ? half : 1));
    if (!inv) {
        ctx->status = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "CUDA rope_table: out of memory");
        return NULL;
    }
    for (int64_t j = 0; j < half; j++) {
        float exponent = (float)(2 * j) / (float)rot_dims;
        inv[j] = 1.0f / (float)pow(theta, (double)exponent);
    }
    float *dev = NULL;
    const size_t bytes = sizeof(float) * (size_t)(half > 0 ? half : 1);
    if (cuda_record(be, cudaMalloc((void **)&dev, bytes), "rope table") == CLEF_OK) {
        cuda_account(be, (ptrdiff_t)bytes);
        /* in the stream's order, and done before inv is freed below */
        cuda_record(be, cudaMemcpyAsync(dev, inv, sizeof(float) * (size_t)half, cudaMemcpyHostToDevice, ctx->stream),
                    "rope table copy");
        cuda_record(be, cudaStreamSynchronize(ctx->stream), "rope table copy");
        ctx->rope_inv[ctx->n_rope_inv].theta = theta;
        ctx->rope_inv[ctx->n_rope_inv].rot_dims = rot_dims;
        ctx->rope_inv[ctx->n_rope_inv++].dev = dev;
    }
    free(inv);
    return ctx->status == CLEF_OK ? dev : NULL;
}

void cuda_rope_table(clef_backend *be, int64_t T, const int32_t *pos, int64_t rot_dims, double theta,
                     const int64_t sections[3], int mrope_interleaved, float *cos_out, float *sin_out) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return;
    const int64_t half = rot_dims / 2;
    const float *inv = rope_inv_freq(be, rot_dims, theta);
    if (!inv)
        return;
    k_rope_table<<<cuda_blocks(T * half, EW_THREADS), EW_THREADS, 0, ctx->stream>>>(
        T, pos, rot_dims, inv, sections[0], sections[1], sections[2], mrope_interleaved, cos_out, sin_out);
    CUDA_CHECK_LAUNCH(be, "rope_table kernel");
}

__global__ void k_rope_apply(int64_t T, int64_t n_heads, float *x, int64_t ldx, int64_t head_stride, int64_t rot,
                             const float *cos_t, const float *sin_t) {
    const int64_t half = rot / 2;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= T * n_heads * half)
        return;
    int64_t j = i % half, th = i / half, h = th % n_heads, t = th / n_heads;
    float *v = x + t * ldx + h * head_stride;
    const float *c = cos_t + t * rot, *s = sin_t + t * rot;
    float a = v[j], b = v[j + half];
    v[j] = a * c[j] + (-b) * s[j];
    v[j + half] = b * c[j + half] + a * s[j + half];
}

void cuda_rope_apply(clef_backend *be, int64_t T, int64_t n_heads, float *x, int64_t ldx, int64_t head_stride,
                     int64_t rot_dims, const float *cos_t, const float *sin_t) {
    int64_t n = T * n_heads * (rot_dims / 2);
    if (cuda_ctx(be)->status != CLEF_OK || n <= 0)
        return;
    k_rope_apply<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_ctx(be)->stream>>>(T, n_heads, x, ldx, head_stride,
                                                                                      rot_dims, cos_t, sin_t);
    CUDA_CHECK_LAUNCH(be, "rope_apply kernel");
}

/* ---- unary, gate, SwiGLU, add ----------------------------------------------------------- */

__global__ void k_unary(int op, int64_t n, const float *x, float *y) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = x[i];
    switch (op) {
    case CLEF_UNARY_SILU: v = silu_f(v); break;
    case CLEF_UNARY_GELU_ERF: v = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)); break;
    case CLEF_UNARY_GELU_TANH: {
        const float k = 0.7978845608028654f;
        v = 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
        break;
    }
    case CLEF_UNARY_SIGMOID: v = sigmoid_f(v); break;
    case CLEF_UNARY_SOFTPLUS: v = softplus_f(v); break;
    case CLEF_UNARY_EXP: v = expf(v); break;
    default: break;
    }
    y[i] = v;
}

void cuda_unary(clef_backend *be, clef_unary_op op, int64_t n, const float *x, float *y) {
    if (cuda_ctx(be)->status != CLEF_OK || n <= 0)
        return;
    k_unary<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_ctx(be)->stream>>>((int)op, n, x, y);
    CUDA_CHECK_LAUNCH(be, "unary kernel");
}

/* xb: NULL, or the bf16 staging of x's rows (contiguous: ldx == cols). VEC = 4: cols, ldx,
 * ldg and the pointers are multiples of 4 floats, one float4 per thread. */
template <int VEC>
__global__ void k_mul_sigmoid(int64_t rows, int64_t cols, float *x, int64_t ldx, const float *gate, int64_t ldg,
                              __nv_bfloat16 *xb) {
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= rows * cols)
        return;
    const int64_t r = i / cols, c = i - r * cols;
    if (VEC == 4) {
        const float4 a = *(const float4 *)(x + r * ldx + c), g = *(const float4 *)(gate + r * ldg + c);
        const float4 v = make_float4(a.x * sigmoid_f(g.x), a.y * sigmoid_f(g.y), a.z * sigmoid_f(g.z),
                                     a.w * sigmoid_f(g.w));
        *(float4 *)(x + r * ldx + c) = v;
        if (xb) {
            cuda_store_bf16x4(xb + i, v);
        }
    } else {
        const float v = x[r * ldx + c] * sigmoid_f(gate[r * ldg + c]);
        x[r * ldx + c] = v;
        if (xb)
            xb[i] = __float2bfloat16_rn(v);
    }
}

/* Threads a block of the fused row kernels (a 17,408-wide SwiGLU row is 68 KB of shared
 * memory, so a few blocks an SM: enough loads in flight per block, as the standalone quantizer) */
#define EW_ROW_THREADS 512

/* Dynamic shared memory of a fused row kernel for rows of K floats (opting in past 48 KB). */
template <typename F> static size_t row_smem(clef_backend *be, F kernel, int64_t K) {
    const size_t smem = sizeof(float) * (size_t)K;
    cuda_record(be, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
                "fused quantizer shared memory");
    return smem;
}

/* k_mul_sigmoid<4> and the hand-off's quantizer, one block per token: its K = H cols values
 * are H rows of x (ldx == cols, so contiguous) and of the gate. */
__global__ void __launch_bounds__(EW_ROW_THREADS) k_mul_sigmoid_rows_q(int64_t cols, float *x, const float *gate,
                                                                       int64_t ldg, __nv_bfloat16 *xb,
                                                                       cuda_qstage_target tg) {
    extern __shared__ float qrow[]; /* tg.K floats */
    __shared__ float red[32];
    const int64_t t = blockIdx.x, K = tg.K, H = K / cols;
    const bool fp8 = tg.mode == CUDA_QMODE_FP8 || tg.mode == CUDA_QMODE_FP8_BF16; /* INT8 takes its own maximum */
    float amax = 0.0f;
    for (int64_t k = 4 * (int64_t)threadIdx.x; k < K; k += 4 * (int64_t)blockDim.x) {
        const int64_t h = k / cols, c = k - h * cols, r = t * H + h;
        float *xp = x + t * K + k;
        const float4 a = *(const float4 *)xp, g = *(const float4 *)(gate + r * ldg + c);
        const float4 v = make_float4(a.x * sigmoid_f(g.x), a.y * sigmoid_f(g.y), a.z * sigmoid_f(g.z),
                                     a.w * sigmoid_f(g.w));
        *(float4 *)xp = v;
        *(float4 *)(qrow + k) = v;
        if (fp8)
            amax = amax4(amax, v);
        if (xb) {
            cuda_store_bf16x4(xb + t * K + k, v);
        }
    }
    __syncthreads();
    cuda_qrow_quantize_max(tg, t, qrow, red, amax);
}

void cuda_mul_sigmoid(clef_backend *be, int64_t rows, int64_t cols, float *x, int64_t ldx, const float *gate,
                      int64_t ldgate) {
    if (cuda_ctx(be)->status != CLEF_OK || rows * cols <= 0)
        return;
    __nv_bfloat16 *xb = ldx == cols ? cuda_staging_claim(be, rows * cols) : NULL;
    const int vec = cols % 4 == 0 && ldx % 4 == 0 && ldgate % 4 == 0 && ((uintptr_t)x | (uintptr_t)gate) % 16 == 0;
    cuda_qstage_target tg;
    if (vec && ldx == cols && cuda_qstage_claim(be, CUDA_QSTAGE_MUL_SIGMOID, rows * cols, cols, 0, &tg)) {
        const size_t smem = row_smem(be, k_mul_sigmoid_rows_q, tg.K);
        k_mul_sigmoid_rows_q<<<(unsigned)(rows * cols / tg.K), EW_ROW_THREADS, smem, cuda_ctx(be)->stream>>>(
            cols, x, gate, ldgate, xb, tg);
        CUDA_CHECK_LAUNCH(be, "mul_sigmoid + quantizer kernel");
        if (xb)
            cuda_staging_mark(be, x, rows * cols);
        cuda_qstage_mark(be, CUDA_QSTAGE_MUL_SIGMOID, x, rows * cols, &tg);
        return;
    }
    if (vec)
        k_mul_sigmoid<4><<<cuda_blocks(rows * cols / 4, EW_THREADS), EW_THREADS, 0, cuda_ctx(be)->stream>>>(
            rows, cols, x, ldx, gate, ldgate, xb);
    else
        k_mul_sigmoid<1><<<cuda_blocks(rows * cols, EW_THREADS), EW_THREADS, 0, cuda_ctx(be)->stream>>>(
            rows, cols, x, ldx, gate, ldgate, xb);
    CUDA_CHECK_LAUNCH(be, "mul_sigmoid kernel");
    if (xb)
        cuda_staging_mark(be, x, rows * cols);
    if (ldx == cols)
        cuda_qstage_mark(be, CUDA_QSTAGE_MUL_SIGMOID, x, rows * cols, NULL);
}

/* VEC = 4: n and the three pointers are multiples of 4 floats (16 bytes), one float4 per
 * thread; yb: NULL or the bf16 staging of y. */
template <int VEC>
__global__ void k_swiglu(int64_t n, const float *gate, const float *up, float *y, __nv_bfloat16 *yb) {
    const int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * VEC;
    if (i >= n)
        return;
    if (VEC == 4) {
        const float4 g = *(const float4 *)(gate + i), u = *(const float4 *)(up + i);
        const float4 v = make_float4(silu_f(g.x) * u.x, silu_f(g.y) * u.y, silu_f(g.z) * u.z, silu_f(g.w) * u.w);
        *(float4 *)(y + i) = v;
        if (yb) {
            cuda_store_bf16x4(yb + i, v);
        }
    } else {
        const float v = silu_f(gate[i]) * up[i];
        y[i] = v;
        if (yb)
            yb[i] = __float2bfloat16_rn(v);
    }
}

/* k_swiglu<4> and the hand-off's quantizer, one block per K-long row. WRITE_Y = false: the
 * codes alone (cuda_swiglu_matmul, when its matmul reads nothing else): no fp32 y, no bf16. */
template <bool WRITE_Y>
__global__ void __launch_bounds__(EW_ROW_THREADS) k_swiglu_rows_q(const float *gate, const float *up, float *y,
                                                                  __nv_bfloat16 *yb, cuda_qstage_target tg) {
    extern __shared__ float qrow[]; /* tg.K floats */
    __shared__ float red[32];
    const int64_t t = blockIdx.x, K = tg.K;
    const bool fp8 = tg.mode == CUDA_QMODE_FP8 || tg.mode == CUDA_QMODE_FP8_BF16; /* INT8 takes its own maximum */
    float amax = 0.0f;
    for (int64_t k = 4 * (int64_t)threadIdx.x; k < K; k += 4 * (int64_t)blockDim.x) {
        const int64_t i = t * K + k;
        const float4 g = *(const float4 *)(gate + i), u = *(const float4 *)(up + i);
        const float4 v = make_float4(silu_f(g.x) * u.x, silu_f(g.y) * u.y, silu_f(g.z) * u.z, silu_f(g.w) * u.w);
        if (WRITE_Y)
            *(float4 *)(y + i) = v;
        *(float4 *)(qrow + k) = v;
        if (fp8)
            amax = amax4(amax, v);
        if (WRITE_Y && yb) {
            cuda_store_bf16x4(yb + i, v);
        }
    }
    __syncthreads();
    cuda_qrow_quantize_max(tg, t, qrow, red, amax);
}

/* The elementwise kernel alone (yb: NULL or the staging of y). */
static void swiglu_plain(clef_backend *be, int64_t n, const float *gate, const float *up, float *y,
                         __nv_bfloat16 *yb) {
    const int vec = n % 4 == 0 && ((uintptr_t)gate | (uintptr_t)up | (uintptr_t)y) % 16 == 0;
    if (vec)
        k_swiglu<4><<<cuda_blocks(n / 4, EW_THREADS), EW_THREADS, 0, cuda_ctx(be)->stream>>>(n, gate, up, y, yb);
    else
        k_swiglu<1><<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_ctx(be)->stream>>>(n, gate, up, y, yb);
    CUDA_CHECK_LAUNCH(be, "swiglu kernel");
}

void cuda_swiglu(clef_backend *be, int64_t n, const float *gate, const float *up, float *y) {
    if (cuda_ctx(be)->status != CLEF_OK || n <= 0)
        return;
    __nv_bfloat16 *yb = cuda_staging_claim(be, n);
    const int vec = n % 4 == 0 && ((uintptr_t)gate | (uintptr_t)up | (uintptr_t)y) % 16 == 0 ? 4 : 1;
    cuda_qstage_target tg;
    if (vec == 4 && cuda_qstage_claim(be, CUDA_QSTAGE_SWIGLU, n, 1, 0, &tg)) {
        const size_t smem = row_smem(be, k_swiglu_rows_q<true>, tg.K);
        k_swiglu_rows_q<true><<<(unsigned)(n / tg.K), EW_ROW_THREADS, smem, cuda_ctx(be)->stream>>>(gate, up, y, yb,
                                                                                                  tg);
        CUDA_CHECK_LAUNCH(be, "swiglu + quantizer kernel");
        if (yb)
            cuda_staging_mark(be, y, n);
        cuda_qstage_mark(be, CUDA_QSTAGE_SWIGLU, y, n, &tg);
        return;
    }
    swiglu_plain(be, n, gate, up, y, yb);
    if (yb)
        cuda_staging_mark(be, y, n);
    cuda_qstage_mark(be, CUDA_QSTAGE_SWIGLU, y, n, NULL);
}

/* SwiGLU and the down projection (backend.h's swiglu_matmul), in two halves (the profile
 * times each: cuda_profile.cu). The SwiGLU: when the hand-off has learnt that this matmul's
 * format reads SwiGLU rows of K and that matmul will take the codes (cuda_qstage_codes_only,
 * cuda_qstage_takes: checked on the very state it will see), the kernel writes the codes and
 * scales only, and y (4 of the 13 bytes a value the fused kernel moved: 8 read, 4 + 1 written)
 * and its bf16 staging are never written, as nothing reads them; returns 1 then, and the
 * matmul must take the codes (cuda_matmul_codes_only). Anything else: the SwiGLU op as
 * before; returns 0. The matmul's result is the same bits either way: its codes are the same
 * bits (cuda_quant_row.cuh). */
int cuda_swiglu_for_matmul(clef_backend *be, int64_t T, const float *gate, const float *up, float *y,
                           const clef_matrix *w) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || T <= 0)
        return 0;
    const int64_t K = w->cols, n = T * K;
    const int vec = n % 4 == 0 && ((uintptr_t)gate | (uintptr_t)up | (uintptr_t)y) % 16 == 0;
    cuda_qstage_target tg;
    if (vec && cuda_qstage_codes_only(be, w) && cuda_qstage_claim(be, CUDA_QSTAGE_SWIGLU, n, 1, K, &tg) &&
        tg.mode == cuda_qstage_mode_of(be, w)) {
        const size_t smem = row_smem(be, k_swiglu_rows_q<false>, tg.K);
        k_swiglu_rows_q<false><<<(unsigned)T, EW_ROW_THREADS, smem, ctx->stream>>>(gate, up, NULL, NULL, tg);
        CUDA_CHECK_LAUNCH(be, "swiglu codes kernel");
        cuda_qstage_mark(be, CUDA_QSTAGE_SWIGLU, y, n, &tg);
        if (cuda_qstage_takes(be, T, y, K, w))
            return 1;
        /* the matmul would not take them (never in the model): y after all */
        swiglu_plain(be, n, gate, up, y, NULL);
        cuda_qstage_mark(be, CUDA_QSTAGE_SWIGLU, y, n, NULL);
        return 0;
    }
    cuda_swiglu(be, n, gate, up, y);
    return 0;
}

void cuda_swiglu_matmul(clef_backend *be, int64_t T, const float *gate, const float *up, float *y,
                        const clef_matrix *w, float *out, int64_t ldo, int accumulate, void *scratch) {
    if (cuda_swiglu_for_matmul(be, T, gate, up, y, w))
        cuda_matmul_codes_only(be, T, y, w, out, ldo, accumulate, scratch);
    else
        cuda_matmul(be, T, y, w->cols, w, NULL, out, ldo, accumulate, scratch);
}

__global__ void k_add(int64_t n, const float *a, const float *b, float *y) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a[i] + b[i];
}

void cuda_add(clef_backend *be, int64_t n, const float *a, const float *b, float *y) {
    if (cuda_ctx(be)->status != CLEF_OK || n <= 0)
        return;
    k_add<<<cuda_blocks(n, EW_THREADS), EW_THREADS, 0, cuda_ctx(be)->stream>>>(n, a, b, y);
    CUDA_CHECK_LAUNCH(be, "add kernel");
}

/* ---- random bf16 fill (bench weights) --------------------------------------------------- */

/* splitmix64 of (seed, index): independent uniform bits per element, no state. */
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

__global__ void k_fill_normal_bf16(__nv_bfloat16 *dst, size_t n, float std, uint64_t seed) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint64_t r = mix64(seed ^ mix64(i));
        float u1 = ((float)(r >> 40) + 1.0f) * (1.0f / 16777217.0f); /* (0, 1] */
        float u2 = (float)((r >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2); /* Box-Muller */
        dst[i] = __float2bfloat16_rn(z * std);
    }
}

int cuda_fill_normal_bf16(clef_backend *be, void *dst, size_t n, float std, uint64_t seed) {
    cuda_context *ctx = cuda_ctx(be);
    if (ctx->status != CLEF_OK || n == 0)
        return ctx->status;
    k_fill_normal_bf16<<<4096, EW_THREADS, 0, ctx->stream>>>((__nv_bfloat16 *)dst, n, std, seed);
    return CUDA_CHECK_LAUNCH(be, "fill kernel");
}
