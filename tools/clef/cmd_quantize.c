/*
 * cmd_quantize.c — `clef quantize --to nf4|fp8|int8-convrot [--progress] SRC DST`: make a
 * quantized release from a BF16 one (include/clef_quantize.h does the work; this file parses
 * flags and reports). Exit status: 0 written, 1 a problem with SRC or DST, 2 bad usage.
 */
#include "clef.h"
#include "clef_quantize.h"
#include "cli_util.h"
#include "commands.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out) {
    fprintf(out,
            "usage: clef quantize --to nf4|fp8|int8-convrot [--progress]\n"
            "                     [--max-shard-size SIZE] [--torch-lanes 8|16]\n"
            "                     [--torch-threads N] SRC DST\n"
            "\n"
            "Write to DST the release SRC (a BF16 Clef release) quantized in the published\n"
            "layout of the chosen precision, with the bytes each library's quantizer writes:\n"
            "  nf4           bitsandbytes NF4, double quant, blocksize 64, on every text Linear;\n"
            "                lm_head in lm-head.safetensors; shards + index; complete.json\n"
            "  fp8           compressed-tensors FP8_DYNAMIC: e4m3 weights with one BF16 scale\n"
            "                per output channel on the attention and MLP Linears\n"
            "  int8-convrot  comfy-kitchen int8_tensorwise with the ConvRot rotation (group\n"
            "                256) on the text Linears whose in_features is a multiple of 256\n"
            "                (GDN in_proj_a / in_proj_b stay BF16)\n"
            "Tensors are streamed (a few 16 MiB buffers, never the model in memory) into\n"
            "DST.tmp-<pid>, renamed to DST at the end. DST must not exist or be empty.\n"
            "\n"
            "  --to PRECISION        nf4, fp8 or int8-convrot (required)\n"
            "  --progress            one line per step on stderr (NF4 reads each quantized\n"
            "                        weight once first, for its double-quant offset)\n"
            "  --max-shard-size SIZE largest model shard, bytes or with a unit: KB MB GB\n"
            "                        (powers of 1000) or KiB MiB GiB (default 50GB)\n"
            "  --torch-lanes 8|16    nf4: the float lanes of the torch whose bitsandbytes\n"
            "                        run is reproduced (default 8, torch 2.11's CPU wheels)\n"
            "  --torch-threads N     nf4: its thread count; matters only for weights of\n"
            "                        32,768 blocks (2M elements) or more (default 1)\n"
            "  -h, --help            this text\n"
            "\n"
            "Exit status: 0 written, 1 a problem with SRC or DST, 2 bad usage.\n");
}

/* "123", "100KB", "5GB", "512MiB" -> bytes; 0 on a malformed size. */
static uint64_t parse_size(const char *text) {
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || text[0] == '-')
        return 0;
    static const struct {
        const char *unit;
        uint64_t mult;
    } units[] = {{"", 1},          {"B", 1},           {"KB", 1000ull},
                 {"MB", 1000000ull}, {"GB", 1000000000ull}, {"KiB", 1ull << 10},
                 {"MiB", 1ull << 20}, {"GiB", 1ull << 30}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcmp(end, units[i].unit) == 0) {
            if (v > UINT64_MAX / units[i].mult)
                return 0;
            return (uint64_t)v * units[i].mult;
        }
    return 0;
}

static void print_progress(void *user, const char *name, size_t i, size_t n, uint64_t bytes) {
    (void)user;
    if (name)
        fprintf(stderr, "clef quantize: [%zu/%zu] %s (%llu bytes)\n", i + 1, n, name,
                (unsigned long long)bytes);
    else
        fprintf(stderr, "clef quantize: %zu steps done\n", n);
}

int cmd_quantize(int argc, char **argv) {
    clef_quantize_params p = clef_quantize_default_params();
    const char *to = NULL, *src = NULL, *dst = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--progress")) {
            p.progress = print_progress;
        } else if (!strcmp(a, "--to") || !strcmp(a, "--max-shard-size") ||
                   !strcmp(a, "--torch-lanes") || !strcmp(a, "--torch-threads")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "clef quantize: %s needs a value\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (!strcmp(a, "--to")) {
                to = v;
            } else if (!strcmp(a, "--max-shard-size")) {
                if ((p.max_shard_bytes = parse_size(v)) == 0) {
                    fprintf(stderr, "clef quantize: --max-shard-size expects a positive size "
                                    "(bytes, or with KB MB GB KiB MiB GiB), got '%s'\n", v);
                    return 2;
                }
            } else if (!strcmp(a, "--torch-lanes")) {
                if (cli_parse_int("quantize", a, v, 8, 16, &p.torch_sum_lanes) != 0)
                    return 2;
                if (p.torch_sum_lanes != 8 && p.torch_sum_lanes != 16) {
                    fprintf(stderr, "clef quantize: --torch-lanes expects 8 or 16, got '%s'\n", v);
                    return 2;
                }
            } else if (cli_parse_int("quantize", a, v, 1, 4096, &p.torch_threads) != 0) {
                return 2;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "clef quantize: unknown option '%s'\n\n", a);
            usage(stderr);
            return 2;
        } else if (!src) {
            src = a;
        } else if (!dst) {
            dst = a;
        } else {
            fprintf(stderr, "clef quantize: unexpected argument '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!to) {
        fprintf(stderr, "clef quantize: --to is required (nf4, fp8 or int8-convrot)\n\n");
        usage(stderr);
        return 2;
    }
    if (!clef_quantize_target_parse(to, &p.target)) {
        fprintf(stderr, "clef quantize: unknown precision '%s' for --to (nf4, fp8 or "
                        "int8-convrot)\n", to);
        return 2;
    }
    if (!src || !dst) {
        fprintf(stderr, "clef quantize: SRC and DST are required\n\n");
        usage(stderr);
        return 2;
    }
    if (clef_quantize_release(src, dst, &p) != CLEF_OK) {
        fprintf(stderr, "clef quantize: %s\n", clef_last_error());
        return 1;
    }
    printf("clef quantize: wrote %s (%s) from %s\n", dst, clef_quantize_target_name(p.target),
           src);
    return 0;
}
