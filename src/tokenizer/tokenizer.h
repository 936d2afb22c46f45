/*
 * tokenizer.h — a tokenizer.json byte-level BPE tokenizer (the Qwen3.5 one and its kin),
 * producing exactly the ids transformers' AutoTokenizer (the default) or Hugging Face
 * `tokenizers` (TOK_PIPELINE_FILE) produces with add_special_tokens=False.
 *
 * Load once; afterwards a tok_tokenizer is read-only and tok_encode may be called from
 * several threads at once (each call uses only its caller's tok_ids and internal
 * thread-safe caches).
 */
#ifndef CLEF_TOKENIZER_TOKENIZER_H
#define CLEF_TOKENIZER_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tok_tokenizer tok_tokenizer;

/* A caller-owned, growable id buffer. Zero-initialise, reuse across calls, free with
 * tok_ids_free. tok_encode appends to it (clear with ids->count = 0). */
typedef struct tok_ids {
    int32_t *ids;
    size_t count, cap;
} tok_ids;

void tok_ids_free(tok_ids *ids);

/* Append one id (the buffer grows geometrically); 0, or -1 when out of memory. */
int tok_ids_push(tok_ids *ids, int32_t id);

/*
 * Which pipeline to build from the files. They differ when tokenizer_config.json names a
 * tokenizer_class that transformers builds itself (docs/tokenizer.md, "Two pipelines").
 */
typedef enum tok_pipeline {
    /* What transformers 5.17's AutoTokenizer builds (the Clef reference encode_record uses
     * it): for tokenizer_class Qwen2Tokenizer / Qwen3_5Tokenizer only vocab + merges come
     * from tokenizer.json and the class installs its own normalizer, Split regex,
     * ByteLevel and added tokens; for TokenizersBackend / PreTrainedTokenizerFast (or no
     * tokenizer_config.json) tokenizer.json is used as is plus the config's tokens. Any
     * other tokenizer_class is refused with CLEF_ERR_TOKENIZER_UNSUPPORTED. The default. */
    TOK_PIPELINE_TRANSFORMERS = 0,
    /* tokenizer.json exactly as Hugging Face `tokenizers` loads it (Tokenizer.from_file),
     * plus the tokens of tokenizer_config.json's added_tokens_decoder the file lacks, at
     * their declared ids. tokenizer_class is ignored. */
    TOK_PIPELINE_FILE = 1,
} tok_pipeline;

typedef struct tok_load_opts {
    tok_pipeline pipeline;
} tok_load_opts;

/* Load tokenizer.json at path; config_path (tokenizer_config.json) may be NULL; opts NULL
 * means the defaults (zero-initialised opts: TOK_PIPELINE_TRANSFORMERS).
 * Refuses files with features it does not implement, naming the feature. */
int tok_load_ex(const char *path, const char *config_path, const tok_load_opts *opts, tok_tokenizer **out);
/* tok_load_ex with the default options. */
int tok_load(const char *path, const char *config_path, tok_tokenizer **out);
/* Load tokenizer.json (+ tokenizer_config.json if present) from a release directory. */
int tok_load_dir_ex(const char *dir, const tok_load_opts *opts, tok_tokenizer **out);
/* tok_load_dir_ex with the default options (the engine's: TOK_PIPELINE_TRANSFORMERS). */
int tok_load_dir(const char *dir, tok_tokenizer **out);
void tok_free(tok_tokenizer *tok); /* accepts NULL */

/* Encode UTF-8 text[0..len) with no special tokens added, appending ids to out.
 * Invalid UTF-8 -> CLEF_ERR_INVALID_UTF8 naming the byte offset. */
int tok_encode(const tok_tokenizer *tok, const char *text, size_t len, tok_ids *out);

/* Id of a token string (vocab or added token), or -1. */
int32_t tok_token_to_id(const tok_tokenizer *tok, const char *token);
/* Vocabulary size including added tokens (max id + 1). */
size_t tok_vocab_size(const tok_tokenizer *tok);

/* Decode ids to UTF-8 text (the tokenizer.json decoder), malloc'd, NUL-terminated. */
int tok_decode(const tok_tokenizer *tok, const int32_t *ids, size_t n, char **out, size_t *out_len);

#endif /* CLEF_TOKENIZER_TOKENIZER_H */
