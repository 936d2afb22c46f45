/*
 * index.c — parse model.safetensors.index.json (see index.h).
 */
#include "release/index.h"

#include "core/error.h"
#include "json/json.h"
#include "release/json_file.h"

#include <stdlib.h>
#include <string.h>

static int by_tensor(const void *a, const void *b) {
    return strcmp(((const clef_index_entry *)a)->tensor, ((const clef_index_entry *)b)->tensor);
}

static int by_string(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void clef_index_free(clef_index *idx) {
    if (!idx)
        return;
    free(idx->entries);
    free(idx->shards);
    json_doc_free(idx->doc);
    memset(idx, 0, sizeof *idx);
}

int clef_index_parse(const char *text, size_t len, const char *file, clef_index *out) {
    memset(out, 0, sizeof *out);
    int prc = clef_release_json_parse(text, len, file, CLEF_ERR_INDEX_JSON, &out->doc);
    if (prc != CLEF_OK)
        return prc;
    const json_value *root = json_doc_root(out->doc);
    const json_value *meta = json_object_get(root, "metadata");
    const json_value *map = json_object_get(root, "weight_map");
    int rc = CLEF_OK;
    int64_t total;
    if (root->type != JSON_OBJECT || !map || map->type != JSON_OBJECT) {
        rc = clef_fail(CLEF_ERR_INDEX_JSON, "file '%s': expected an object with a \"weight_map\" object",
                       file);
        goto fail;
    }
    if (!meta || meta->type != JSON_OBJECT || !json_get_int64(json_object_get(meta, "total_size"), &total) ||
        total < 0) {
        rc = clef_fail(CLEF_ERR_INDEX_JSON,
                       "file '%s': metadata.total_size is missing or not a non-negative integer", file);
        goto fail;
    }
    out->total_size = (uint64_t)total;
    size_t n = map->u.obj.count;
    out->entries = calloc(n ? n : 1, sizeof *out->entries);
    out->shards = calloc(n ? n : 1, sizeof *out->shards);
    if (!out->entries || !out->shards) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "file '%s': out of memory", file);
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        const json_member *m = &map->u.obj.members[i];
        const char *shard = json_get_string(m->value);
        if (!shard || strlen(shard) != m->value->u.str.len || strlen(m->key) != m->key_len ||
            !shard[0] || !m->key[0]) {
            rc = clef_fail(CLEF_ERR_INDEX_JSON,
                           "file '%s': weight_map entry '%.200s' must map a non-empty name to a "
                           "non-empty file name string",
                           file, m->key);
            goto fail;
        }
        out->entries[i].tensor = m->key;
        out->entries[i].shard = shard;
        out->shards[i] = shard;
    }
    out->count = n;
    qsort(out->entries, n, sizeof *out->entries, by_tensor);
    qsort(out->shards, n, sizeof *out->shards, by_string);
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (w == 0 || strcmp(out->shards[w - 1], out->shards[i]) != 0)
            out->shards[w++] = out->shards[i];
    out->n_shards = w;
    return CLEF_OK;
fail:
    clef_index_free(out);
    return rc;
}

const clef_index_entry *clef_index_find(const clef_index *idx, const char *tensor) {
    clef_index_entry key = {tensor, NULL};
    return bsearch(&key, idx->entries, idx->count, sizeof key, by_tensor);
}
