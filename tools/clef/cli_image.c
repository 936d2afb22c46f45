/*
 * cli_image.c — `clef run --image FILE` / `--video FILE`: an image or video file from the
 * command line into the record's "images" / "videos" list as a data URL
 * (data:<type>;base64,...), the form the API takes. The type comes from the file's signature
 * (PNG, JPEG, WebP; MP4 / QuickTime, WebM / Matroska, AVI); anything else is refused here, by
 * file name, before the release is opened. Everything else about the medium (size caps,
 * decoding, bombs) is the library's to check, as for any record.
 */
#include "cli_image.h"
#include "cli_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *image_type(const unsigned char *b, size_t n) {
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8))
        return "image/png";
    if (n >= 3 && b[0] == 0xFF && b[1] == 0xD8 && b[2] == 0xFF)
        return "image/jpeg";
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WEBP", 4))
        return "image/webp";
    return NULL;
}

static const char *video_type(const unsigned char *b, size_t n) {
    if (n >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "AVI ", 4))
        return "video/x-msvideo";
    if (n >= 4 && !memcmp(b, "\x1a\x45\xdf\xa3", 4))
        return "video/x-matroska"; /* WebM is Matroska: the library takes either name */
    if (n >= 8 && (!memcmp(b + 4, "ftyp", 4) || !memcmp(b + 4, "moov", 4) ||
                   !memcmp(b + 4, "mdat", 4) || !memcmp(b + 4, "free", 4) ||
                   !memcmp(b + 4, "wide", 4)))
        return "video/mp4";
    return NULL;
}

/* The file at path as a data URL of the type its first bytes say (`video` picks the kind). */
static int media_data_url(const char *path, int video, char **out) {
    const char *flag = video ? "--video" : "--image";
    char *bytes = NULL;
    size_t n = 0;
    int rc = cli_read_input("run", flag, path, &bytes, &n);
    if (rc)
        return rc;
    const char *type = video ? video_type((const unsigned char *)bytes, n)
                             : image_type((const unsigned char *)bytes, n);
    if (!type) {
        fprintf(stderr, "clef run: %s '%s': not %s file (by its first bytes)\n", flag, path,
                video ? "an MP4 / QuickTime, WebM / Matroska or AVI" : "a PNG, JPEG or WebP");
        free(bytes);
        return 1;
    }
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const size_t head = strlen("data:;base64,") + strlen(type);
    char *url = malloc(head + 4 * ((n + 2) / 3) + 1);
    if (!url) {
        fprintf(stderr, "clef run: out of memory\n");
        free(bytes);
        return 1;
    }
    char *p = url + sprintf(url, "data:%s;base64,", type);
    const unsigned char *b = (const unsigned char *)bytes;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0) |
                     (i + 2 < n ? b[i + 2] : 0);
        *p++ = alphabet[v >> 18 & 63];
        *p++ = alphabet[v >> 12 & 63];
        *p++ = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? alphabet[v & 63] : '=';
    }
    *p = '\0';
    free(bytes);
    *out = url;
    return 0;
}

int cli_image_data_url(const char *path, char **out) {
    return media_data_url(path, 0, out);
}

int cli_video_data_url(const char *path, char **out) {
    return media_data_url(path, 1, out);
}

int cli_record_add_images(const char *record, size_t len, char *const *urls, int n, char **out,
                          size_t *out_len) {
    return cli_record_add_list(record, len, "images", urls, n, out, out_len);
}

int cli_record_add_list(const char *record, size_t len, const char *key, char *const *urls,
                        int n, char **out, size_t *out_len) {
    /* the record's closing brace (trailing whitespace skipped); the caller has checked that
     * the record is one JSON object */
    size_t end = len;
    while (end > 0 && (record[end - 1] == ' ' || record[end - 1] == '\n' ||
                       record[end - 1] == '\r' || record[end - 1] == '\t'))
        end--;
    if (end == 0 || record[end - 1] != '}') {
        fprintf(stderr, "clef run: --image / --video need the record to be a JSON object\n");
        return 1;
    }
    size_t open = end - 1;
    int empty = 1; /* "{}" takes no comma */
    for (size_t i = 0; i < open && empty; i++)
        if (record[i] != '{' && record[i] != ' ' && record[i] != '\n' && record[i] != '\r' &&
            record[i] != '\t')
            empty = 0;
    char *buf = NULL;
    size_t buf_len = 0;
    FILE *f = open_memstream(&buf, &buf_len);
    if (!f) {
        fprintf(stderr, "clef run: out of memory\n");
        return 1;
    }
    fwrite(record, 1, open, f);
    fprintf(f, empty ? "\"%s\":[" : ",\"%s\":[", key);
    for (int i = 0; i < n; i++) {
        fputs(i ? ",\"" : "\"", f);
        fputs(urls[i], f);
        fputs("\"", f);
    }
    fputs("]}", f);
    if (fclose(f) != 0 || !buf) {
        free(buf);
        fprintf(stderr, "clef run: out of memory\n");
        return 1;
    }
    *out = buf;
    *out_len = buf_len;
    return 0;
}
