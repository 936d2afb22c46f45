/*
 * tok_unicode.c — NFC normalization (Unicode Standard Annex #15) over the generated Unicode
 * 16.0 tables: canonical decomposition, canonical ordering by combining class, then
 * canonical composition with the blocking rule; Hangul syllables algorithmically.
 *
 * Most text never gets here: tok_nfc_quick_check() passes any text without a character that
 * could change under NFC (a flag per code point in the property table), and callers skip
 * the normalization then.
 */
#include "tokenizer/tok_unicode.h"

#include "core/utf8.h"

#include <stdlib.h>
#include <string.h>

enum {
    HANGUL_S_BASE = 0xAC00, HANGUL_L_BASE = 0x1100, HANGUL_V_BASE = 0x1161, HANGUL_T_BASE = 0x11A7,
    HANGUL_L_COUNT = 19, HANGUL_V_COUNT = 21, HANGUL_T_COUNT = 28,
    HANGUL_N_COUNT = HANGUL_V_COUNT * HANGUL_T_COUNT, HANGUL_S_COUNT = HANGUL_L_COUNT * HANGUL_N_COUNT,
};

int tok_nfc_quick_check(const unsigned char *s, size_t len) {
    size_t i = 0;
    while (i < len) {
        if (s[i] < 0xCC) { /* below U+0300 nothing changes under NFC */
            i += s[i] < 0x80 ? 1 : 2;
            continue;
        }
        uint32_t cp;
        size_t n = clef_utf8_decode(s + i, len - i, &cp);
        if (n == 0) return 0;
        if (tok_uprops(cp) & TOK_UPROP_NFC_UNSAFE) return 0;
        i += n;
    }
    return 1;
}

static int ccc_of(uint32_t cp) {
    if (!(tok_uprops(cp) & TOK_UPROP_NFC_UNSAFE)) return 0;
    size_t lo = 0, hi = tok_ccc_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (tok_ccc[mid][0] == cp) return (int)tok_ccc[mid][1];
        if (tok_ccc[mid][0] < cp) lo = mid + 1; else hi = mid;
    }
    return 0;
}

/* Writes the full canonical decomposition of cp to buf (at most 4 code points) and returns
 * the count written. */
static size_t decompose(uint32_t cp, uint32_t *buf) {
    if (cp >= HANGUL_S_BASE && cp < HANGUL_S_BASE + HANGUL_S_COUNT) {
        uint32_t s = cp - HANGUL_S_BASE;
        buf[0] = HANGUL_L_BASE + s / HANGUL_N_COUNT;
        buf[1] = HANGUL_V_BASE + (s % HANGUL_N_COUNT) / HANGUL_T_COUNT;
        if (s % HANGUL_T_COUNT == 0) return 2;
        buf[2] = HANGUL_T_BASE + s % HANGUL_T_COUNT;
        return 3;
    }
    if (tok_uprops(cp) & TOK_UPROP_NFC_UNSAFE) {
        size_t lo = 0, hi = tok_decomp_count;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (tok_decomp_index[mid][0] == cp) {
                uint32_t off = tok_decomp_index[mid][1], n = tok_decomp_index[mid][2];
                memcpy(buf, tok_decomp_chars + off, n * sizeof(uint32_t));
                return n;
            }
            if (tok_decomp_index[mid][0] < cp) lo = mid + 1; else hi = mid;
        }
    }
    buf[0] = cp;
    return 1;
}

/* The primary composite of (a, b), or 0 if they do not compose. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= HANGUL_L_BASE && a < HANGUL_L_BASE + HANGUL_L_COUNT && b >= HANGUL_V_BASE &&
        b < HANGUL_V_BASE + HANGUL_V_COUNT)
        return HANGUL_S_BASE + ((a - HANGUL_L_BASE) * HANGUL_V_COUNT + (b - HANGUL_V_BASE)) * HANGUL_T_COUNT;
    if (a >= HANGUL_S_BASE && a < HANGUL_S_BASE + HANGUL_S_COUNT && (a - HANGUL_S_BASE) % HANGUL_T_COUNT == 0 &&
        b > HANGUL_T_BASE && b < HANGUL_T_BASE + HANGUL_T_COUNT)
        return a + (b - HANGUL_T_BASE);
    size_t lo = 0, hi = tok_compose_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint32_t f = tok_compose[mid][0], s = tok_compose[mid][1];
        if (f == a && s == b) return tok_compose[mid][2];
        if (f < a || (f == a && s < b)) lo = mid + 1; else hi = mid;
    }
    return 0;
}

int tok_nfc(const unsigned char *s, size_t len, unsigned char **out, size_t *out_len) {
    /* len bytes hold at most len code points; each decomposes to at most 4 (the longest
     * full canonical decomposition in Unicode 16, Hangul included). */
    size_t cap = len * 4 + 1;
    uint32_t *cps = malloc(cap * sizeof(uint32_t));
    int *cls = malloc(cap * sizeof(int));
    if (!cps || !cls) {
        free(cps);
        free(cls);
        return -1;
    }
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t k = clef_utf8_decode(s + i, len - i, &cp);
        if (k == 0) { cp = 0xFFFD; k = 1; } /* callers pass valid UTF-8 */
        n += decompose(cp, cps + n);
        i += k;
    }
    for (size_t i = 0; i < n; i++) cls[i] = ccc_of(cps[i]);

    /* Canonical ordering: each non-starter moves left past non-starters of a higher class
     * (a stable insertion sort of every run of non-starters). */
    for (size_t i = 1; i < n; i++) {
        int c = cls[i];
        if (c == 0) continue;
        size_t j = i;
        while (j > 0 && cls[j - 1] > c) j--;
        if (j != i) {
            uint32_t cp = cps[i];
            memmove(cps + j + 1, cps + j, (i - j) * sizeof(uint32_t));
            memmove(cls + j + 1, cls + j, (i - j) * sizeof(int));
            cps[j] = cp;
            cls[j] = c;
        }
    }

    /* Canonical composition (UAX #15's reference algorithm). last_class is the class of the
     * last character kept after the current starter; 0 means "adjacent to the starter", 256
     * means "no starter yet". */
    size_t w = 0;
    if (n > 0) {
        size_t starter = 0;
        int last_class = cls[0] != 0 ? 256 : 0;
        w = 1;
        for (size_t i = 1; i < n; i++) {
            uint32_t cp = cps[i];
            int c = cls[i];
            uint32_t composite = compose_pair(cps[starter], cp);
            if (composite && (last_class < c || last_class == 0)) {
                cps[starter] = composite;
                continue;
            }
            if (c == 0) starter = w;
            last_class = c;
            cps[w++] = cp;
        }
    }
    free(cls);
    unsigned char *dst = malloc(w * 4 + 1);
    if (!dst) {
        free(cps);
        return -1;
    }
    size_t o = 0;
    for (size_t i = 0; i < w; i++) o += clef_utf8_encode(cps[i], dst + o);
    dst[o] = 0;
    free(cps);
    *out = dst;
    *out_len = o;
    return 0;
}
