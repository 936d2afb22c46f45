/*
 * test_utf8.c — strict UTF-8: every code point round-trips through encode/decode, and the
 * RFC 3629 refusals (overlongs, surrogates, > U+10FFFF, truncated, stray continuation).
 */
#include "core/utf8.h"
#include "test.h"

int main(void) {
    unsigned char buf[4];
    int bad = 0;
    for (uint32_t cp = 0; cp <= 0x10ffff; cp++) {
        if (cp >= 0xd800 && cp <= 0xdfff)
            continue;
        size_t n = clef_utf8_encode(cp, buf);
        uint32_t back = 0;
        if (clef_utf8_decode(buf, n, &back) != n || back != cp)
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
    static const struct {
        const char *bytes;
        size_t len;
    } invalid[] = {
        {"\xc0\xaf", 2},         /* overlong '/' */
        {"\xe0\x80\xaf", 3},     /* overlong */
        {"\xed\xa0\x80", 3},     /* U+D800 surrogate */
        {"\xf4\x90\x80\x80", 4}, /* U+110000 */
        {"\xe2\x82", 2},         /* truncated */
        {"\x80", 1},             /* stray continuation */
        {"\xff", 1},
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        CHECK_EQ_INT(clef_utf8_check((const unsigned char *)invalid[i].bytes, invalid[i].len), 0);
    CHECK_EQ_INT(clef_utf8_check((const unsigned char *)"ab\xe2\x82\xac" "c\xff", 7), 6);
    return test_summary();
}
