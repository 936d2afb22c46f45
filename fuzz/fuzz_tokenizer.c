/*
 * fuzz_tokenizer.c — libFuzzer target for tok_encode (and tok_decode of what it returns).
 *
 * The first input byte picks the mode:
 *   even: the rest is raw bytes, so invalid UTF-8 is exercised (must be refused with
 *         CLEF_ERR_INVALID_UTF8 exactly when clef_utf8_check rejects it);
 *   odd:  the rest is read as 3-byte groups, each a Unicode scalar value (surrogates
 *         skipped), so deep Unicode (marks, Hangul, new planes) reaches the regex and NFC.
 * Checked: no crash, hang or sanitizer report; every id is inside the vocabulary; decode of
 * the ids succeeds. The tokenizer is tests/tokenizer/data/demo/tokenizer.json (every added
 * token flag) or, for a campaign on the real file, $CLEF_FUZZ_TOKENIZER.
 */
#include "clef.h"
#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static tok_tokenizer *tok;

static void load_once(void) {
    if (tok) return;
    const char *path = getenv("CLEF_FUZZ_TOKENIZER");
    if (!path) path = "tests/tokenizer/data/demo/tokenizer.json";
    if (tok_load(path, NULL, &tok) != CLEF_OK) {
        fprintf(stderr, "fuzz_tokenizer: cannot load %s: %s\n", path, clef_last_error());
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load_once();
    if (size == 0) return 0;
    unsigned char *text = malloc(size * 2 + 4);
    size_t len = 0;
    if (data[0] % 2 == 0) {
        memcpy(text, data + 1, size - 1);
        len = size - 1;
    } else {
        for (size_t i = 1; i + 3 <= size; i += 3) {
            uint32_t cp = ((uint32_t)data[i] << 16 | (uint32_t)data[i + 1] << 8 | data[i + 2]) % 0x110000;
            if (cp >= 0xD800 && cp <= 0xDFFF) continue;
            len += clef_utf8_encode(cp, text + len);
        }
    }
    tok_ids ids = {0};
    int rc = tok_encode(tok, (const char *)text, len, &ids);
    int valid = clef_utf8_check(text, len) == len;
    if (valid != (rc != CLEF_ERR_INVALID_UTF8)) abort();
    if (rc == CLEF_OK) {
        for (size_t i = 0; i < ids.count; i++)
            if (ids.ids[i] < 0 || (size_t)ids.ids[i] >= tok_vocab_size(tok)) abort();
        char *out = NULL;
        size_t out_len = 0;
        if (tok_decode(tok, ids.ids, ids.count, &out, &out_len) != CLEF_OK) abort();
        free(out);
    } else if (rc != CLEF_ERR_INVALID_UTF8) {
        abort(); /* only invalid UTF-8 may be refused */
    }
    tok_ids_free(&ids);
    free(text);
    return 0;
}
