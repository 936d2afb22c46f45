/*
 * base64.c — strict standard base64 decoding (see base64.h for the accepted language).
 */
#include "media/base64.h"

#include "core/error.h"

#include <stdlib.h>

/* Value of a base64 character, or -1 for anything outside the standard alphabet. */
static int sextet(unsigned char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

size_t clef_base64_decoded_bound(size_t len) {
    return len / 4 * 3 + 3;
}

int clef_base64_decode(const char *text, size_t len, const char *what, uint8_t **out,
                       size_t *out_len) {
    if (!text || !out || !out_len)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_base64_decode: NULL argument");
    if (!what)
        what = "base64";
    *out = NULL;
    *out_len = 0;
    if (len % 4 != 0)
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: base64 text of %zu characters is not a multiple of 4 (padding "
                         "missing or the text is truncated)",
                         what, len);
    size_t padding = 0;
    if (len >= 4 && text[len - 1] == '=')
        padding = text[len - 2] == '=' ? 2 : 1;
    size_t body = len - padding;
    for (size_t i = 0; i < body; i++) {
        unsigned char c = (unsigned char)text[i];
        if (sextet(c) < 0) {
            if (c == '=')
                return clef_fail(CLEF_ERR_REQUEST_INVALID,
                                 "%s: base64 padding '=' at offset %zu is not at the end", what, i);
            if (c >= 0x21 && c < 0x7f)
                return clef_fail(CLEF_ERR_REQUEST_INVALID,
                                 "%s: character '%c' at offset %zu is not in the base64 alphabet",
                                 what, c, i);
            return clef_fail(CLEF_ERR_REQUEST_INVALID,
                             "%s: byte 0x%02x at offset %zu is not in the base64 alphabet "
                             "(whitespace and line breaks are refused)",
                             what, c, i);
        }
    }
    size_t n = len / 4 * 3 - padding;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: %zu bytes for decoded base64", what, n);
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        uint32_t v = 0;
        int have = 0;
        for (int k = 0; k < 4; k++) {
            int s = i + (size_t)k < body ? sextet((unsigned char)text[i + (size_t)k]) : 0;
            if (i + (size_t)k < body)
                have++;
            v = v << 6 | (uint32_t)s;
        }
        /* have is 4, 3 (one '=') or 2 (two '='): 3, 2 or 1 bytes. */
        buf[o++] = (uint8_t)(v >> 16);
        if (have >= 3)
            buf[o++] = (uint8_t)(v >> 8);
        if (have == 4)
            buf[o++] = (uint8_t)v;
    }
    CLEF_ASSERT(o == n);
    *out = buf;
    *out_len = n;
    return CLEF_OK;
}
