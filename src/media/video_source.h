/*
 * video_source.h — from a request's video field to the video file's bytes.
 *
 * The same forms as images (image_source.h): a data URL ("data:video/mp4;base64,...") or a
 * content type plus base64 text ({content_type, base64}); remote URLs refused (the engine never
 * downloads); strict base64 (base64.h). Accepted types: video/mp4, video/quicktime (ISO media),
 * video/webm, video/x-matroska (Matroska), video/x-msvideo, video/avi (AVI) — the containers
 * the decoder probes (video_codec.h). The bytes must carry the signature of the declared
 * container family (a WebM sent as video/mp4 is refused by name: "wrong content type").
 * At most CLEF_VIDEO_MAX_BYTES decoded bytes per video, checked on the base64 length first
 * (an oversized text is never decoded); the request-wide total is CLEF_VIDEOS_TOTAL_MAX_BYTES,
 * for the request code to apply over all videos.
 */
#ifndef CLEF_MEDIA_VIDEO_SOURCE_H
#define CLEF_MEDIA_VIDEO_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#define CLEF_VIDEO_MAX_BYTES ((size_t)16 << 20)        /* per video, decoded file bytes */
#define CLEF_VIDEOS_TOTAL_MAX_BYTES ((size_t)32 << 20) /* all videos of a request */

typedef enum {
    CLEF_VIDEO_ISO_MEDIA = 1, /* MP4 / QuickTime: an ISO base media box ('ftyp', 'moov'...) */
    CLEF_VIDEO_MATROSKA = 2,  /* WebM / Matroska: the EBML header */
    CLEF_VIDEO_AVI = 3,       /* RIFF 'AVI ' */
} clef_video_container;

typedef struct {
    clef_video_container container;
    uint8_t *bytes; /* the video file, malloc'd */
    size_t size;
} clef_video_file;

/* Parse a data URL. `what` names the field in messages (e.g. "videos[0]"). Returns CLEF_OK,
 * CLEF_ERR_REQUEST_INVALID (not a data URL, remote URL, a type not accepted, bad base64,
 * bytes not of the declared container), CLEF_ERR_REQUEST_TOO_LONG (over CLEF_VIDEO_MAX_BYTES)
 * or CLEF_ERR_OUT_OF_MEMORY. On success free with clef_video_file_free. */
int clef_video_from_data_url(const char *url, size_t len, const char *what,
                             clef_video_file *file);

/* The same from the {content_type, base64} form. */
int clef_video_from_base64(const char *content_type, size_t type_len, const char *b64,
                           size_t b64_len, const char *what, clef_video_file *file);

/* Which container family the bytes' signature says, or 0 when none of the three. */
clef_video_container clef_video_sniff(const uint8_t *bytes, size_t size);

void clef_video_file_free(clef_video_file *file); /* accepts NULL and a zeroed struct */

#endif /* CLEF_MEDIA_VIDEO_SOURCE_H */
