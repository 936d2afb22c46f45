/*
 * cli_util.c — shared helpers of the `clef` subcommands (see cli_util.h).
 */
#include "cli_util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_parse_int(const char *cmd, const char *flag, const char *text, long min, long max, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < min || v > max) {
        fprintf(stderr, "clef %s: %s expects an integer from %ld to %ld, got '%s'\n", cmd, flag, min,
                max, text);
        return 2;
    }
    *out = (int)v;
    return 0;
}

/* Read f to its end; 0 ok, 1 too large, -1 read error or out of memory. */
static int read_stream(FILE *f, char **out, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return -1;
    for (;;) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
        if (n == cap) {
            if (cap >= CLI_MAX_INPUT_BYTES) {
                free(buf);
                return 1;
            }
            char *bigger = realloc(buf, cap * 2 + 1);
            if (!bigger) {
                free(buf);
                return -1;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    if (ferror(f)) {
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

int cli_read_input(const char *cmd, const char *what, const char *path, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int from_stdin = !strcmp(path, "-");
    FILE *f = from_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "clef %s: %s '%s': %s\n", cmd, what, path, strerror(errno));
        return 1;
    }
    int rc = read_stream(f, out, len);
    int read_errno = errno;
    if (!from_stdin)
        fclose(f);
    if (rc == 1)
        fprintf(stderr, "clef %s: %s '%s' is larger than %zu bytes\n", cmd, what,
                from_stdin ? "stdin" : path, CLI_MAX_INPUT_BYTES);
    else if (rc < 0)
        fprintf(stderr, "clef %s: %s '%s': cannot read: %s\n", cmd, what,
                from_stdin ? "stdin" : path, strerror(read_errno));
    return rc ? 1 : 0;
}

int cli_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void cli_json_string(FILE *out, const char *s) { cli_json_string_n(out, s, strlen(s)); }

void cli_json_string_n(FILE *out, const char *s, size_t len) {
    fputc('"', out);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(out, "\\%c", c);
        else if (c < 0x20)
            fprintf(out, "\\u%04x", c);
        else
            fputc(c, out);
    }
    fputc('"', out);
}

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

void cli_report_device_memory(const char *cmd, const clef_model *model, const clef_context *ctx) {
    clef_memory_info mm, cm = {0};
    if (clef_model_memory(model, &mm) != CLEF_OK || (ctx && clef_context_memory(ctx, &cm) != CLEF_OK)) {
        fprintf(stderr, "clef %s: device memory unknown: %s\n", cmd, clef_last_error());
        return;
    }
    fprintf(stderr, "clef %s: %s: model %.1f MiB resident (weights %.1f MiB; peak %.1f MiB)",
            cmd, clef_model_device(model), mib(mm.resident), mib(mm.weights), mib(mm.peak));
    if (ctx)
        fprintf(stderr, ", context %.1f MiB resident (peak %.1f MiB); together %.1f MiB, "
                "peak at most %.1f MiB", mib(cm.resident), mib(cm.peak),
                mib(mm.resident + cm.resident), mib(mm.peak + cm.peak));
    fprintf(stderr, "; device %.2f of %.2f GiB in use (all processes)\n",
            mib(mm.device_used) / 1024.0, mib(mm.device_total) / 1024.0);
}

int cli_parse_profile(const char *cmd, const char *name, clef_profile *out) {
    if (!strcmp(name, "resident"))
        *out = CLEF_PROFILE_RESIDENT;
    else if (!strcmp(name, "host-embed"))
        *out = CLEF_PROFILE_HOST_EMBED;
    else if (!strcmp(name, "24gb"))
        *out = CLEF_PROFILE_24GB;
    else if (!strcmp(name, "16gb"))
        *out = CLEF_PROFILE_16GB;
    else {
        fprintf(stderr, "clef %s: --profile expects 'resident', 'host-embed', '24gb' or '16gb', got '%s'\n", cmd,
                name);
        return 2;
    }
    return 0;
}
