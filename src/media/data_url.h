/*
 * data_url.h — the part of reading a media data URL that images and videos share: refusing
 * remote URLs, finding the content type and the base64 text of 'data:<type>;base64,<data>'.
 * Each media kind then checks its own content types, caps and signatures (image_source.c,
 * video_source.c).
 */
#ifndef CLEF_MEDIA_DATA_URL_H
#define CLEF_MEDIA_DATA_URL_H

#include <stddef.h>

/* s[0..len) starts with the lower-case ASCII prefix p, ignoring case. */
int clef_has_prefix_ci(const char *s, size_t len, const char *p);

/* Splits url[0..len) into its content type and base64 text (pointers into url). noun names
 * the media in errors ("image", "video"); example is the data URL form shown when url is not
 * one. Errors name `what`; CLEF_ERR_REQUEST_INVALID for a remote or malformed URL. */
int clef_data_url_split(const char *url, size_t len, const char *what, const char *noun,
                        const char *example, const char **type, size_t *type_len,
                        const char **b64, size_t *b64_len);

#endif
