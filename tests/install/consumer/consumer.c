/*
 * consumer.c — a program outside the clef tree, built only against the INSTALLED libclef
 * (include/clef.h through pkg-config or find_package(clef)). It loads a release, decides one
 * record read from a file and prints the answer body; tests/install/check_install.sh builds
 * it both ways and compares the answer with the reference answer of the demo release.
 */
#include <clef.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n + 4096 > cap) {
            char *grown = realloc(buf, cap = 2 * cap + 4096);
            if (!grown) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = grown;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: consumer RELEASE_DIR RECORD_JSON\n");
        return 2;
    }
    size_t len = 0;
    char *record = read_file(argv[2], &len);
    if (!record) {
        fprintf(stderr, "consumer: cannot read %s\n", argv[2]);
        return 1;
    }
    clef_model_params mp = clef_model_default_params();
    mp.n_threads = 1;
    clef_model *model = NULL;
    int st = clef_model_load(argv[1], &mp, &model);
    if (st != CLEF_OK) {
        fprintf(stderr, "consumer: %s: %s\n", clef_status_str(st), clef_last_error());
        free(record);
        return 1;
    }
    char *answer = NULL;
    st = clef_model_decide(model, record, len, &answer);
    if (st == CLEF_OK)
        printf("%s\n", answer);
    else
        fprintf(stderr, "consumer: %s: %s\n", clef_status_str(st), clef_last_error());
    clef_string_free(answer);
    clef_model_free(model);
    free(record);
    fprintf(stderr, "consumer: libclef %s\n", clef_version());
    return st == CLEF_OK ? 0 : 1;
}
