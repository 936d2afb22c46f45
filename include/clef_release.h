/*
 * clef_release.h — the public release-inspection API of libclef, in the manner of ggml's
 * gguf.h: open a Clef release directory, validate it the way clef_model_load does, and read
 * what it holds (configs, precision, every tensor with its name, dtype, shape, bytes and file,
 * the files, the problems found) without loading a weight. `clef inspect` is built on this
 * header and include/clef.h only.
 *
 *     clef_release_opts o = clef_release_default_opts();
 *     o.keep_going = 1;                        // list every model-level problem
 *     clef_release *rel = NULL;
 *     if (clef_release_open("releases/clef-flash", &o, &rel) != CLEF_OK) { ...clef_last_error()... }
 *     for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
 *         const clef_tensor_info *t = clef_release_tensor_at(rel, i);
 *         printf("%s %s %s\n", t->name, clef_dtype_name(t->dtype),
 *                clef_release_file_name(rel, (size_t)t->file));
 *     }
 *     clef_release_check_tokenizer(rel);       // what clef_model_load would refuse, too
 *     clef_release_scan_values(rel, 1, NULL, NULL); // NaN / Inf in any weight (reads them all)
 *     clef_release_free(rel);
 *
 * clef_release_open reads config.json, joint_head_config.json, the shard index (or the single
 * model.safetensors), every safetensors header, joint_head.safetensors and, when present,
 * complete.json, and refuses the release (docs/release.md, "What is refused") before returning
 * it. Every file is opened with the same rules: inside the directory (or the Hugging Face
 * cache's snapshots -> blobs layout), regular files only, never a FIFO or a device.
 *
 * Engine names: one table maps the release's names to the engine's:
 *   model.language_model.X | language_model.X        -> text.X
 *   model.visual.X | visual.X                         -> vision.X
 *   lm_head.weight                                    -> lm_head.weight
 *   tensors of joint_head.safetensors (bare names) X  -> head.X
 *   mtp.*                                             -> ignored (counted, never loaded)
 * e.g. "model.language_model.layers.3.self_attn.q_proj.weight" is
 * "text.layers.3.self_attn.q_proj.weight"; quantization companions keep their suffix
 * ("text.layers.0.mlp.up_proj.weight.absmax", "...weight_scale").
 *
 * Thread safety: an opened release is read-only except for clef_release_scan_values, which
 * records problems on it; do not call it while other threads use the release.
 */
#ifndef CLEF_RELEASE_H
#define CLEF_RELEASE_H

#include "clef.h" /* status codes, clef_last_error */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- dtypes ------------------------------------------------------------------------------ */

typedef enum clef_dtype {
    CLEF_DTYPE_BF16,
    CLEF_DTYPE_F16,
    CLEF_DTYPE_F32,
    CLEF_DTYPE_F8_E4M3,
    CLEF_DTYPE_I8,
    CLEF_DTYPE_U8,
    CLEF_DTYPE_I32,
    CLEF_DTYPE_I64,
    CLEF_DTYPE_BOOL,
    CLEF_DTYPE_COUNT
} clef_dtype;

CLEF_API size_t clef_dtype_size(clef_dtype t);      /* bytes per element */
CLEF_API const char *clef_dtype_name(clef_dtype t); /* the safetensors spelling: "BF16", "F8_E4M3", ... */
CLEF_API int clef_dtype_parse(const char *name, clef_dtype *out); /* 1 and *out set if name is known */

/* ---- configs ------------------------------------------------------------------------------ */

typedef enum clef_layer_type {
    CLEF_LAYER_LINEAR_ATTENTION, /* Gated DeltaNet */
    CLEF_LAYER_FULL_ATTENTION,
} clef_layer_type;

/* config.json "text_config" (field names as in transformers' Qwen3_5TextConfig). */
typedef struct clef_text_config {
    int64_t vocab_size;              /* V */
    int64_t hidden_size;             /* D */
    int64_t intermediate_size;       /* F */
    int64_t num_hidden_layers;
    int64_t num_attention_heads;     /* Hq */
    int64_t num_key_value_heads;     /* Hkv */
    int64_t head_dim;                /* d */
    int64_t linear_num_key_heads;    /* Hk */
    int64_t linear_num_value_heads;  /* Hv */
    int64_t linear_key_head_dim;     /* dk */
    int64_t linear_value_head_dim;   /* dv */
    int64_t linear_conv_kernel_dim;  /* K */
    double rms_norm_eps;
    double rope_theta;
    double partial_rotary_factor;
    int64_t mrope_section[3];        /* T, H, W frequency counts */
    int mrope_interleaved;
    int tie_word_embeddings;
    clef_layer_type *layer_types;    /* [num_hidden_layers], owned by the release */
} clef_text_config;

/* config.json "vision_config". */
typedef struct clef_vision_config {
    int present;                     /* 0 when the release has no vision tower */
    int64_t depth, hidden_size, intermediate_size, num_heads, out_hidden_size;
    int64_t patch_size, temporal_patch_size, spatial_merge_size, in_channels;
    int64_t num_position_embeddings;
    double rope_theta;               /* rope_parameters.rope_theta of the 2-D RoPE (10000) */
    int gelu_tanh;                   /* hidden_act of the blocks' MLP: 1 "gelu_pytorch_tanh"
                                      * (the default), 0 "gelu" (exact, erf) */
} clef_vision_config;

/* joint_head_config.json (the arguments of the reference JointSchemaHead). */
typedef struct clef_head_config {
    int present;              /* 0 when the release has no joint head (skip_model_checks only) */
    int64_t hidden_size, width, routing_layers, layers, heads, feedforward;
    double dropout;           /* training only; 0 when absent */
} clef_head_config;

typedef enum clef_quant_method {
    CLEF_QUANT_NONE,          /* BF16 (or F32) weights */
    CLEF_QUANT_BNB_NF4,       /* bitsandbytes 4-bit NF4, double quant */
    CLEF_QUANT_FP8_W8A8,      /* compressed-tensors float-quantized, channel x dynamic token */
    CLEF_QUANT_INT8_CONVROT,  /* comfy int8_tensorwise with ConvRot (Hadamard 256) */
} clef_quant_method;

typedef struct clef_quant_config {
    clef_quant_method method;
    char **ignore;            /* module names / "re:" patterns left unquantized; owned */
    size_t n_ignore;
    int64_t group_size;       /* NF4 blocksize (64) or ConvRot group (256); 0 if n/a */
    int double_quant;         /* NF4: bnb_4bit_use_double_quant (absmax U8 + nested tables) */
    int from_tensors;         /* 1: no quantization_config; the method was read off the tensors */
    char compute_dtype[16];   /* NF4: bnb_4bit_compute_dtype ("bfloat16"), "" when absent */
} clef_quant_config;

typedef struct clef_release_config {
    clef_text_config text;
    clef_vision_config vision;
    clef_head_config head;
    clef_quant_config quant;
    int64_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
} clef_release_config;

/* ---- tensors ------------------------------------------------------------------------------ */

#define CLEF_MAX_DIMS 8

typedef struct clef_tensor_info {
    const char *name;          /* engine name (see above) */
    const char *stored_name;   /* the name in its safetensors file */
    clef_dtype dtype;
    int n_dims;
    int64_t shape[CLEF_MAX_DIMS];
    uint64_t offset;           /* absolute byte offset of the data in its file */
    uint64_t n_bytes;
    int file;                  /* index into the release's file list */
} clef_tensor_info;

typedef struct clef_release clef_release;

/* Progress of long steps (SHA-256 of complete.json's files): called before file i of n is
 * hashed (bytes: its size), and once at the end with file == NULL. */
typedef void (*clef_progress_fn)(void *user, const char *file, size_t i, size_t n, uint64_t bytes);

typedef struct clef_release_opts {
    int verify_hashes;          /* 1: check every SHA-256 of complete.json (slow; --verify) */
    int allow_unknown_tensors;  /* 1: tensors the model does not know are reported, not refused */
    int skip_model_checks;      /* 1: only the file-level checks (inspect of a foreign layout) */
    int keep_going;             /* 1: model-level problems (missing, unexpected, shape, dtype,
                                 *    scale) are collected as problems and open succeeds;
                                 *    file-level problems still fail open */
    clef_progress_fn progress;  /* NULL: silent */
    void *progress_user;
} clef_release_opts;

/* All zero: strict, no hashing, silent. */
CLEF_API clef_release_opts clef_release_default_opts(void);

/* Open and validate the release in dir. On failure returns a negative clef_status whose
 * message (clef_last_error) names the file and tensor; *out is NULL. */
CLEF_API int clef_release_open(const char *dir, const clef_release_opts *opts, clef_release **out);
CLEF_API void clef_release_free(clef_release *rel); /* accepts NULL */

CLEF_API const clef_release_config *clef_release_get_config(const clef_release *rel);

/* Tensor table, in a stable order (by engine name). Pointers live until clef_release_free. */
CLEF_API size_t clef_release_tensor_count(const clef_release *rel);
CLEF_API const clef_tensor_info *clef_release_tensor_at(const clef_release *rel, size_t i);
CLEF_API const clef_tensor_info *clef_release_find(const clef_release *rel, const char *engine_name);

/* Files of the release, relative to its directory, in a stable order (the shards and
 * joint_head.safetensors: the files tensors live in). */
CLEF_API size_t clef_release_file_count(const clef_release *rel);
CLEF_API const char *clef_release_file_name(const clef_release *rel, size_t i);
CLEF_API uint64_t clef_release_file_size(const clef_release *rel, size_t i);

/* The directory the release was opened from. */
CLEF_API const char *clef_release_dir(const clef_release *rel);

/* Problems found by an open with keep_going (or unknown tensors allowed by
 * allow_unknown_tensors): status and message naming file and tensor. Live until free. */
typedef struct clef_release_problem {
    int status;
    const char *message;
} clef_release_problem;
CLEF_API size_t clef_release_problem_count(const clef_release *rel);
CLEF_API const clef_release_problem *clef_release_problem_at(const clef_release *rel, size_t i);

/* Facts about the release as a whole, for `clef inspect`. */
typedef struct clef_release_summary {
    int sharded;                 /* 1: model.safetensors.index.json; 0: model.safetensors */
    uint64_t index_total_size;   /* metadata.total_size (sharded only) */
    int has_manifest;            /* complete.json present (sizes checked) */
    int manifest_verified;       /* its SHA-256s checked too */
    size_t manifest_files;
    int has_tokenizer;           /* tokenizer.json present */
    int has_tokenizer_config;    /* tokenizer_config.json present */
    size_t n_ignored;            /* mtp.* tensors skipped */
    uint64_t ignored_bytes;
    size_t n_unknown;            /* tensors the model does not know (allow_unknown_tensors) */
    size_t values_scanned;       /* weights whose values clef_release_scan_values read */
    int values_checked;          /* 1: clef_release_scan_values ran to the end */
} clef_release_summary;
CLEF_API void clef_release_get_summary(const clef_release *rel, clef_release_summary *out);

/* Tensor count and data bytes held by file i of clef_release_file_name. */
CLEF_API size_t clef_release_file_tensor_count(const clef_release *rel, size_t i);
CLEF_API uint64_t clef_release_file_tensor_bytes(const clef_release *rel, size_t i);

/* ---- names, groups, precision ------------------------------------------------------------ */

/* Tensor groups `clef inspect` reports. */
typedef enum clef_tensor_group {
    CLEF_GROUP_EMBEDDINGS,
    CLEF_GROUP_GDN,        /* text.layers.*.linear_attn.* */
    CLEF_GROUP_ATTENTION,  /* text.layers.*.self_attn.* */
    CLEF_GROUP_MLP,
    CLEF_GROUP_NORMS,      /* text layer norms and the final norm */
    CLEF_GROUP_VISION,
    CLEF_GROUP_LM_HEAD,
    CLEF_GROUP_HEAD,
    CLEF_GROUP_OTHER,      /* ignored or unknown */
    CLEF_GROUP_COUNT
} clef_tensor_group;

CLEF_API clef_tensor_group clef_tensor_group_of(const char *engine_name);
CLEF_API const char *clef_tensor_group_name(clef_tensor_group g); /* "embeddings", "gdn", ... static */

/* Rotary dimensions of attention heads: head_dim * partial_rotary_factor. */
CLEF_API int64_t clef_text_rotary_dim(const clef_text_config *t);

/* "bf16", "nf4", "fp8-w8a8", "int8-convrot" (static). */
CLEF_API const char *clef_quant_method_name(clef_quant_method m);

/* 1 if name ends with a quantization companion suffix (".absmax", ".quant_map",
 * ".nested_absmax", ".nested_quant_map", ".quant_state.bitsandbytes__nf4", ".weight_scale",
 * ".input_scale", ".comfy_quant"): metadata of a quantized weight, not parameters. The
 * library's one list of them. */
CLEF_API int clef_tensor_is_quant_companion(const char *name);

/* Parameters a tensor holds: 0 for a companion, two per byte for NF4's packed U8 weights,
 * else its element count. */
CLEF_API uint64_t clef_tensor_param_count(const clef_tensor_info *t, clef_quant_method m);

/* ---- checks beyond open ------------------------------------------------------------------ */

/* Load the release's tokenizer (tokenizer.json, and tokenizer_config.json when present) the
 * way clef_model_load does, then free it: CLEF_OK, or the status load would refuse with
 * (CLEF_ERR_FILE_MISSING, CLEF_ERR_TOKENIZER_FORMAT, CLEF_ERR_TOKENIZER_UNSUPPORTED,
 * CLEF_ERR_SHARD_PATH, CLEF_ERR_NOT_REGULAR, ...) naming the file. */
CLEF_API int clef_release_check_tokenizer(const clef_release *rel);

/* 1 if this build's clef_model_load runs the release's precision: every precision the reader
 * accepts (BF16/F16/F32, NF4, FP8 W8A8, INT8 ConvRot) runs on the CPU backend. */
CLEF_API int clef_release_runnable(const clef_release *rel);

/* Read every floating-point weight (BF16, F16, F32, F8_E4M3) and check that it holds no NaN
 * or Inf — what clef_model_load checks as it reads. Reads every byte: as slow as a load.
 * A bad weight is CLEF_ERR_TENSOR_VALUES naming the file, the weight and the element; with
 * keep_going every bad weight is recorded as a problem (clef_release_problem_at) and the
 * scan returns CLEF_OK, else the first stops it. progress (may be NULL) is called before each
 * weight (file = its stored name, bytes = its size) and once at the end with file NULL. An
 * I/O failure returns its status. Sets the summary's values_scanned / values_checked. */
CLEF_API int clef_release_scan_values(clef_release *rel, int keep_going, clef_progress_fn progress,
                             void *progress_user);

/* ---- quantization: what is quantized, what the engine holds ------------------------------- */

/* Where a linear layer's weight stands in the release (clef_release_linear_state). The rules
 * are each format's own (docs/quant.md, "What each precision quantizes"). */
typedef enum clef_linear_state {
    CLEF_LINEAR_QUANTIZED = 0,          /* stored in the release's quantized format */
    CLEF_LINEAR_UNQUANTIZED_RELEASE,    /* the release is not quantized (BF16 / F16 / F32) */
    CLEF_LINEAR_KEPT_IGNORED,           /* named by the release's ignore list: compressed-tensors
                                           `ignore` (exact name or "re:" regex, matched from the
                                           start) or bitsandbytes `llm_int8_skip_modules` (a
                                           regex matched from the start, or a name suffix) */
    CLEF_LINEAR_KEPT_BY_FORMAT,         /* the format never quantizes this module: lm_head,
                                           vision tower and joint head (every format), GDN
                                           linears (FP8 W8A8), GDN in_proj_a / in_proj_b (INT8) */
    CLEF_LINEAR_KEPT_ROTATION_GROUP,    /* INT8 ConvRot: in_features not a multiple of the
                                           rotation group (256) */
    CLEF_LINEAR_KEPT_UNEXPLAINED,       /* stored in high precision though no rule above says so */
    CLEF_LINEAR_STATE_COUNT
} clef_linear_state;

/* "quantized", "unquantized-release", "ignore-list", "format-rule", "rotation-group",
 * "unexplained" (static). */
CLEF_API const char *clef_linear_state_name(clef_linear_state s);

/* If t is the weight of a linear layer (a text projection, lm_head, a vision-tower or
 * joint-head Linear, a head attention's in_proj_weight; not an embedding, norm or conv),
 * returns its state and, for CLEF_LINEAR_KEPT_IGNORED, sets *rule (may be NULL) to the ignore
 * entry that matched (owned by the release); returns -1 for any other tensor. */
CLEF_API int clef_release_linear_state(const clef_release *rel, const clef_tensor_info *t,
                                       const char **rule);

/* Bytes the engine holds for tensor t once the release is loaded, in the formats it keeps
 * (the resident size; docs/quant.md, "Resident bytes"): quantized data and NF4 absmax / code
 * tables as stored; FP8 and INT8 weight scales as fp32; vectors (norms, biases, GDN conv taps
 * and gate parameters, the head's type embedding) as fp32; matrices and embedding tables in
 * their stored type; 0 for what is not held: an untied lm_head (its option rows are read from
 * the file per record), NF4 quant_state JSON and comfy_quant JSON (parsed into the
 * descriptor), the head's three scalars (host copies) and input_scale. A backend may add
 * packing padding (the CPU's GEMM panels) or widen F16 matrices (CPU): `clef inspect --device`
 * measures a real load. */
CLEF_API uint64_t clef_release_resident_bytes(const clef_release *rel, const clef_tensor_info *t);

/* The format parameters of a release's quantization, as its files give them. */
typedef struct clef_quant_params {
    clef_quant_method method;
    size_t n_quantized;              /* linears stored quantized */
    clef_dtype weight_dtype;         /* stored dtype of quantized weights (U8 packed NF4,
                                        F8_E4M3, I8); meaningful when n_quantized > 0 */
    /* NF4 (bitsandbytes): the first quantized weight's quant_state and the config */
    char quant_type[16];             /* "nf4" */
    int64_t blocksize;               /* elements per absmax block (64) */
    int double_quant;                /* 1: absmax stored U8, decoded by the nested tables */
    int64_t nested_blocksize;        /* absmax blocks per nested absmax (256) */
    char nested_dtype[16];           /* "float32" */
    char dtype[16];                  /* the weight's dtype in the library ("bfloat16") */
    char compute_dtype[16];          /* config's bnb_4bit_compute_dtype, "" when absent */
    /* FP8 W8A8 (compressed-tensors) and INT8 ConvRot (comfy-kitchen) */
    const char *weight_strategy;     /* "channel": one scale per output row, [out, 1] */
    const char *activation_strategy; /* "token, dynamic" (scale per token at run time) or
                                        "tensor, static" (INT8 with input_scale) */
    clef_dtype scale_dtype;          /* weight_scale as stored (BF16 or F32); held as fp32 */
    const char *scale_layout;        /* "[out, 1]" */
    int64_t rotation_group;          /* INT8: Hadamard group over in_features (256), else 0 */
    char comfy_format[32];           /* INT8: comfy_quant "format" ("int8_tensorwise") or "" */
} clef_quant_params;

/* Fill *out for rel (const char * fields are static strings). CLEF_OK, or the status of
 * reading a quant_state / comfy_quant tensor (naming it). For a BF16 release only method and
 * n_quantized (0) are set. */
CLEF_API int clef_release_quant_params(const clef_release *rel, clef_quant_params *out);

#ifdef __cplusplus
}
#endif

#endif /* CLEF_RELEASE_H */
