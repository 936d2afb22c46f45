/*
 * tok_added.c — added tokens (special or not) and the top of the encode pipeline.
 *
 * As `tokenizers`' AddedVocabulary::extract_and_normalize: tokens declared with
 * normalized=false are found in the raw text first; the text between them is normalized
 * (NFC) and then searched for the tokens declared with normalized=true (whose content was
 * normalized the same way at load). Each search is leftmost-longest over the whole piece,
 * non-overlapping (the Aho-Corasick MatchKind::LeftmostLongest that `tokenizers` uses); a match
 * is then checked and widened by the token's flags:
 *   single_word: dropped unless neither neighbour character is a word character (\w);
 *   lstrip: swallows the whitespace before it (not past the previous match);
 *   rstrip: swallows the whitespace after it.
 * A dropped match still consumes its bytes for the search (the search does not restart
 * inside it), exactly as there.
 */
#include "tokenizer/tok_internal.h"

#include "core/error.h"
#include "core/utf8.h"
#include "tokenizer/tok_unicode.h"

#include <stdlib.h>
#include <string.h>

static int build_set(tok_tokenizer *tok, tok_added_set *set, int normalized) {
    memset(set, 0, sizeof *set);
    set->order = malloc((tok->added_count + 1) * sizeof *set->order);
    if (!set->order) return -1;
    for (size_t i = 0; i < tok->added_count; i++) {
        const tok_added_token *t = &tok->added[i];
        if (t->normalized != normalized || t->match_len == 0) continue;
        set->order[set->count++] = (uint32_t)i;
    }
    /* Order: by first byte, then longest first, then declaration order (qsort would need a
     * global for the context; the lists are small, an insertion sort is enough). */
    for (size_t i = 1; i < set->count; i++) {
        uint32_t v = set->order[i];
        size_t j = i;
        while (j > 0) {
            const tok_added_token *x = &tok->added[v], *y = &tok->added[set->order[j - 1]];
            unsigned char fx = (unsigned char)x->match[0], fy = (unsigned char)y->match[0];
            int before = fx < fy || (fx == fy && (x->match_len > y->match_len ||
                                                   (x->match_len == y->match_len && v < set->order[j - 1])));
            if (!before) break;
            set->order[j] = set->order[j - 1];
            j--;
        }
        set->order[j] = v;
    }
    size_t k = 0;
    for (int b = 0; b < 256; b++) {
        set->bucket_start[b] = (uint32_t)k;
        while (k < set->count && (unsigned char)tok->added[set->order[k]].match[0] == b) k++;
        if (k > set->bucket_start[b]) set->first_bytes[b] = 1;
    }
    set->bucket_start[256] = (uint32_t)k;
    return 0;
}

int tok_added_build(tok_tokenizer *tok) {
    if (build_set(tok, &tok->raw_set, 0) != 0 || build_set(tok, &tok->norm_set, 1) != 0)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tokenizer '%s': out of memory", tok->path);
    return CLEF_OK;
}

void tok_added_free(tok_tokenizer *tok) {
    for (size_t i = 0; i < tok->added_count; i++) {
        if (tok->added[i].match != tok->added[i].content) free(tok->added[i].match);
        free(tok->added[i].content);
    }
    free(tok->added);
    free(tok->raw_set.order);
    free(tok->norm_set.order);
    tok->added = NULL;
    tok->added_count = 0;
}

/* ---- character tests on UTF-8 boundaries ---------------------------------------------- */

static uint32_t last_char(const char *s, size_t end) {
    size_t i = end;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--;
    if (i == 0) return UINT32_MAX;
    i--;
    uint32_t cp;
    return clef_utf8_decode((const unsigned char *)s + i, end - i, &cp) ? cp : UINT32_MAX;
}

static size_t char_before(const char *s, size_t end) {
    size_t i = end - 1;
    while (i > 0 && ((unsigned char)s[i] & 0xC0) == 0x80) i--;
    return i;
}

static int is_word_char(uint32_t cp) { return cp != UINT32_MAX && (tok_uprops(cp) & TOK_UPROP_WORD); }
static int is_space_char(uint32_t cp) { return cp != UINT32_MAX && (tok_uprops(cp) & TOK_UPROP_WHITE_SPACE); }

static uint32_t first_char(const char *s, size_t len) {
    uint32_t cp;
    return len && clef_utf8_decode((const unsigned char *)s, len, &cp) ? cp : UINT32_MAX;
}

/* ---- segments -------------------------------------------------------------------------- */

typedef struct segment {
    size_t start, end;
    int32_t token; /* index into tok->added, or -1 for text */
} segment;
typedef struct segments {
    segment *v;
    size_t count, cap;
} segments;

static int seg_push(segments *l, size_t start, size_t end, int32_t token) {
    if (l->count == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        segment *v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->count++] = (segment){start, end, token};
    return 0;
}

/* `tokenizers`' find_matches over s[0..len) with set: fills out with text and token segments. */
static int find_added(const tok_tokenizer *tok, const tok_added_set *set, const char *s, size_t len,
                      segments *out) {
    out->count = 0;
    size_t start_offset = 0;
    size_t p = 0;
    while (set->count && p < len) {
        unsigned char b = (unsigned char)s[p];
        if (!set->first_bytes[b]) {
            p++;
            continue;
        }
        int32_t found = -1;
        for (uint32_t k = set->bucket_start[b]; k < set->bucket_start[b + 1]; k++) {
            const tok_added_token *t = &tok->added[set->order[k]];
            if (t->match_len <= len - p && memcmp(s + p, t->match, t->match_len) == 0) {
                found = (int32_t)set->order[k];
                break;
            }
        }
        if (found < 0) {
            p++;
            continue;
        }
        const tok_added_token *t = &tok->added[found];
        size_t start = p, stop = p + t->match_len;
        p = stop; /* the search continues after this match whatever happens to it */
        if (t->single_word) {
            int start_space = start == 0 || !is_word_char(last_char(s, start));
            int stop_space = stop == len || !is_word_char(first_char(s + stop, len - stop));
            if (!start_space || !stop_space) continue;
        }
        if (t->lstrip) {
            size_t ns = start;
            while (ns > 0) {
                size_t c = char_before(s, ns);
                uint32_t cp = first_char(s + c, ns - c);
                if (!is_space_char(cp)) break;
                ns = c;
            }
            start = ns > start_offset ? ns : start_offset;
        }
        if (t->rstrip) {
            while (stop < len) {
                uint32_t cp;
                size_t k = clef_utf8_decode((const unsigned char *)s + stop, len - stop, &cp);
                if (!k || !is_space_char(cp)) break;
                stop += k;
            }
        }
        if (start_offset < start && seg_push(out, start_offset, start, -1) != 0) return -1;
        if (seg_push(out, start, stop, found) != 0) return -1;
        start_offset = stop;
    }
    if (start_offset < len && seg_push(out, start_offset, len, -1) != 0) return -1;
    return 0;
}

/* Normalizes one text piece, extracts normalized added tokens from it, encodes the rest. */
static int encode_text_piece(const tok_tokenizer *tok, const char *text, size_t len, tok_scratch *s,
                             segments *segs, tok_ids *out) {
    unsigned char *nfc = NULL;
    const char *norm = text;
    size_t norm_len = len;
    if (tok->normalize_nfc && !tok_nfc_quick_check((const unsigned char *)text, len)) {
        if (tok_nfc((const unsigned char *)text, len, &nfc, &norm_len) != 0)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tokenizer '%s': out of memory in NFC", tok->path);
        norm = (const char *)nfc;
    }
    int rc = CLEF_OK;
    if (tok->norm_set.count == 0) {
        rc = tok_pretok_and_encode(tok, norm, norm_len, s, out);
    } else if (find_added(tok, &tok->norm_set, norm, norm_len, segs) != 0) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tokenizer '%s': out of memory", tok->path);
    } else {
        for (size_t i = 0; i < segs->count && rc == CLEF_OK; i++) {
            const segment *g = &segs->v[i];
            if (g->token >= 0) {
                if (tok_ids_push(out, tok->added[g->token].id) != 0)
                    rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tokenizer '%s': out of memory", tok->path);
            } else {
                rc = tok_pretok_and_encode(tok, norm + g->start, g->end - g->start, s, out);
            }
        }
    }
    free(nfc);
    return rc;
}

int tok_encode_with_added(const tok_tokenizer *tok, const char *text, size_t len, tok_scratch *s,
                          tok_ids *out) {
    if (tok->raw_set.count == 0) {
        segments inner = {0};
        int rc = encode_text_piece(tok, text, len, s, &inner, out);
        free(inner.v);
        return rc;
    }
    segments outer = {0}, inner = {0};
    int rc = CLEF_OK;
    if (find_added(tok, &tok->raw_set, text, len, &outer) != 0) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tokenizer '%s': out of memory", tok->path);
    } else {
        for (size_t i = 0; i < outer.count && rc == CLEF_OK; i++) {
            const segment *g = &outer.v[i];
            if (g->token >= 0) {
                if (tok_ids_push(out, tok->added[g->token].id) != 0)
                    rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "tokenizer '%s': out of memory", tok->path);
            } else {
                rc = encode_text_piece(tok, text + g->start, g->end - g->start, s, &inner, out);
            }
        }
    }
    free(outer.v);
    free(inner.v);
    return rc;
}
