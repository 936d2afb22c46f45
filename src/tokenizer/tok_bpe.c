/*
 * tok_bpe.c — byte-pair encoding of one pre-tokenized word, and the word cache.
 *
 * BPE: the word's bytes start as one symbol each (the byte-level alphabet's tokens); then,
 * repeatedly, the adjacent pair with the lowest merge rank is merged, the leftmost first on
 * a tie, until no adjacent pair has a merge. This is `tokenizers`' Word::merge_all: a min-heap
 * of (rank, position) entries, stale entries skipped when popped, so a long word (a run of
 * 10,000 spaces) costs O(n log n), not O(n^2).
 *
 * Word cache (thread-safe after load): TOK_CACHE_SHARDS shards, each a small hash table of
 * word bytes -> ids in its own arena, guarded by its own mutex. A caller takes a shard's lock
 * with trylock only: if another thread holds it, the word is simply encoded without the
 * cache, so no thread ever waits. A full shard is emptied and refilled (the cache is a
 * pure optimisation: a hit and a miss give the same ids). Words longer than
 * TOK_CACHE_MAX_WORD bytes are never cached.
 */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

#define TOK_CACHE_MAX_WORD 64
#define TOK_CACHE_SLOTS 4096          /* per shard, power of two */
#define TOK_CACHE_MAX_ENTRIES 2048    /* per shard */
#define TOK_CACHE_ARENA (256 * 1024)  /* bytes per shard */

struct tok_cache_shard {
    pthread_mutex_t lock;
    uint32_t slots[TOK_CACHE_SLOTS];  /* 0 = empty, else entry offset in arena + 1 */
    size_t entries;
    size_t used;
    unsigned char arena[TOK_CACHE_ARENA];
};

/* Arena entry layout: uint32 key_len, uint32 id_count, key bytes (padded to 4), int32 ids. */
static size_t entry_size(size_t key_len, size_t id_count) {
    return 8 + ((key_len + 3) & ~(size_t)3) + id_count * 4;
}

int tok_cache_create(tok_tokenizer *tok) {
    tok->cache = calloc(TOK_CACHE_SHARDS, sizeof *tok->cache);
    if (!tok->cache) return -1;
    for (int i = 0; i < TOK_CACHE_SHARDS; i++) pthread_mutex_init(&tok->cache[i].lock, NULL);
    return 0;
}

void tok_cache_destroy(tok_tokenizer *tok) {
    if (!tok->cache) return;
    for (int i = 0; i < TOK_CACHE_SHARDS; i++) pthread_mutex_destroy(&tok->cache[i].lock);
    free(tok->cache);
    tok->cache = NULL;
}

/* With the shard locked: the entry for word, or NULL. */
static const unsigned char *cache_find(const tok_cache_shard *sh, uint64_t h, const char *word,
                                       size_t len) {
    size_t i = (h >> 8) & (TOK_CACHE_SLOTS - 1);
    while (sh->slots[i]) {
        const unsigned char *e = sh->arena + sh->slots[i] - 1;
        uint32_t klen;
        memcpy(&klen, e, 4);
        if (klen == len && memcmp(e + 8, word, len) == 0) return e;
        i = (i + 1) & (TOK_CACHE_SLOTS - 1);
    }
    return NULL;
}

static void cache_insert(tok_cache_shard *sh, uint64_t h, const char *word, size_t len,
                         const int32_t *ids, size_t n) {
    size_t need = entry_size(len, n);
    if (need > TOK_CACHE_ARENA / 16) return;
    if (sh->entries >= TOK_CACHE_MAX_ENTRIES || sh->used + need > TOK_CACHE_ARENA) {
        memset(sh->slots, 0, sizeof sh->slots);
        sh->entries = 0;
        sh->used = 0;
    }
    unsigned char *e = sh->arena + sh->used;
    uint32_t klen = (uint32_t)len, cnt = (uint32_t)n;
    memcpy(e, &klen, 4);
    memcpy(e + 4, &cnt, 4);
    memcpy(e + 8, word, len);
    memcpy(e + 8 + ((len + 3) & ~(size_t)3), ids, n * 4);
    size_t i = (h >> 8) & (TOK_CACHE_SLOTS - 1);
    while (sh->slots[i]) i = (i + 1) & (TOK_CACHE_SLOTS - 1);
    sh->slots[i] = (uint32_t)sh->used + 1;
    sh->used += need;
    sh->entries++;
}

/* ---- BPE --------------------------------------------------------------------------------- */

static inline const tok_merge_slot *merge_find(const tok_merge_map *m, int32_t left, int32_t right) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    uint64_t x = key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    size_t i = (size_t)x & m->mask;
    for (;;) {
        const tok_merge_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
        i = (i + 1) & m->mask;
    }
}

typedef struct heap_entry {
    uint32_t rank;
    uint32_t pos;
    int32_t merged;
} heap_entry;

static inline int heap_less(const heap_entry *a, const heap_entry *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(heap_entry *h, size_t *n, heap_entry e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static heap_entry heap_pop(heap_entry *h, size_t *n) {
    heap_entry top = h[0];
    heap_entry last = h[--(*n)];
    size_t i = 0, count = *n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= count) break;
        if (c + 1 < count && heap_less(&h[c + 1], &h[c])) c++;
        if (!heap_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (count) h[i] = last;
    return top;
}

/* Scratch layout in s->ids (int32 units): id[n], prev[n], next[n], then the heap. */
static int bpe_merge(const tok_tokenizer *tok, const char *word, size_t len, tok_scratch *s,
                     tok_ids *out) {
    size_t need = len * 3 + (len * 3 + 1) * (sizeof(heap_entry) / sizeof(int32_t)) + 4;
    if (s->ids_cap < need) {
        int32_t *v = realloc(s->ids, need * sizeof(int32_t));
        if (!v) return -1;
        s->ids = v;
        s->ids_cap = need;
    }
    int32_t *id = s->ids, *prev = id + len, *next = prev + len;
    heap_entry *heap = (heap_entry *)(void *)(next + len);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t t = tok->byte_to_id[(unsigned char)word[i]];
        if (t < 0) continue; /* a byte without a token is dropped, as `tokenizers` does with no unk */
        id[n] = t;
        prev[n] = (int32_t)n - 1;
        next[n] = (int32_t)n + 1;
        n++;
    }
    if (n == 0) return 0;
    next[n - 1] = -1;
    size_t hn = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        const tok_merge_slot *m = merge_find(&tok->merges, id[i], id[i + 1]);
        if (m) heap_push(heap, &hn, (heap_entry){m->rank, (uint32_t)i, m->merged});
    }
    while (hn) {
        heap_entry top = heap_pop(heap, &hn);
        uint32_t pos = top.pos;
        if (id[pos] < 0) continue;            /* symbol merged away */
        int32_t nx = next[pos];
        if (nx < 0) continue;                 /* last symbol */
        const tok_merge_slot *m = merge_find(&tok->merges, id[pos], id[nx]);
        if (!m || m->merged != top.merged) continue; /* stale entry */
        id[pos] = top.merged;
        id[nx] = -1;
        next[pos] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = (int32_t)pos;
        if (prev[pos] >= 0) {
            const tok_merge_slot *pm = merge_find(&tok->merges, id[prev[pos]], id[pos]);
            if (pm) heap_push(heap, &hn, (heap_entry){pm->rank, (uint32_t)prev[pos], pm->merged});
        }
        if (next[pos] >= 0) {
            const tok_merge_slot *nm = merge_find(&tok->merges, id[pos], id[next[pos]]);
            if (nm) heap_push(heap, &hn, (heap_entry){nm->rank, pos, nm->merged});
        }
    }
    for (int32_t i = 0; i >= 0; i = next[i])
        if (tok_ids_push(out, id[i]) != 0) return -1;
    return 0;
}

int tok_bpe_word(const tok_tokenizer *tok, const char *word, size_t len, tok_scratch *s, tok_ids *out) {
    if (len == 0) return 0;
    if (tok->ignore_merges) {
        int32_t whole = tok_strmap_get(&tok->bytes_to_id, word, len);
        if (whole >= 0) return tok_ids_push(out, whole);
    }
    if (len == 1) {
        int32_t t = tok->byte_to_id[(unsigned char)word[0]];
        return t < 0 ? 0 : tok_ids_push(out, t);
    }
    if (len > TOK_CACHE_MAX_WORD) return bpe_merge(tok, word, len, s, out);

    uint64_t h = tok_hash_bytes(word, len);
    tok_cache_shard *sh = &tok->cache[h & (TOK_CACHE_SHARDS - 1)];
    if (pthread_mutex_trylock(&sh->lock) == 0) {
        const unsigned char *e = cache_find(sh, h, word, len);
        if (e) {
            uint32_t cnt;
            memcpy(&cnt, e + 4, 4);
            const unsigned char *ids = e + 8 + ((len + 3) & ~(size_t)3);
            int rc = 0;
            for (uint32_t i = 0; i < cnt && rc == 0; i++) {
                int32_t v;
                memcpy(&v, ids + 4 * i, 4);
                rc = tok_ids_push(out, v);
            }
            pthread_mutex_unlock(&sh->lock);
            return rc;
        }
        pthread_mutex_unlock(&sh->lock);
    }
    size_t start = out->count;
    if (bpe_merge(tok, word, len, s, out) != 0) return -1;
    if (pthread_mutex_trylock(&sh->lock) == 0) {
        if (!cache_find(sh, h, word, len))
            cache_insert(sh, h, word, len, out->ids + start, out->count - start);
        pthread_mutex_unlock(&sh->lock);
    }
    return 0;
}
