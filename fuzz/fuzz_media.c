/*
 * fuzz_media.c — libFuzzer target for the media input side: data-URL / {content_type, base64}
 * parsing, the strict base64 decoder and the image header probe.
 *
 * The first input byte picks the mode:
 *   0: the rest is a data URL (clef_image_from_data_url, then the probe on what it returns;
 *      and clef_video_from_data_url, the video fields' parser, on the same text);
 *   1: the rest is base64 text (clef_base64_decode): a success must decode to at most
 *      clef_base64_decoded_bound bytes and re-encode to the same text;
 *   2 and up: the rest is an image file, PNG / JPEG / WebP for (byte - 2) % 3 = 0 / 1 / 2,
 *      probed directly.
 * Checked: no crash, hang, leak or sanitizer report; every status is OK or a documented one.
 */
#include "clef.h"
#include "media/base64.h"
#include "media/image_probe.h"
#include "media/image_source.h"
#include "media/video_source.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void expect_status(int st) {
    if (st != CLEF_OK && st != CLEF_ERR_REQUEST_INVALID && st != CLEF_ERR_REQUEST_TOO_LONG &&
        st != CLEF_ERR_OUT_OF_MEMORY)
        abort();
}

static void roundtrip(const char *text, size_t len, const uint8_t *bytes, size_t n) {
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    if (n > clef_base64_decoded_bound(len) || (n + 2) / 3 * 4 != len)
        abort();
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)bytes[i] << 16 | (i + 1 < n ? (uint32_t)bytes[i + 1] << 8 : 0) |
                     (i + 2 < n ? bytes[i + 2] : 0);
        const char *q = text + i / 3 * 4;
        /* The last group's unused low bits may be non-zero in the text: compare the bits that
         * carry data only. */
        if (q[0] != a[v >> 18 & 63])
            abort();
        if (i + 1 < n && q[1] != a[v >> 12 & 63])
            abort();
        if (i + 2 < n && (q[2] != a[v >> 6 & 63] || q[3] != a[v & 63]))
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0)
        return 0;
    uint8_t mode = data[0];
    const uint8_t *rest = data + 1;
    size_t n = size - 1;
    if (mode == 0) {
        clef_image_file file;
        int st = clef_image_from_data_url((const char *)rest, n, "fuzz", &file);
        expect_status(st);
        if (st == CLEF_OK) {
            int64_t w, h;
            expect_status(clef_image_probe(&file, "fuzz", &w, &h));
            clef_image_file_free(&file);
        }
        clef_video_file video;
        st = clef_video_from_data_url((const char *)rest, n, "fuzz", &video);
        expect_status(st);
        if (st == CLEF_OK && (!video.bytes || clef_video_sniff(video.bytes, video.size) !=
                                                  video.container))
            abort(); /* accepted bytes must be of the declared container */
        clef_video_file_free(&video);
    } else if (mode == 1) {
        uint8_t *out = NULL;
        size_t out_len = 0;
        int st = clef_base64_decode((const char *)rest, n, "fuzz", &out, &out_len);
        expect_status(st);
        if (st == CLEF_OK)
            roundtrip((const char *)rest, n, out, out_len);
        free(out);
    } else {
        clef_image_file file = {(clef_image_format)((mode - 2) % 3 + 1), (uint8_t *)rest, n};
        int64_t w, h;
        expect_status(clef_image_probe(&file, "fuzz", &w, &h));
    }
    return 0;
}
