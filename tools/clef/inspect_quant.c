/*
 * inspect_quant.c — the quantization section of `clef inspect` (see inspect_quant.h): what each
 * linear's state is under the release's own rules, resident bytes per group, format parameters.
 */
#include "inspect_quant.h"

#include "cli_util.h"

#include <stdio.h>
#include <string.h>

void inspect_quant_collect(const clef_release *rel, inspect_quant *q) {
    memset(q, 0, sizeof *q);
    q->rel = rel;
    q->status = clef_release_quant_params(rel, &q->params);
    if (q->status != CLEF_OK)
        snprintf(q->error, sizeof q->error, "%s", clef_last_error());
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(rel, i);
        inspect_quant_group *g = &q->groups[clef_tensor_group_of(t->name)];
        const uint64_t resident = clef_release_resident_bytes(rel, t);
        g->resident_bytes += resident;
        g->stored_bytes += t->n_bytes;
        q->total.resident_bytes += resident;
        q->total.stored_bytes += t->n_bytes;
        int state = clef_release_linear_state(rel, t, NULL);
        if (state >= 0) {
            g->linears++;
            g->per_state[state]++;
            q->total.linears++;
            q->total.per_state[state]++;
        }
    }
}

static void with_commas(uint64_t v, char *buf, size_t cap) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    size_t o = 0;
    for (int i = 0; i < n && o + 1 < cap; i++) {
        if (i > 0 && (n - i) % 3 == 0 && o + 2 < cap)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = '\0';
}

/* "2 ignore-list, 1 format-rule" for the kept states of g ("-" when none) */
static void kept_list(const inspect_quant_group *g, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = '\0';
    for (int s = 0; s < CLEF_LINEAR_STATE_COUNT; s++) {
        if (s == CLEF_LINEAR_QUANTIZED || !g->per_state[s])
            continue;
        int w = snprintf(buf + o, cap - o, "%s%zu %s", o ? ", " : "", g->per_state[s],
                         clef_linear_state_name((clef_linear_state)s));
        if (w < 0 || (size_t)w >= cap - o)
            return;
        o += (size_t)w;
    }
    if (!o)
        snprintf(buf, cap, "-");
}

static const char *dtype_or(clef_dtype d, const char *none) {
    return d < CLEF_DTYPE_COUNT ? clef_dtype_name(d) : none;
}

/* The distinct ignore entries that kept a linear, with how many each kept (at most `shown`). */
static void print_ignore_rules(const clef_release *rel, size_t shown) {
    const char *rules[64];
    size_t counts[64], n = 0, more = 0;
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
        const char *rule = NULL;
        if (clef_release_linear_state(rel, clef_release_tensor_at(rel, i), &rule) !=
                CLEF_LINEAR_KEPT_IGNORED || !rule)
            continue;
        size_t k = 0;
        while (k < n && strcmp(rules[k], rule) != 0)
            k++;
        if (k < n) {
            counts[k]++;
        } else if (n < sizeof rules / sizeof rules[0]) {
            rules[n] = rule;
            counts[n++] = 1;
        } else {
            more++;
        }
    }
    if (!n)
        return;
    size_t kept = more;
    for (size_t k = 0; k < n; k++)
        kept += counts[k];
    printf("ignored    %zu linears by %s%zu entries of the release's ignore list:", kept,
           more ? "more than " : "", n);
    for (size_t k = 0; k < n && k < shown; k++)
        printf("%s \"%s\" (%zu)", k ? "," : "", rules[k], counts[k]);
    if (n > shown || more)
        printf(", ... (--json lists every linear with its rule)");
    printf("\n");
}

void inspect_quant_print_table(const inspect_quant *q) {
    const clef_quant_params *p = &q->params;
    char a[32], b[32], kept[160];
    printf("\n%-12s %8s %9s  %-34s %16s %16s\n", "group", "linears", "quantized", "kept (why)",
           "resident bytes", "stored bytes");
    for (int g = 0; g < CLEF_GROUP_COUNT; g++) {
        const inspect_quant_group *x = &q->groups[g];
        if (!x->stored_bytes && !x->linears)
            continue;
        kept_list(x, kept, sizeof kept);
        with_commas(x->resident_bytes, a, sizeof a);
        with_commas(x->stored_bytes, b, sizeof b);
        printf("%-12s %8zu %9zu  %-34s %16s %16s\n", clef_tensor_group_name((clef_tensor_group)g),
               x->linears, x->per_state[CLEF_LINEAR_QUANTIZED], kept, a, b);
    }
    kept_list(&q->total, kept, sizeof kept);
    with_commas(q->total.resident_bytes, a, sizeof a);
    with_commas(q->total.stored_bytes, b, sizeof b);
    printf("%-12s %8zu %9zu  %-34s %16s %16s\n", "total", q->total.linears,
           q->total.per_state[CLEF_LINEAR_QUANTIZED], kept, a, b);
    printf("resident   bytes the engine holds once loaded, before a backend's packing "
           "(docs/quant.md; --device measures a real load)\n");
    print_ignore_rules(q->rel, 3);
    if (q->status != CLEF_OK) {
        printf("format     unreadable: [%d %s] %s\n", q->status, clef_status_str(q->status), q->error);
        return;
    }
    switch (p->method) {
    case CLEF_QUANT_NONE:
        printf("format     not quantized: every linear in its stored type\n");
        break;
    case CLEF_QUANT_BNB_NF4:
        printf("format     NF4 (bitsandbytes): quant_type %s, blocksize %lld, double quant %s "
               "(absmax %s, nested blocksize %lld, nested dtype %s), weight dtype %s, compute "
               "dtype %s (config; the CPU backend computes in fp32)\n",
               p->quant_type, (long long)p->blocksize, p->double_quant ? "yes" : "no",
               p->double_quant ? "U8" : "F32", (long long)p->nested_blocksize,
               p->nested_dtype[0] ? p->nested_dtype : "-", p->dtype,
               p->compute_dtype[0] ? p->compute_dtype : "(absent)");
        break;
    case CLEF_QUANT_FP8_W8A8:
        printf("format     FP8 W8A8 (compressed-tensors float-quantized): weights %s, strategy "
               "%s, weight_scale %s %s (held as F32); activations e4m3 per %s (scale = amax / "
               "448, at run time)\n",
               dtype_or(p->weight_dtype, "-"), p->weight_strategy, p->scale_layout,
               dtype_or(p->scale_dtype, "-"), p->activation_strategy);
        break;
    case CLEF_QUANT_INT8_CONVROT:
        printf("format     INT8 ConvRot (comfy-kitchen %s): weights %s rotated by the Hadamard "
               "transform in groups of %lld input features, strategy %s, weight_scale %s %s "
               "(held as F32); activations rotated, int8 per %s; int32 accumulation\n",
               p->comfy_format[0] ? p->comfy_format : "int8, no comfy_quant",
               dtype_or(p->weight_dtype, "-"), (long long)p->rotation_group, p->weight_strategy,
               p->scale_layout, dtype_or(p->scale_dtype, "-"), p->activation_strategy);
        break;
    }
}

static void json_group(const inspect_quant_group *x) {
    printf("{\"linears\": %zu, \"resident_bytes\": %llu, \"stored_bytes\": %llu, \"states\": {",
           x->linears, (unsigned long long)x->resident_bytes, (unsigned long long)x->stored_bytes);
    int first = 1;
    for (int s = 0; s < CLEF_LINEAR_STATE_COUNT; s++) {
        if (!x->per_state[s])
            continue;
        printf("%s\"%s\": %zu", first ? "" : ", ", clef_linear_state_name((clef_linear_state)s),
               x->per_state[s]);
        first = 0;
    }
    printf("}}");
}

static void json_str_or_null(const char *s) {
    if (s && s[0])
        cli_json_string(stdout, s);
    else
        printf("null");
}

void inspect_quant_print_json(const inspect_quant *q) {
    const clef_quant_params *p = &q->params;
    printf(", \"quantization\": {\"method\": \"%s\", \"groups\": {",
           clef_quant_method_name(p->method));
    int first = 1;
    for (int g = 0; g < CLEF_GROUP_COUNT; g++) {
        const inspect_quant_group *x = &q->groups[g];
        if (!x->stored_bytes && !x->linears)
            continue;
        printf("%s\"%s\": ", first ? "" : ", ", clef_tensor_group_name((clef_tensor_group)g));
        json_group(x);
        first = 0;
    }
    printf("}, \"total\": ");
    json_group(&q->total);
    printf(", \"params\": ");
    if (q->status != CLEF_OK) {
        printf("{\"status\": %d, \"error\": ", q->status);
        cli_json_string(stdout, q->error);
        printf("}");
    } else if (p->method == CLEF_QUANT_NONE) {
        printf("null");
    } else {
        printf("{\"quantized_linears\": %zu, \"weight_dtype\": ", p->n_quantized);
        json_str_or_null(p->weight_dtype < CLEF_DTYPE_COUNT ? clef_dtype_name(p->weight_dtype) : NULL);
        if (p->method == CLEF_QUANT_BNB_NF4) {
            printf(", \"quant_type\": ");
            json_str_or_null(p->quant_type);
            printf(", \"blocksize\": %lld, \"double_quant\": %s, \"nested_blocksize\": %lld, "
                   "\"nested_dtype\": ",
                   (long long)p->blocksize, p->double_quant ? "true" : "false",
                   (long long)p->nested_blocksize);
            json_str_or_null(p->nested_dtype);
            printf(", \"dtype\": ");
            json_str_or_null(p->dtype);
            printf(", \"compute_dtype\": ");
            json_str_or_null(p->compute_dtype);
        } else {
            printf(", \"weight_strategy\": \"%s\", \"activation_strategy\": \"%s\", "
                   "\"scale_layout\": \"%s\", \"scale_dtype\": ",
                   p->weight_strategy, p->activation_strategy, p->scale_layout);
            json_str_or_null(p->scale_dtype < CLEF_DTYPE_COUNT ? clef_dtype_name(p->scale_dtype) : NULL);
            printf(", \"scale_held_as\": \"F32\"");
            if (p->method == CLEF_QUANT_INT8_CONVROT) {
                printf(", \"rotation_group\": %lld, \"comfy_format\": ", (long long)p->rotation_group);
                json_str_or_null(p->comfy_format);
            }
        }
        printf("}");
    }
    printf(", \"linears\": [");
    first = 1;
    for (size_t i = 0; i < clef_release_tensor_count(q->rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(q->rel, i);
        const char *rule = NULL;
        int state = clef_release_linear_state(q->rel, t, &rule);
        if (state < 0)
            continue;
        printf("%s{\"name\": ", first ? "" : ", ");
        cli_json_string(stdout, t->stored_name);
        printf(", \"group\": \"%s\", \"state\": \"%s\", \"rule\": ",
               clef_tensor_group_name(clef_tensor_group_of(t->name)),
               clef_linear_state_name((clef_linear_state)state));
        json_str_or_null(rule);
        printf("}");
        first = 0;
    }
    printf("]}");
}
