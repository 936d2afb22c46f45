/*
 * weight_format.h — the weight formats a backend's matmul can be asked to run, with their type
 * traits (in the manner of ggml's type traits), their typed quantization descriptors, and the
 * typed weight matrix (clef_matrix) that carries both through every slice.
 *
 * A format stores a row of n elements as n / block_size blocks of block_bytes bytes each
 * (F32: blocks of 1 element of 4 bytes; NF4: blocks of 64 elements in 32 bytes of packed
 * nibbles). The companions a quantized format needs besides its packed data (scales, code
 * tables, double-quant constants, rotation group) live in a typed descriptor, clef_quant,
 * that the matrix points at. A descriptor always describes the whole STORED tensor; a matrix
 * that is a row slice of it says where it starts (quant_row0), so the descriptor itself never
 * changes and is shared by all slices:
 *   - per-row arrays (FP8 / INT8 weight scales) are indexed by quant_row0 + r;
 *   - per-block arrays (NF4 absmax) are indexed by the block number in the stored tensor,
 *     ((quant_row0 + r) * cols + c) / block, since bitsandbytes numbers blocks over the
 *     flattened [rows, cols] tensor.
 * clef_matrix_slice_rows() is the one place that moves `data` and quant_row0 together.
 *
 * This file declares NF4, FP8_E4M3 and INT8_CONVROT and their descriptors; their arithmetic
 * (dequantization, GEMMs) belongs to src/quant/ and to the backends that declare them in
 * supports_format. Formats a backend runs today: see its supports_format (CPU: F32, BF16, F16).
 */
#ifndef CLEF_BACKEND_WEIGHT_FORMAT_H
#define CLEF_BACKEND_WEIGHT_FORMAT_H

#include <stddef.h>
#include <stdint.h>

typedef enum clef_wtype {
    CLEF_WTYPE_F32 = 0,          /* float, row-major */
    CLEF_WTYPE_BF16 = 1,         /* uint16 bfloat16 bits, row-major */
    CLEF_WTYPE_F16 = 2,          /* uint16 IEEE half bits, row-major */
    CLEF_WTYPE_NF4 = 3,          /* bitsandbytes NF4, double quant (clef_quant_nf4) */
    CLEF_WTYPE_FP8_E4M3 = 4,     /* float8 e4m3fn, per-channel scales (clef_quant_fp8) */
    CLEF_WTYPE_INT8_CONVROT = 5, /* int8, Hadamard-rotated inputs (clef_quant_int8_convrot) */
    CLEF_WTYPE_COUNT
} clef_wtype;

/* What a format is, independent of any backend. */
typedef struct clef_wtype_traits {
    const char *name;       /* "F32", "BF16", "F16", "NF4", "FP8_E4M3", "INT8_CONVROT" */
    int64_t block_size;     /* elements per block (1 for plain formats) */
    size_t block_bytes;     /* bytes of packed data per block */
    int is_quantized;       /* 1: needs a clef_quant descriptor; 0: plain, quant is NULL */
} clef_wtype_traits;

/* Traits of t; NULL for a value outside the enum. */
const clef_wtype_traits *clef_wtype_get_traits(clef_wtype t);
const char *clef_wtype_name(clef_wtype t); /* traits' name; "?" outside the enum */
/* Bytes per element of a plain format (block size 1); 0 for a block format (use row_bytes). */
size_t clef_wtype_size(clef_wtype t);
/* Bytes of n consecutive elements; n must be a multiple of the block size (0 if it is not). */
size_t clef_wtype_row_bytes(clef_wtype t, int64_t n);

/* ---- quantization descriptors ------------------------------------------------------------- */

/* bitsandbytes NF4 with double quantization (release layout: docs/model.md, "Weights").
 * The stored tensor [rows, cols] is n = rows*cols elements in blocks of `block` (64) consecutive
 * elements; packed data holds element 2j in the HIGH nibble of byte j, 2j+1 in the low one.
 * Scale of block b (fp32 multiplies, no FMA):
 *   absmax(b) = nested_code[absmax_q[b]] * nested_absmax[b / nested_block] + nested_offset
 * (absmax_q NULL: absmax(b) = absmax_f32[b], no double quantization). Element i:
 *   W[i] = bf16_rne(code[nibble(i)] * absmax(i / block)).
 * Arrays are in backend memory, indexed in the stored tensor (see the file comment). */
typedef struct clef_quant_nf4 {
    int64_t block;              /* elements per absmax block: 64 */
    const uint8_t *absmax_q;    /* [ceil(n / block)] double-quantized absmax, or NULL */
    const float *absmax_f32;    /* [ceil(n / block)] plain absmax when absmax_q is NULL */
    const float *nested_absmax; /* [ceil(n_blocks / nested_block)] */
    int64_t nested_block;       /* blocks per nested absmax: 256 */
    float nested_offset;        /* added after the nested dequantization */
    const float *code;          /* [16] the NF4 table (quant_map) */
    const float *nested_code;   /* [256] the signed dynamic 8-bit map (nested_quant_map) */
} clef_quant_nf4;

/* compressed-tensors FP8 W8A8, dynamic: weights float8 e4m3fn [rows, cols] with one scale per
 * output channel, W = bf16(float(q) * weight_scale[row]); activations are quantized per token
 * at run time (s_t = max(amax_t / 448, eps)), so there is no input scale. */
typedef struct clef_quant_fp8 {
    const float *weight_scale;  /* [rows] fp32 (widened from the release's BF16 or F32) */
} clef_quant_fp8;

/* comfy-kitchen INT8 ConvRot: weights int8 [rows, cols] stored rotated (W . H per group of
 * rotation_group input features, H the regular Hadamard of that size), one calibrated scale
 * per output channel (loaded, never recomputed). Activations are rotated by the same H and
 * quantized per token at run time, or with input_scale when the release gives a static one. */
typedef struct clef_quant_int8_convrot {
    const float *weight_scale;  /* [rows] fp32 */
    int64_t rotation_group;     /* G: 256 in the releases; 0 = no rotation */
    const float *input_scale;   /* [1] static activation scale, or NULL (dynamic per token) */
} clef_quant_int8_convrot;

/* The descriptor of a quantized matrix; the matrix's type says which member is meant. Host
 * memory owned by whoever loaded the weights; immutable once loaded. */
typedef struct clef_quant {
    union {
        clef_quant_nf4 nf4;
        clef_quant_fp8 fp8;
        clef_quant_int8_convrot int8_convrot;
    } u;
} clef_quant;

/* ---- typed weight matrices ---------------------------------------------------------------- */

/* A weight matrix [rows = out, cols = in] as torch.nn.Linear: y = x W^T. Row r starts at
 * data + row_bytes(type, ld) * r; ld (elements, a multiple of the block size) >= cols, == cols
 * for weights. An F32 matrix may also wrap an activation buffer (K in attention scores).
 * Build slices with clef_matrix_slice_rows, never by moving `data` by hand. */
typedef struct clef_matrix {
    clef_wtype type;
    int64_t rows;              /* out features (N) */
    int64_t cols;              /* in features (K) */
    int64_t ld;                /* elements between consecutive rows */
    const void *data;          /* rows x ld elements of `type`, in backend memory */
    const clef_quant *quant;   /* descriptor of the stored tensor (quantized types), else NULL */
    int64_t quant_row0;        /* first row of this matrix within the stored tensor */
    const void *packed;        /* backend-private prepared form (prepare_matrix), or NULL;
                                  when set, data may point at it too (no row-major form) */
} clef_matrix;

/* Rows [r0, r0 + n) of m as a matrix of the same type: data moved by r0 rows, quant_row0 by
 * r0, the descriptor shared. Only a stored (unprepared) matrix slices: a prepared one's data
 * may be in its backend's layout (prepare slices separately, see weight_loader.h). Asserts
 * m->packed == NULL, 0 <= r0, n > 0, r0 + n <= m->rows. */
clef_matrix clef_matrix_slice_rows(const clef_matrix *m, int64_t r0, int64_t n);

/* Bytes of m's packed data (rows x ld elements of its type). */
size_t clef_matrix_bytes(const clef_matrix *m);

#endif /* CLEF_BACKEND_WEIGHT_FORMAT_H */
