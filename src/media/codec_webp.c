/*
 * codec_webp.c — WebP files to RGB through libwebp and its demuxer (see codec.h).
 *
 * The demuxer validates the RIFF container and finds the EXIF chunk; the still image (VP8
 * lossy, VP8L lossless, either with alpha) is decoded with libwebp's defaults (fancy
 * upsampling), as Pillow's WebP plugin has libwebp decode it, and the alpha channel, if any,
 * is dropped (convert("RGB")). Animated WebP is refused: Pillow would composite its first
 * frame, clef does not decode animations.
 */
#include "media/codec.h"

#include "core/error.h"
#include "media/pil_convert.h"

#include <webp/decode.h>
#include <webp/demux.h>

#include <stdlib.h>
#include <string.h>

int clef_codec_webp_decode(const uint8_t *bytes, size_t size, const char *what,
                           clef_rgb_image *out, int *orientation) {
    memset(out, 0, sizeof *out);
    *orientation = 1;
    WebPData data = {bytes, size};
    WebPDemuxer *demux = WebPDemux(&data);
    if (!demux)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: corrupt or truncated WebP container",
                         what);
    uint32_t flags = WebPDemuxGetI(demux, WEBP_FF_FORMAT_FLAGS);
    if (flags & ANIMATION_FLAG) {
        WebPDemuxDelete(demux);
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: animated WebP is not supported (send a still image)", what);
    }
    WebPChunkIterator chunk;
    if ((flags & EXIF_FLAG) && WebPDemuxGetChunk(demux, "EXIF", 1, &chunk)) {
        *orientation = clef_codec_exif_orientation(chunk.chunk.bytes, chunk.chunk.size);
        WebPDemuxReleaseChunkIterator(&chunk);
    }
    WebPDemuxDelete(demux);

    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config))
        return clef_fail(CLEF_ERR_INTERNAL, "%s: libwebp version mismatch", what);
    VP8StatusCode status = WebPGetFeatures(bytes, size, &config.input);
    if (status != VP8_STATUS_OK)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: corrupt WebP header (libwebp status %d)",
                         what, (int)status);
    int rc = clef_rgb_image_alloc(out, config.input.width, config.input.height, what);
    if (rc != CLEF_OK)
        return rc;
    config.output.colorspace = MODE_RGB;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = out->rgb;
    config.output.u.RGBA.stride = (int)(out->width * 3);
    config.output.u.RGBA.size = (size_t)out->width * (size_t)out->height * 3;
    status = WebPDecode(bytes, size, &config);
    WebPFreeDecBuffer(&config.output);
    if (status != VP8_STATUS_OK) {
        clef_rgb_image_free(out);
        if (status == VP8_STATUS_OUT_OF_MEMORY)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a WebP", what);
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: corrupt or truncated WebP (%s)", what,
                         status == VP8_STATUS_NOT_ENOUGH_DATA ? "data ends early"
                         : status == VP8_STATUS_UNSUPPORTED_FEATURE ? "unsupported feature"
                                                                     : "bad bitstream");
    }
    return CLEF_OK;
}
