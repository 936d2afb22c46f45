/*
 * tok_decode.c — ids back to text with the ByteLevel decoder, as `tokenizers`' decode with
 * skip_special_tokens=False: each token's characters map back to bytes (a token with a
 * character outside the byte-level alphabet, like "<|im_start|>", contributes its own UTF-8
 * bytes), and the bytes become text with invalid sequences replaced by U+FFFD the way
 * Rust's String::from_utf8_lossy does (one U+FFFD per maximal invalid subpart).
 */
#include "tokenizer/tok_internal.h"

#include "core/error.h"
#include "core/utf8.h"

#include <stdlib.h>
#include <string.h>

/* Length of the longest prefix of s[0..len) that could start a valid sequence (a "maximal
 * subpart", at least 1), for an s that is not valid UTF-8 at its start. */
static size_t maximal_subpart(const unsigned char *s, size_t len) {
    unsigned char b = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) need = 1;
    else if (b == 0xE0) need = 2, lo = 0xA0;
    else if (b >= 0xE1 && b <= 0xEC) need = 2;
    else if (b == 0xED) need = 2, hi = 0x9F;
    else if (b >= 0xEE && b <= 0xEF) need = 2;
    else if (b == 0xF0) need = 3, lo = 0x90;
    else if (b >= 0xF1 && b <= 0xF3) need = 3;
    else if (b == 0xF4) need = 3, hi = 0x8F;
    else return 1;
    size_t i = 1;
    if (i < len && s[i] >= lo && s[i] <= hi) {
        i++;
        while (i <= need && i < len && s[i] >= 0x80 && s[i] <= 0xBF) i++;
    }
    return i;
}

int tok_decode(const tok_tokenizer *tok, const int32_t *ids, size_t n, char **out, size_t *out_len) {
    if (!tok || (!ids && n) || !out) return clef_fail(CLEF_ERR_INVALID_ARG, "tok_decode: NULL argument");
    *out = NULL;
    size_t cap = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || (size_t)ids[i] >= tok->vocab_size || !tok->id_to_token[ids[i]])
            return clef_fail(CLEF_ERR_INVALID_ARG, "tok_decode: id %d at position %zu is not in the vocabulary",
                             ids[i], i);
        cap += tok->id_to_token_len[ids[i]];
    }
    unsigned char *bytes = malloc(cap + 1);
    unsigned char *text = malloc(cap * 3 + 1); /* each invalid byte may become 3 bytes of U+FFFD */
    if (!bytes || !text) {
        free(bytes);
        free(text);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "out of memory");
    }
    size_t nb = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *t = (const unsigned char *)tok->id_to_token[ids[i]];
        size_t tl = tok->id_to_token_len[ids[i]], start = nb;
        int all_mapped = 1;
        for (size_t k = 0; k < tl;) {
            uint32_t cp;
            size_t c = clef_utf8_decode(t + k, tl - k, &cp);
            int b = c ? tok_char_to_byte(cp) : -1;
            if (b < 0) {
                all_mapped = 0;
                break;
            }
            bytes[nb++] = (unsigned char)b;
            k += c;
        }
        if (!all_mapped) {
            nb = start;
            memcpy(bytes + nb, t, tl);
            nb += tl;
        }
    }
    size_t o = 0;
    for (size_t i = 0; i < nb;) {
        uint32_t cp;
        size_t c = clef_utf8_decode(bytes + i, nb - i, &cp);
        if (c) {
            memcpy(text + o, bytes + i, c);
            o += c;
            i += c;
        } else {
            memcpy(text + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += maximal_subpart(bytes + i, nb - i);
        }
    }
    text[o] = 0;
    free(bytes);
    *out = (char *)text;
    if (out_len) *out_len = o;
    return CLEF_OK;
}
