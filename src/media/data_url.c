/*
 * data_url.c — data URLs split into content type and base64 text, remote URLs refused
 * (see data_url.h).
 */
#include "media/data_url.h"

#include "core/error.h"

#include <string.h>

static int ascii_lower(int c) {
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

int clef_has_prefix_ci(const char *s, size_t len, const char *p) {
    size_t n = strlen(p);
    if (len < n)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (ascii_lower((unsigned char)s[i]) != p[i])
            return 0;
    return 1;
}

int clef_data_url_split(const char *url, size_t len, const char *what, const char *noun,
                        const char *example, const char **type, size_t *type_len,
                        const char **b64, size_t *b64_len) {
    if (clef_has_prefix_ci(url, len, "http:") || clef_has_prefix_ci(url, len, "https:"))
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: remote %s URLs are refused (the engine never downloads); send "
                         "a data URL or {content_type, base64}",
                         what, noun);
    if (!clef_has_prefix_ci(url, len, "data:"))
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: not a data URL (expected '%s')", what,
                         example);
    const char *t = url + 5;
    size_t rest = len - 5;
    const char *comma = memchr(t, ',', rest);
    if (!comma)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: data URL has no ',' before its data",
                         what);
    size_t meta_len = (size_t)(comma - t);
    static const char b64_suffix[] = ";base64";
    size_t suffix_len = sizeof b64_suffix - 1;
    if (meta_len < suffix_len ||
        !clef_has_prefix_ci(t + meta_len - suffix_len, suffix_len, b64_suffix))
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: data URL is not base64 (expected ';base64,' before the data)", what);
    *type = t;
    *type_len = meta_len - suffix_len;
    *b64 = comma + 1;
    *b64_len = rest - meta_len - 1;
    return CLEF_OK;
}
