/*
 * index.h — model.safetensors.index.json: {"metadata": {"total_size": N, ...},
 * "weight_map": {tensor name: shard file name}}. Parsed from bytes (fuzzed); the checks
 * against the shards themselves (every entry present in its shard, every shard tensor listed,
 * total_size) live in release.c, which has both sides.
 */
#ifndef CLEF_RELEASE_INDEX_H
#define CLEF_RELEASE_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct clef_index_entry {
    const char *tensor;   /* stored tensor name */
    const char *shard;    /* shard file name as written (not yet checked for safety) */
} clef_index_entry;

typedef struct clef_index {
    clef_index_entry *entries;  /* sorted by tensor name */
    size_t count;
    uint64_t total_size;
    const char **shards;        /* distinct shard names, sorted */
    size_t n_shards;
    struct json_doc *doc;       /* owns the strings */
} clef_index;

/* Parse the index text. Failure: CLEF_ERR_INDEX_JSON naming file and the bad member. */
int clef_index_parse(const char *text, size_t len, const char *file, clef_index *out);
void clef_index_free(clef_index *idx); /* accepts zeroed */

/* The entry for a stored tensor name, or NULL. */
const clef_index_entry *clef_index_find(const clef_index *idx, const char *tensor);

#endif /* CLEF_RELEASE_INDEX_H */
