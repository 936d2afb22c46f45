/*
 * video_source.c — data URLs and {content_type, base64} to video file bytes, with the
 * per-video byte cap and the container signature check (see video_source.h).
 */
#include "media/video_source.h"

#include "core/error.h"
#include "media/base64.h"
#include "media/data_url.h"

#include <stdlib.h>
#include <string.h>

static const char *container_name(clef_video_container c) {
    switch (c) {
    case CLEF_VIDEO_ISO_MEDIA:
        return "MP4 / QuickTime";
    case CLEF_VIDEO_MATROSKA:
        return "WebM / Matroska";
    case CLEF_VIDEO_AVI:
        return "AVI";
    }
    return "unknown";
}

static int content_type(const char *type, size_t len, const char *what,
                        clef_video_container *container) {
    static const struct {
        const char *name;
        clef_video_container container;
    } known[] = {{"video/mp4", CLEF_VIDEO_ISO_MEDIA},     {"video/quicktime", CLEF_VIDEO_ISO_MEDIA},
                 {"video/webm", CLEF_VIDEO_MATROSKA},     {"video/x-matroska", CLEF_VIDEO_MATROSKA},
                 {"video/x-msvideo", CLEF_VIDEO_AVI},     {"video/avi", CLEF_VIDEO_AVI}};
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
        if (len == strlen(known[k].name) && clef_has_prefix_ci(type, len, known[k].name)) {
            *container = known[k].container;
            return CLEF_OK;
        }
    int shown = len > 64 ? 64 : (int)len;
    return clef_fail(CLEF_ERR_REQUEST_INVALID,
                     "%s: content type '%.*s'%s is not accepted (video/mp4, video/quicktime, "
                     "video/webm, video/x-matroska, video/x-msvideo or video/avi)",
                     what, shown, type, len > 64 ? "..." : "");
}

clef_video_container clef_video_sniff(const uint8_t *b, size_t n) {
    if (n >= 12 && memcmp(b, "RIFF", 4) == 0 && memcmp(b + 8, "AVI ", 4) == 0)
        return CLEF_VIDEO_AVI;
    if (n >= 4 && b[0] == 0x1a && b[1] == 0x45 && b[2] == 0xdf && b[3] == 0xa3)
        return CLEF_VIDEO_MATROSKA;
    /* ISO base media: the first box's type at bytes 4..8 */
    static const char *const boxes[] = {"ftyp", "moov", "mdat", "free", "skip", "wide", "pnot"};
    for (size_t k = 0; n >= 8 && k < sizeof boxes / sizeof boxes[0]; k++)
        if (memcmp(b + 4, boxes[k], 4) == 0)
            return CLEF_VIDEO_ISO_MEDIA;
    return (clef_video_container)0;
}

int clef_video_from_base64(const char *type, size_t type_len, const char *b64, size_t b64_len,
                           const char *what, clef_video_file *file) {
    if (!type || !b64 || !file)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_video_from_base64: NULL argument");
    if (!what)
        what = "video";
    memset(file, 0, sizeof *file);
    clef_video_container container = (clef_video_container)0;
    int st = content_type(type, type_len, what, &container);
    if (st)
        return st;
    if (b64_len / 4 * 3 > CLEF_VIDEO_MAX_BYTES + 2) /* before decoding anything */
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                         "%s: %zu base64 characters decode to more than the %zu-byte (16 MiB) "
                         "per-video cap", what, b64_len, CLEF_VIDEO_MAX_BYTES);
    uint8_t *bytes;
    size_t size;
    if ((st = clef_base64_decode(b64, b64_len, what, &bytes, &size)))
        return st;
    if (size > CLEF_VIDEO_MAX_BYTES) {
        free(bytes);
        return clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                         "%s: video of %zu bytes is over the %zu-byte (16 MiB) per-video cap",
                         what, size, CLEF_VIDEO_MAX_BYTES);
    }
    clef_video_container sniffed = clef_video_sniff(bytes, size);
    if (sniffed != container) {
        free(bytes);
        if (!sniffed)
            return clef_fail(CLEF_ERR_REQUEST_INVALID,
                             "%s: declared as %s video but the %zu bytes are not an MP4 / "
                             "QuickTime, WebM / Matroska or AVI file", what,
                             container_name(container), size);
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: declared as %s video but the bytes are a %s file (wrong content "
                         "type)", what, container_name(container), container_name(sniffed));
    }
    file->container = container;
    file->bytes = bytes;
    file->size = size;
    return CLEF_OK;
}

int clef_video_from_data_url(const char *url, size_t len, const char *what,
                             clef_video_file *file) {
    if (!url || !file)
        return clef_fail(CLEF_ERR_INVALID_ARG, "clef_video_from_data_url: NULL argument");
    if (!what)
        what = "video";
    memset(file, 0, sizeof *file);
    const char *type, *b64;
    size_t type_len, b64_len;
    int st = clef_data_url_split(url, len, what, "video", "data:video/<mp4|webm|...>;base64,...",
                                 &type, &type_len, &b64, &b64_len);
    if (st)
        return st;
    return clef_video_from_base64(type, type_len, b64, b64_len, what, file);
}

void clef_video_file_free(clef_video_file *file) {
    if (!file)
        return;
    free(file->bytes);
    memset(file, 0, sizeof *file);
}
