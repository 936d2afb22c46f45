/*
 * quantize_release.c — `clef quantize`: a BF16 release in, an NF4 / FP8 / INT8 ConvRot
 * release out (include/clef_quantize.h). The steps:
 *   1. open and validate the source (strict), refuse a quantized one and a non-empty DST;
 *   2. plan every output tensor (quantize_plan.c); NF4 first measures each weight's
 *      double-quant offset, since the quant_state JSON that states it is a tensor whose
 *      length the file header must know;
 *   3. in DST.tmp-<pid>: each safetensors file, header first, then its tensors streamed in
 *      pieces of at most 16 MiB of source bytes (rows for FP8 / INT8, 64-element blocks for
 *      NF4), quantized by src/quant/; config.json, the index, the copied files and
 *      complete.json;
 *   4. rename DST.tmp-<pid> to DST.
 * Memory: two 16 MiB piece buffers plus, for NF4, the block absmax of one weight (4 bytes per
 * 64 elements) and its 8-bit codes — never a whole weight, never the model.
 */
#include "clef_quantize.h"

#include "core/error.h"
#include "core/io.h"
#include "core/numeric.h"
#include "quant/fp8.h"
#include "quant/int8_convrot.h"
#include "quant/nf4.h"
#include "quant/nf4_quantize.h"
#include "quantize/quantize_plan.h"
#include "quantize/release_files.h"
#include "release/release.h"
#include "release/st_writer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PIECE_BYTES = 16 << 20 };

clef_quantize_params clef_quantize_default_params(void) {
    clef_quantize_params p;
    memset(&p, 0, sizeof p);
    p.target = CLEF_QUANTIZE_NF4;
    return p;
}

static const char *const target_names[] = {"nf4", "fp8", "int8-convrot"};

int clef_quantize_target_parse(const char *name, clef_quantize_target *out) {
    for (int t = 0; t < 3; t++)
        if (name && strcmp(name, target_names[t]) == 0) {
            *out = (clef_quantize_target)t;
            return 1;
        }
    return 0;
}

const char *clef_quantize_target_name(clef_quantize_target t) {
    return (unsigned)t < 3 ? target_names[t] : "?";
}

/* Working state of one run. */
typedef struct quantizer {
    const clef_release *rel;
    const clef_quantize_params *p;
    clef_torch_sum_mode sum_mode;
    uint8_t *in;    /* PIECE_BYTES of source bytes */
    uint8_t *out;   /* PIECE_BYTES of output bytes (+ scales) */
} quantizer;

static int check_finite_bf16(const uint16_t *w, size_t n, const clef_tensor_info *t,
                             uint64_t first) {
    for (size_t i = 0; i < n; i++)
        if ((w[i] & 0x7f80) == 0x7f80)
            return clef_fail(CLEF_ERR_TENSOR_VALUES, "tensor '%s': element %llu is %s; a weight "
                             "with NaN or Inf cannot be quantized", t->stored_name,
                             (unsigned long long)(first + i), (w[i] & 0x7f) ? "NaN" : "Inf");
    return CLEF_OK;
}

/* Block absmax of an NF4 weight, piece by piece (absmax: n_blocks floats). */
static int nf4_absmax(quantizer *q, const q_item *it, float *absmax) {
    const int64_t n = it->rows * it->cols;
    const int64_t piece = (PIECE_BYTES / 2) / 64 * 64; /* elements, whole blocks */
    for (int64_t e = 0; e < n; e += piece) {
        const int64_t c = n - e < piece ? n - e : piece;
        int rc = clef_release_read_range(q->rel, it->src, (uint64_t)e * 2, (size_t)c * 2, q->in);
        if (rc != CLEF_OK)
            return rc;
        const uint16_t *w = (const uint16_t *)q->in;
        if ((rc = check_finite_bf16(w, (size_t)c, it->src, (uint64_t)e)) != CLEF_OK)
            return rc;
        clef_nf4_quantize_blocks(w, e, c, n, 64, q->out, absmax + e / 64);
    }
    return CLEF_OK;
}

/* Step 2 of the plan: each NF4 weight's offset, hence its quant_state. Progress counts these
 * reads as steps before the writes (steps: NF4 weights + all tensors). */
static int measure_nf4_offsets(quantizer *q, q_plan *plan, size_t *step, size_t steps) {
    for (size_t i = 0; i < plan->n_items; i++) {
        q_item *it = &plan->items[i];
        if (it->action != Q_NF4)
            continue;
        if (q->p->progress)
            q->p->progress(q->p->progress_user, it->src->stored_name, (*step)++, steps,
                           it->src->n_bytes);
        const int64_t blocks = (it->rows * it->cols + 63) / 64;
        float *absmax = malloc((size_t)blocks * sizeof *absmax);
        if (!absmax)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tensor '%s': out of memory",
                             it->src->stored_name);
        int rc = nf4_absmax(q, it, absmax);
        if (rc == CLEF_OK)
            rc = q_plan_set_nf4_offset(it, clef_torch_sum_f32(absmax, blocks, q->sum_mode) /
                                               (float)blocks);
        free(absmax);
        if (rc != CLEF_OK)
            return rc;
    }
    return CLEF_OK;
}

static int write_nf4(quantizer *q, st_writer *w, const q_item *it) {
    const int64_t n = it->rows * it->cols, blocks = (n + 63) / 64;
    const int64_t piece = (PIECE_BYTES / 2) / 64 * 64;
    float *absmax = malloc((size_t)blocks * sizeof *absmax);
    uint8_t *codes = malloc((size_t)blocks);
    float *nested = malloc((size_t)((blocks + 255) / 256) * sizeof *nested);
    int rc = CLEF_OK;
    if (!absmax || !codes || !nested) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tensor '%s': out of memory", it->src->stored_name);
        goto done;
    }
    for (int64_t e = 0; e < n && rc == CLEF_OK; e += piece) {
        const int64_t c = n - e < piece ? n - e : piece;
        if ((rc = clef_release_read_range(q->rel, it->src, (uint64_t)e * 2, (size_t)c * 2,
                                          q->in)) != CLEF_OK)
            break;
        clef_nf4_quantize_blocks((const uint16_t *)q->in, e, c, n, 64, q->out, absmax + e / 64);
        rc = st_writer_write(w, &it->out[Q_OUT_WEIGHT], (uint64_t)e / 2, q->out,
                             (size_t)(c + 1) / 2);
    }
    if (rc != CLEF_OK)
        goto done;
    float offset;
    if ((rc = clef_nf4_double_quant(absmax, blocks, 256, q->sum_mode, codes, nested, &offset)) !=
        CLEF_OK)
        goto done;
    if (memcmp(&offset, &it->nf4_offset, sizeof offset) != 0) {
        rc = clef_fail(CLEF_ERR_INTERNAL, "tensor '%s': the double-quant offset changed between "
                       "two reads of the same bytes", it->src->stored_name);
        goto done;
    }
    if ((rc = st_writer_write(w, &it->out[Q_NF4_ABSMAX], 0, codes, (size_t)blocks)) != CLEF_OK ||
        (rc = st_writer_write(w, &it->out[Q_NF4_QUANT_MAP], 0, clef_nf4_table,
                              sizeof clef_nf4_table)) != CLEF_OK ||
        (rc = st_writer_write(w, &it->out[Q_NF4_NESTED_ABSMAX], 0, nested,
                              (size_t)((blocks + 255) / 256) * sizeof *nested)) != CLEF_OK ||
        (rc = st_writer_write(w, &it->out[Q_NF4_NESTED_QUANT_MAP], 0, clef_bnb_dynamic_map,
                              sizeof clef_bnb_dynamic_map)) != CLEF_OK)
        goto done;
    rc = st_writer_write(w, &it->out[Q_NF4_QUANT_STATE], 0, it->quant_state, it->quant_state_len);
done:
    free(absmax);
    free(codes);
    free(nested);
    return rc;
}

/* FP8 and INT8 ConvRot: whole rows at a time (both quantize per output channel). */
static int write_rows(quantizer *q, st_writer *w, const q_item *it) {
    const int64_t K = it->cols, N = it->rows;
    int64_t rows = (PIECE_BYTES / 2) / K;
    if (rows < 1)
        rows = 1;
    const size_t row_bytes = (size_t)K * 2;
    uint8_t *in = q->in, *codes = q->out;
    float *scale = malloc((size_t)rows * sizeof *scale);
    uint16_t *scale_bf16 = malloc((size_t)rows * sizeof *scale_bf16);
    float *rot = malloc((size_t)K * 2 * sizeof *rot);
    int rc = CLEF_OK;
    if (rows * (int64_t)row_bytes > PIECE_BYTES) { /* one row over 16 MiB: its own buffers */
        in = malloc(row_bytes);
        codes = malloc((size_t)K);
    }
    if (!scale || !scale_bf16 || !rot || !in || !codes) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tensor '%s': out of memory", it->src->stored_name);
        goto done;
    }
    for (int64_t r = 0; r < N && rc == CLEF_OK; r += rows) {
        const int64_t m = N - r < rows ? N - r : rows;
        const uint16_t *wb = (const uint16_t *)in;
        if ((rc = clef_release_read_range(q->rel, it->src, (uint64_t)r * row_bytes,
                                          (size_t)m * row_bytes, in)) != CLEF_OK ||
            (rc = check_finite_bf16(wb, (size_t)(m * K), it->src, (uint64_t)(r * K))) != CLEF_OK)
            break;
        if (it->action == Q_FP8) {
            clef_fp8_quantize_weight(wb, m, K, codes, scale);
            for (int64_t i = 0; i < m; i++)
                scale_bf16[i] = clef_f32_to_bf16(scale[i]); /* bf16 numbers: exact */
            rc = st_writer_write(w, &it->out[Q_SCALE], (uint64_t)r * 2, scale_bf16,
                                 (size_t)m * 2);
        } else {
            clef_convrot_quantize_weight(wb, m, K, (int8_t *)codes, scale, rot);
            rc = st_writer_write(w, &it->out[Q_SCALE], (uint64_t)r * 4, scale, (size_t)m * 4);
        }
        if (rc == CLEF_OK)
            rc = st_writer_write(w, &it->out[Q_OUT_WEIGHT], (uint64_t)(r * K), codes,
                                 (size_t)(m * K));
    }
    if (rc == CLEF_OK && it->action == Q_INT8)
        rc = st_writer_write(w, &it->out[Q_INT8_COMFY_QUANT], 0, q_comfy_quant_json,
                             strlen(q_comfy_quant_json));
done:
    if (in != q->in)
        free(in);
    if (codes != q->out)
        free(codes);
    free(scale);
    free(scale_bf16);
    free(rot);
    return rc;
}

/* Copy, or cast F32 / F16 to BF16, piece by piece. */
static int write_plain(quantizer *q, st_writer *w, const q_item *it) {
    const clef_tensor_info *t = it->src;
    const size_t esize = clef_dtype_size(t->dtype);
    const uint64_t piece = PIECE_BYTES / esize * esize;
    for (uint64_t at = 0; at < t->n_bytes; at += piece) {
        const size_t len = (size_t)(t->n_bytes - at < piece ? t->n_bytes - at : piece);
        int rc = clef_release_read_range(q->rel, t, at, len, q->in);
        if (rc != CLEF_OK)
            return rc;
        if (it->action == Q_COPY) {
            rc = st_writer_write(w, &it->out[0], at, q->in, len);
        } else {
            const size_t count = len / esize;
            uint16_t *dst = (uint16_t *)q->out;
            for (size_t i = 0; i < count; i++) {
                float f = t->dtype == CLEF_DTYPE_F32 ? ((const float *)q->in)[i]
                                                     : clef_f16_to_f32(((const uint16_t *)q->in)[i]);
                dst[i] = clef_f32_to_bf16(f);
            }
            rc = st_writer_write(w, &it->out[0], at / esize * 2, dst, count * 2);
        }
        if (rc != CLEF_OK)
            return rc;
    }
    return CLEF_OK;
}

static int write_file(quantizer *q, const q_plan *plan, size_t f, const char *dir,
                      size_t *step, size_t steps) {
    size_t n = 0;
    for (size_t i = 0; i < plan->n_items; i++)
        if (plan->items[i].file == f)
            n += plan->items[i].n_out;
    st_write_tensor **tensors = malloc((n ? n : 1) * sizeof *tensors);
    char *path = clef_path_join(dir, plan->files[f]);
    int rc = CLEF_OK;
    if (!tensors || !path) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    n = 0;
    for (size_t i = 0; i < plan->n_items; i++)
        if (plan->items[i].file == f)
            for (size_t k = 0; k < plan->items[i].n_out; k++)
                tensors[n++] = (st_write_tensor *)&plan->items[i].out[k];
    static const char *const metadata[] = {"format", "pt"};
    st_writer w;
    if ((rc = st_writer_create(&w, path, tensors, n, metadata, 1)) != CLEF_OK)
        goto done;
    for (size_t i = 0; i < plan->n_items && rc == CLEF_OK; i++) {
        const q_item *it = &plan->items[i];
        if (it->file != f)
            continue;
        if (q->p->progress)
            q->p->progress(q->p->progress_user, it->src->stored_name, (*step)++, steps,
                           it->src->n_bytes);
        switch (it->action) {
        case Q_NF4: rc = write_nf4(q, &w, it); break;
        case Q_FP8:
        case Q_INT8: rc = write_rows(q, &w, it); break;
        default: rc = write_plain(q, &w, it); break;
        }
    }
    if (rc == CLEF_OK)
        rc = st_writer_close(&w);
    else
        st_writer_abort(&w);
done:
    free(tensors);
    free(path);
    return rc;
}

/* DST must be absent or an empty directory. */
static int check_destination(const char *dst) {
    struct stat st;
    if (stat(dst, &st) != 0) {
        if (errno == ENOENT)
            return CLEF_OK;
        return clef_fail(CLEF_ERR_IO, "%s: %s", dst, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode))
        return clef_fail(CLEF_ERR_INVALID_ARG, "destination '%s' exists and is not a directory",
                         dst);
    DIR *d = opendir(dst);
    if (!d)
        return clef_fail(CLEF_ERR_IO, "%s: cannot list: %s", dst, strerror(errno));
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            empty = 0;
    closedir(d);
    if (!empty)
        return clef_fail(CLEF_ERR_INVALID_ARG, "destination '%s' exists and is not empty; "
                         "clef quantize never writes over files", dst);
    return CLEF_OK;
}

int clef_quantize_release(const char *src_dir, const char *dst_dir,
                          const clef_quantize_params *params) {
    if (!src_dir || !dst_dir || !params)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_quantize_release: NULL argument");
    if ((unsigned)params->target > CLEF_QUANTIZE_INT8_CONVROT)
        return clef_fail(CLEF_ERR_INVALID_ARG, "unknown quantization target %d (nf4, fp8, "
                         "int8-convrot)", (int)params->target);
    if (params->torch_sum_lanes != 0 && params->torch_sum_lanes != 8 &&
        params->torch_sum_lanes != 16)
        return clef_fail(CLEF_ERR_INVALID_ARG, "torch_sum_lanes is %d: 8 or 16",
                         params->torch_sum_lanes);
    if (params->torch_threads < 0)
        return clef_fail(CLEF_ERR_INVALID_ARG, "torch_threads is %d: >= 1 (0 = 1)",
                         params->torch_threads);
    int rc = check_destination(dst_dir);
    if (rc != CLEF_OK)
        return rc;

    clef_release *rel = NULL;
    q_plan plan;
    memset(&plan, 0, sizeof plan);
    quantizer q = {.p = params};
    q.sum_mode.lanes = params->torch_sum_lanes ? params->torch_sum_lanes : 8;
    q.sum_mode.threads = params->torch_threads ? params->torch_threads : 1;
    char *tmp = NULL;
    int made_tmp = 0;

    clef_release_opts opts = clef_release_default_opts();
    if ((rc = clef_release_open(src_dir, &opts, &rel)) != CLEF_OK)
        goto done;
    q.rel = rel;
    const clef_release_config *cfg = clef_release_get_config(rel);
    if (cfg->quant.method != CLEF_QUANT_NONE) {
        rc = clef_fail(CLEF_ERR_UNSUPPORTED, "source '%s' is a %s release; clef quantize reads "
                       "a BF16 release", src_dir, clef_quant_method_name(cfg->quant.method));
        goto done;
    }
    q.in = malloc(PIECE_BYTES);
    q.out = malloc(PIECE_BYTES);
    if (!q.in || !q.out) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory (2 x 16 MiB)");
        goto done;
    }
    if ((rc = q_plan_build(rel, params, &plan)) != CLEF_OK)
        goto done;
    if (plan.n_quantized == 0) {
        rc = clef_fail(CLEF_ERR_UNSUPPORTED, "source '%s' has no Linear weight that %s "
                       "quantizes (INT8 ConvRot needs in_features divisible by 256)", src_dir,
                       clef_quantize_target_name(params->target));
        goto done;
    }
    size_t step = 0, steps = plan.n_items;
    for (size_t i = 0; i < plan.n_items; i++)
        steps += plan.items[i].action == Q_NF4;
    if ((rc = measure_nf4_offsets(&q, &plan, &step, steps)) != CLEF_OK ||
        (rc = q_plan_assign_files(&plan, params->max_shard_bytes
                                             ? params->max_shard_bytes
                                             : (uint64_t)50000000000ull)) != CLEF_OK)
        goto done;

    /* DST.tmp-<pid> beside DST (the same file system, so the final rename is atomic). */
    size_t dl = strlen(dst_dir);
    while (dl > 1 && dst_dir[dl - 1] == '/')
        dl--;
    tmp = malloc(dl + 32);
    if (!tmp) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    snprintf(tmp, dl + 32, "%.*s.tmp-%ld", (int)dl, dst_dir, (long)getpid());
    if (mkdir(tmp, 0755) != 0) {
        rc = clef_fail(CLEF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
        goto done;
    }
    made_tmp = 1;
    for (size_t f = 0; f < plan.n_files && rc == CLEF_OK; f++)
        rc = write_file(&q, &plan, f, tmp, &step, steps);
    if (rc == CLEF_OK)
        rc = q_write_config(src_dir, tmp, &plan);
    if (rc == CLEF_OK && plan.indexed)
        rc = q_write_index(tmp, &plan);
    if (rc == CLEF_OK)
        rc = q_copy_other_files(rel, tmp);
    if (rc == CLEF_OK)
        rc = q_write_complete(src_dir, tmp, &plan);
    if (rc != CLEF_OK)
        goto done;
    if ((rc = check_destination(dst_dir)) != CLEF_OK) /* appeared meanwhile */
        goto done;
    char *dst_clean = strndup(dst_dir, dl);
    if (!dst_clean || rename(tmp, dst_clean) != 0) {
        rc = clef_fail(CLEF_ERR_IO, "cannot rename '%s' to '%.*s': %s", tmp, (int)dl, dst_dir,
                       dst_clean ? strerror(errno) : "out of memory");
        free(dst_clean);
        goto done;
    }
    free(dst_clean);
    made_tmp = 0;
    if (params->progress)
        params->progress(params->progress_user, NULL, steps, steps, 0);
done:
    if (made_tmp)
        q_remove_dir(tmp);
    free(tmp);
    free(q.in);
    free(q.out);
    q_plan_free(&plan);
    clef_release_free(rel);
    return rc;
}
