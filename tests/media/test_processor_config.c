/*
 * test_processor_config.c — the image processor's settings from a release's processor config
 * files, against what transformers' Qwen2VLImageProcessorPil reads from the same files
 * (configs.txt from scripts/media/make_processor_fixtures.py): Qwen3.5's flat
 * preprocessor_config.json, legacy min_pixels / max_pixels keys overriding size, and
 * transformers 5's processor_config.json with a nested "image_processor" (one mean / std for
 * all channels, another rescale_factor). Then the refusals (settings clef does not implement,
 * mistyped fields, min over max) and clef_processor_config_load on release directories: the
 * demo release (no processor file: defaults with the vision config's patch 4) and one whose
 * processor file disagrees with its vision config.
 */
#include "clef.h"
#include "core/io.h"
#include "media/processor_config.h"
#include "release/config.h"
#include "test.h"

#include <stdlib.h>
#include <unistd.h>

static void parse_triple(const char *text, float out[3]) {
    for (int c = 0; c < 3; c++) {
        out[c] = strtof(text, (char **)&text);
        if (*text == ',')
            text++;
    }
}

static void check_against_transformers(const char *dir) {
    char path[1024], name[128], mean_s[256], std_s[256];
    long long patch, temporal, merge, min_px, max_px;
    double rescale;
    snprintf(path, sizeof path, "%s/configs.txt", dir);
    FILE *list = fopen(path, "r");
    CHECK_MSG(list != NULL, "cannot open %s", path);
    if (!list)
        return;
    int n = 0;
    while (fscanf(list, "%127s %lld %lld %lld %lld %lld %255s %255s %lf", name, &patch, &temporal,
                  &merge, &min_px, &max_px, mean_s, std_s, &rescale) == 9) {
        snprintf(path, sizeof path, "%s/%s", dir, name);
        char *text = NULL;
        size_t len = 0;
        CHECK_EQ_INT(clef_read_file(path, 1 << 20, &text, &len), CLEF_OK);
        clef_image_processor_params p;
        clef_image_processor_default_params(&p);
        int st = clef_processor_config_parse(text, len, name, &p);
        CHECK_MSG(st == CLEF_OK, "%s: %s", name, clef_last_error());
        CHECK_EQ_INT(p.patch_size, patch);
        CHECK_EQ_INT(p.temporal_patch_size, temporal);
        CHECK_EQ_INT(p.merge_size, merge);
        CHECK_EQ_INT(p.min_pixels, min_px);
        CHECK_EQ_INT(p.max_pixels, max_px);
        float mean[3], std[3];
        parse_triple(mean_s, mean);
        parse_triple(std_s, std);
        for (int c = 0; c < 3; c++) {
            CHECK_MSG(p.image_mean[c] == mean[c], "%s: mean[%d] %.9g, transformers %.9g", name, c,
                      p.image_mean[c], mean[c]);
            CHECK_MSG(p.image_std[c] == std[c], "%s: std[%d] %.9g, transformers %.9g", name, c,
                      p.image_std[c], std[c]);
        }
        CHECK_MSG(p.rescale_factor == rescale, "%s: rescale %.17g, transformers %.17g", name,
                  p.rescale_factor, rescale);
        free(text);
        n++;
    }
    fclose(list);
    CHECK_EQ_INT(n, 3);
}

static void check_refusals(void) {
    static const struct {
        const char *text;
        int status;
        const char *names;
    } cases[] = {
        {"{\"do_normalize\": false}", CLEF_ERR_UNSUPPORTED, "do_normalize"},
        {"{\"do_convert_rgb\": false}", CLEF_ERR_UNSUPPORTED, "do_convert_rgb"},
        {"{\"resample\": 2}", CLEF_ERR_UNSUPPORTED, "resample"},
        {"{\"size\": 5}", CLEF_ERR_CONFIG_INVALID, "size"},
        {"{\"patch_size\": \"16\"}", CLEF_ERR_CONFIG_INVALID, "patch_size"},
        {"{\"patch_size\": 0}", CLEF_ERR_CONFIG_INVALID, "patch_size"},
        {"{\"size\": {\"shortest_edge\": 5000, \"longest_edge\": 4000}}", CLEF_ERR_CONFIG_INVALID,
         "min_pixels"},
        {"{\"image_std\": [0.5, 0, 0.5]}", CLEF_ERR_CONFIG_INVALID, "image_std"},
        {"{\"image_mean\": [0.5, 0.5]}", CLEF_ERR_CONFIG_INVALID, "image_mean"},
        {"{\"rescale_factor\": -1}", CLEF_ERR_CONFIG_INVALID, "rescale_factor"},
        {"[1, 2]", CLEF_ERR_CONFIG_INVALID, "root"},
        {"{\"size\": ", CLEF_ERR_CONFIG_INVALID, "not valid JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        clef_image_processor_params p, before;
        clef_image_processor_default_params(&p);
        before = p;
        int st = clef_processor_config_parse(cases[i].text, strlen(cases[i].text),
                                             "preprocessor_config.json", &p);
        CHECK_MSG(st == cases[i].status, "%s: status %d, expected %d", cases[i].text, st,
                  cases[i].status);
        CHECK_MSG(strstr(clef_last_error(), cases[i].names) &&
                      strstr(clef_last_error(), "preprocessor_config.json"),
                  "%s: message '%s' should name %s and the file", cases[i].text,
                  clef_last_error(), cases[i].names);
        CHECK_MSG(memcmp(&p, &before, sizeof p) == 0, "%s: params changed on failure",
                  cases[i].text);
    }
}

static void check_release_dirs(void) {
    char *text = NULL;
    size_t len = 0;
    CHECK_EQ_INT(clef_read_file("demo/clef-demo/config.json", 1 << 20, &text, &len), CLEF_OK);
    clef_release_config cfg;
    memset(&cfg, 0, sizeof cfg);
    int st = text ? clef_config_parse(text, len, "config.json", &cfg) : -1;
    CHECK_MSG(st == CLEF_OK, "demo config: %s", clef_last_error());
    free(text);
    if (st != CLEF_OK)
        return;
    clef_image_processor_params p;
    st = clef_processor_config_load("demo/clef-demo", &cfg.vision, &p);
    CHECK_MSG(st == CLEF_OK, "demo: %s", clef_last_error());
    CHECK_EQ_INT(p.patch_size, cfg.vision.patch_size);
    CHECK_EQ_INT(p.patch_size, 4);
    CHECK_EQ_INT(p.min_pixels, 65536);
    CHECK_EQ_INT(p.max_pixels, 16777216);

    char dir[] = "/tmp/clef_procfg_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    snprintf(path, sizeof path, "%s/processor_config.json", dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs("{\"image_processor\": {\"patch_size\": 16, \"size\": {\"shortest_edge\": 1024, "
              "\"longest_edge\": 4096}}}",
              f);
        fclose(f);
    }
    st = clef_processor_config_load(dir, &cfg.vision, &p);
    CHECK_MSG(st == CLEF_ERR_CONFIG_INVALID && strstr(clef_last_error(), "vision_config"),
              "a processor patch 16 over a patch-4 tower: status %d (%s)", st, clef_last_error());
    /* preprocessor_config.json wins over processor_config.json */
    snprintf(path, sizeof path, "%s/preprocessor_config.json", dir);
    f = fopen(path, "w");
    if (f) {
        fputs("{\"patch_size\": 4, \"min_pixels\": 1024, \"max_pixels\": 8192}", f);
        fclose(f);
    }
    st = clef_processor_config_load(dir, &cfg.vision, &p);
    CHECK_MSG(st == CLEF_OK, "preprocessor_config.json first: %s", clef_last_error());
    CHECK_EQ_INT(p.max_pixels, 8192);
    CHECK_EQ_INT(p.min_pixels, 1024);
    unlink(path);
    snprintf(path, sizeof path, "%s/processor_config.json", dir);
    unlink(path);
    rmdir(dir);
    clef_config_free(&cfg);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s fixtures/processor\n", argv[0]);
        return 2;
    }
    check_against_transformers(argv[1]);
    check_refusals();
    check_release_dirs();
    return test_summary();
}
