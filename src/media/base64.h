/*
 * base64.h — the strict standard base64 decoder (RFC 4648 section 4 alphabet) images arrive in.
 *
 * Strict means what Python's base64.b64decode(s, validate=True) accepts: only A-Z a-z 0-9 + /,
 * length a multiple of 4, '=' only as the last one or two characters of the text. Whitespace,
 * the URL-safe alphabet and missing padding are refused with the offending position named.
 * As in Python, the unused low bits of the last group are ignored (not required to be zero).
 * One difference: CPython 3.11 accepts '=' after a complete group ("QUJD=="); clef refuses it,
 * as newer CPython does (excess padding).
 */
#ifndef CLEF_MEDIA_BASE64_H
#define CLEF_MEDIA_BASE64_H

#include <stddef.h>
#include <stdint.h>

/* Largest decoded size of `len` base64 characters (an upper bound; exact when unpadded). */
size_t clef_base64_decoded_bound(size_t len);

/* Decode text[0..len) into a new malloc'd buffer (*out, *out_len; free with free()). An empty
 * text decodes to zero bytes and a non-NULL *out. Returns CLEF_OK, CLEF_ERR_REQUEST_INVALID
 * (message names the character and its offset; `what` names the field) or
 * CLEF_ERR_OUT_OF_MEMORY. */
int clef_base64_decode(const char *text, size_t len, const char *what, uint8_t **out,
                       size_t *out_len);

#endif /* CLEF_MEDIA_BASE64_H */
