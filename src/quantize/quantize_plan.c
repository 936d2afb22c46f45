/*
 * quantize_plan.c — which tensors `clef quantize` quantizes, and into what (see
 * quantize_plan.h). The Linear modules of the architecture are one table here, with the
 * order in which the model declares them (the order of FP8's ignore list).
 */
#include "quantize/quantize_plan.h"

#include "core/error.h"
#include "json/render.h"
#include "release/release.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char q_comfy_quant_json[] =
    "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 256}";

enum { FAMILY_GDN, FAMILY_ATTN, FAMILY_MLP };

/* Text Linears, in the order the model's named_modules() yields them inside one layer. */
static const struct {
    const char *module;
    int family;
} text_linears[] = {
    {"linear_attn.out_proj", FAMILY_GDN},   {"linear_attn.in_proj_qkv", FAMILY_GDN},
    {"linear_attn.in_proj_z", FAMILY_GDN},  {"linear_attn.in_proj_b", FAMILY_GDN},
    {"linear_attn.in_proj_a", FAMILY_GDN},  {"self_attn.q_proj", FAMILY_ATTN},
    {"self_attn.k_proj", FAMILY_ATTN},      {"self_attn.v_proj", FAMILY_ATTN},
    {"self_attn.o_proj", FAMILY_ATTN},      {"mlp.gate_proj", FAMILY_MLP},
    {"mlp.up_proj", FAMILY_MLP},            {"mlp.down_proj", FAMILY_MLP},
};
static const char *const vision_block_linears[] = {"attn.qkv", "attn.proj", "mlp.linear_fc1",
                                                   "mlp.linear_fc2"};
static const char *const vision_merger_linears[] = {"linear_fc1", "linear_fc2"};

/* Where a Linear sits in module order: group (vision blocks, merger, text, lm_head), its
 * block or layer, its place inside it. */
typedef struct linear_pos {
    int group;
    long index;
    int order;
    int family;   /* text only */
} linear_pos;

/* "<prefix><N>.<module>.weight" with module in table[]: 1 and *pos filled. */
static int match_indexed(const char *name, const char *prefix, long *index, const char **rest) {
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0)
        return 0;
    char *end;
    const char *digits = name + n;
    if (*digits < '0' || *digits > '9')
        return 0;
    *index = strtol(digits, &end, 10);
    if (*end != '.')
        return 0;
    *rest = end + 1;
    return 1;
}

static int is_module_weight(const char *rest, const char *module) {
    size_t n = strlen(module);
    return strncmp(rest, module, n) == 0 && strcmp(rest + n, ".weight") == 0;
}

/* 1 if the engine name is the weight of a Linear module. */
static int linear_position(const char *name, linear_pos *pos) {
    const char *rest;
    long index;
    memset(pos, 0, sizeof *pos);
    if (strcmp(name, "lm_head.weight") == 0) {
        pos->group = 3;
        return 1;
    }
    if (match_indexed(name, "text.layers.", &index, &rest)) {
        for (size_t i = 0; i < sizeof text_linears / sizeof text_linears[0]; i++)
            if (is_module_weight(rest, text_linears[i].module)) {
                *pos = (linear_pos){2, index, (int)i, text_linears[i].family};
                return 1;
            }
        return 0;
    }
    if (match_indexed(name, "vision.blocks.", &index, &rest)) {
        for (size_t i = 0; i < 4; i++)
            if (is_module_weight(rest, vision_block_linears[i])) {
                *pos = (linear_pos){0, index, (int)i, 0};
                return 1;
            }
        return 0;
    }
    if (strncmp(name, "vision.merger.", 14) == 0) {
        for (size_t i = 0; i < 2; i++)
            if (is_module_weight(name + 14, vision_merger_linears[i])) {
                *pos = (linear_pos){1, 0, (int)i, 0};
                return 1;
            }
    }
    return 0;
}

static int quantizes(clef_quantize_target target, const linear_pos *pos, const clef_tensor_info *t) {
    if (pos->group != 2)
        return 0;
    switch (target) {
    case CLEF_QUANTIZE_NF4:
        return 1;
    case CLEF_QUANTIZE_FP8:
        return pos->family != FAMILY_GDN;
    case CLEF_QUANTIZE_INT8_CONVROT: {
        const char *m = text_linears[pos->order].module;
        if (!strcmp(m, "linear_attn.in_proj_a") || !strcmp(m, "linear_attn.in_proj_b"))
            return 0;
        return t->n_dims == 2 && t->shape[1] % 256 == 0;
    }
    }
    return 0;
}

static char *concat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

/* module + suffix; *ok cleared when out of memory. */
static char *name_for(const char *module, const char *suffix, int *ok) {
    char *s = concat(module, suffix);
    if (!s)
        *ok = 0;
    return s;
}

/* The module name (stored name without ".weight"). */
static char *module_of(const char *stored) {
    size_t n = strlen(stored);
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    memcpy(s, stored, n + 1);
    if (n > 7 && strcmp(s + n - 7, ".weight") == 0)
        s[n - 7] = '\0';
    return s;
}

static void set_out(st_write_tensor *o, char *name, clef_dtype dtype, int n_dims, int64_t d0,
                    int64_t d1) {
    memset(o, 0, sizeof *o);
    o->name = name;
    o->dtype = dtype;
    o->n_dims = n_dims;
    o->shape[0] = d0;
    o->shape[1] = d1;
    int overflow;
    o->n_bytes = st_tensor_bytes(dtype, o->shape, n_dims, &overflow);
}

/* Output tensors of a quantized weight (NF4's quant_state gets its length later). */
static int plan_quantized(q_item *it, const char *stored) {
    char *module = module_of(stored);
    if (!module)
        return CLEF_ERR_OUT_OF_MEMORY;
    const int64_t rows = it->rows, cols = it->cols, n = rows * cols;
    int ok = 1;
    switch (it->action) {
    case Q_NF4: {
        const int64_t blocks = (n + 63) / 64;
        set_out(&it->out[Q_OUT_WEIGHT], name_for(module, ".weight", &ok), CLEF_DTYPE_U8, 2, (n + 1) / 2, 1);
        set_out(&it->out[Q_NF4_ABSMAX], name_for(module, ".weight.absmax", &ok), CLEF_DTYPE_U8, 1, blocks, 0);
        set_out(&it->out[Q_NF4_QUANT_MAP], name_for(module, ".weight.quant_map", &ok), CLEF_DTYPE_F32, 1, 16, 0);
        set_out(&it->out[Q_NF4_NESTED_ABSMAX], name_for(module, ".weight.nested_absmax", &ok), CLEF_DTYPE_F32, 1,
                (blocks + 255) / 256, 0);
        set_out(&it->out[Q_NF4_NESTED_QUANT_MAP], name_for(module, ".weight.nested_quant_map", &ok),
                CLEF_DTYPE_F32, 1, 256, 0);
        set_out(&it->out[Q_NF4_QUANT_STATE], name_for(module, ".weight.quant_state.bitsandbytes__nf4", &ok),
                CLEF_DTYPE_U8, 1, 0, 0);
        it->n_out = 6;
        break;
    }
    case Q_FP8:
        set_out(&it->out[Q_OUT_WEIGHT], name_for(module, ".weight", &ok), CLEF_DTYPE_F8_E4M3, 2, rows, cols);
        set_out(&it->out[Q_SCALE], name_for(module, ".weight_scale", &ok), CLEF_DTYPE_BF16, 2, rows, 1);
        it->n_out = 2;
        break;
    case Q_INT8:
        set_out(&it->out[Q_OUT_WEIGHT], name_for(module, ".weight", &ok), CLEF_DTYPE_I8, 2, rows, cols);
        set_out(&it->out[Q_SCALE], name_for(module, ".weight_scale", &ok), CLEF_DTYPE_F32, 2, rows, 1);
        set_out(&it->out[Q_INT8_COMFY_QUANT], name_for(module, ".comfy_quant", &ok), CLEF_DTYPE_U8, 1,
                (int64_t)strlen(q_comfy_quant_json), 0);
        it->n_out = 3;
        break;
    default:
        break;
    }
    free(module);
    return ok ? CLEF_OK : CLEF_ERR_OUT_OF_MEMORY;
}

int q_plan_set_nf4_offset(q_item *it, float offset) {
    char num[JSON_DOUBLE_BUF];
    json_format_double((double)offset, num);
    char buf[512];
    int len = snprintf(buf, sizeof buf,
                       "{\"quant_type\": \"nf4\", \"blocksize\": 64, \"dtype\": \"bfloat16\", "
                       "\"shape\": [%lld, %lld], \"nested_blocksize\": 256, \"nested_dtype\": "
                       "\"float32\", \"nested_offset\": %s}",
                       (long long)it->rows, (long long)it->cols, num);
    if (len < 0 || (size_t)len >= sizeof buf)
        return clef_fail(CLEF_ERR_INTERNAL, "quant_state of '%s' too long", it->src->stored_name);
    free(it->quant_state);
    it->quant_state = malloc((size_t)len);
    if (!it->quant_state)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    memcpy(it->quant_state, buf, (size_t)len);
    it->quant_state_len = (size_t)len;
    it->nf4_offset = offset;
    it->out[Q_NF4_QUANT_STATE].shape[0] = len;
    it->out[Q_NF4_QUANT_STATE].n_bytes = (uint64_t)len;
    return CLEF_OK;
}

static int compare_items(const void *a, const void *b) {
    return strcmp(((const q_item *)a)->src->stored_name, ((const q_item *)b)->src->stored_name);
}

typedef struct ignored {
    linear_pos pos;
    char *module;
} ignored;

static int compare_ignored(const void *a, const void *b) {
    const linear_pos *x = &((const ignored *)a)->pos, *y = &((const ignored *)b)->pos;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

int q_plan_build(const clef_release *rel, const clef_quantize_params *p, q_plan *out) {
    memset(out, 0, sizeof *out);
    out->target = p->target;
    const size_t n = clef_release_tensor_count(rel);
    out->items = calloc(n ? n : 1, sizeof *out->items);
    ignored *ign = calloc(n ? n : 1, sizeof *ign);
    int rc = CLEF_OK;
    if (!out->items || !ign) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    size_t n_ign = 0;
    for (size_t i = 0; i < n; i++) {
        const clef_tensor_info *t = clef_release_tensor_at(rel, i);
        if (strncmp(t->name, "head.", 5) == 0)
            continue; /* joint_head.safetensors is copied as a file */
        q_item *it = &out->items[out->n_items++];
        it->src = t;
        linear_pos pos;
        const int linear = linear_position(t->name, &pos);
        if (linear && quantizes(p->target, &pos, t)) {
            if (t->dtype != CLEF_DTYPE_BF16 || t->n_dims != 2) {
                rc = clef_fail(CLEF_ERR_UNSUPPORTED,
                               "tensor '%s' is %s with %d dimensions; clef quantize reads BF16 "
                               "[out, in] Linear weights", t->stored_name,
                               clef_dtype_name(t->dtype), t->n_dims);
                goto done;
            }
            it->action = p->target == CLEF_QUANTIZE_NF4   ? Q_NF4
                         : p->target == CLEF_QUANTIZE_FP8 ? Q_FP8
                                                          : Q_INT8;
            it->rows = t->shape[0];
            it->cols = t->shape[1];
            if ((rc = plan_quantized(it, t->stored_name)) != CLEF_OK) {
                clef_fail(rc, "out of memory");
                goto done;
            }
            out->n_quantized++;
            continue;
        }
        if (linear) {
            ign[n_ign].pos = pos;
            if (!(ign[n_ign].module = module_of(t->stored_name))) {
                rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
                goto done;
            }
            n_ign++;
        }
        const int cast = p->target != CLEF_QUANTIZE_INT8_CONVROT &&
                         (t->dtype == CLEF_DTYPE_F32 || t->dtype == CLEF_DTYPE_F16);
        it->action = cast ? Q_TO_BF16 : Q_COPY;
        char *name = strdup(t->stored_name);
        if (!name) {
            rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
            goto done;
        }
        st_write_tensor *o = &it->out[0];
        memset(o, 0, sizeof *o);
        o->name = name;
        o->dtype = cast ? CLEF_DTYPE_BF16 : t->dtype;
        o->n_dims = t->n_dims;
        memcpy(o->shape, t->shape, sizeof o->shape);
        int overflow;
        o->n_bytes = st_tensor_bytes(o->dtype, o->shape, o->n_dims, &overflow);
        it->n_out = 1;
    }
    qsort(out->items, out->n_items, sizeof *out->items, compare_items);
    qsort(ign, n_ign, sizeof *ign, compare_ignored);
    out->ignore = calloc(n_ign ? n_ign : 1, sizeof *out->ignore);
    if (!out->ignore) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < n_ign; i++) {
        out->ignore[i] = ign[i].module;
        ign[i].module = NULL;
    }
    out->n_ignore = n_ign;
done:
    if (ign)
        for (size_t i = 0; i < n; i++)
            free(ign[i].module);
    free(ign);
    if (rc != CLEF_OK)
        q_plan_free(out);
    return rc;
}

static uint64_t item_bytes(const q_item *it) {
    uint64_t b = 0;
    for (size_t k = 0; k < it->n_out; k++)
        b += it->out[k].n_bytes;
    return b;
}

static uint64_t item_parameters(const q_item *it) {
    if (it->action == Q_NF4)
        return 2 * it->out[Q_OUT_WEIGHT].n_bytes; /* two 4-bit codes per byte */
    int overflow;
    return st_tensor_bytes(CLEF_DTYPE_U8, it->out[0].shape, it->out[0].n_dims, &overflow);
}

int q_plan_assign_files(q_plan *plan, uint64_t max_shard_bytes) {
    const int split_lm_head = plan->target == CLEF_QUANTIZE_NF4;
    size_t shards = 0;
    uint64_t in_shard = 0;
    int has_lm_head = 0;
    plan->total_size = plan->total_parameters = 0;
    for (size_t i = 0; i < plan->n_items; i++) {
        q_item *it = &plan->items[i];
        const uint64_t b = item_bytes(it);
        plan->total_size += b;
        plan->total_parameters += item_parameters(it);
        if (split_lm_head && strcmp(it->src->name, "lm_head.weight") == 0) {
            has_lm_head = 1;
            it->file = SIZE_MAX; /* set below */
            continue;
        }
        if (shards == 0 || (in_shard > 0 && in_shard + b > max_shard_bytes)) {
            shards++;
            in_shard = 0;
        }
        in_shard += b;
        it->file = shards - 1;
    }
    if (shards == 0)
        shards = 1;
    plan->indexed = split_lm_head || shards > 1;
    plan->n_files = shards + (size_t)has_lm_head;
    plan->files = calloc(plan->n_files, sizeof *plan->files);
    if (!plan->files)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t s = 0; s < shards; s++) {
        char buf[64];
        if (plan->indexed)
            snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", s + 1, shards);
        else
            snprintf(buf, sizeof buf, "model.safetensors");
        if (!(plan->files[s] = strdup(buf)))
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    if (has_lm_head) {
        if (!(plan->files[shards] = strdup("lm-head.safetensors")))
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        for (size_t i = 0; i < plan->n_items; i++)
            if (plan->items[i].file == SIZE_MAX)
                plan->items[i].file = shards;
    }
    return CLEF_OK;
}

void q_plan_free(q_plan *plan) {
    for (size_t i = 0; i < plan->n_items; i++) {
        for (size_t k = 0; k < Q_MAX_OUT; k++)
            free((char *)plan->items[i].out[k].name);
        free(plan->items[i].quant_state);
    }
    free(plan->items);
    for (size_t i = 0; i < plan->n_files; i++)
        free(plan->files[i]);
    free(plan->files);
    for (size_t i = 0; i < plan->n_ignore; i++)
        free(plan->ignore[i]);
    free(plan->ignore);
    memset(plan, 0, sizeof *plan);
}
