/*
 * model.c — the public model object of include/clef.h: a release validated and loaded once —
 * the backbone's and the head's weights placed on the backend chosen by name, the tokenizer,
 * and the file the lm_head rows are read from. After load a model is only read, so any
 * number of contexts (context.c) decide over it at once. The decide functions are in
 * decide.c, the steps they are made of in prepare.c, run.c and render.c.
 *
 * The lm_head matrix is not loaded: a record's prepare step reads the rows of its option
 * tokens, with pread, from the release file that holds it.
 */
#include "clef.h"

#include "backend/backend.h"
#include "core/error.h"
#include "core/log.h"
#include "core/numeric.h"
#include "engine/engine_internal.h"
#include "media/processor_config.h"
#include "model/weight_loader.h"
#include "release/values.h"
#ifdef CLEF_HAVE_CUDA
#include "backend/cuda/cuda_backend.h" /* compiled in with CLEF_CUDA (CMakeLists.txt) */
#endif

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MODEL_DEFAULT_MAX_QUESTIONS 64
#define MODEL_DEFAULT_MAX_OPTIONS (64 * 255)

clef_model_params clef_model_default_params(void) {
    clef_model_params p;
    memset(&p, 0, sizeof p);
    p.truncation = CLEF_TRUNCATION_TRUNCATE;
    return p;
}

/* min / max pixels given by the caller (0: keep the release's) into a processor's settings;
 * `prefix` names the fields ("" or "video_"). */
static int pixel_bounds(const char *prefix, int64_t min_pixels, int64_t max_pixels,
                        clef_image_processor_params *ip) {
    if (min_pixels < 0 || max_pixels < 0)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_load: negative %smin_pixels or "
                         "%smax_pixels", prefix, prefix);
    if (min_pixels)
        ip->min_pixels = min_pixels;
    if (max_pixels)
        ip->max_pixels = max_pixels;
    if (ip->min_pixels > ip->max_pixels)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_load: %smax_pixels %lld is under "
                         "%smin_pixels %lld (%s)", prefix, (long long)ip->max_pixels, prefix,
                         (long long)ip->min_pixels,
                         min_pixels && max_pixels ? "both given"
                         : min_pixels ? "the maximum is the release's"
                                      : "the minimum is the release's");
    return CLEF_OK;
}

/* ---- lm_head rows ------------------------------------------------------------------------- */

static int lm_open(clef_lm_source *lm, const clef_release *rel) {
    const clef_release_config *cfg = clef_release_get_config(rel);
    const char *name = "lm_head.weight";
    lm->tensor = clef_release_find(rel, name);
    if (!lm->tensor && cfg->text.tie_word_embeddings) {
        name = "text.embed_tokens.weight";
        lm->tensor = clef_release_find(rel, name);
    }
    if (!lm->tensor)
        return clef_fail(CLEF_ERR_TENSOR_MISSING, "release '%s': tensor 'lm_head.weight' is "
                         "missing (the head reads option tokens' rows of it)",
                         clef_release_dir(rel));
    const clef_tensor_info *t = lm->tensor;
    if (t->dtype != CLEF_DTYPE_BF16 && t->dtype != CLEF_DTYPE_F16 && t->dtype != CLEF_DTYPE_F32)
        return clef_fail(CLEF_ERR_TENSOR_DTYPE, "tensor '%s' is %s, expected BF16, F16 or F32",
                         name, clef_dtype_name(t->dtype));
    if (t->n_dims != 2 || t->shape[0] != cfg->text.vocab_size ||
        t->shape[1] != cfg->text.hidden_size)
        return clef_fail(CLEF_ERR_TENSOR_SHAPE, "tensor '%s' is not [vocab_size %lld, "
                         "hidden_size %lld]", name, (long long)cfg->text.vocab_size,
                         (long long)cfg->text.hidden_size);
    lm->hidden_size = cfg->text.hidden_size;
    lm->vocab_size = cfg->text.vocab_size;
    lm->rel = rel; /* rows are read through the release's own open, contained file */
    return CLEF_OK;
}

/* ---- loading ------------------------------------------------------------------------------ */

static void progress(const clef_model *m, const char *stage, uint64_t done, uint64_t total) {
    if (m->params.progress)
        m->params.progress(stage, done, total, m->params.progress_user);
}

/* The tensor source of the backbone and the head: the release, counting bytes for progress. */
static const clef_tensor_info *model_find(void *user, const char *name) {
    return clef_release_find(((clef_model *)user)->release, name);
}

static int model_read(void *user, const clef_tensor_info *t, void *dst) {
    clef_model *m = user;
    /* read and checked on all threads in one pass (each chunk scanned while in cache) */
    int finite = 0;
    int st = clef_release_read_checked(m->release, t, dst, m->params.n_threads, 0, &finite);
    /* A NaN or Inf weight is refused here, by name, rather than surfacing later as a NaN
     * probability that looks like the record's fault (the message from the one-thread scan,
     * which finds the first). */
    if (st == CLEF_OK && !finite) {
        /* t may be a piece of the tensor (model_read_range): count elements from its start */
        const clef_tensor_info *whole = clef_release_find(m->release, t->name);
        size_t esize = clef_dtype_size(t->dtype);
        uint64_t first = whole && esize && t->offset >= whole->offset
                             ? (t->offset - whole->offset) / esize : 0;
        st = clef_check_weight_finite(t, clef_release_file_name(m->release, (size_t)t->file), dst,
                                      t->n_bytes, first);
    }
    m->load_done += t->n_bytes;
    progress(m, "weights", m->load_done, m->load_total);
    return st;
}

/* A piece of a tensor (the weight loader stages big tensors piece by piece). */
static int model_read_range(void *user, const clef_tensor_info *t, uint64_t offset, uint64_t n,
                            void *dst) {
    return clef_tensor_source_read_range_by_copy(model_read, user, t, offset, n, dst);
}

/* Bytes the backbone, the head and the vision tower will read (text.*, head.*, vision.*
 * tensors; lm_head is read by rows later). */
static uint64_t bytes_to_load(const clef_release *rel) {
    uint64_t total = 0;
    for (size_t i = 0; i < clef_release_tensor_count(rel); i++) {
        const clef_tensor_info *t = clef_release_tensor_at(rel, i);
        if (!strncmp(t->name, "text.", 5) || !strncmp(t->name, "head.", 5) ||
            !strncmp(t->name, "vision.", 7))
            total += t->n_bytes;
    }
    return total;
}

/* The devices of this build, by the name params.device (or params.backend) gives:
 * "cpu", and with the CUDA backend compiled in (CLEF_HAVE_CUDA), "cuda" / "cuda:N". */
#ifdef CLEF_HAVE_CUDA
#define MODEL_DEVICES "cpu, cuda, cuda:N"
#else
#define MODEL_DEVICES "cpu"
#endif

/* "cuda" (GPU 0) or "cuda:N" with N a plain decimal index: 1 and *index; else 0. */
static int parse_cuda_device(const char *name, int *index) {
    if (strncmp(name, "cuda", 4))
        return 0;
    if (!name[4]) {
        *index = 0;
        return 1;
    }
    if (name[4] != ':' || !name[5])
        return 0;
    long v = 0;
    for (const char *c = name + 5; *c; c++) {
        if (*c < '0' || *c > '9' || v > 9999)
            return 0;
        v = v * 10 + (*c - '0');
    }
    *index = (int)v;
    return 1;
}

static int backend_create(clef_model *m, const clef_model_params *p, clef_backend **out) {
    const char *name = p->device ? p->device : p->backend ? p->backend : "cpu";
    if (!strcmp(name, "cpu")) {
        clef_backend_params bp = clef_backend_default_params();
        bp.n_threads = p->n_threads;
        snprintf(m->device, sizeof m->device, "cpu");
        return clef_backend_cpu_create(&bp, out);
    }
    int index = 0;
    if (!parse_cuda_device(name, &index))
        return clef_fail(strncmp(name, "cuda", 4) ? CLEF_ERR_UNSUPPORTED : CLEF_ERR_INVALID_ARG,
                         "device '%s' is not one this build knows (known: %s)", name,
                         MODEL_DEVICES);
#ifdef CLEF_HAVE_CUDA
    int n = clef_backend_cuda_device_count();
    if (n == 0)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "device '%s': no CUDA GPU is visible (no GPU, "
                         "no NVIDIA driver, or CUDA_VISIBLE_DEVICES hides them all)", name);
    if (index >= n)
        return clef_fail(CLEF_ERR_UNSUPPORTED, "device '%s': there is no GPU %d (%d visible: "
                         "cuda:0 to cuda:%d)", name, index, n, n - 1);
    snprintf(m->device, sizeof m->device, "cuda:%d", index);
    return clef_backend_cuda_create(index, out);
#else
    return clef_fail(CLEF_ERR_UNSUPPORTED, "device '%s': this build has no CUDA backend (it "
                     "was built without CUDA: CLEF_CUDA=OFF or no nvcc); known: %s", name,
                     MODEL_DEVICES);
#endif
}

static char *base_name(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    size_t b = n;
    while (b > 0 && dir[b - 1] != '/')
        b--;
    char *s = malloc(n - b + 1);
    if (s) {
        memcpy(s, dir + b, n - b);
        s[n - b] = '\0';
    }
    return s;
}

int clef_model_load(const char *dir, const clef_model_params *params, clef_model **out) {
    if (!out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_load: out is NULL");
    *out = NULL;
    if (!dir)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_load: dir is NULL");
    clef_model_params p = params ? *params : clef_model_default_params();
    if (p.n_threads < 0 || p.max_length < 0 || p.max_questions < 0 || p.max_options < 0 ||
        (p.truncation != CLEF_TRUNCATION_TRUNCATE && p.truncation != CLEF_TRUNCATION_REFUSE) ||
        (p.profile != CLEF_PROFILE_RESIDENT && p.profile != CLEF_PROFILE_HOST_EMBED &&
         p.profile != CLEF_PROFILE_24GB && p.profile != CLEF_PROFILE_16GB))
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_load: negative n_threads, "
                         "max_length, max_questions or max_options, or unknown truncation or "
                         "profile");
    if (!p.max_length)
        p.max_length = CLEF_DEFAULT_MAX_LENGTH;
    if (!p.max_questions)
        p.max_questions = MODEL_DEFAULT_MAX_QUESTIONS;
    if (!p.max_options)
        p.max_options = MODEL_DEFAULT_MAX_OPTIONS;

    clef_model *m = calloc(1, sizeof *m);
    if (!m)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_load: out of memory");
    m->params = p;
    int st = CLEF_OK;
    if (!(m->name = base_name(dir))) {
        st = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "clef_model_load: out of memory");
        goto err;
    }
    if (pthread_mutex_init(&m->default_lock, NULL)) {
        st = clef_fail(CLEF_ERR_INTERNAL, "clef_model_load: pthread_mutex_init failed");
        goto err;
    }
    m->lock_ready = 1;

    /* 0. the backend named by the params (an unknown name fails before any file is read) */
    if ((st = backend_create(m, &p, &m->backend)))
        goto err;
    /* the caller's strings need not live: keep the backend's static name, our device name */
    m->params.backend = m->backend->ops->name;
    m->params.device = m->device;
    /* the host-embedding profile: the table on a CPU backend beside the device (on the CPU
     * itself every weight is host memory already) */
    if ((p.profile == CLEF_PROFILE_HOST_EMBED || p.profile == CLEF_PROFILE_16GB) && strcmp(m->device, "cpu")) {
        clef_backend_params bp = clef_backend_default_params();
        bp.n_threads = p.n_threads;
        if ((st = clef_backend_cpu_create(&bp, &m->host_backend)))
            goto err;
    }

    /* 1. the release: every file and tensor validated before anything is read */
    progress(m, "validate", 0, 0);
    clef_release_opts ro = {.verify_hashes = p.verify_hashes};
    if ((st = clef_release_open(dir, &ro, &m->release)))
        goto err;
    const clef_release_config *cfg = clef_release_get_config(m->release);
    if (cfg->head.hidden_size != cfg->text.hidden_size) {
        st = clef_fail(CLEF_ERR_CONFIG_INVALID, "joint_head_config.json: hidden_size %lld, "
                       "config.json text_config.hidden_size %lld",
                       (long long)cfg->head.hidden_size, (long long)cfg->text.hidden_size);
        goto err;
    }

    /* 2. the tokenizer */
    progress(m, "tokenizer", 0, 0);
    if ((st = tok_load_dir(dir, &m->tokenizer)))
        goto err;

    /* 3. the weights of the backbone and the head (workspaces belong to contexts) */
    m->load_total = bytes_to_load(m->release);
    /* one source for both loaders: the release's tensors, counted for the progress line */
    clef_tensor_source src = {.ctx = m, .find = model_find, .read = model_read,
                              .read_range = model_read_range};
    if ((st = qwen35_load_placed(&cfg->text, &src, m->backend, m->host_backend, &m->backbone)))
        goto err;
    if ((st = clef_joint_head_load(m->backend, &cfg->head, &src, NULL, &m->head)))
        goto err;
    /* the vision tower, when the release has one (records with images need it) */
    if (cfg->vision.present) {
        if ((st = vision_load(&cfg->vision, &src, m->backend, &m->vision)))
            goto err;
        /* its image processor: the tower's sizes, bounds from preprocessor_config.json */
        if ((st = clef_processor_config_load(dir, &cfg->vision, &m->image_params)))
            goto err;
        /* and its video processor: video_preprocessor_config.json or the defaults */
        if ((st = clef_video_config_load(dir, &cfg->vision, &m->video_params)))
            goto err;
        /* the caller's pixel bounds (clef run --max-pixels ...) over the release's */
        if ((st = pixel_bounds("", p.min_pixels, p.max_pixels, &m->image_params)) ||
            (st = pixel_bounds("video_", p.video_min_pixels, p.video_max_pixels,
                               &m->video_params.image)))
            goto err;
    }
    m->image_pixels = clef_image_pixels_default;
    if ((st = lm_open(&m->lm, m->release)))
        goto err;
    /* the 24gb / 16gb profiles: the weights alone must leave room for a context */
    if ((st = clef_profile_check(m, NULL, "clef_model_load")))
        goto err;

    m->limits = clef_request_default_limits();
    m->limits.max_questions = p.max_questions;
    progress(m, "ready", 1, 1);
    CLEF_LOG_I("model '%s' on %s: %lld layers, hidden %lld, vocab %lld; weights %zu bytes "
               "(backbone) + %zu (head)", m->name, m->device,
               (long long)cfg->text.num_hidden_layers, (long long)cfg->text.hidden_size,
               (long long)cfg->text.vocab_size, qwen35_weight_bytes(m->backbone),
               clef_joint_head_weight_bytes(m->head));
    *out = m;
    return CLEF_OK;
err:
    clef_model_free(m);
    return st;
}

void clef_model_free(clef_model *m) {
    if (!m)
        return;
    clef_context_free(m->default_ctx); /* before the weights and the backend it forks */
    clef_joint_head_free(m->head);
    vision_free(m->vision);
    qwen35_free(m->backbone);
    clef_backend_free(m->host_backend);
    clef_backend_free(m->backend);
    tok_free(m->tokenizer);
    clef_release_free(m->release);
    if (m->lock_ready)
        pthread_mutex_destroy(&m->default_lock);
    free(m->name);
    free(m);
}

const char *clef_model_name(const clef_model *m) { return m ? m->name : ""; }
int32_t clef_model_max_length(const clef_model *m) { return m ? m->params.max_length : 0; }
uint64_t clef_model_weight_bytes(const clef_model *m) {
    return m ? (uint64_t)qwen35_weight_bytes(m->backbone) + clef_joint_head_weight_bytes(m->head) +
                   (m->vision ? vision_weight_bytes(m->vision) : 0)
             : 0;
}
const char *clef_model_device(const clef_model *m) { return m ? m->device : ""; }

/* The public memory facts of one backend handle (clef_memory_info in clef.h). */
static int memory_info(clef_backend *be, uint64_t weights, clef_memory_info *out) {
    clef_backend_memory_info bm;
    int st = clef_backend_memory(be, &bm);
    out->weights = weights;
    out->resident = bm.resident;
    out->peak = bm.peak;
    out->device_used = bm.device_used;
    out->device_total = bm.device_total;
    return st;
}

int clef_model_memory(const clef_model *m, clef_memory_info *out) {
    if (!m || !out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_model_memory: NULL argument");
    return memory_info(m->backend, clef_model_weight_bytes(m), out);
}

int clef_context_memory(const clef_context *c, clef_memory_info *out) {
    if (!c || !out)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_context_memory: NULL argument");
    return memory_info(c->be, 0, out);
}

uint64_t clef_profile_budget(clef_profile profile) {
    return profile == CLEF_PROFILE_24GB ? (uint64_t)24 << 30 : profile == CLEF_PROFILE_16GB ? (uint64_t)16 << 30 : 0;
}

int clef_profile_check(const clef_model *m, const clef_context *c, const char *what) {
    const uint64_t budget = clef_profile_budget(m->params.profile);
    if (!budget || !strcmp(m->device, "cpu"))
        return CLEF_OK;
    clef_memory_info mm = {0}, cm = {0};
    int st = clef_model_memory(m, &mm);
    if (st == CLEF_OK && c)
        st = clef_context_memory(c, &cm);
    if (st != CLEF_OK)
        return st;
    /* the matmul scratch the backend grows at the first forward of max_tokens rows, with the
     * quarter of head room the CUDA backend's staging buffer grows by */
    if (c) {
        uint64_t scratch = qwen35_matmul_scratch_bytes(m->backbone, c->be, c->params.max_tokens);
        cm.resident += scratch + scratch / 4;
    }
    if (mm.resident + cm.resident <= budget)
        return CLEF_OK;
    return clef_fail(CLEF_ERR_OUT_OF_MEMORY,
                     "%s: profile %s allows %llu GiB of device memory; the model holds %.2f GiB%s%.2f GiB "
                     "(a context for %d tokens, its matmul scratch included)%s",
                     what, m->params.profile == CLEF_PROFILE_24GB ? "24gb" : "16gb",
                     (unsigned long long)(budget >> 30), (double)mm.resident / (1 << 30), c ? " and the context " : "",
                     c ? (double)cm.resident / (1 << 30) : 0.0, c ? c->params.max_tokens : 0,
                     c ? ": lower max_length / max_tokens" : "");
}

uint64_t clef_model_workspace_bytes(const clef_model *m) {
    if (!m)
        return 0;
    clef_model *mut = (clef_model *)m; /* the lock guards default_ctx; nothing else is written */
    pthread_mutex_lock(&mut->default_lock);
    uint64_t bytes = clef_context_workspace_bytes(m->default_ctx);
    pthread_mutex_unlock(&mut->default_lock);
    return bytes;
}

