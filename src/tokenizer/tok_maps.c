/*
 * tok_maps.c — the hash maps of the tokenizer: token string -> id, (left, right) -> merge,
 * and the GPT-2 byte-level alphabet (byte <-> printable char) that ByteLevel uses.
 *
 * Both maps use open addressing with linear probing at a load factor of at most 1/2 and
 * are filled once at load; lookups afterwards are read-only and thread-safe.
 */
#include "tokenizer/tok_internal.h"

#include <stdlib.h>
#include <string.h>

uint64_t tok_hash_bytes(const void *p, size_t n) {
    /* FNV-1a over 8-byte words then bytes, with a final avalanche (splitmix64). */
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
        s += 8;
        n -= 8;
    }
    while (n--) h = (h ^ *s++) * 0x100000001b3ull;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static size_t pow2_at_least(size_t n) {
    size_t p = 16;
    while (p < n) p <<= 1;
    return p;
}

int tok_strmap_init(tok_strmap *m, size_t expected) {
    memset(m, 0, sizeof *m);
    size_t slots = pow2_at_least(expected * 2 + 1);
    m->slots = calloc(slots, sizeof *m->slots);
    m->cap = expected ? expected : 1;
    m->keys = malloc(m->cap * sizeof *m->keys);
    m->key_lens = malloc(m->cap * sizeof *m->key_lens);
    m->values = malloc(m->cap * sizeof *m->values);
    if (!m->slots || !m->keys || !m->key_lens || !m->values) {
        tok_strmap_free(m);
        return -1;
    }
    m->mask = slots - 1;
    return 0;
}

void tok_strmap_free(tok_strmap *m) {
    free(m->slots);
    free(m->keys);
    free(m->key_lens);
    free(m->values);
    memset(m, 0, sizeof *m);
}

static int strmap_grow(tok_strmap *m) {
    size_t cap = m->cap * 2;
    const char **keys = realloc(m->keys, cap * sizeof *keys);
    if (!keys) return -1;
    m->keys = keys;
    uint32_t *lens = realloc(m->key_lens, cap * sizeof *lens);
    if (!lens) return -1;
    m->key_lens = lens;
    int32_t *values = realloc(m->values, cap * sizeof *values);
    if (!values) return -1;
    m->values = values;
    m->cap = cap;
    size_t slots = pow2_at_least(cap * 2 + 1);
    if (slots - 1 != m->mask) {
        uint32_t *s = calloc(slots, sizeof *s);
        if (!s) return -1;
        for (size_t e = 0; e < m->count; e++) {
            size_t i = tok_hash_bytes(m->keys[e], m->key_lens[e]) & (slots - 1);
            while (s[i]) i = (i + 1) & (slots - 1);
            s[i] = (uint32_t)e + 1;
        }
        free(m->slots);
        m->slots = s;
        m->mask = slots - 1;
    }
    return 0;
}

int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t value) {
    size_t i = tok_hash_bytes(key, len) & m->mask;
    while (m->slots[i]) {
        uint32_t e = m->slots[i] - 1;
        if (m->key_lens[e] == len && memcmp(m->keys[e], key, len) == 0) {
            m->values[e] = value;
            return 1;
        }
        i = (i + 1) & m->mask;
    }
    if (m->count == m->cap) {
        if (strmap_grow(m) != 0) return -1;
        return tok_strmap_put(m, key, len, value);
    }
    size_t e = m->count++;
    m->keys[e] = key;
    m->key_lens[e] = (uint32_t)len;
    m->values[e] = value;
    m->slots[i] = (uint32_t)e + 1;
    return 0;
}

int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len) {
    if (!m->slots) return -1;
    size_t i = tok_hash_bytes(key, len) & m->mask;
    while (m->slots[i]) {
        uint32_t e = m->slots[i] - 1;
        if (m->key_lens[e] == len && memcmp(m->keys[e], key, len) == 0) return m->values[e];
        i = (i + 1) & m->mask;
    }
    return -1;
}

/* ---- merges ---------------------------------------------------------------------------- */

static inline size_t merge_hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (size_t)key;
}

int tok_merges_init(tok_merge_map *m, size_t expected) {
    size_t slots = pow2_at_least(expected * 2 + 1);
    m->slots = malloc(slots * sizeof *m->slots);
    if (!m->slots) return -1;
    for (size_t i = 0; i < slots; i++) m->slots[i].key = UINT64_MAX;
    m->mask = slots - 1;
    return 0;
}

void tok_merges_free(tok_merge_map *m) {
    free(m->slots);
    m->slots = NULL;
}

/* A later duplicate of a pair replaces the earlier one, as `tokenizers`' HashMap::insert does. */
int tok_merges_put(tok_merge_map *m, int32_t left, int32_t right, uint32_t rank, int32_t merged) {
    uint64_t key = ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
    size_t i = merge_hash(key) & m->mask;
    while (m->slots[i].key != UINT64_MAX && m->slots[i].key != key) i = (i + 1) & m->mask;
    m->slots[i].key = key;
    m->slots[i].rank = rank;
    m->slots[i].merged = merged;
    return 0;
}

/* Lookup is inlined in tok_bpe.c (hot path). */

/* ---- byte-level alphabet --------------------------------------------------------------- */

/* GPT-2's bytes_to_unicode(): printable bytes map to themselves, the others to U+0100 up. */
const uint16_t tok_byte_to_char[256] = {
    256, 257, 258, 259, 260, 261, 262, 263, 264, 265, 266, 267, 268, 269, 270, 271,
    272, 273, 274, 275, 276, 277, 278, 279, 280, 281, 282, 283, 284, 285, 286, 287,
    288, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
    48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
    64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79,
    80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95,
    96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
    112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 289,
    290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300, 301, 302, 303, 304, 305,
    306, 307, 308, 309, 310, 311, 312, 313, 314, 315, 316, 317, 318, 319, 320, 321,
    322, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 323, 174, 175,
    176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191,
    192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207,
    208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223,
    224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239,
    240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255,
};

int tok_char_to_byte(uint32_t c) {
    if (c >= 0x21 && c <= 0x7E) return (int)c;
    if ((c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF)) return (int)c;
    if (c >= 256 && c <= 323) {
        /* the non-printable bytes in increasing order: 0x00-0x20, 0x7F-0xA0, 0xAD */
        uint32_t k = c - 256;
        if (k <= 0x20) return (int)k;
        if (k <= 0x20 + 34) return (int)(0x7F + (k - 0x21));
        return 0xAD;
    }
    return -1;
}

int tok_ids_push(tok_ids *ids, int32_t id) {
    if (ids->count == ids->cap) {
        size_t cap = ids->cap ? ids->cap * 2 : 64;
        int32_t *v = realloc(ids->ids, cap * sizeof *v);
        if (!v) return -1;
        ids->ids = v;
        ids->cap = cap;
    }
    ids->ids[ids->count++] = id;
    return 0;
}

void tok_ids_free(tok_ids *ids) {
    if (!ids) return;
    free(ids->ids);
    ids->ids = NULL;
    ids->count = ids->cap = 0;
}
