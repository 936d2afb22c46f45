/*
 * processor_config.c — the image processor's settings from the release's processor config
 * files (see processor_config.h), with the engine's own JSON reader.
 */
#include "media/processor_config.h"

#include "core/error.h"
#include "core/io.h"
#include "json/json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int get_int(const char *file, const json_value *obj, const char *key, int64_t min,
                   int64_t max, int64_t *out) {
    const json_value *v = json_object_get(obj, key);
    if (!v || v->type == JSON_NULL)
        return CLEF_OK;
    int64_t x;
    if (!json_get_int64(v, &x) || x < min || x > max)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "file '%s': %s must be an integer in [%lld, %lld], got %s", file, key,
                         (long long)min, (long long)max,
                         v->type == JSON_NUMBER ? v->u.num.text : json_type_name(v->type));
    *out = x;
    return CLEF_OK;
}

static int get_triple(const char *file, const json_value *obj, const char *key, int nonzero,
                      float out[3]) {
    const json_value *v = json_object_get(obj, key);
    if (!v || v->type == JSON_NULL)
        return CLEF_OK;
    double x[3];
    if (v->type == JSON_NUMBER && json_get_double(v, &x[0])) { /* one value for all channels */
        x[1] = x[2] = x[0];
    } else if (v->type != JSON_ARRAY || v->u.arr.count != 3 ||
               !json_get_double(v->u.arr.items[0], &x[0]) ||
               !json_get_double(v->u.arr.items[1], &x[1]) ||
               !json_get_double(v->u.arr.items[2], &x[2])) {
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "file '%s': %s must be a number or a list of 3 numbers", file, key);
    }
    for (int c = 0; c < 3; c++) {
        if (!isfinite(x[c]) || (nonzero && (float)x[c] == 0.0f))
            return clef_fail(CLEF_ERR_CONFIG_INVALID, "file '%s': %s[%d] is %g", file, key, c,
                             x[c]);
        out[c] = (float)x[c]; /* numpy makes float32 arrays of them */
    }
    return CLEF_OK;
}

static int refuse_false(const char *file, const json_value *obj, const char *key) {
    const json_value *v = json_object_get(obj, key);
    if (v && v->type == JSON_FALSE)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "file '%s': %s = false is not supported", file,
                         key);
    return CLEF_OK;
}

int clef_processor_config_parse(const char *text, size_t len, const char *file,
                                clef_image_processor_params *params) {
    json_doc *doc = NULL;
    json_parse_opts opts = {0};
    opts.max_depth = 32;
    json_error perr;
    int prc = json_parse(text, len, &opts, &doc, &perr);
    if (prc != 0) {
        return prc == JSON_PARSE_NOMEM
                   ? clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': no memory to parse", file)
                   : clef_fail(CLEF_ERR_CONFIG_INVALID,
                               "file '%s' is not valid JSON: %s at line %d column %d", file,
                               perr.msg, perr.line, perr.column);
    }
    const json_value *root = json_doc_root(doc);
    int rc = CLEF_OK;
    if (root->type != JSON_OBJECT) {
        rc = clef_fail(CLEF_ERR_CONFIG_INVALID, "file '%s': the root is not an object", file);
        goto done;
    }
    /* processor_config.json (transformers 5) nests the image processor's settings. */
    const json_value *nested = json_object_get(root, "image_processor");
    const json_value *cfg = nested && nested->type == JSON_OBJECT ? nested : root;
    clef_image_processor_params p = *params;
    const json_value *size = json_object_get(cfg, "size");
    if (size && size->type != JSON_NULL && size->type != JSON_OBJECT) {
        rc = clef_fail(CLEF_ERR_CONFIG_INVALID, "file '%s': size must be an object", file);
        goto done;
    }
    const int64_t big = (int64_t)1 << 40;
    if ((size && (rc = get_int(file, size, "shortest_edge", 1, big, &p.min_pixels)) != CLEF_OK) ||
        (size && (rc = get_int(file, size, "longest_edge", 1, big, &p.max_pixels)) != CLEF_OK) ||
        (rc = get_int(file, cfg, "min_pixels", 1, big, &p.min_pixels)) != CLEF_OK ||
        (rc = get_int(file, cfg, "max_pixels", 1, big, &p.max_pixels)) != CLEF_OK ||
        (rc = get_int(file, cfg, "patch_size", 1, 1024, &p.patch_size)) != CLEF_OK ||
        (rc = get_int(file, cfg, "temporal_patch_size", 1, 64, &p.temporal_patch_size)) !=
            CLEF_OK ||
        (rc = get_int(file, cfg, "merge_size", 1, 64, &p.merge_size)) != CLEF_OK ||
        (rc = get_triple(file, cfg, "image_mean", 0, p.image_mean)) != CLEF_OK ||
        (rc = get_triple(file, cfg, "image_std", 1, p.image_std)) != CLEF_OK ||
        (rc = refuse_false(file, cfg, "do_resize")) != CLEF_OK ||
        (rc = refuse_false(file, cfg, "do_rescale")) != CLEF_OK ||
        (rc = refuse_false(file, cfg, "do_normalize")) != CLEF_OK ||
        (rc = refuse_false(file, cfg, "do_convert_rgb")) != CLEF_OK)
        goto done;
    if (p.min_pixels > p.max_pixels) {
        rc = clef_fail(CLEF_ERR_CONFIG_INVALID,
                       "file '%s': min_pixels %lld is over max_pixels %lld", file,
                       (long long)p.min_pixels, (long long)p.max_pixels);
        goto done;
    }
    const json_value *rf = json_object_get(cfg, "rescale_factor");
    if (rf && rf->type != JSON_NULL) {
        double x;
        if (!json_get_double(rf, &x) || !isfinite(x) || x <= 0) {
            rc = clef_fail(CLEF_ERR_CONFIG_INVALID,
                           "file '%s': rescale_factor must be a positive number", file);
            goto done;
        }
        p.rescale_factor = x;
    }
    int64_t resample = 3;
    if ((rc = get_int(file, cfg, "resample", 0, 5, &resample)) != CLEF_OK)
        goto done;
    if (resample != 3) {
        rc = clef_fail(CLEF_ERR_UNSUPPORTED,
                       "file '%s': resample %lld is not supported (clef resizes bicubic, 3)",
                       file, (long long)resample);
        goto done;
    }
    *params = p;
done:
    json_doc_free(doc);
    return rc;
}

static int load_file(const char *dir, const char *name, clef_image_processor_params *params,
                     int *found) {
    char *path = clef_path_join(dir, name);
    if (!path)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "no memory for a path");
    *found = 0;
    int rc = CLEF_OK;
    if (access(path, F_OK) == 0) {
        *found = 1;
        char *text = NULL;
        size_t len = 0;
        rc = clef_read_file(path, (size_t)1 << 20, &text, &len);
        if (rc == CLEF_OK)
            rc = clef_processor_config_parse(text, len, name, params);
        free(text);
    }
    free(path);
    return rc;
}

int clef_processor_config_load(const char *release_dir, const clef_vision_config *vision,
                               clef_image_processor_params *params) {
    clef_image_processor_default_params(params);
    int rc = clef_image_processor_params_from_vision(vision, params);
    if (rc != CLEF_OK)
        return rc;
    const clef_image_processor_params from_vision = *params;
    int found = 0;
    rc = load_file(release_dir, "preprocessor_config.json", params, &found);
    if (rc == CLEF_OK && !found)
        rc = load_file(release_dir, "processor_config.json", params, &found);
    if (rc != CLEF_OK)
        return rc;
    if (params->patch_size != from_vision.patch_size ||
        params->temporal_patch_size != from_vision.temporal_patch_size ||
        params->merge_size != from_vision.merge_size)
        return clef_fail(CLEF_ERR_CONFIG_INVALID,
                         "the processor config says patch %lld / temporal %lld / merge %lld, "
                         "config.json's vision_config says %lld / %lld / %lld",
                         (long long)params->patch_size, (long long)params->temporal_patch_size,
                         (long long)params->merge_size, (long long)from_vision.patch_size,
                         (long long)from_vision.temporal_patch_size,
                         (long long)from_vision.merge_size);
    return CLEF_OK;
}
