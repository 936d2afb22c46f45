/*
 * cmd_inspect.c — `clef inspect DIR [--json] [--verify] [--allow-unknown] [--device D]`: check
 * a release directory and describe what it holds, for a person (a table) or a script (--json).
 * With --device, a sound release is then loaded onto that device with one context, and the
 * device memory it holds is reported (what `clef run --device D` will hold).
 *
 * Built on the public headers only (clef.h, clef_release.h). The release is opened with
 * keep_going, so every model-level problem (missing, unexpected, wrong shape or dtype, bad
 * scale) is listed at once; a file-level problem (a damaged shard, a bad index or config, a
 * complete.json mismatch, a FIFO or a link out) stops the check and is reported alone. Then
 * the tokenizer is loaded as clef_model_load loads it, and with --verify every weight is read
 * and checked for NaN/Inf: whatever `clef run` refuses while loading, inspect refuses too.
 * The summary says what was checked and what was not. The quantization section (inspect_quant.c)
 * says which linears are quantized and which stay in high precision by which rule of the
 * release, the bytes the engine holds per group once loaded, and the format parameters.
 * Exit status: 0 the release is sound, 1 any problem, 2 bad usage.
 */
#include "clef.h"
#include "clef_release.h"
#include "cli_util.h"
#include "commands.h"
#include "inspect_quant.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* What this run checked beyond clef_release_open (which always checks configs, index,
 * headers, shapes, dtypes, scales and complete.json sizes). */
typedef struct inspect_checks {
    int tokenizer_status;   /* clef_release_check_tokenizer */
    char tokenizer_error[512];
    int verify;             /* --verify: SHA-256 (when complete.json exists) and weight values */
    int values_status;      /* clef_release_scan_values (I/O failures only; NaN are problems) */
} inspect_checks;

static void usage(FILE *out) {
    fprintf(out,
            "usage: clef inspect DIR [--json] [--verify] [--allow-unknown]\n"
            "                    [--device D [--profile resident|host-embed|24gb|16gb]]\n"
            "\n"
            "Check the Clef release in DIR the way loading it would (config.json,\n"
            "joint_head_config.json, the shard index or model.safetensors, every safetensors\n"
            "header, joint_head.safetensors, complete.json sizes, tokenizer.json and\n"
            "tokenizer_config.json) and describe it: architecture and sizes, precision,\n"
            "tensors / parameters / bytes per group and per file, the head config, what was\n"
            "checked and what was not, and every problem found. Then, per group, how many\n"
            "linears are quantized and why the others stay in high precision (the release's\n"
            "ignore list, the format's rules, ConvRot's rotation group), the bytes the engine\n"
            "holds once loaded, and the format parameters (docs/quant.md).\n"
            "\n"
            "  --json           print one JSON object instead of the table (for scripts)\n"
            "  --verify         also read every byte: the SHA-256 of every file listed in\n"
            "                   complete.json (says so when there is none), and every weight\n"
            "                   for NaN or Inf (progress on stderr)\n"
            "  --allow-unknown  list tensors the model does not know without failing\n"
            "  --device D       then load the release onto D (cpu, cuda, cuda:N) with one\n"
            "                   context of 16384 tokens and report the device memory they\n"
            "                   hold: resident and peak, model and context (what `clef run\n"
            "                   --device D` holds); a device that cannot run it is a problem\n"
            "  --profile P      with --device: the placement to measure, 'resident' (default),\n"
            "                   'host-embed' (embed_tokens in host RAM), '24gb' or '16gb'\n"
            "                   (those placements, refused past 24 / 16 GiB of device memory)\n"
            "  -h, --help       this text\n"
            "\n"
            "Exit status: 0 the release is sound, 1 a problem was found, 2 bad usage.\n");
}

typedef struct group_stats {
    size_t tensors;
    uint64_t params, bytes;
    size_t per_dtype[CLEF_DTYPE_COUNT];
} group_stats;

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

static void dtype_list(const group_stats *g, char *buf, size_t cap, int json) {
    size_t o = 0;
    buf[0] = '\0';
    for (int t = 0; t < CLEF_DTYPE_COUNT; t++) {
        if (!g->per_dtype[t])
            continue;
        int w = json ? snprintf(buf + o, cap - o, "%s\"%s\": %zu", o ? ", " : "",
                                clef_dtype_name((clef_dtype)t), g->per_dtype[t])
                     : snprintf(buf + o, cap - o, "%s%s x%zu", o ? ", " : "",
                                clef_dtype_name((clef_dtype)t), g->per_dtype[t]);
        if (w < 0 || (size_t)w >= cap - o)
            return;
        o += (size_t)w;
    }
}

/* Progress of --verify on stderr: one line per file or weight on a terminal (rewritten in
 * place); in a log, one line per hashed file (a handful) but not per weight (thousands). */
static void progress(void *user, const char *file, size_t i, size_t n, uint64_t bytes) {
    const char *what = user; /* "SHA-256" or "values" */
    const int tty = isatty(STDERR_FILENO), hashing = !strcmp(what, "SHA-256");
    if (file && (tty || hashing))
        fprintf(stderr, "%sverifying %s %zu/%zu: %s (%.1f MB)%s", tty ? "\r" : "", what, i + 1,
                n, file, (double)bytes / 1e6, tty ? "\033[K" : "\n");
    else if (!file)
        fprintf(stderr, "%sverified %s of %zu %s%s\n", tty ? "\r" : "", what, n,
                hashing ? "files" : "tensors", tty ? "\033[K" : "");
}

static void print_table(const clef_release *rel, const group_stats *groups, const inspect_checks *k,
                        const inspect_quant *quant) {
    const clef_release_config *c = clef_release_get_config(rel);
    const clef_text_config *t = &c->text;
    clef_release_summary s;
    clef_release_get_summary(rel, &s);
    size_t n_full = 0;
    for (int64_t i = 0; i < t->num_hidden_layers; i++)
        n_full += t->layer_types[i] == CLEF_LAYER_FULL_ATTENTION;
    char a[32], b[32];
    printf("release    %s\n", clef_release_dir(rel));
    printf("layout     %s\n", s.sharded ? "sharded (model.safetensors.index.json)" : "single file (model.safetensors)");
    printf("text       %lld layers (%lld GDN + %zu attention), hidden %lld, MLP %lld, vocab %lld%s\n",
           (long long)t->num_hidden_layers, (long long)t->num_hidden_layers - (long long)n_full, n_full,
           (long long)t->hidden_size, (long long)t->intermediate_size, (long long)t->vocab_size,
           t->tie_word_embeddings ? ", tied lm_head" : "");
    printf("attention  %lld q heads / %lld kv heads x %lld, rotary %lld dims (theta %g, mrope %lld/%lld/%lld)\n",
           (long long)t->num_attention_heads, (long long)t->num_key_value_heads, (long long)t->head_dim,
           (long long)clef_text_rotary_dim(t), t->rope_theta, (long long)t->mrope_section[0],
           (long long)t->mrope_section[1], (long long)t->mrope_section[2]);
    printf("gdn        %lld k heads x %lld / %lld v heads x %lld, conv %lld\n",
           (long long)t->linear_num_key_heads, (long long)t->linear_key_head_dim,
           (long long)t->linear_num_value_heads, (long long)t->linear_value_head_dim,
           (long long)t->linear_conv_kernel_dim);
    if (c->vision.present)
        printf("vision     %lld blocks x %lld, %lld heads, MLP %lld, patch %lld x %lld, merge %lld -> %lld\n",
               (long long)c->vision.depth, (long long)c->vision.hidden_size, (long long)c->vision.num_heads,
               (long long)c->vision.intermediate_size, (long long)c->vision.patch_size,
               (long long)c->vision.temporal_patch_size, (long long)c->vision.spatial_merge_size,
               (long long)c->vision.out_hidden_size);
    else
        printf("vision     none\n");
    if (c->head.present)
        printf("head       width %lld, routing_layers %lld, layers %lld, heads %lld, feedforward %lld\n",
               (long long)c->head.width, (long long)c->head.routing_layers, (long long)c->head.layers,
               (long long)c->head.heads, (long long)c->head.feedforward);
    else
        printf("head       none\n");
    printf("precision  %s%s\n", clef_quant_method_name(c->quant.method),
           c->quant.from_tensors ? " (from tensor dtypes; no quantization_config)" : "");
    printf("tokenizer  tokenizer.json %s, tokenizer_config.json %s; %s\n",
           s.has_tokenizer ? "yes" : "absent (needed to run the model)",
           s.has_tokenizer_config ? "yes" : "absent",
           k->tokenizer_status == CLEF_OK ? "loads" : "REFUSED (see problems)");
    if (s.has_manifest)
        printf("manifest   complete.json: %zu files, sizes ok, SHA-256 %s\n", s.manifest_files,
               s.manifest_verified ? "ok" : "not checked (--verify)");
    else
        printf("manifest   none (no complete.json): file sizes and SHA-256 cannot be checked%s\n",
               k->verify ? " (--verify had nothing to check them against)" : "");
    printf("runs       %s\n", clef_release_runnable(rel)
                                   ? "yes: this build's `clef run` loads this precision"
                                   : "no: this build does not run this precision");
    printf("checked    configs, index, safetensors headers (offsets, sizes, shapes, dtypes), "
           "quantization scales, tokenizer%s%s%s\n",
           s.has_manifest ? ", complete.json sizes" : "", s.manifest_verified ? ", SHA-256" : "",
           s.values_checked ? ", every weight's values (NaN/Inf)" : "");
    if (!s.manifest_verified || !s.values_checked)
        printf("unchecked  %s%s%s\n",
               !s.has_manifest ? "SHA-256 (no complete.json)"
                               : (!s.manifest_verified ? "SHA-256 (--verify)" : ""),
               !s.manifest_verified && !s.values_checked ? ", " : "",
               !s.values_checked ? "weights' values: NaN/Inf (--verify)" : "");
    if (s.n_ignored)
        printf("ignored    %zu mtp.* tensors (%s bytes)\n", s.n_ignored,
               (with_commas(s.ignored_bytes, a, sizeof a), a));

    printf("\n%-12s %8s %16s %16s  %s\n", "group", "tensors", "params", "bytes", "dtypes");
    group_stats total = {0};
    for (int g = 0; g < CLEF_GROUP_COUNT; g++) {
        if (!groups[g].tensors)
            continue;
        char d[160];
        dtype_list(&groups[g], d, sizeof d, 0);
        with_commas(groups[g].params, a, sizeof a);
        with_commas(groups[g].bytes, b, sizeof b);
        printf("%-12s %8zu %16s %16s  %s\n", clef_tensor_group_name((clef_tensor_group)g),
               groups[g].tensors, a, b, d);
        total.tensors += groups[g].tensors;
        total.params += groups[g].params;
        total.bytes += groups[g].bytes;
    }
    with_commas(total.params, a, sizeof a);
    with_commas(total.bytes, b, sizeof b);
    printf("%-12s %8zu %16s %16s\n", "total", total.tensors, a, b);

    printf("\n%-40s %8s %16s %16s\n", "file", "tensors", "tensor bytes", "file bytes");
    for (size_t i = 0; i < clef_release_file_count(rel); i++) {
        with_commas(clef_release_file_tensor_bytes(rel, i), a, sizeof a);
        with_commas(clef_release_file_size(rel, i), b, sizeof b);
        printf("%-40s %8zu %16s %16s\n", clef_release_file_name(rel, i),
               clef_release_file_tensor_count(rel, i), a, b);
    }
    inspect_quant_print_table(quant);
    size_t np = clef_release_problem_count(rel);
    printf("\n");
    if (np == 0 && k->tokenizer_status == CLEF_OK)
        printf("status     OK: the release is complete and consistent\n");
    if (k->tokenizer_status != CLEF_OK)
        printf("problem    [%d %s] %s\n", k->tokenizer_status, clef_status_str(k->tokenizer_status),
               k->tokenizer_error);
    const size_t shown = 40; /* a broken release can have thousands; --json lists them all */
    for (size_t i = 0; i < np && i < shown; i++) {
        const clef_release_problem *p = clef_release_problem_at(rel, i);
        printf("problem    [%d %s] %s\n", p->status, clef_status_str(p->status), p->message);
    }
    if (np > shown)
        printf("problem    ... and %zu more (--json lists every one)\n", np - shown);
}

static void print_json(const clef_release *rel, const group_stats *groups, int ok,
                       const inspect_checks *k) {
    const clef_release_config *c = clef_release_get_config(rel);
    const clef_text_config *t = &c->text;
    clef_release_summary s;
    clef_release_get_summary(rel, &s);
    printf("{\"ok\": %s, \"dir\": ", ok ? "true" : "false");
    cli_json_string(stdout, clef_release_dir(rel));
    printf(", \"sharded\": %s, \"precision\": \"%s\", \"precision_from_tensors\": %s",
           s.sharded ? "true" : "false", clef_quant_method_name(c->quant.method),
           c->quant.from_tensors ? "true" : "false");
    printf(", \"text\": {\"vocab_size\": %lld, \"hidden_size\": %lld, \"intermediate_size\": %lld, "
           "\"num_hidden_layers\": %lld, \"num_attention_heads\": %lld, \"num_key_value_heads\": %lld, "
           "\"head_dim\": %lld, \"linear_num_key_heads\": %lld, \"linear_num_value_heads\": %lld, "
           "\"linear_key_head_dim\": %lld, \"linear_value_head_dim\": %lld, "
           "\"linear_conv_kernel_dim\": %lld, \"tie_word_embeddings\": %s, \"layer_types\": [",
           (long long)t->vocab_size, (long long)t->hidden_size, (long long)t->intermediate_size,
           (long long)t->num_hidden_layers, (long long)t->num_attention_heads,
           (long long)t->num_key_value_heads, (long long)t->head_dim, (long long)t->linear_num_key_heads,
           (long long)t->linear_num_value_heads, (long long)t->linear_key_head_dim,
           (long long)t->linear_value_head_dim, (long long)t->linear_conv_kernel_dim,
           t->tie_word_embeddings ? "true" : "false");
    for (int64_t i = 0; i < t->num_hidden_layers; i++)
        printf("%s\"%s\"", i ? ", " : "",
               t->layer_types[i] == CLEF_LAYER_FULL_ATTENTION ? "full_attention" : "linear_attention");
    printf("]}");
    if (c->vision.present)
        printf(", \"vision\": {\"depth\": %lld, \"hidden_size\": %lld, \"num_heads\": %lld, "
               "\"intermediate_size\": %lld, \"out_hidden_size\": %lld}",
               (long long)c->vision.depth, (long long)c->vision.hidden_size,
               (long long)c->vision.num_heads, (long long)c->vision.intermediate_size,
               (long long)c->vision.out_hidden_size);
    else
        printf(", \"vision\": null");
    if (c->head.present)
        printf(", \"head\": {\"hidden_size\": %lld, \"width\": %lld, \"routing_layers\": %lld, "
               "\"layers\": %lld, \"heads\": %lld, \"feedforward\": %lld}",
               (long long)c->head.hidden_size, (long long)c->head.width,
               (long long)c->head.routing_layers, (long long)c->head.layers, (long long)c->head.heads,
               (long long)c->head.feedforward);
    else
        printf(", \"head\": null");
    printf(", \"tokenizer\": %s, \"tokenizer_config\": %s", s.has_tokenizer ? "true" : "false",
           s.has_tokenizer_config ? "true" : "false");
    printf(", \"runnable\": %s", clef_release_runnable(rel) ? "true" : "false");
    printf(", \"checked\": {\"configs\": true, \"headers\": true, \"tokenizer\": true, "
           "\"sizes\": %s, \"sha256\": %s, \"values\": %s}",
           s.has_manifest ? "true" : "false", s.manifest_verified ? "true" : "false",
           s.values_checked ? "true" : "false");
    printf(", \"manifest\": {\"present\": %s, \"files\": %zu, \"sha256_verified\": %s}",
           s.has_manifest ? "true" : "false", s.manifest_files, s.manifest_verified ? "true" : "false");
    printf(", \"ignored\": {\"tensors\": %zu, \"bytes\": %llu}", s.n_ignored,
           (unsigned long long)s.ignored_bytes);
    printf(", \"groups\": {");
    int first = 1;
    for (int g = 0; g < CLEF_GROUP_COUNT; g++) {
        if (!groups[g].tensors)
            continue;
        char d[256];
        dtype_list(&groups[g], d, sizeof d, 1);
        printf("%s\"%s\": {\"tensors\": %zu, \"params\": %llu, \"bytes\": %llu, \"dtypes\": {%s}}",
               first ? "" : ", ", clef_tensor_group_name((clef_tensor_group)g), groups[g].tensors,
               (unsigned long long)groups[g].params, (unsigned long long)groups[g].bytes, d);
        first = 0;
    }
    printf("}, \"files\": [");
    for (size_t i = 0; i < clef_release_file_count(rel); i++) {
        printf("%s{\"name\": ", i ? ", " : "");
        cli_json_string(stdout, clef_release_file_name(rel, i));
        printf(", \"tensors\": %zu, \"tensor_bytes\": %llu, \"size\": %llu}",
               clef_release_file_tensor_count(rel, i),
               (unsigned long long)clef_release_file_tensor_bytes(rel, i),
               (unsigned long long)clef_release_file_size(rel, i));
    }
    printf("], \"problems\": [");
    size_t np = clef_release_problem_count(rel);
    if (k->tokenizer_status != CLEF_OK) {
        printf("{\"status\": %d, \"kind\": ", k->tokenizer_status);
        cli_json_string(stdout, clef_status_str(k->tokenizer_status));
        printf(", \"message\": ");
        cli_json_string(stdout, k->tokenizer_error);
        printf("}%s", np ? ", " : "");
    }
    for (size_t i = 0; i < np; i++) {
        const clef_release_problem *p = clef_release_problem_at(rel, i);
        printf("%s{\"status\": %d, \"kind\": ", i ? ", " : "", p->status);
        cli_json_string(stdout, clef_status_str(p->status));
        printf(", \"message\": ");
        cli_json_string(stdout, p->message);
        printf("}");
    }
    printf("]");
}

/* --device: the release loaded there with one default context, and what they hold. */
typedef struct device_report {
    const char *device;        /* NULL: not asked */
    clef_profile profile;
    int status;
    char error[512];
    char name[24];             /* clef_model_device */
    clef_memory_info model, context;
    int32_t context_tokens;
    uint64_t workspace_bytes;
} device_report;

static void device_measure(const char *dir, device_report *d) {
    clef_model_params mp = clef_model_default_params();
    mp.device = d->device;
    mp.profile = d->profile;
    clef_model *m = NULL;
    clef_context *c = NULL;
    d->status = clef_model_load(dir, &mp, &m);
    if (d->status == CLEF_OK)
        d->status = clef_context_create(m, NULL, &c);
    if (d->status == CLEF_OK)
        d->status = clef_model_memory(m, &d->model);
    if (d->status == CLEF_OK)
        d->status = clef_context_memory(c, &d->context);
    if (d->status == CLEF_OK) {
        snprintf(d->name, sizeof d->name, "%s", clef_model_device(m));
        d->context_tokens = clef_context_max_tokens(c);
        d->workspace_bytes = clef_context_workspace_bytes(c);
    } else {
        snprintf(d->error, sizeof d->error, "%s", clef_last_error());
    }
    clef_context_free(c);
    clef_model_free(m);
}

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }

static void print_device_table(const device_report *d) {
    if (d->status != CLEF_OK) {
        printf("device     %s: REFUSED [%d %s] %s\n", d->device, d->status,
               clef_status_str(d->status), d->error);
        return;
    }
    printf("device     %s: model %.1f MiB resident (weights %.1f MiB, peak %.1f MiB); one "
           "context of %d tokens %.1f MiB resident (workspace %.1f MiB, peak %.1f MiB); "
           "together %.1f MiB, peak at most %.1f MiB\n",
           d->name, mib(d->model.resident), mib(d->model.weights), mib(d->model.peak),
           d->context_tokens, mib(d->context.resident), mib(d->workspace_bytes),
           mib(d->context.peak), mib(d->model.resident + d->context.resident),
           mib(d->model.peak + d->context.peak));
}

static void print_device_json(const device_report *d) {
    printf(", \"device\": {\"name\": ");
    cli_json_string(stdout, d->status == CLEF_OK ? d->name : d->device);
    if (d->status != CLEF_OK) {
        printf(", \"status\": %d, \"kind\": ", d->status);
        cli_json_string(stdout, clef_status_str(d->status));
        printf(", \"error\": ");
        cli_json_string(stdout, d->error);
        printf("}");
        return;
    }
    printf(", \"model_resident_bytes\": %llu, \"model_peak_bytes\": %llu, \"weight_bytes\": %llu, "
           "\"context_tokens\": %d, \"context_resident_bytes\": %llu, \"context_peak_bytes\": %llu, "
           "\"context_workspace_bytes\": %llu, \"device_used_bytes\": %llu, "
           "\"device_total_bytes\": %llu}",
           (unsigned long long)d->model.resident, (unsigned long long)d->model.peak,
           (unsigned long long)d->model.weights, d->context_tokens,
           (unsigned long long)d->context.resident, (unsigned long long)d->context.peak,
           (unsigned long long)d->workspace_bytes, (unsigned long long)d->model.device_used,
           (unsigned long long)d->model.device_total);
}

int cmd_inspect(int argc, char **argv) {
    const char *dir = NULL;
    int as_json = 0;
    device_report dev = {0};
    clef_release_opts opts = clef_release_default_opts();
    opts.keep_going = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--json")) {
            as_json = 1;
        } else if (!strcmp(argv[i], "--verify")) {
            opts.verify_hashes = 1;
        } else if (!strcmp(argv[i], "--allow-unknown")) {
            opts.allow_unknown_tensors = 1;
        } else if (!strcmp(argv[i], "--device")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "clef inspect: --device needs a value (cpu, cuda, cuda:N)\n\n");
                usage(stderr);
                return 2;
            }
            dev.device = argv[++i];
        } else if (!strcmp(argv[i], "--profile")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "clef inspect: --profile needs a value (resident, host-embed, 24gb, 16gb)\n\n");
                usage(stderr);
                return 2;
            }
            int prc = cli_parse_profile("inspect", argv[++i], &dev.profile);
            if (prc)
                return prc;
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "clef inspect: unknown option '%s'\n\n", argv[i]);
            usage(stderr);
            return 2;
        } else if (dir) {
            fprintf(stderr, "clef inspect: one directory only ('%s' and '%s')\n\n", dir, argv[i]);
            usage(stderr);
            return 2;
        } else {
            dir = argv[i];
        }
    }
    if (!dir) {
        usage(stderr);
        return 2;
    }
    if (opts.verify_hashes) {
        opts.progress = progress;
        opts.progress_user = (void *)"SHA-256";
    }
    clef_release *rel = NULL;
    int rc = clef_release_open(dir, &opts, &rel);
    if (rc != CLEF_OK) {
        if (as_json) {
            printf("{\"ok\": false, \"dir\": ");
            cli_json_string(stdout, dir);
            printf(", \"status\": %d, \"kind\": ", rc);
            cli_json_string(stdout, clef_status_str(rc));
            printf(", \"error\": ");
            cli_json_string(stdout, clef_last_error());
            printf("}\n");
        } else {
            printf("release    %s\nstatus     REFUSED [%d %s]\nproblem    %s\n", dir, rc,
                   clef_status_str(rc), clef_last_error());
        }
        return 1;
    }
    inspect_checks k = {.verify = opts.verify_hashes};
    k.tokenizer_status = clef_release_check_tokenizer(rel);
    if (k.tokenizer_status != CLEF_OK)
        snprintf(k.tokenizer_error, sizeof k.tokenizer_error, "%s", clef_last_error());
    if (opts.verify_hashes) {
        k.values_status = clef_release_scan_values(rel, 1, progress, (void *)"values");
        if (k.values_status != CLEF_OK) { /* I/O: report as a refusal */
            fprintf(stderr, "clef inspect: cannot read the weights: %s (%s)\n", clef_last_error(),
                    clef_status_str(k.values_status));
            clef_release_free(rel);
            return 1;
        }
    }
    group_stats groups[CLEF_GROUP_COUNT];
    memset(groups, 0, sizeof groups);
    clef_quant_method m = clef_release_get_config(rel)->quant.method;
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(rel, i);
        group_stats *g = &groups[clef_tensor_group_of(t->name)];
        g->tensors++;
        g->params += clef_tensor_param_count(t, m);
        g->bytes += t->n_bytes;
        g->per_dtype[t->dtype]++;
    }
    size_t blocking = 0;
    for (size_t i = 0; i < clef_release_problem_count(rel); i++) {
        const clef_release_problem *p = clef_release_problem_at(rel, i);
        blocking += !(opts.allow_unknown_tensors && p->status == CLEF_ERR_TENSOR_UNEXPECTED);
    }
    blocking += k.tokenizer_status != CLEF_OK;
    if (dev.device && !blocking) {
        device_measure(dir, &dev);
        blocking += dev.status != CLEF_OK;
    }
    inspect_quant quant;
    inspect_quant_collect(rel, &quant);
    if (as_json) {
        print_json(rel, groups, blocking == 0, &k);
        inspect_quant_print_json(&quant);
        if (dev.device && (dev.status != CLEF_OK || dev.name[0])) /* not asked when refused */
            print_device_json(&dev);
        printf("}\n");
    } else {
        print_table(rel, groups, &k, &quant);
        if (dev.device && (dev.status != CLEF_OK || dev.name[0]))
            print_device_table(&dev);
    }
    clef_release_free(rel);
    return blocking ? 1 : 0;
}
