/*
 * utf8.h — strict UTF-8 validation and decoding (RFC 3629: no overlongs, no surrogates,
 * nothing above U+10FFFF). Shared by the JSON parser and the tokenizer.
 */
#ifndef CLEF_CORE_UTF8_H
#define CLEF_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Decode one code point at s[0..len). Returns its byte length (1-4) and stores the code
 * point in *cp, or returns 0 if the bytes there are not valid UTF-8. */
size_t clef_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);

/* Returns len if s is valid UTF-8, else the byte offset of the first invalid sequence. */
size_t clef_utf8_check(const unsigned char *s, size_t len);

/* Encode cp (<= 0x10FFFF, not a surrogate) into out; returns bytes written (1-4). */
size_t clef_utf8_encode(uint32_t cp, unsigned char out[4]);

#endif /* CLEF_CORE_UTF8_H */
