/*
 * weight_loader.h — the one weight loader of every model (the Qwen3.5 backbone, the joint
 * head, later vision): a tensor by name from a clef_tensor_source to its final place on a
 * backend, checked on the way.
 *
 * For each tensor, in order: present; shape as the config says (message: expected vs got);
 * dtype allowed for its role; format run by the backend (CLEF_ERR_UNSUPPORTED naming the
 * tensor, the format and the backend otherwise); bytes = shape x format. Then the bytes go
 * through two bounded host staging buffers (CLEF_WEIGHT_STAGING_BYTES at most each, reused for
 * every tensor: a piece is read into one while the backend copies the previous piece out of
 * the other, clef_backend_write_async) and the backend's write, never by writing backend
 * memory from the host, so the same loader serves a CPU and a GPU backend. Matrices keep their stored format and then pass the
 * backend's prepare step (clef_backend_prepare_matrix: the CPU pre-packs its GEMM panels, a
 * GPU packs on upload), except lookup tables (clef_weight_load_table); vectors (norms,
 * biases, conv taps, gate parameters) become fp32 through the one dtype conversion of
 * core/convert.h.
 *
 *   clef_weight_loader L = clef_weight_loader_init(be, &src, &buffers, "joint head", "head.",
 *                                                  "joint_head_config.json");
 *   st = clef_weight_load_matrix(&L, "memory_projection.weight", W, D, &w->memory_projection);
 *   ...
 *   clef_weight_loader_free(&L);   // the staging buffer; the weights stay in `buffers`
 *
 * Every failure returns a clef_status whose message names the tensor (full name).
 */
#ifndef CLEF_MODEL_WEIGHT_LOADER_H
#define CLEF_MODEL_WEIGHT_LOADER_H

#include "backend/backend.h"
#include "backend/buffer_set.h"
#include "core/convert.h"
#include "model/tensor_source.h"

#include <stddef.h>
#include <stdint.h>

/* Largest host staging buffer the loader holds (bytes; it holds two). Sources without
 * read_range stage a whole tensor instead. */
#define CLEF_WEIGHT_STAGING_BYTES ((size_t)64 << 20)

typedef struct clef_weight_loader clef_weight_loader;

/* The plug point of the quantized formats (src/quant/ provides one per release precision).
 * Called by clef_weight_load_matrix* for a matrix whose tensor `name` is stored in no plain
 * float dtype (t is that tensor: the packed U8 / F8_E4M3 / I8 data): find and check the
 * format's tensors (P.weight, P.weight.absmax, P.weight_scale, ...), place them with
 * clef_weight_place_bytes / clef_weight_load_vector, describe them in a descriptor from
 * clef_weight_new_quant, and fill *out (type, rows, cols, ld = cols, data, quant). The loader
 * then checks that the backend runs out->type (CLEF_ERR_UNSUPPORTED otherwise), slices parts
 * and runs the prepare step. Returns a clef_status naming the tensor. */
typedef int (*clef_weight_quant_fn)(void *ctx, clef_weight_loader *L, const char *name,
                                    const clef_tensor_info *t, int64_t rows, int64_t cols,
                                    clef_matrix *out);

struct clef_weight_loader {
    clef_backend *be;
    const clef_tensor_source *src;
    clef_buffer_set *buffers;   /* the owner's backend buffers: every weight is allocated here */
    const char *owner;          /* message prefix ("joint head"), or NULL */
    const char *name_prefix;    /* prepended to every name asked for ("head."), or "" */
    const char *config_name;    /* who set the expected shapes: "config", "joint_head_config.json" */
    size_t bytes;               /* backend bytes of the weights placed so far */
    size_t staging_limit;       /* largest staged piece: CLEF_WEIGHT_STAGING_BYTES from init */
    void *staging[2];           /* host staging buffers (clef_backend_host_alloc: pinned on a
                                   GPU), used in turn, grown on demand, freed by _free */
    size_t staging_bytes;       /* the size of each */
    int staging_next;           /* the one the next piece is read into */
    clef_weight_quant_fn load_quantized; /* NULL: only plain formats (others: TENSOR_DTYPE) */
    void *load_quantized_ctx;
};

clef_weight_loader clef_weight_loader_init(clef_backend *be, const clef_tensor_source *src,
                                           clef_buffer_set *buffers, const char *owner,
                                           const char *name_prefix, const char *config_name);
/* Waits for the last queued copy, then frees the staging buffers; accepts a zeroed L. */
void clef_weight_loader_free(clef_weight_loader *L);

/* The scalar kind of a stored float dtype (F32, BF16, F16, F8_E4M3): 1 and *out set, else 0. */
int clef_scalar_kind_of_dtype(clef_dtype dtype, clef_scalar_kind *out);
/* The weight format of a plain stored matrix dtype (F32, BF16, F16): 1 and *out set, else 0. */
int clef_wtype_of_dtype(clef_dtype dtype, clef_wtype *out);

/* The tensor name (after name_prefix) with n_dims dims of the given sizes, or a status
 * (CLEF_ERR_TENSOR_MISSING, CLEF_ERR_TENSOR_SHAPE) naming it. */
int clef_weight_find(clef_weight_loader *L, const char *name, int n_dims, const int64_t *dims,
                     const clef_tensor_info **out);

/* A matrix [rows, cols] in its stored format (F32, BF16 or F16), placed and prepared. */
int clef_weight_load_matrix(clef_weight_loader *L, const char *name, int64_t rows, int64_t cols,
                            clef_matrix *out);

/* A matrix [rows, cols] read only by get_rows (an embedding table): placed in its stored
 * format without the prepare step, so it is never held twice, not even while loading (a
 * backend's prepared form is for its matmul). */
int clef_weight_load_table(clef_weight_loader *L, const char *name, int64_t rows, int64_t cols,
                           clef_matrix *out);

/* A tensor stored with n_dims >= 2 dims (dims: their sizes) as the matrix [dims[0], product
 * of the other dims] in its stored format (F32, BF16 or F16), placed and prepared: a Conv3d
 * kernel [out, C, T, P, P] whose stride equals its size is the matrix of a patch embedding. */
int clef_weight_load_matrix_nd(clef_weight_loader *L, const char *name, int n_dims,
                               const int64_t *dims, clef_matrix *out);
/* A matrix [rows, cols] whose row blocks are used as separate matrices (torch's packed
 * in_proj_weight: q, k, v rows): out[i] has part_rows[i] rows (they sum to rows), each
 * prepared on its own so a backend's packed form covers exactly the matrix it multiplies. */
int clef_weight_load_matrix_parts(clef_weight_loader *L, const char *name, int64_t rows,
                                  int64_t cols, int n_parts, const int64_t *part_rows,
                                  clef_matrix *out);

/* The stored bytes of tensor name (shape dims, dtype `dtype`) as they are, in a new backend
 * buffer of the owner's set (*out; *bytes its size): packed data and companions of a
 * quantized format. */
int clef_weight_place_bytes(clef_weight_loader *L, const char *name, int n_dims,
                            const int64_t *dims, clef_dtype dtype, void **out, size_t *bytes);

/* A zeroed descriptor that lives as long as the owner's weights (host memory of the set). */
clef_quant *clef_weight_new_quant(clef_weight_loader *L);

/* A tensor of the given shape stored as F32, BF16 or F16, as fp32 in a new backend buffer
 * (*out, owned by the buffer set). */
int clef_weight_load_vector(clef_weight_loader *L, const char *name, const int64_t *shape,
                            int n_dims, float **out);

/* The same into host memory dst (n = product of shape floats; n_dims 0: a scalar). */
int clef_weight_read_host_f32(clef_weight_loader *L, const char *name, const int64_t *shape,
                              int n_dims, float *dst);

#endif /* CLEF_MODEL_WEIGHT_LOADER_H */
