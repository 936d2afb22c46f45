/*
 * request.c — parse and validate a request body (see request.h for the shapes and limits).
 *
 * The validator walks the parsed tree once, keeping the path to the current field on a
 * small stack so that each problem is reported with its full loc. It collects every
 * problem instead of stopping at the first (clients fix a request in one round trip), then
 * builds the question/option tables only when there were none.
 */
#include "encode/request.h"

#include "core/error.h"
#include "core/log.h"
#include "core/utf8.h"
#include "json/render.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

clef_request_limits clef_request_default_limits(void) {
    clef_request_limits l;
    memset(&l, 0, sizeof l);
    l.max_body_bytes = 13u << 20;
    l.max_questions = 64;
    l.max_id_chars = 100;
    l.question_id_charset = 1;
    l.min_choice_options = 2;
    l.max_choice_options = 255;
    l.min_score_levels = 2;
    l.max_score_levels = 10;
    l.max_images = 4;
    l.max_videos = 4;
    l.reject_unknown_fields = 1;
    l.max_json_depth = 64;
    return l;
}

/* The default descriptions of a noul question's options (the reference's question_options). */
static const json_value noul_true_default = {
    .type = JSON_STRING,
    .u.str = {"The proposition is true or the answer is yes.",
              sizeof "The proposition is true or the answer is yes." - 1}};
static const json_value noul_false_default = {
    .type = JSON_STRING,
    .u.str = {"The proposition is false or the answer is no.",
              sizeof "The proposition is false or the answer is no." - 1}};

/* ---- field errors ---------------------------------------------------------------------- */

void clef_request_errors_free(clef_request_errors *errors) {
    if (!errors)
        return;
    for (size_t i = 0; i < errors->count; i++) {
        free(errors->items[i].loc);
        free(errors->items[i].path);
        free(errors->items[i].msg);
    }
    free(errors->items);
    memset(errors, 0, sizeof *errors);
}

/* One step of the path to the field being checked: an object key or an array index. */
typedef struct loc_segment {
    const char *key; /* NULL for an array index */
    size_t key_len;
    size_t index;
} loc_segment;

#define LOC_MAX 300 /* deeper than any body the parser accepts (max_json_depth + 4) */

typedef struct validator {
    const clef_request_limits *limits;
    clef_request_kind kind;
    const char *path_model;
    clef_request_errors *errors; /* caller's list, or own scratch list */
    int oom;
    int status;                  /* the first failure status */
    loc_segment loc[LOC_MAX];
    int depth;
} validator;

static void push_key(validator *v, const char *key, size_t len) {
    CLEF_ASSERT(v->depth < LOC_MAX);
    v->loc[v->depth++] = (loc_segment){key, len, 0};
}
static void push_index(validator *v, size_t index) {
    CLEF_ASSERT(v->depth < LOC_MAX);
    v->loc[v->depth++] = (loc_segment){NULL, 0, index};
}
static void pop(validator *v) { v->depth--; }

static char *loc_json(const validator *v) {
    clef_strbuf b = {0};
    clef_strbuf_append_str(&b, "[\"body\"");
    for (int i = 0; i < v->depth; i++) {
        clef_strbuf_append_char(&b, ',');
        if (v->loc[i].key)
            json_render_string(v->loc[i].key, v->loc[i].key_len, &b);
        else
            clef_strbuf_appendf(&b, "%zu", v->loc[i].index);
    }
    clef_strbuf_append_char(&b, ']');
    return clef_strbuf_take(&b, NULL);
}

static char *loc_dotted(const validator *v) {
    clef_strbuf b = {0};
    clef_strbuf_append_str(&b, "body");
    for (int i = 0; i < v->depth; i++) {
        clef_strbuf_append_char(&b, '.');
        if (v->loc[i].key)
            clef_strbuf_append(&b, v->loc[i].key, v->loc[i].key_len);
        else
            clef_strbuf_appendf(&b, "%zu", v->loc[i].index);
    }
    return clef_strbuf_take(&b, NULL);
}

/* Record a field error at the current path (status is the request-level status it implies). */
static void field_error(validator *v, int status, const char *type, const char *fmt, ...)
    CLEF_PRINTF(4, 5);
static void field_error(validator *v, int status, const char *type, const char *fmt, ...) {
    if (v->status == CLEF_OK || (v->status == CLEF_ERR_REQUEST_INVALID && status != v->status))
        v->status = status; /* a too-large or malformed body outranks field errors */
    clef_request_errors *e = v->errors;
    if (status == CLEF_ERR_REQUEST_TOO_LONG)
        e->http_status = 413;
    else if (e->http_status == 0)
        e->http_status = 422;
    if (e->count >= CLEF_REQUEST_MAX_ERRORS) {
        e->dropped++;
        return;
    }
    if (e->count == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 8;
        clef_field_error *items = realloc(e->items, cap * sizeof *items);
        if (!items) {
            v->oom = 1;
            return;
        }
        e->items = items;
        e->cap = cap;
    }
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* A long id or model name cut by the buffer may end inside a UTF-8 sequence; the
     * message goes into JSON error bodies, so keep only the valid prefix. */
    msg[clef_utf8_check((const unsigned char *)msg, strlen(msg))] = '\0';
    clef_field_error *fe = &e->items[e->count];
    fe->loc = loc_json(v);
    fe->path = loc_dotted(v);
    fe->msg = strdup(msg);
    fe->type = type;
    if (!fe->loc || !fe->path || !fe->msg) {
        free(fe->loc);
        free(fe->path);
        free(fe->msg);
        v->oom = 1;
        return;
    }
    e->count++;
}

/* ---- value checks ---------------------------------------------------------------------- */

static size_t count_code_points(const char *s, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += ((unsigned char)s[i] & 0xc0) != 0x80;
    return count;
}

/* Python turns NaN/Infinity literals and overflowing reals into nan/inf; a prompt cannot
 * carry them (json.dumps would write NaN, which is not JSON), so they are refused where
 * they are, anywhere in the body. */
static void check_finite_numbers(validator *v, const json_value *value) {
    switch (value->type) {
    case JSON_NUMBER:
        if (json_number_is_nonfinite(value))
            field_error(v, CLEF_ERR_REQUEST_INVALID, "finite_number",
                        "Input should be a finite number, got '%.40s'", value->u.num.text);
        return;
    case JSON_ARRAY:
        for (size_t i = 0; i < value->u.arr.count; i++) {
            push_index(v, i);
            check_finite_numbers(v, value->u.arr.items[i]);
            pop(v);
        }
        return;
    case JSON_OBJECT:
        for (size_t i = 0; i < value->u.obj.count; i++) {
            const json_member *m = &value->u.obj.members[i];
            push_key(v, m->key, m->key_len);
            check_finite_numbers(v, m->value);
            pop(v);
        }
        return;
    default: return;
    }
}

static int is_description_type(const json_value *d) {
    return d->type == JSON_STRING || d->type == JSON_NULL || d->type == JSON_OBJECT ||
           d->type == JSON_ARRAY;
}

static void check_description(validator *v, const json_value *d) {
    if (!is_description_type(d))
        field_error(v, CLEF_ERR_REQUEST_INVALID, "description_type",
                    "an option description must be a string, null, object or array, got %s",
                    json_type_name(d->type));
}

static void check_question_id(validator *v, const char *id, size_t len) {
    const clef_request_limits *l = v->limits;
    if (len == 0 || count_code_points(id, len) > (size_t)l->max_id_chars) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, len == 0 ? "string_too_short" : "string_too_long",
                    "question id must have 1 to %d characters, got %zu", (int)l->max_id_chars,
                    count_code_points(id, len));
        return;
    }
    if (!l->question_id_charset)
        return;
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
        if (!ok) {
            field_error(v, CLEF_ERR_REQUEST_INVALID, "string_pattern_mismatch",
                        "question id must match ^[A-Za-z0-9_.-]+$ (byte %zu is not allowed)", i);
            return;
        }
    }
}

static void check_choice_criteria(validator *v, const json_value *criteria) {
    const clef_request_limits *l = v->limits;
    if (criteria->type != JSON_OBJECT) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "dict_type",
                    "choice criteria must be an object mapping option id -> description, got %s",
                    json_type_name(criteria->type));
        return;
    }
    size_t n = criteria->u.obj.count;
    if (n < (size_t)l->min_choice_options || n > (size_t)l->max_choice_options)
        field_error(v, CLEF_ERR_REQUEST_INVALID, n < (size_t)l->min_choice_options ? "too_short" : "too_long",
                    "a choice question needs %d to %d options, got %zu", (int)l->min_choice_options,
                    (int)l->max_choice_options, n);
    for (size_t i = 0; i < n; i++) {
        const json_member *m = &criteria->u.obj.members[i];
        push_key(v, m->key, m->key_len);
        size_t chars = count_code_points(m->key, m->key_len);
        if (chars == 0 || chars > (size_t)l->max_id_chars)
            field_error(v, CLEF_ERR_REQUEST_INVALID, chars == 0 ? "string_too_short" : "string_too_long",
                        "option id must have 1 to %d characters, got %zu", (int)l->max_id_chars, chars);
        check_description(v, m->value);
        pop(v);
    }
}

static void check_score_criteria(validator *v, const json_value *criteria) {
    const clef_request_limits *l = v->limits;
    if (criteria->type != JSON_ARRAY) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "list_type",
                    "score criteria must be a list of level descriptions, lowest first, got %s",
                    json_type_name(criteria->type));
        return;
    }
    size_t n = criteria->u.arr.count;
    if (n < (size_t)l->min_score_levels || n > (size_t)l->max_score_levels)
        field_error(v, CLEF_ERR_REQUEST_INVALID, n < (size_t)l->min_score_levels ? "too_short" : "too_long",
                    "a score question needs %d to %d levels, got %zu", (int)l->min_score_levels,
                    (int)l->max_score_levels, n);
    for (size_t i = 0; i < n; i++) {
        push_index(v, i);
        check_description(v, criteria->u.arr.items[i]);
        pop(v);
    }
}

static void check_noul_criteria(validator *v, const json_value *criteria) {
    if (criteria->type == JSON_NULL)
        return;
    if (criteria->type != JSON_OBJECT) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "dict_type",
                    "noul criteria must be null or an object with \"true\" and/or \"false\", got %s",
                    json_type_name(criteria->type));
        return;
    }
    for (size_t i = 0; i < criteria->u.obj.count; i++) {
        const json_member *m = &criteria->u.obj.members[i];
        push_key(v, m->key, m->key_len);
        int is_true = m->key_len == 4 && memcmp(m->key, "true", 4) == 0;
        int is_false = m->key_len == 5 && memcmp(m->key, "false", 5) == 0;
        if (!is_true && !is_false)
            field_error(v, CLEF_ERR_REQUEST_INVALID, "extra_forbidden",
                        "noul criteria may only describe \"true\" and \"false\"");
        else
            check_description(v, m->value);
        pop(v);
    }
}

static int question_type_of(const json_value *t, clef_question_type *out) {
    const char *s = json_get_string(t);
    if (!s)
        return 0;
    if (strcmp(s, "noul") == 0 && t->u.str.len == 4)
        *out = CLEF_QUESTION_NOUL;
    else if (strcmp(s, "choice") == 0 && t->u.str.len == 6)
        *out = CLEF_QUESTION_CHOICE;
    else if (strcmp(s, "score") == 0 && t->u.str.len == 5)
        *out = CLEF_QUESTION_SCORE;
    else
        return 0;
    return 1;
}

static void check_question(validator *v, const json_value *q) {
    if (q->type != JSON_OBJECT) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "dict_type", "a question must be an object, got %s",
                    json_type_name(q->type));
        return;
    }
    const json_value *type = json_object_get(q, "type");
    clef_question_type qt;
    push_key(v, "type", 4);
    if (!type) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "missing", "Field required");
        pop(v);
        return;
    }
    if (!question_type_of(type, &qt)) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "literal_error",
                    "Input should be 'noul', 'choice' or 'score'");
        pop(v);
        return;
    }
    pop(v);
    const json_value *criteria = json_object_get(q, "criteria");
    push_key(v, "criteria", 8);
    if (qt == CLEF_QUESTION_NOUL) {
        if (criteria)
            check_noul_criteria(v, criteria);
    } else if (!criteria) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "missing",
                    "Field required: a %s question needs criteria", json_get_string(type));
    } else if (qt == CLEF_QUESTION_CHOICE) {
        check_choice_criteria(v, criteria);
    } else {
        check_score_criteria(v, criteria);
    }
    pop(v);
}

static void check_questions(validator *v, const json_value *questions) {
    if (questions->type != JSON_OBJECT) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "dict_type",
                    "questions must be an object mapping question id -> question, got %s",
                    json_type_name(questions->type));
        return;
    }
    size_t n = questions->u.obj.count;
    if (n == 0 || n > (size_t)v->limits->max_questions)
        field_error(v, CLEF_ERR_REQUEST_INVALID, n == 0 ? "too_short" : "too_long",
                    "a request needs 1 to %d questions, got %zu", (int)v->limits->max_questions, n);
    for (size_t i = 0; i < n; i++) {
        const json_member *m = &questions->u.obj.members[i];
        push_key(v, m->key, m->key_len);
        check_question_id(v, m->key, m->key_len);
        check_question(v, m->value);
        pop(v);
    }
}

/* An image is a data URL string or {"content_type", "base64"}; decoding is src/media's. */
static void check_media_list(validator *v, const json_value *list, int32_t max, const char *what) {
    if (list->type == JSON_NULL)
        return;
    if (list->type != JSON_ARRAY) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "list_type", "%s must be a list, got %s", what,
                    json_type_name(list->type));
        return;
    }
    if (list->u.arr.count > (size_t)max)
        field_error(v, CLEF_ERR_REQUEST_INVALID, "too_long", "at most %d %s are allowed, got %zu",
                    (int)max, what, list->u.arr.count);
    for (size_t i = 0; i < list->u.arr.count; i++) {
        const json_value *item = list->u.arr.items[i];
        push_index(v, i);
        const char *s = json_get_string(item);
        if (s) {
            if (strncmp(s, "data:", 5) != 0)
                field_error(v, CLEF_ERR_REQUEST_INVALID, "url_scheme",
                            "media must be given inline as a data: URL; remote URLs are refused");
        } else if (item->type == JSON_OBJECT) {
            const json_value *ct = json_object_get(item, "content_type");
            const json_value *b64 = json_object_get(item, "base64");
            if (!json_get_string(ct) || !json_get_string(b64))
                field_error(v, CLEF_ERR_REQUEST_INVALID, "model_type",
                            "an inline medium needs string fields \"content_type\" and \"base64\"");
        } else {
            field_error(v, CLEF_ERR_REQUEST_INVALID, "model_type",
                        "a medium must be a data: URL string or {content_type, base64}, got %s",
                        json_type_name(item->type));
        }
        pop(v);
    }
}

static int is_known_field(clef_request_kind kind, const char *key) {
    static const char *const common[] = {"model", "state", "questions", "images", "videos"};
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++)
        if (strcmp(key, common[i]) == 0)
            return 1;
    return kind == CLEF_REQUEST_RECORD && strcmp(key, "id") == 0;
}

static void check_model(validator *v, const json_value *model) {
    push_key(v, "model", 5);
    if (!model) {
        if (v->kind != CLEF_REQUEST_RECORD)
            field_error(v, CLEF_ERR_REQUEST_INVALID, "missing", "Field required");
    } else if (model->type != JSON_STRING) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "string_type", "Input should be a valid string, got %s",
                    json_type_name(model->type));
    } else if (v->kind == CLEF_REQUEST_WORKERS_AI) {
        const char *m = model->u.str.ptr;
        if ((strcmp(m, "clef") != 0 && strcmp(m, "clef-flash") != 0) || strlen(m) != model->u.str.len)
            field_error(v, CLEF_ERR_REQUEST_INVALID, "literal_error",
                        "Input should be 'clef' or 'clef-flash'");
        else if (v->path_model && strcmp(v->path_model, m) != 0)
            field_error(v, CLEF_ERR_REQUEST_INVALID, "model_mismatch",
                        "model '%s' does not match the route's model '%s'", m, v->path_model);
    }
    pop(v);
}

static void check_body(validator *v, const json_value *root) {
    if (root->type != JSON_OBJECT) {
        field_error(v, CLEF_ERR_REQUEST_INVALID, "model_attributes_type",
                    "the body must be a JSON object, got %s", json_type_name(root->type));
        return;
    }
    if (v->limits->reject_unknown_fields) {
        for (size_t i = 0; i < root->u.obj.count; i++) {
            const json_member *m = &root->u.obj.members[i];
            if (!is_known_field(v->kind, m->key) || strlen(m->key) != m->key_len) {
                push_key(v, m->key, m->key_len);
                field_error(v, CLEF_ERR_REQUEST_INVALID, "extra_forbidden",
                            "Extra inputs are not permitted");
                pop(v);
            }
        }
    }
    check_model(v, json_object_get(root, "model"));
    if (!json_object_get(root, "state")) {
        push_key(v, "state", 5);
        field_error(v, CLEF_ERR_REQUEST_INVALID, "missing", "Field required");
        pop(v);
    }
    const json_value *questions = json_object_get(root, "questions");
    push_key(v, "questions", 9);
    if (!questions)
        field_error(v, CLEF_ERR_REQUEST_INVALID, "missing", "Field required");
    else
        check_questions(v, questions);
    pop(v);
    const json_value *images = json_object_get(root, "images");
    if (images) {
        push_key(v, "images", 6);
        check_media_list(v, images, v->limits->max_images, "images");
        pop(v);
    }
    const json_value *videos = json_object_get(root, "videos");
    if (videos) {
        push_key(v, "videos", 6);
        check_media_list(v, videos, v->limits->max_videos, "videos");
        pop(v);
    }
    check_finite_numbers(v, root);
}

/* ---- building the question tables ------------------------------------------------------- */

static int compare_option_ids(const void *a, const void *b) {
    const clef_option *x = a, *y = b;
    size_t n = x->id_len < y->id_len ? x->id_len : y->id_len;
    int c = memcmp(x->id, y->id, n); /* UTF-8 byte order = code point order (Python's sort) */
    if (c != 0)
        return c;
    return (x->id_len > y->id_len) - (x->id_len < y->id_len);
}

static int build_question(clef_question *q, const json_member *m) {
    const json_value *qv = m->value;
    q->id = m->key;
    q->id_len = m->key_len;
    question_type_of(json_object_get(qv, "type"), &q->type);
    q->type_name = json_object_get(qv, "type")->u.str.ptr;
    const json_value *instructions = json_object_get(qv, "instructions");
    if (instructions && (instructions->type == JSON_NULL ||
                         (instructions->type == JSON_STRING && instructions->u.str.len == 0)))
        instructions = NULL;
    q->instructions = instructions;
    q->criteria = json_object_get(qv, "criteria");
    if (q->criteria && q->criteria->type == JSON_NULL)
        q->criteria = NULL;

    size_t n = q->type == CLEF_QUESTION_NOUL    ? 2
               : q->type == CLEF_QUESTION_CHOICE ? q->criteria->u.obj.count
                                                 : q->criteria->u.arr.count;
    q->n_options = (int32_t)n;
    q->options = calloc(n, sizeof *q->options);
    q->request_to_presented = calloc(n, sizeof *q->request_to_presented);
    if (!q->options || !q->request_to_presented)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory building question '%s'", q->id);
    if (q->type == CLEF_QUESTION_NOUL) {
        /* Defaults, then criteria.true / criteria.false override (null: no description). */
        q->options[0] = (clef_option){.id = "true", .id_len = 4, .description = &noul_true_default};
        q->options[1] = (clef_option){.id = "false", .id_len = 5, .description = &noul_false_default};
        q->options[1].request_index = 1;
        if (q->criteria) {
            const json_value *t = json_object_get(q->criteria, "true");
            const json_value *f = json_object_get(q->criteria, "false");
            if (t)
                q->options[0].description = t;
            if (f)
                q->options[1].description = f;
        }
    } else if (q->type == CLEF_QUESTION_CHOICE) {
        for (size_t i = 0; i < n; i++) {
            const json_member *opt = &q->criteria->u.obj.members[i];
            q->options[i] = (clef_option){.id = opt->key, .id_len = opt->key_len,
                                          .description = opt->value, .request_index = (int32_t)i};
        }
        qsort(q->options, n, sizeof *q->options, compare_option_ids);
    } else {
        for (size_t i = 0; i < n; i++) {
            clef_option *o = &q->options[i];
            snprintf(o->index_text, sizeof o->index_text, "%d", (int)i);
            o->id = o->index_text;
            o->id_len = strlen(o->index_text);
            o->description = q->criteria->u.arr.items[i];
            o->request_index = (int32_t)i;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (q->options[i].description && q->options[i].description->type == JSON_NULL)
            q->options[i].description = NULL;
        q->request_to_presented[q->options[i].request_index] = (int32_t)i;
    }
    return CLEF_OK;
}

void clef_request_free(clef_request *request) {
    if (!request)
        return;
    for (int32_t i = 0; i < request->n_questions; i++) {
        free(request->questions[i].options);
        free(request->questions[i].request_to_presented);
    }
    free(request->questions);
    json_doc_free(request->doc);
    free(request);
}

static int build_request(clef_request *r) {
    const json_value *root = r->root;
    r->model = json_get_string(json_object_get(root, "model"));
    r->state = json_object_get(root, "state");
    r->record_id = r->kind == CLEF_REQUEST_RECORD ? json_object_get(root, "id") : NULL;
    r->images = json_object_get(root, "images");
    r->videos = json_object_get(root, "videos");
    r->n_images = r->images && r->images->type == JSON_ARRAY ? (int32_t)r->images->u.arr.count : 0;
    r->n_videos = r->videos && r->videos->type == JSON_ARRAY ? (int32_t)r->videos->u.arr.count : 0;
    const json_value *questions = json_object_get(root, "questions");
    size_t n = questions->u.obj.count;
    r->questions = calloc(n, sizeof *r->questions);
    if (!r->questions)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory building %zu questions", n);
    for (size_t i = 0; i < n; i++) {
        r->n_questions = (int32_t)i + 1;
        int status = build_question(&r->questions[i], &questions->u.obj.members[i]);
        if (status != CLEF_OK)
            return status;
    }
    return CLEF_OK;
}

/* ---- entry point ----------------------------------------------------------------------- */

/* Repeated keys follow Python's json.loads, as the reference systemone() (plain dicts, no
 * pydantic model) sees them: the last value wins, at the first key's position. That is
 * accepted, but where it may explain a refusal (a choice left with one option, fewer
 * questions than sent) the refusal says so: *note gets "; note: key "x" appears twice ..."
 * or "". merged: the first parse merged a repeated key (only then is the body parsed again,
 * strictly, to find the first repeat and its position). */
static void duplicate_note(const char *body, size_t len, int merged, char *note, size_t cap) {
    note[0] = '\0';
    if (!merged)
        return;
    json_parse_opts opts = {.allow_nonfinite = 1, .max_depth = LOC_MAX, .reject_duplicate_keys = 1};
    json_doc *doc = NULL;
    json_error err;
    if (json_parse(body, len, &opts, &doc, &err) == JSON_PARSE_DUPLICATE_KEY)
        snprintf(note, cap,
                 "; note: key \"%.80s\" appears twice in one object (line %d column %d); as in "
                 "Python's json.loads the last value is kept",
                 err.key, err.line, err.column);
    json_doc_free(doc);
}

int clef_request_parse(const char *body, size_t len, clef_request_kind kind, const char *path_model,
                       const clef_request_limits *limits, clef_request **out,
                       clef_request_errors *errors) {
    CLEF_ASSERT(out && (body || len == 0));
    *out = NULL;
    clef_request_limits defaults = clef_request_default_limits();
    if (!limits)
        limits = &defaults;
    clef_request_errors scratch;
    memset(&scratch, 0, sizeof scratch);
    if (errors)
        clef_request_errors_free(errors);
    validator *v = calloc(1, sizeof *v);
    if (!v)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory validating a request");
    v->limits = limits;
    v->kind = kind;
    v->path_model = path_model;
    v->errors = errors ? errors : &scratch;
    v->status = CLEF_OK;

    json_doc *doc = NULL;
    clef_request *r = NULL;
    if (limits->max_body_bytes && len > limits->max_body_bytes) {
        field_error(v, CLEF_ERR_REQUEST_TOO_LONG, "body_too_large",
                    "the body has %zu bytes; the cap is %zu", len, limits->max_body_bytes);
    } else {
        /* The loc stack bounds the depth the validator can walk. */
        int depth = limits->max_json_depth > 0 ? limits->max_json_depth : 64;
        json_parse_opts popts = {.allow_nonfinite = 1, .max_depth = depth < LOC_MAX - 8 ? depth : LOC_MAX - 8};
        json_error jerr;
        int parsed = json_parse(body, len, &popts, &doc, &jerr);
        if (parsed == -2) {
            v->oom = 1;
        } else if (parsed != 0) {
            push_index(v, jerr.offset);
            field_error(v, CLEF_ERR_REQUEST_JSON, "json_invalid",
                        "JSON decode error at line %d column %d (byte %zu): %s", jerr.line,
                        jerr.column, jerr.offset, jerr.msg);
            pop(v);
        } else {
            check_body(v, json_doc_root(doc));
        }
    }
    int status = v->status;
    if (v->oom) {
        status = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory validating a request");
    } else if (status != CLEF_OK) {
        const clef_field_error *first = v->errors->count ? &v->errors->items[0] : NULL;
        /* A JSON syntax error's loc is ["body", byte] (FastAPI's); people get "request body"
         * and the position in the message instead of a byte offset posing as a field. */
        const char *where = !first || !strcmp(first->type, "json_invalid") ? "body" : first->path;
        char dup[256];
        duplicate_note(body, len, json_doc_merged_duplicates(doc), dup, sizeof dup);
        clef_fail(status, "request %s: %s (%zu problem%s)%s", where,
                  first ? first->msg : "invalid", v->errors->count + v->errors->dropped,
                  v->errors->count + v->errors->dropped == 1 ? "" : "s", dup);
    } else {
        r = calloc(1, sizeof *r);
        if (!r) {
            status = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory building a request");
        } else {
            r->kind = kind;
            r->doc = doc;
            r->root = json_doc_root(doc);
            doc = NULL;
            status = build_request(r);
            if (status == CLEF_OK) {
                char dup[256];
                duplicate_note(body, len, json_doc_merged_duplicates(r->doc), dup, sizeof dup);
                if (dup[0])
                    CLEF_LOG_W("request accepted%s", dup);
                *out = r;
                r = NULL;
            }
        }
    }
    clef_request_free(r);
    json_doc_free(doc);
    clef_request_errors_free(&scratch);
    free(v);
    return status;
}

/* ---- error bodies ---------------------------------------------------------------------- */

int clef_workers_ai_error_code(const clef_field_error *error) {
    return strcmp(error->type, "body_too_large") == 0 ? 3006 : 5006;
}

int clef_request_errors_render_detail(const clef_request_errors *errors, clef_strbuf *out) {
    clef_strbuf_append_str(out, "{\"detail\":[");
    for (size_t i = 0; i < errors->count; i++) {
        const clef_field_error *e = &errors->items[i];
        if (i)
            clef_strbuf_append_char(out, ',');
        clef_strbuf_append_str(out, "{\"loc\":");
        clef_strbuf_append_str(out, e->loc);
        clef_strbuf_append_str(out, ",\"msg\":");
        json_render_string(e->msg, strlen(e->msg), out);
        clef_strbuf_append_str(out, ",\"type\":");
        json_render_string(e->type, strlen(e->type), out);
        clef_strbuf_append_char(out, '}');
    }
    clef_strbuf_append_str(out, "]}");
    return clef_strbuf_status(out);
}

int clef_request_errors_render_workers_ai(const clef_request_errors *errors, clef_strbuf *out) {
    clef_strbuf_append_str(out, "{\"success\":false,\"result\":{},\"errors\":[");
    for (size_t i = 0; i < errors->count; i++) {
        const clef_field_error *e = &errors->items[i];
        if (i)
            clef_strbuf_append_char(out, ',');
        clef_strbuf_appendf(out, "{\"code\":%d,\"message\":", clef_workers_ai_error_code(e));
        clef_strbuf message = {0};
        clef_strbuf_appendf(&message, "%s: %s", e->path, e->msg);
        if (message.oom)
            out->oom = 1;
        else
            json_render_string(message.data, message.len, out);
        clef_strbuf_free(&message);
        clef_strbuf_append_char(out, '}');
    }
    clef_strbuf_append_str(out, "],\"messages\":[]}");
    return clef_strbuf_status(out);
}
