/*
 * video_codec.h — a video file in memory to RGB frames through FFmpeg (libavformat,
 * libavcodec, libswscale), one frame at a time in presentation order, as transformers' PyAV
 * loader enumerates them (`container.decode(video=0)`, then `to_ndarray(format="rgb24")`).
 *
 * Only the container formats requests bring are probed (MP4 / MOV, Matroska / WebM, AVI) and
 * only common video codecs are opened (H.264, HEVC, VP8, VP9, AV1, MPEG-4 part 2, MJPEG,
 * uncompressed RGB): FFmpeg's other demuxers (playlists that open further files, exotic
 * formats) are never reached. Frames over the image pixel cap (16,000,000) or containers
 * declaring more than CLEF_VIDEO_MAX_FRAMES frames are refused before decoding. FFmpeg's log
 * is silenced (it would print to stderr): errors come back as clef messages.
 * Only built with CMake CLEF_MEDIA_VIDEO.
 */
#ifndef CLEF_MEDIA_VIDEO_CODEC_H
#define CLEF_MEDIA_VIDEO_CODEC_H

#include "media/rgb_image.h"

#include <stddef.h>
#include <stdint.h>

#define CLEF_VIDEO_MAX_FRAMES 100000

typedef struct clef_video_info {
    int64_t width, height; /* of the coded frames */
    int64_t total_frames;  /* the container's count; counted from packets when it has none */
    double fps;            /* the stream's average frame rate (PyAV's average_rate) */
} clef_video_info;

typedef struct clef_video_decoder clef_video_decoder;

/* Opens the file (bytes must outlive the decoder). Returns CLEF_OK,
 * CLEF_ERR_REQUEST_INVALID (not a supported container / codec, no video stream, corrupt;
 * the message names `what`), CLEF_ERR_REQUEST_TOO_LONG (frame over the pixel cap, too many
 * frames) or CLEF_ERR_OUT_OF_MEMORY. */
int clef_video_decoder_open(const uint8_t *bytes, size_t size, const char *what,
                            clef_video_decoder **out, clef_video_info *info);

/* Decodes the next frame. *index = its 0-based position; *done = 1 (and nothing else set)
 * after the last one. With convert, *frame (allocated on first use, reused after; free with
 * clef_rgb_image_free) receives it as RGB; without, the frame is only counted. Returns CLEF_OK
 * or CLEF_ERR_REQUEST_INVALID (corrupt data, a frame of another size). */
int clef_video_decoder_next(clef_video_decoder *dec, int convert, clef_rgb_image *frame,
                            int64_t *index, int *done);

void clef_video_decoder_close(clef_video_decoder *dec); /* accepts NULL */

#endif /* CLEF_MEDIA_VIDEO_CODEC_H */
