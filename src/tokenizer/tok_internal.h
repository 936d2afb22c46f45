/*
 * tok_internal.h — the inside of a tok_tokenizer, shared by the files of src/tokenizer/.
 *
 * Pipeline of tok_encode (the order Hugging Face `tokenizers` uses, add_special_tokens=False):
 *   1. added tokens that are not `normalized` are cut out of the raw text (tok_added.c);
 *   2. every remaining piece is normalized (NFC or nothing), then added tokens that are
 *      `normalized` are cut out of the normalized pieces;
 *   3. each piece goes through the pre-tokenizer steps (Split with a regex, then ByteLevel)
 *      (tok_pretok.c);
 *   4. each resulting word is encoded by BPE over its bytes (tok_bpe.c), through a cache.
 *
 * Invariants after tok_load: everything here is read-only except the word cache, whose
 * shards each have their own mutex (tok_bpe.c documents it). So tok_encode can run on many
 * threads at once.
 */
#ifndef CLEF_TOKENIZER_TOK_INTERNAL_H
#define CLEF_TOKENIZER_TOK_INTERNAL_H

#include "tokenizer/tokenizer.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* ---- string -> id map (open addressing, keys stored elsewhere) ------------------------ */

typedef struct tok_strmap {
    uint32_t *slots;     /* 0 = empty, else entry index + 1 */
    size_t mask;         /* slot count - 1 (a power of two) */
    const char **keys;   /* entry -> key bytes */
    uint32_t *key_lens;
    int32_t *values;
    size_t count, cap;
} tok_strmap;

uint64_t tok_hash_bytes(const void *p, size_t n);
int tok_strmap_init(tok_strmap *m, size_t expected);
void tok_strmap_free(tok_strmap *m);
/* Insert (key stays owned by the caller and must outlive the map). Returns 0, 1 if the key
 * was present (the value is then replaced), -1 out of memory. */
int tok_strmap_put(tok_strmap *m, const char *key, size_t len, int32_t value);
/* Value for key, or -1. */
int32_t tok_strmap_get(const tok_strmap *m, const char *key, size_t len);

/* ---- merges: (left id, right id) -> (rank, merged id) --------------------------------- */

typedef struct tok_merge_slot {
    uint64_t key;  /* (left << 32) | right, UINT64_MAX = empty */
    uint32_t rank;
    int32_t merged;
} tok_merge_slot;

typedef struct tok_merge_map {
    tok_merge_slot *slots;
    size_t mask;
} tok_merge_map;

/* ---- pre-tokenizer -------------------------------------------------------------------- */

typedef enum tok_split_behavior {
    TOK_SPLIT_REMOVED,
    TOK_SPLIT_ISOLATED,
    TOK_SPLIT_MERGED_WITH_PREVIOUS,
    TOK_SPLIT_MERGED_WITH_NEXT,
    TOK_SPLIT_CONTIGUOUS,
} tok_split_behavior;

/* The hand-written matcher for the Qwen / Llama-3 family of patterns (tok_pretok.c). */
typedef struct tok_qwen_pattern {
    int marks_in_words; /* 1: \p{M} joins letters ([\p{L}\p{M}]+, Qwen3.5); 0: \p{L}+ */
    int max_digits;     /* \p{N} (1) or \p{N}{1,3} (3) */
} tok_qwen_pattern;

typedef enum tok_matcher_kind {
    TOK_MATCHER_QWEN,   /* a known pattern, matched by hand with the Unicode 16 tables */
    TOK_MATCHER_PCRE2,  /* any other regex, through PCRE2 (see docs: Unicode versions) */
} tok_matcher_kind;

typedef struct tok_split {
    tok_matcher_kind kind;
    tok_qwen_pattern qwen;
    void *regex;        /* pcre2_code_8 *, for TOK_MATCHER_PCRE2 */
    tok_split_behavior behavior;
    int invert;
} tok_split;

typedef struct tok_pretok {
    tok_split *splits;  /* applied in order, before ByteLevel */
    size_t split_count;
    int byte_level_prefix_space; /* ByteLevel.add_prefix_space */
    int byte_level_use_regex;    /* ByteLevel.use_regex: split with GPT-2's pattern too */
    tok_split gpt2_split;        /* used when byte_level_use_regex */
} tok_pretok;

/* ---- added tokens --------------------------------------------------------------------- */

typedef struct tok_added_token {
    char *content;       /* as declared */
    size_t content_len;
    char *match;         /* what is searched for: content, NFC'd when normalized */
    size_t match_len;
    int32_t id;
    int special, normalized, lstrip, rstrip, single_word;
} tok_added_token;

/* A set of added tokens searched leftmost-longest, bucketed by first byte. */
typedef struct tok_added_set {
    uint32_t *order;          /* indices into tok->added, by first byte then length desc */
    uint32_t bucket_start[257];
    uint8_t first_bytes[256]; /* 1 if some token starts with this byte */
    size_t count;
} tok_added_set;

/* ---- word cache (tok_bpe.c) ----------------------------------------------------------- */

#define TOK_CACHE_SHARDS 64
typedef struct tok_cache_shard tok_cache_shard;

/* ---- the tokenizer -------------------------------------------------------------------- */

struct tok_tokenizer {
    char *path;                 /* tokenizer.json, for messages */
    int normalize_nfc;          /* normalizer NFC (else none) */
    size_t model_vocab_count;   /* entries of model.vocab (`tokenizers`' BPE get_vocab_size) */
    size_t max_added_id;        /* largest id of an added token (when added_count > 0) */

    /* vocabulary: id -> token string (as in the file), and the reverse maps */
    size_t vocab_size;          /* max id + 1, added tokens included */
    size_t id_cap;              /* allocated entries of id_to_token (>= vocab_size) */
    char **id_to_token;         /* NULL for an unused id */
    uint32_t *id_to_token_len;
    tok_strmap token_to_id;     /* model vocab + added tokens, by file string */
    tok_strmap bytes_to_id;     /* model vocab by raw bytes (for ignore_merges) */
    char *vocab_strings;        /* the vocabulary's token strings, NUL-terminated */
    char *byte_strings;         /* their raw-byte forms (keys of bytes_to_id) */

    /* BPE */
    tok_merge_map merges;
    int32_t byte_to_id[256];    /* id of the single byte b's token, -1 if absent */
    int ignore_merges;

    tok_pretok pretok;

    tok_added_token *added;
    size_t added_count;
    tok_added_set raw_set;      /* non-normalized added tokens, matched on raw text */
    tok_added_set norm_set;     /* normalized added tokens, matched after NFC */

    tok_cache_shard *cache;     /* TOK_CACHE_SHARDS shards */
};

/* The GPT-2 byte <-> char bijection of the ByteLevel pre-tokenizer and decoder. */
extern const uint16_t tok_byte_to_char[256];
/* Byte of a byte-level char, or -1 if c is not one of the 256. */
int tok_char_to_byte(uint32_t c);

/* tok_load.c: fills tok (path set, rest zeroed) from the parsed tokenizer.json and the text
 * of tokenizer_config.json (config_path NULL: none; config_path names it in messages), and
 * builds the given pipeline. */
struct json_value;
int tok_load_json(tok_tokenizer *tok, const struct json_value *root, const char *config_path,
                  const char *config_text, size_t config_len, tok_pipeline pipeline);

/* An added token's declaration (content not owned). */
typedef struct tok_token_spec {
    const char *content;
    size_t content_len;
    int special, normalized, lstrip, rstrip, single_word;
} tok_token_spec;

/* Reads {"content", "special", "normalized", "lstrip", "rstrip", "single_word"} with the
 * defaults of an AddedToken (normalized = !special, the rest false); file/where name it. */
int tok_token_spec_from_json(const char *file, const struct json_value *t, const char *where,
                             tok_token_spec *out);
/* Adds an added token with this id (refusing an id that clashes with the vocabulary). cap
 * is the allocated length of tok->added. */
int tok_add_token(tok_tokenizer *tok, const tok_token_spec *spec, int32_t id, const char *file,
                  const char *where, size_t *cap);
/* tokenizer.json's "added_tokens", each at its id. */
int tok_load_file_added(tok_tokenizer *tok, const struct json_value *list, size_t *cap);
/* A key of added_tokens_decoder as an id. */
int tok_config_token_id(const char *config_path, const char *key, int32_t *id);

/* tok_transformers.c: what transformers 5.17's AutoTokenizer builds. */
typedef enum tok_tf_class {
    TOK_TF_FILE,     /* TokenizersBackend / PreTrainedTokenizerFast: tokenizer.json as is */
    TOK_TF_QWEN2,    /* Qwen2Tokenizer: its own NFC + Qwen2 Split + ByteLevel */
    TOK_TF_QWEN3_5,  /* Qwen3_5Tokenizer: its own NFC + Qwen3.5 Split (\p{M}) + ByteLevel */
} tok_tf_class;
/* The class for tokenizer_config.json's tokenizer_class (config may be NULL: no config
 * file); an unknown class -> CLEF_ERR_TOKENIZER_UNSUPPORTED naming it. */
int tok_tf_resolve_class(const struct json_value *config, const char *config_path, tok_tf_class *out);
/* Normalizer and pre-tokenizer of a class that builds its own (QWEN2, QWEN3_5). */
int tok_tf_class_pipeline(tok_tokenizer *tok, tok_tf_class cls, int add_prefix_space);
/* The added tokens transformers ends up with, after the model is loaded. */
int tok_tf_add_tokens(tok_tokenizer *tok, tok_tf_class cls, const struct json_value *root,
                      const struct json_value *config, const char *config_path, size_t *cap);

/* tok_regex.c: regex with \s \S \p{..} \P{..} written out as Unicode 16 ranges (malloc'd,
 * NUL-terminated). Returns 0, or -1 out of memory. */
int tok_regex_expand_classes(const char *re, size_t len, char **out, size_t *out_len);

/* tok_pretok.c */
int tok_pretok_compile_split(tok_split *s, const char *regex, size_t regex_len, int literal,
                             const char *where);
void tok_pretok_free(tok_pretok *p);

/* A growable list of word pieces (pointer + length), the pre-tokenizer's output. */
typedef struct tok_piece {
    const char *p;
    size_t n;
} tok_piece;
typedef struct tok_pieces {
    tok_piece *v;
    size_t count, cap;
} tok_pieces;
int tok_pieces_push(tok_pieces *l, const char *p, size_t n);

/* Scratch memory for one tok_encode call. */
typedef struct tok_scratch {
    tok_pieces a, b;          /* ping-pong lists for the Split steps */
    char *prefixed;           /* ByteLevel add_prefix_space copies */
    size_t prefixed_len, prefixed_cap;
    void *match_data;         /* pcre2_match_data_8 * */
    int32_t *ids;             /* BPE symbols */
    size_t ids_cap;
} tok_scratch;
void tok_scratch_free(tok_scratch *s);

/* Pre-tokenize text[0..len) (normalized, valid UTF-8) and BPE-encode each word into out. */
int tok_pretok_and_encode(const tok_tokenizer *tok, const char *text, size_t len, tok_scratch *s,
                          tok_ids *out);

/* tok_bpe.c */
int tok_merges_init(tok_merge_map *m, size_t expected);
void tok_merges_free(tok_merge_map *m);
int tok_merges_put(tok_merge_map *m, int32_t left, int32_t right, uint32_t rank, int32_t merged);
int tok_bpe_word(const tok_tokenizer *tok, const char *word, size_t len, tok_scratch *s, tok_ids *out);
int tok_cache_create(tok_tokenizer *tok);
void tok_cache_destroy(tok_tokenizer *tok);

/* tok_added.c */
int tok_added_build(tok_tokenizer *tok);
void tok_added_free(tok_tokenizer *tok);
/* Encode text with added-token extraction, normalization and the rest of the pipeline. */
int tok_encode_with_added(const tok_tokenizer *tok, const char *text, size_t len, tok_scratch *s,
                          tok_ids *out);


#endif /* CLEF_TOKENIZER_TOK_INTERNAL_H */
