/*
 * tok_regex.c — rewrites the Unicode classes of a Split regex into explicit code point
 * ranges from our Unicode 16 tables before PCRE2 compiles it.
 *
 * Why: `tokenizers` matches with Oniguruma on Unicode 16; the system PCRE2 has older tables
 * (Debian 12: Unicode 14) and a \s that is not Unicode 16's White_Space on characters such
 * as U+180E, U+200B, U+FEFF. A pattern handed to PCRE2 as written therefore disagreed with
 * `tokenizers` (DeepSeek-V3's file on 548 of the 11,842 parity corpus records).
 * Writing \s, \S, \p{..} and \P{..} out as ranges taken from tok_unicode.h makes PCRE2
 * classify every code point exactly as `tokenizers` does.
 *
 * Rewritten: \s \S (White_Space), \p{X} \P{X} \p{^X} for a general category or category
 * group X (L Lu Ll Lt Lm Lo, M Mn Mc Me, N Nd Nl No, P Pc Pd Ps Pe Pi Pf Po, S Sm Sc Sk So,
 * Z Zs Zl Zp, C Cc Cf Cs Co Cn), outside a character class as [..] / [^..] and inside one as
 * its ranges (a negated one inside a class as the complement's ranges). Surrogates are left
 * out (they never occur in UTF-8 text and PCRE2 rejects them as range ends). Anything else
 * (\d, \w, \p{Greek}, POSIX classes) is left to PCRE2 as written.
 */
#include "tokenizer/tok_internal.h"

#include "core/error.h"
#include "tokenizer/tok_unicode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct strbuf {
    char *p;
    size_t n, cap;
    int oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = (b->n + n + 1) * 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

/* ---- code point sets ------------------------------------------------------------------------ */

/* A set as a bit mask over tok_ucat values, plus White_Space. */
typedef struct uset {
    uint32_t cats;  /* bit c: general category c */
    int white;      /* White_Space instead of categories */
    int negated;
} uset;

static int in_set(const uset *s, uint32_t cp) {
    int in = s->white ? (tok_uprops(cp) & TOK_UPROP_WHITE_SPACE) != 0 : ((s->cats >> tok_ucat_of(cp)) & 1) != 0;
    return in != s->negated;
}

static void put_cp(strbuf *b, uint32_t cp) {
    char t[16];
    int n = snprintf(t, sizeof t, "\\x{%X}", (unsigned)cp);
    sb_put(b, t, (size_t)n);
}

/* Appends the set's ranges (no brackets), surrogates excluded. */
static void put_ranges(strbuf *b, const uset *s) {
    uint32_t cp = 0;
    while (cp <= 0x10FFFF) {
        if ((cp >= 0xD800 && cp <= 0xDFFF) || !in_set(s, cp)) {
            cp++;
            continue;
        }
        uint32_t end = cp;
        while (end + 1 <= 0x10FFFF && !(end + 1 >= 0xD800 && end + 1 <= 0xDFFF) && in_set(s, end + 1)) end++;
        put_cp(b, cp);
        if (end > cp) {
            sb_put(b, "-", 1);
            put_cp(b, end);
        }
        cp = end + 1;
    }
}

static const struct {
    const char *name;
    uint32_t cats;
} cat_names[] = {
#define B(c) (1u << TOK_UCAT_##c)
    {"L", B(LU) | B(LL) | B(LT) | B(LM) | B(LO)},
    {"Lu", B(LU)}, {"Ll", B(LL)}, {"Lt", B(LT)}, {"Lm", B(LM)}, {"Lo", B(LO)},
    {"M", B(MN) | B(MC) | B(ME)}, {"Mn", B(MN)}, {"Mc", B(MC)}, {"Me", B(ME)},
    {"N", B(ND) | B(NL) | B(NO)}, {"Nd", B(ND)}, {"Nl", B(NL)}, {"No", B(NO)},
    {"P", B(PC) | B(PD) | B(PS) | B(PE) | B(PI) | B(PF) | B(PO)},
    {"Pc", B(PC)}, {"Pd", B(PD)}, {"Ps", B(PS)}, {"Pe", B(PE)}, {"Pi", B(PI)}, {"Pf", B(PF)}, {"Po", B(PO)},
    {"S", B(SM) | B(SC) | B(SK) | B(SO)}, {"Sm", B(SM)}, {"Sc", B(SC)}, {"Sk", B(SK)}, {"So", B(SO)},
    {"Z", B(ZS) | B(ZL) | B(ZP)}, {"Zs", B(ZS)}, {"Zl", B(ZL)}, {"Zp", B(ZP)},
    {"C", B(CC) | B(CF) | B(CS) | B(CO) | B(CN)},
    {"Cc", B(CC)}, {"Cf", B(CF)}, {"Cs", B(CS)}, {"Co", B(CO)}, {"Cn", B(CN)},
#undef B
};

/* Parses an escape at re[i] == '\\' that names a set; returns its length (0: not ours). */
static size_t parse_set(const char *re, size_t len, size_t i, uset *out) {
    memset(out, 0, sizeof *out);
    if (i + 1 >= len) return 0;
    char c = re[i + 1];
    if (c == 's' || c == 'S') {
        out->white = 1;
        out->negated = c == 'S';
        return 2;
    }
    if ((c != 'p' && c != 'P') || i + 2 >= len || re[i + 2] != '{') return 0;
    const char *close = memchr(re + i + 3, '}', len - (i + 3));
    if (!close) return 0;
    const char *name = re + i + 3;
    size_t n = (size_t)(close - name);
    out->negated = c == 'P';
    if (n && name[0] == '^') {
        out->negated = !out->negated;
        name++, n--;
    }
    for (size_t k = 0; k < sizeof cat_names / sizeof cat_names[0]; k++) {
        if (strlen(cat_names[k].name) == n && memcmp(cat_names[k].name, name, n) == 0) {
            out->cats = cat_names[k].cats;
            return (size_t)(close + 1 - (re + i));
        }
    }
    return 0;
}

int tok_regex_expand_classes(const char *re, size_t len, char **out, size_t *out_len) {
    strbuf b = {0};
    int in_class = 0;
    sb_put(&b, "", 0);
    for (size_t i = 0; i < len;) {
        char c = re[i];
        if (c == '\\') {
            uset set;
            size_t k = parse_set(re, len, i, &set);
            if (k) {
                if (in_class) {
                    put_ranges(&b, &set);
                } else {
                    int neg = set.negated;
                    set.negated = 0;
                    sb_put(&b, neg ? "[^" : "[", neg ? 2 : 1);
                    put_ranges(&b, &set);
                    sb_put(&b, "]", 1);
                }
                i += k;
                continue;
            }
            sb_put(&b, re + i, i + 1 < len ? 2 : 1); /* any other escape, kept whole */
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = 1;
            sb_put(&b, "[", 1);
            i++;
            if (i < len && re[i] == '^') sb_put(&b, "^", 1), i++;
            if (i < len && re[i] == ']') sb_put(&b, "]", 1), i++; /* a leading ] is literal */
            continue;
        }
        if (in_class && c == '[' && i + 1 < len && re[i + 1] == ':') { /* [:alpha:] kept whole */
            const char *end = strstr(re + i + 2, ":]");
            size_t n = end && (size_t)(end - re) < len ? (size_t)(end + 2 - (re + i)) : 1;
            sb_put(&b, re + i, n);
            i += n;
            continue;
        }
        if (in_class && c == ']') in_class = 0;
        sb_put(&b, &c, 1);
        i++;
    }
    if (b.oom) {
        free(b.p);
        return -1;
    }
    *out = b.p;
    *out_len = b.n;
    return 0;
}
