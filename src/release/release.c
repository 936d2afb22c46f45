/*
 * release.c — clef_release_open: the order in which a release directory is checked, and the
 * tensor table it produces (see release.h for the contract, formats.md for the rules).
 *
 * Open, step by step (the first failure returns; messages name file and tensor):
 *   1. the directory, config.json, joint_head_config.json
 *   2. complete.json when present: every listed file exists with its size (SHA-256: verify)
 *   3. the index (or model.safetensors): shard names stay inside the directory; every shard's
 *      header parses and tiles its data area; index and shards agree both ways; total_size
 *   4. joint_head.safetensors
 *   5. the tensor table: release names -> engine names, no engine name twice, mtp.* dropped
 *   6. model checks (unless skip_model_checks): every needed tensor present with its dtype
 *      and shape, nothing unknown (unless allowed), scale and NF4 tables sane. With
 *      keep_going these are collected as problems instead of failing.
 *
 * Invariants of an opened release: files[] stay open (fd per file) until free; every
 * tensors[i] lies inside files[tensors[i].file] with n_bytes = elements x dtype size.
 */
#include "release/release.h"

#include "core/error.h"
#include "core/io.h"
#include "core/shape.h"
#include "release/config.h"
#include "release/expected.h"
#include "release/index.h"
#include "release/manifest.h"
#include "release/names.h"
#include "release/path.h"
#include "release/safetensors.h"
#include "release/values.h"

#include <errno.h>
#include <omp.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define CONFIG_NAME "config.json"
#define HEAD_CONFIG_NAME "joint_head_config.json"
#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define HEAD_WEIGHTS_NAME "joint_head.safetensors"
#define MANIFEST_NAME "complete.json"
#define SMALL_FILE_CAP ((size_t)64 << 20) /* configs, index, manifest: far below this */

typedef struct release_file {
    char *name;          /* relative to the directory */
    clef_file file;
    st_header header;    /* kept until the table is built */
    int is_head;
    size_t n_tensors;
    uint64_t tensor_bytes;
} release_file;

struct clef_release {
    char *dir;
    char *dir_real;
    clef_release_config config;
    release_file *files;
    size_t n_files;
    clef_tensor_info *tensors;      /* sorted by engine name; name / stored_name owned */
    size_t n_tensors;
    clef_release_problem *problems; /* message owned */
    size_t n_problems;
    clef_release_summary summary;
    int problems_oom;               /* a problem could not be recorded: fail the open */
};

clef_release_opts clef_release_default_opts(void) {
    clef_release_opts o;
    memset(&o, 0, sizeof o);
    return o;
}

/* ---- small helpers ------------------------------------------------------------------------ */

/* Present as anything at all (a dangling link or a FIFO included): an optional file that is
 * there is opened, and refused by the open rules of path.h, rather than skipped. */
static int file_exists(const char *dir, const char *name) { return clef_release_has_file(dir, name); }

static int read_small(const clef_release *rel, const char *name, char **text, size_t *len) {
    return clef_release_read_small(rel->dir, rel->dir_real, name, SMALL_FILE_CAP,
                                   CLEF_ERR_FILE_MISSING, text, len);
}

/* Record the current error message as a problem. Returns status; if memory runs out the
 * problem is lost and rel->problems_oom makes the open fail. */
static int add_problem(clef_release *rel, int status) {
    clef_release_problem *p = realloc(rel->problems, (rel->n_problems + 1) * sizeof *p);
    if (!p) {
        rel->problems_oom = 1;
        return status;
    }
    rel->problems = p;
    p[rel->n_problems].status = status;
    p[rel->n_problems].message = strdup(clef_last_error());
    if (!p[rel->n_problems].message) {
        rel->problems_oom = 1;
        return status;
    }
    rel->n_problems++;
    return status;
}

static int problem(clef_release *rel, int status, const char *fmt, ...) CLEF_PRINTF(3, 4);
static int problem(clef_release *rel, int status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    clef_fail(status, "%s", msg);
    return add_problem(rel, status);
}

static int by_engine_name(const void *a, const void *b) {
    return strcmp(((const clef_tensor_info *)a)->name, ((const clef_tensor_info *)b)->name);
}

const clef_tensor_info *clef_release_find(const clef_release *rel, const char *engine_name) {
    if (!rel || !engine_name)
        return NULL;
    clef_tensor_info key;
    key.name = engine_name;
    return bsearch(&key, rel->tensors, rel->n_tensors, sizeof key, by_engine_name);
}

/* ---- files ---------------------------------------------------------------------------------- */

static int add_file(clef_release *rel, const char *name, const char *source, int missing_status,
                    int is_head) {
    release_file *files = realloc(rel->files, (rel->n_files + 1) * sizeof *files);
    if (!files)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    rel->files = files;
    release_file *f = &files[rel->n_files];
    memset(f, 0, sizeof *f);
    f->file.fd = -1;
    f->is_head = is_head;
    f->name = strdup(name);
    if (!f->name)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    rel->n_files++;
    int rc = clef_release_open_file(rel->dir, rel->dir_real, name, source, missing_status, &f->file);
    if (rc != CLEF_OK)
        return rc;
    rc = st_read_header(&f->file, name, &f->header);
    if (rc != CLEF_OK)
        return rc;
    f->n_tensors = f->header.n_tensors;
    for (size_t i = 0; i < f->header.n_tensors; i++)
        f->tensor_bytes += f->header.tensors[i].end - f->header.tensors[i].begin;
    return CLEF_OK;
}

/* Index and shards must agree both ways, and total_size must be the sum of tensor bytes. */
static int check_index(clef_release *rel, const clef_index *idx, size_t first, size_t last) {
    uint64_t total = 0;
    for (size_t fi = first; fi < last; fi++) {
        const release_file *f = &rel->files[fi];
        for (size_t i = 0; i < f->header.n_tensors; i++) {
            const st_tensor *t = &f->header.tensors[i];
            const clef_index_entry *e = clef_index_find(idx, t->name);
            if (!e)
                return clef_fail(CLEF_ERR_INDEX_UNLISTED,
                                 "file '%s': tensor '%s' is not listed in %s", f->name, t->name,
                                 INDEX_NAME);
            if (strcmp(e->shard, f->name) != 0)
                return clef_fail(CLEF_ERR_INDEX_UNLISTED,
                                 "file '%s': tensor '%s' is listed in %s under '%s', not this "
                                 "shard",
                                 f->name, t->name, INDEX_NAME, e->shard);
            total += t->end - t->begin;
        }
    }
    /* Every entry must be found in its shard. The pass above mapped each shard tensor to a
     * distinct entry (names are unique within a header, and an entry names one shard), so
     * equal counts mean every entry was found; only on a mismatch look for the missing one. */
    size_t n_shard_tensors = 0;
    for (size_t fi = first; fi < last; fi++)
        n_shard_tensors += rel->files[fi].header.n_tensors;
    for (size_t k = 0; k < idx->count && n_shard_tensors != idx->count; k++) {
        const clef_index_entry *e = &idx->entries[k];
        int found = 0;
        for (size_t fi = first; fi < last && !found; fi++) {
            const release_file *f = &rel->files[fi];
            for (size_t i = 0; i < f->header.n_tensors && !found && !strcmp(f->name, e->shard); i++)
                found = strcmp(f->header.tensors[i].name, e->tensor) == 0;
        }
        if (!found)
            return clef_fail(CLEF_ERR_INDEX_TENSOR_ABSENT,
                             "file '%s' maps tensor '%s' to '%s', which does not hold it", INDEX_NAME,
                             e->tensor, e->shard);
    }
    if (total != idx->total_size)
        return clef_fail(CLEF_ERR_INDEX_TOTAL_SIZE,
                         "file '%s': metadata.total_size is %llu, the shards' tensors hold %llu bytes",
                         INDEX_NAME, (unsigned long long)idx->total_size, (unsigned long long)total);
    return CLEF_OK;
}

static int open_model_files(clef_release *rel) {
    if (!file_exists(rel->dir, INDEX_NAME)) {
        if (!file_exists(rel->dir, SINGLE_NAME))
            return clef_fail(CLEF_ERR_FILE_MISSING, "release '%s' has neither %s nor %s", rel->dir,
                             INDEX_NAME, SINGLE_NAME);
        return add_file(rel, SINGLE_NAME, NULL, CLEF_ERR_FILE_MISSING, 0);
    }
    rel->summary.sharded = 1;
    char *text = NULL;
    size_t len = 0;
    int rc = read_small(rel, INDEX_NAME, &text, &len);
    if (rc != CLEF_OK)
        return rc;
    clef_index idx;
    rc = clef_index_parse(text, len, INDEX_NAME, &idx);
    free(text);
    if (rc != CLEF_OK)
        return rc;
    rel->summary.index_total_size = idx.total_size;
    size_t first = rel->n_files;
    for (size_t i = 0; i < idx.n_shards && rc == CLEF_OK; i++)
        rc = add_file(rel, idx.shards[i], INDEX_NAME, CLEF_ERR_SHARD_MISSING, 0);
    if (rc == CLEF_OK)
        rc = check_index(rel, &idx, first, rel->n_files);
    clef_index_free(&idx);
    return rc;
}

/* ---- the tensor table ------------------------------------------------------------------------ */

static int build_table(clef_release *rel) {
    size_t total = 0;
    for (size_t fi = 0; fi < rel->n_files; fi++)
        total += rel->files[fi].header.n_tensors;
    rel->tensors = calloc(total ? total : 1, sizeof *rel->tensors);
    if (!rel->tensors)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t fi = 0; fi < rel->n_files; fi++) {
        release_file *f = &rel->files[fi];
        for (size_t i = 0; i < f->header.n_tensors; i++) {
            const st_tensor *s = &f->header.tensors[i];
            char *engine = NULL;
            clef_name_kind kind = clef_name_to_engine(s->name, f->is_head, &engine);
            if (!engine)
                return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
            if (kind == CLEF_NAME_IGNORED) {
                rel->summary.n_ignored++;
                rel->summary.ignored_bytes += s->end - s->begin;
                free(engine);
                continue;
            }
            clef_tensor_info *t = &rel->tensors[rel->n_tensors];
            t->name = engine;
            t->stored_name = strdup(s->name);
            if (!t->stored_name)
                return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
            rel->n_tensors++;
            t->dtype = s->dtype;
            t->n_dims = s->n_dims;
            memcpy(t->shape, s->shape, sizeof t->shape);
            t->offset = f->header.data_start + s->begin;
            t->n_bytes = s->end - s->begin;
            t->file = (int)fi;
        }
    }
    qsort(rel->tensors, rel->n_tensors, sizeof *rel->tensors, by_engine_name);
    for (size_t i = 1; i < rel->n_tensors; i++) {
        const clef_tensor_info *a = &rel->tensors[i - 1], *b = &rel->tensors[i];
        if (strcmp(a->name, b->name) == 0)
            return clef_fail(CLEF_ERR_ST_DUPLICATE_TENSOR,
                             "tensor '%s' appears twice: as '%s' in file '%s' and as '%s' in file "
                             "'%s'",
                             a->name, a->stored_name, rel->files[a->file].name, b->stored_name,
                             rel->files[b->file].name);
    }
    /* Headers are no longer needed: the table holds everything. */
    for (size_t fi = 0; fi < rel->n_files; fi++)
        st_header_free(&rel->files[fi].header);
    return CLEF_OK;
}

/* ---- model checks ---------------------------------------------------------------------------- */

static int lookup_dtype(void *user, const char *engine_name) {
    const clef_tensor_info *t = clef_release_find(user, engine_name);
    return t ? (int)t->dtype : -1;
}

static int shape_matches(const clef_tensor_info *t, const clef_expected_tensor *e) {
    if (e->n_dims == CLEF_SHAPE_ANY_1D)
        return t->n_dims == 1;
    if (e->n_dims == CLEF_SHAPE_SCALAR)
        return t->n_dims == 0 || (t->n_dims == 1 && t->shape[0] == 1);
    if (t->n_dims != e->n_dims)
        return 0;
    for (int i = 0; i < e->n_dims; i++)
        if (t->shape[i] != e->shape[i])
            return 0;
    return 1;
}

/* The INT8 ConvRot convention may come without quantization_config: recognise it by an I8
 * weight with a weight_scale next to it. */
static void detect_quant_from_tensors(clef_release *rel) {
    if (rel->config.quant.method != CLEF_QUANT_NONE)
        return;
    for (size_t i = 0; i < rel->n_tensors; i++) {
        const clef_tensor_info *t = &rel->tensors[i];
        size_t n = strlen(t->name);
        if (t->dtype != CLEF_DTYPE_I8 || n < 7 || strcmp(t->name + n - 7, ".weight") != 0)
            continue;
        char scale[600];
        snprintf(scale, sizeof scale, "%.*s.weight_scale", (int)(n - 7), t->name);
        if (clef_release_find(rel, scale)) {
            rel->config.quant.method = CLEF_QUANT_INT8_CONVROT;
            rel->config.quant.group_size = 256;
            rel->config.quant.from_tensors = 1;
            return;
        }
    }
}

static int check_values(clef_release *rel, const clef_tensor_info *t, const clef_expected_tensor *e) {
    if (e->check == CLEF_CHECK_NONE)
        return CLEF_OK;
    void *data = malloc(t->n_bytes ? (size_t)t->n_bytes : 1);
    if (!data)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory reading tensor '%s'", t->name);
    int rc = clef_release_read(rel, t, data);
    if (rc == CLEF_OK)
        rc = clef_check_tensor_values(t, data, e, rel->files[t->file].name);
    free(data);
    return rc;
}

/* Record every model-level problem (missing, dtype, shape, values, unexpected) on rel.
 * Returns CLEF_OK, or a hard failure (out of memory, I/O) that stops the open. */
static int check_model(clef_release *rel, const clef_release_opts *opts) {
    clef_expected_list list;
    int rc = clef_expected_build(&rel->config, lookup_dtype, rel, &list);
    if (rc != CLEF_OK)
        return rc;
    unsigned char *known = calloc(rel->n_tensors ? rel->n_tensors : 1, 1);
    if (!known) {
        clef_expected_free(&list);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    char want[128], got[128];
    int hard = CLEF_OK; /* out of memory or I/O: stop */
    for (size_t k = 0; k < list.count && hard == CLEF_OK; k++) {
        const clef_expected_tensor *e = &list.items[k];
        const clef_tensor_info *t = clef_release_find(rel, e->name);
        if (!t) {
            if (!e->optional)
                problem(rel, CLEF_ERR_TENSOR_MISSING,
                        "tensor '%s' is needed by the model but no file of release '%s' has it",
                        e->name, rel->dir);
            continue;
        }
        known[t - rel->tensors] = 1;
        const char *file = rel->files[t->file].name;
        if (!(e->dtype_mask & (1u << t->dtype))) {
            clef_dtype_mask_str(e->dtype_mask, want, sizeof want);
            problem(rel, CLEF_ERR_TENSOR_DTYPE,
                    "file '%s': tensor '%s' is %s; its role allows %s", file, t->stored_name,
                    clef_dtype_name(t->dtype), want);
            continue;
        }
        if (!shape_matches(t, e)) {
            clef_shape_str(t->shape, t->n_dims, got, sizeof got);
            if (e->n_dims >= 0)
                clef_shape_str(e->shape, e->n_dims, want, sizeof want);
            else
                snprintf(want, sizeof want, "%s", e->n_dims == CLEF_SHAPE_SCALAR ? "[] or [1]" : "1-D");
            problem(rel, CLEF_ERR_TENSOR_SHAPE,
                    "file '%s': tensor '%s' has shape %s, config says %s", file, t->stored_name,
                    got, want);
            continue;
        }
        int vrc = check_values(rel, t, e);
        if (vrc == CLEF_ERR_OUT_OF_MEMORY || vrc == CLEF_ERR_IO || vrc == CLEF_ERR_ST_TRUNCATED)
            hard = vrc;
        else if (vrc != CLEF_OK)
            add_problem(rel, vrc);
    }
    for (size_t i = 0; i < rel->n_tensors && hard == CLEF_OK; i++) {
        if (known[i])
            continue;
        const clef_tensor_info *t = &rel->tensors[i];
        rel->summary.n_unknown++;
        problem(rel, CLEF_ERR_TENSOR_UNEXPECTED,
                "file '%s': tensor '%s' is not one the model knows%s",
                rel->files[t->file].name, t->stored_name,
                opts->allow_unknown_tensors ? " (allowed)" : "");
    }
    free(known);
    clef_expected_free(&list);
    if (hard == CLEF_OK && rel->problems_oom)
        hard = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory recording the release's problems");
    return hard;
}

/* ---- weight values (inspect --verify) -------------------------------------------------------- */

#define SCAN_PIECE ((size_t)16 << 20)

int clef_release_scan_values(clef_release *rel, int keep_going, clef_progress_fn progress,
                             void *progress_user) {
    if (!rel)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_release_scan_values: rel is NULL");
    unsigned char *buf = malloc(SCAN_PIECE);
    if (!buf)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory scanning weights");
    int first_rc = CLEF_OK;
    rel->summary.values_scanned = 0;
    for (size_t i = 0; i < rel->n_tensors; i++) {
        const clef_tensor_info *t = &rel->tensors[i];
        size_t esize = clef_dtype_size(t->dtype);
        if (t->dtype != CLEF_DTYPE_BF16 && t->dtype != CLEF_DTYPE_F16 &&
            t->dtype != CLEF_DTYPE_F32 && t->dtype != CLEF_DTYPE_F8_E4M3)
            continue;
        if (progress)
            progress(progress_user, t->stored_name, i, rel->n_tensors, t->n_bytes);
        const release_file *f = &rel->files[t->file];
        size_t piece = SCAN_PIECE - SCAN_PIECE % esize;
        int rc = CLEF_OK;
        for (uint64_t done = 0; done < t->n_bytes && rc == CLEF_OK; done += piece) {
            size_t n = t->n_bytes - done < piece ? (size_t)(t->n_bytes - done) : piece;
            rc = clef_file_pread(&f->file, buf, n, t->offset + done);
            if (rc == CLEF_OK)
                rc = clef_check_weight_finite(t, f->name, buf, n, done / esize);
        }
        rel->summary.values_scanned++;
        if (rc == CLEF_OK)
            continue;
        if (rc != CLEF_ERR_TENSOR_VALUES) { /* I/O: stop */
            free(buf);
            return rc;
        }
        add_problem(rel, rc);
        if (first_rc == CLEF_OK)
            first_rc = rc;
        if (!keep_going)
            break;
    }
    free(buf);
    if (progress)
        progress(progress_user, NULL, rel->n_tensors, rel->n_tensors, 0);
    if (rel->problems_oom)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory recording the release's problems");
    if (first_rc != CLEF_OK && !keep_going)
        return clef_fail(first_rc, "%s", rel->problems[rel->n_problems - 1].message);
    rel->summary.values_checked = 1;
    return CLEF_OK;
}

/* ---- open / free ----------------------------------------------------------------------------- */

static int load_configs(clef_release *rel, const clef_release_opts *opts) {
    char *text = NULL;
    size_t len = 0;
    int rc = read_small(rel, CONFIG_NAME, &text, &len);
    if (rc != CLEF_OK)
        return rc;
    rc = clef_config_parse(text, len, CONFIG_NAME, &rel->config);
    free(text);
    if (rc != CLEF_OK)
        return rc;
    if (!file_exists(rel->dir, HEAD_CONFIG_NAME) && opts->skip_model_checks)
        return CLEF_OK;
    rc = read_small(rel, HEAD_CONFIG_NAME, &text, &len);
    if (rc != CLEF_OK)
        return rc;
    rc = clef_head_config_parse(text, len, HEAD_CONFIG_NAME, &rel->config);
    free(text);
    return rc;
}

static int check_manifest(clef_release *rel, const clef_release_opts *opts) {
    if (!file_exists(rel->dir, MANIFEST_NAME))
        return CLEF_OK;
    char *text = NULL;
    size_t len = 0;
    int rc = read_small(rel, MANIFEST_NAME, &text, &len);
    if (rc != CLEF_OK)
        return rc;
    clef_manifest m;
    rc = clef_manifest_parse(text, len, MANIFEST_NAME, &m);
    free(text);
    if (rc != CLEF_OK)
        return rc;
    rc = clef_manifest_check(&m, rel->dir, rel->dir_real, opts->verify_hashes, opts->progress,
                             opts->progress_user);
    rel->summary.has_manifest = 1;
    rel->summary.manifest_files = m.count;
    rel->summary.manifest_verified = rc == CLEF_OK && opts->verify_hashes;
    clef_manifest_free(&m);
    return rc;
}

static int open_steps(clef_release *rel, const clef_release_opts *opts) {
    int rc;
    if ((rc = load_configs(rel, opts)) || (rc = check_manifest(rel, opts)) ||
        (rc = open_model_files(rel)))
        return rc;
    if (file_exists(rel->dir, HEAD_WEIGHTS_NAME) || (rel->config.head.present && !opts->skip_model_checks))
        if ((rc = add_file(rel, HEAD_WEIGHTS_NAME, NULL, CLEF_ERR_FILE_MISSING, 1)))
            return rc;
    if ((rc = build_table(rel)))
        return rc;
    detect_quant_from_tensors(rel);
    rel->summary.has_tokenizer = file_exists(rel->dir, "tokenizer.json");
    rel->summary.has_tokenizer_config = file_exists(rel->dir, "tokenizer_config.json");
    if (opts->skip_model_checks)
        return CLEF_OK;
    if ((rc = check_model(rel, opts)) != CLEF_OK)
        return rc;
    if (rel->n_problems > 0 && !opts->keep_going) {
        /* Report the first problem, with a count of the others. */
        size_t real = 0;
        const clef_release_problem *first = NULL;
        for (size_t i = 0; i < rel->n_problems; i++)
            if (!(opts->allow_unknown_tensors && rel->problems[i].status == CLEF_ERR_TENSOR_UNEXPECTED)) {
                if (!first)
                    first = &rel->problems[i];
                real++;
            }
        if (first) {
            if (real > 1)
                return clef_fail(first->status, "%s (and %zu more problems)", first->message, real - 1);
            return clef_fail(first->status, "%s", first->message);
        }
    }
    return CLEF_OK;
}

int clef_release_open(const char *dir, const clef_release_opts *opts, clef_release **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_release_open: out is NULL");
    *out = NULL;
    if (!dir)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_release_open: dir is NULL");
    clef_release_opts defaults = clef_release_default_opts();
    if (!opts)
        opts = &defaults;
    clef_release *rel = calloc(1, sizeof *rel);
    if (!rel)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    int rc;
    rel->dir = strdup(dir);
    rel->dir_real = realpath(dir, NULL);
    if (!rel->dir) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
        goto err;
    }
    struct stat st;
    if (!rel->dir_real || stat(rel->dir_real, &st) != 0 || !S_ISDIR(st.st_mode)) {
        rc = clef_fail(errno == ENOENT || !rel->dir_real ? CLEF_ERR_FILE_MISSING : CLEF_ERR_IO,
                       "release directory '%s' does not exist or is not a directory", dir);
        goto err;
    }
    rc = open_steps(rel, opts);
    if (rc != CLEF_OK)
        goto err;
    *out = rel;
    return CLEF_OK;
err:
    clef_release_free(rel);
    return rc;
}

void clef_release_free(clef_release *rel) {
    if (!rel)
        return;
    for (size_t i = 0; i < rel->n_files; i++) {
        clef_file_close(&rel->files[i].file);
        st_header_free(&rel->files[i].header);
        free(rel->files[i].name);
    }
    free(rel->files);
    for (size_t i = 0; i < rel->n_tensors; i++) {
        free((char *)rel->tensors[i].name);
        free((char *)rel->tensors[i].stored_name);
    }
    free(rel->tensors);
    for (size_t i = 0; i < rel->n_problems; i++)
        free((char *)rel->problems[i].message);
    free(rel->problems);
    clef_config_free(&rel->config);
    free(rel->dir);
    free(rel->dir_real);
    free(rel);
}

/* ---- accessors -------------------------------------------------------------------------------- */

const clef_release_config *clef_release_get_config(const clef_release *rel) {
    return rel ? &rel->config : NULL;
}

size_t clef_release_tensor_count(const clef_release *rel) { return rel ? rel->n_tensors : 0; }

const clef_tensor_info *clef_release_tensor_at(const clef_release *rel, size_t i) {
    return rel && i < rel->n_tensors ? &rel->tensors[i] : NULL;
}

size_t clef_release_file_count(const clef_release *rel) { return rel ? rel->n_files : 0; }

const char *clef_release_file_name(const clef_release *rel, size_t i) {
    return rel && i < rel->n_files ? rel->files[i].name : NULL;
}

uint64_t clef_release_file_size(const clef_release *rel, size_t i) {
    return rel && i < rel->n_files ? rel->files[i].file.size : 0;
}

size_t clef_release_file_tensor_count(const clef_release *rel, size_t i) {
    return rel && i < rel->n_files ? rel->files[i].n_tensors : 0;
}

uint64_t clef_release_file_tensor_bytes(const clef_release *rel, size_t i) {
    return rel && i < rel->n_files ? rel->files[i].tensor_bytes : 0;
}

const char *clef_release_dir(const clef_release *rel) { return rel ? rel->dir : NULL; }

/* What clef_model_load runs: every precision the reader accepts (BF16/F16/F32, NF4, FP8 W8A8,
 * INT8 ConvRot). Kept as a function so a build that lacks a format can say so. */
int clef_release_runnable(const clef_release *rel) {
    return rel != NULL;
}

size_t clef_release_problem_count(const clef_release *rel) { return rel ? rel->n_problems : 0; }

const clef_release_problem *clef_release_problem_at(const clef_release *rel, size_t i) {
    return rel && i < rel->n_problems ? &rel->problems[i] : NULL;
}

void clef_release_get_summary(const clef_release *rel, clef_release_summary *out) {
    if (rel)
        *out = rel->summary;
    else
        memset(out, 0, sizeof *out);
}

int clef_release_read(const clef_release *rel, const clef_tensor_info *t, void *dst) {
    if (!rel || !t || (!dst && t->n_bytes) || t->file < 0 || (size_t)t->file >= rel->n_files)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_release_read: bad arguments");
    if (t->n_bytes > SIZE_MAX)
        return clef_fail(CLEF_ERR_INVALID_ARG, "tensor '%s' is too large for this platform", t->name);
    return clef_file_pread(&rel->files[t->file].file, dst, (size_t)t->n_bytes, t->offset);
}

int clef_release_read_range(const clef_release *rel, const clef_tensor_info *t, uint64_t offset,
                            size_t n, void *dst) {
    if (!rel || !t || (!dst && n) || t->file < 0 || (size_t)t->file >= rel->n_files)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_release_read_range: bad arguments");
    if (offset > t->n_bytes || n > t->n_bytes - offset)
        return clef_fail(CLEF_ERR_INVALID_ARG, "tensor '%s': bytes [%llu, +%zu) are outside its "
                         "%llu bytes", t->name, (unsigned long long)offset, n,
                         (unsigned long long)t->n_bytes);
    return clef_file_pread(&rel->files[t->file].file, dst, n, t->offset + offset);
}

/* The load checks every weight for NaN / Inf. Reading a staged piece on every thread and then
 * scanning it on every thread went to memory twice: a load from the page cache ran at 9-10
 * GB/s where the reads alone reach 23 (bench_gpu_load, run15_load). Scanning each chunk right
 * after its pread reads it from cache instead. */
#define READ_CHECKED_CHUNK ((uint64_t)4 << 20)

/* 1 if the n_bytes at data (elements of t's dtype) are all finite */
static int scan_finite(const clef_tensor_info *t, const void *data, uint64_t n_bytes) {
    const size_t esize = clef_dtype_size(t->dtype);
    uint64_t first = 0;
    int nan = 0;
    return clef_count_nonfinite(t->dtype, data, esize ? n_bytes / esize : 0, &first, &nan) == 0;
}

/* t's bytes into dst in n_chunks chunks of chunk_bytes (the last shorter) on n_threads threads,
 * each chunk scanned right after its pread when scan is set (*bad: one was not all finite).
 * Returns 1 when a chunk's read failed: clef_fail messages are per thread, so the caller reads
 * the whole tensor again on its own thread for the message. */
static int read_chunks(const clef_release *rel, const clef_tensor_info *t, void *dst, int n_threads,
                       uint64_t chunk_bytes, uint64_t n_chunks, int scan, int *bad) {
    int failed = 0, any_bad = 0;
#pragma omp parallel for num_threads(n_threads) schedule(static) reduction(| : failed, any_bad)
    for (int64_t i = 0; i < (int64_t)n_chunks; i++) {
        const uint64_t begin = (uint64_t)i * chunk_bytes;
        const uint64_t len = t->n_bytes - begin < chunk_bytes ? t->n_bytes - begin : chunk_bytes;
        char *part = (char *)dst + begin;
        if (clef_release_read_range(rel, t, begin, (size_t)len, part) != CLEF_OK)
            failed = 1;
        else if (scan)
            any_bad |= !scan_finite(t, part, len);
    }
    *bad = any_bad;
    return failed;
}

/* Below this, one pread beats starting threads; above it each thread gets >= 8 MiB. */
#define PARALLEL_READ_MIN (16u << 20)
#define PARALLEL_READ_PIECE (8u << 20)

int clef_release_read_threads(const clef_release *rel, const clef_tensor_info *t, void *dst,
                              int n_threads) {
    if (!rel || !t || t->n_bytes < PARALLEL_READ_MIN || t->n_bytes > SIZE_MAX ||
        t->file < 0 || (size_t)t->file >= rel->n_files || !dst)
        return clef_release_read(rel, t, dst);
    if (n_threads <= 0)
        n_threads = omp_get_max_threads();
    int64_t pieces = (int64_t)(t->n_bytes / PARALLEL_READ_PIECE);
    if (pieces > n_threads)
        pieces = n_threads;
    if (pieces < 2)
        return clef_release_read(rel, t, dst);
    const uint64_t piece = (t->n_bytes + (uint64_t)pieces - 1) / (uint64_t)pieces;
    int bad = 0;
    return read_chunks(rel, t, dst, (int)pieces, piece, (t->n_bytes + piece - 1) / piece, 0, &bad)
               ? clef_release_read(rel, t, dst) : CLEF_OK;
}

int clef_release_read_checked(const clef_release *rel, const clef_tensor_info *t, void *dst,
                              int n_threads, uint64_t chunk_bytes, int *finite) {
    *finite = 0;
    const size_t esize = clef_dtype_size(t->dtype);
    if (chunk_bytes == 0)
        chunk_bytes = READ_CHECKED_CHUNK;
    if (esize)
        chunk_bytes = chunk_bytes / esize * esize;
    const uint64_t n_bytes = t->n_bytes;
    const uint64_t n_chunks = chunk_bytes ? (n_bytes + chunk_bytes - 1) / chunk_bytes : 0;
    if (n_threads <= 0)
        n_threads = omp_get_max_threads();
    if ((uint64_t)n_threads > n_chunks)
        n_threads = (int)n_chunks;
    int bad = 0;
    if (n_threads >= 2 && dst && n_bytes <= SIZE_MAX &&
        !read_chunks(rel, t, dst, n_threads, chunk_bytes, n_chunks, 1, &bad)) {
        *finite = !bad;
        return CLEF_OK;
    }
    /* one thread, or a chunk failed: the whole tensor on this thread (its error message) */
    int st = clef_release_read(rel, t, dst);
    if (st == CLEF_OK)
        *finite = scan_finite(t, dst, n_bytes);
    return st;
}

int clef_release_map(const clef_release *rel, const clef_tensor_info *t, clef_tensor_map *out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_release_map: out is NULL");
    memset(out, 0, sizeof *out);
    if (!rel || !t || t->file < 0 || (size_t)t->file >= rel->n_files || t->n_bytes > SIZE_MAX)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_release_map: bad arguments");
    return clef_file_map(&rel->files[t->file].file, t->offset, (size_t)t->n_bytes, &out->base,
                         &out->map_len, &out->data);
}

void clef_release_unmap(clef_tensor_map *m) {
    if (!m)
        return;
    clef_file_unmap(m->base, m->map_len);
    memset(m, 0, sizeof *m);
}
