/*
 * video_codec.c — FFmpeg demuxing, decoding and RGB conversion of a video in memory (see
 * video_codec.h).
 */
#include "media/video_codec.h"

#include "core/error.h"
#include "media/image_probe.h"

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/avutil.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define IO_BUFFER_SIZE 65536

/* Demuxers and decoders clef lets FFmpeg use (names as FFmpeg spells them). */
static const char format_whitelist[] = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi";
static const char codec_whitelist[] = "h264,hevc,vp8,vp9,av1,libdav1d,mpeg4,mjpeg,rawvideo";

struct clef_video_decoder {
    const uint8_t *bytes;
    size_t size, pos;
    const char *what;
    AVIOContext *io;
    AVFormatContext *fmt;
    AVCodecContext *codec;
    struct SwsContext *sws;
    AVPacket *packet;
    AVFrame *frame;
    uint8_t *conv;   /* swscale's output: rows padded (its SIMD writes past width * 3) */
    int conv_stride;
    int stream;
    int64_t width, height;
    int64_t next_index;
    int eof_sent; /* the decoder was flushed */
};

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static void silence_ffmpeg(void) {
    av_log_set_level(AV_LOG_QUIET); /* the library never prints */
}

static int read_bytes(void *opaque, uint8_t *buf, int n) {
    clef_video_decoder *d = opaque;
    size_t left = d->size - d->pos;
    if (left == 0)
        return AVERROR_EOF;
    size_t take = (size_t)n < left ? (size_t)n : left;
    memcpy(buf, d->bytes + d->pos, take);
    d->pos += take;
    return (int)take;
}

static int64_t seek_bytes(void *opaque, int64_t offset, int whence) {
    clef_video_decoder *d = opaque;
    int64_t base;
    switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return (int64_t)d->size;
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = (int64_t)d->pos; break;
    case SEEK_END: base = (int64_t)d->size; break;
    default: return -1;
    }
    if (offset > (int64_t)d->size - base || base + offset < 0)
        return -1;
    d->pos = (size_t)(base + offset);
    return (int64_t)d->pos;
}

static int av_failure(const char *what, const char *step, int err) {
    char text[AV_ERROR_MAX_STRING_SIZE];
    av_strerror(err, text, sizeof text);
    if (err == AVERROR(ENOMEM))
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to %s", what, step);
    return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: corrupt or unsupported video (%s: %s)", what,
                     step, text);
}

void clef_video_decoder_close(clef_video_decoder *d) {
    if (!d)
        return;
    sws_freeContext(d->sws);
    av_free(d->conv);
    av_frame_free(&d->frame);
    av_packet_free(&d->packet);
    avcodec_free_context(&d->codec);
    avformat_close_input(&d->fmt);
    if (d->io) {
        av_freep(&d->io->buffer);
        avio_context_free(&d->io);
    }
    free(d);
}

/* Frames counted from the stream's packets when the container states no count. */
static int count_frames(clef_video_decoder *d, int64_t *count) {
    int64_t n = 0;
    int rc;
    while ((rc = av_read_frame(d->fmt, d->packet)) >= 0) {
        if (d->packet->stream_index == d->stream)
            n++;
        av_packet_unref(d->packet);
        if (n > CLEF_VIDEO_MAX_FRAMES)
            break;
    }
    if (rc < 0 && rc != AVERROR_EOF)
        return av_failure(d->what, "read packets", rc);
    *count = n;
    rc = av_seek_frame(d->fmt, d->stream, 0, AVSEEK_FLAG_BACKWARD);
    if (rc < 0)
        return av_failure(d->what, "rewind", rc);
    return CLEF_OK;
}

int clef_video_decoder_open(const uint8_t *bytes, size_t size, const char *what,
                            clef_video_decoder **out, clef_video_info *info) {
    *out = NULL;
    memset(info, 0, sizeof *info);
    pthread_once(&log_once, silence_ffmpeg);
    clef_video_decoder *d = calloc(1, sizeof *d);
    if (!d)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a video", what);
    d->bytes = bytes;
    d->size = size;
    d->what = what;
    int rc = CLEF_OK, err;
    uint8_t *iobuf = av_malloc(IO_BUFFER_SIZE);
    d->io = iobuf ? avio_alloc_context(iobuf, IO_BUFFER_SIZE, 0, d, read_bytes, NULL, seek_bytes)
                  : NULL;
    d->fmt = avformat_alloc_context();
    d->packet = av_packet_alloc();
    d->frame = av_frame_alloc();
    if (!d->io || !d->fmt || !d->packet || !d->frame) {
        if (!d->io)
            av_free(iobuf);
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a video", what);
        goto fail;
    }
    d->fmt->pb = d->io;
    d->fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    AVDictionary *opts = NULL;
    av_dict_set(&opts, "format_whitelist", format_whitelist, 0);
    av_dict_set(&opts, "codec_whitelist", codec_whitelist, 0);
    err = avformat_open_input(&d->fmt, NULL, NULL, &opts);
    av_dict_free(&opts);
    if (err < 0) {
        d->fmt = NULL; /* freed by avformat_open_input on failure */
        rc = clef_fail(CLEF_ERR_REQUEST_INVALID,
                       "%s: not a video clef reads (MP4 / MOV, Matroska / WebM or AVI)", what);
        goto fail;
    }
    err = avformat_find_stream_info(d->fmt, NULL);
    if (err < 0) {
        rc = av_failure(what, "read the stream info", err);
        goto fail;
    }
    const AVCodec *codec = NULL;
    d->stream = av_find_best_stream(d->fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
    if (d->stream < 0 || !codec) {
        rc = clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: no video stream clef can decode", what);
        goto fail;
    }
    if (!strstr(codec_whitelist, codec->name)) {
        rc = clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: video codec '%s' is not supported", what,
                       codec->name);
        goto fail;
    }
    AVStream *st = d->fmt->streams[d->stream];
    d->width = st->codecpar->width;
    d->height = st->codecpar->height;
    if (d->width <= 0 || d->height <= 0) {
        rc = clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: video frames are %lldx%lld (empty)", what,
                       (long long)d->width, (long long)d->height);
        goto fail;
    }
    if (d->width * d->height > CLEF_IMAGE_MAX_PIXELS) {
        rc = clef_fail(CLEF_ERR_REQUEST_TOO_LONG,
                       "%s: video frames are %lldx%lld, over the 16 MP per-frame cap", what,
                       (long long)d->width, (long long)d->height);
        goto fail;
    }
    info->width = d->width;
    info->height = d->height;
    info->fps = st->avg_frame_rate.den > 0 ? av_q2d(st->avg_frame_rate) : 0.0;
    info->total_frames = st->nb_frames;
    if (info->total_frames <= 0 && (rc = count_frames(d, &info->total_frames)) != CLEF_OK)
        goto fail;
    if (info->total_frames > CLEF_VIDEO_MAX_FRAMES) {
        rc = clef_fail(CLEF_ERR_REQUEST_TOO_LONG, "%s: video has %lld frames, over %d", what,
                       (long long)info->total_frames, CLEF_VIDEO_MAX_FRAMES);
        goto fail;
    }
    if (info->total_frames <= 0 || !(info->fps > 0)) {
        rc = clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: video has no frames or no frame rate", what);
        goto fail;
    }
    d->codec = avcodec_alloc_context3(codec);
    if (!d->codec) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a video", what);
        goto fail;
    }
    if ((err = avcodec_parameters_to_context(d->codec, st->codecpar)) < 0 ||
        (err = avcodec_open2(d->codec, codec, NULL)) < 0) {
        rc = av_failure(what, "open the decoder", err);
        goto fail;
    }
    *out = d;
    return CLEF_OK;
fail:
    clef_video_decoder_close(d);
    return rc;
}

static int to_rgb(clef_video_decoder *d, const AVFrame *f, clef_rgb_image *rgb) {
    if (f->width != d->width || f->height != d->height)
        return clef_fail(CLEF_ERR_REQUEST_INVALID,
                         "%s: a frame is %dx%d, the stream says %lldx%lld (size changes are not "
                         "supported)",
                         d->what, f->width, f->height, (long long)d->width, (long long)d->height);
    if (!rgb->rgb) {
        int rc = clef_rgb_image_alloc(rgb, d->width, d->height, d->what);
        if (rc != CLEF_OK)
            return rc;
    }
    if (!d->conv) {
        d->conv_stride = (int)((d->width * 3 + 63) / 64 * 64);
        d->conv = av_malloc((size_t)d->conv_stride * (size_t)(d->height + 1) + 64);
        if (!d->conv)
            return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory for a video frame", d->what);
    }
    /* PyAV's to_ndarray("rgb24"): swscale, same size, bilinear flags, the frame's own
     * colorspace and range. */
    d->sws = sws_getCachedContext(d->sws, f->width, f->height, (enum AVPixelFormat)f->format,
                                  f->width, f->height, AV_PIX_FMT_RGB24, SWS_BILINEAR, NULL,
                                  NULL, NULL);
    if (!d->sws)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: cannot convert pixel format %s to RGB",
                         d->what, av_get_pix_fmt_name((enum AVPixelFormat)f->format));
    const int *coeffs = sws_getCoefficients(f->colorspace == AVCOL_SPC_UNSPECIFIED
                                                ? SWS_CS_DEFAULT
                                                : (int)f->colorspace);
    int src_full = f->color_range == AVCOL_RANGE_JPEG;
    sws_setColorspaceDetails(d->sws, coeffs, src_full, sws_getCoefficients(SWS_CS_DEFAULT), 1, 0,
                             1 << 16, 1 << 16);
    uint8_t *dst[4] = {d->conv, NULL, NULL, NULL};
    int dst_stride[4] = {d->conv_stride, 0, 0, 0};
    sws_scale(d->sws, (const uint8_t *const *)f->data, f->linesize, 0, f->height, dst,
              dst_stride);
    for (int64_t y = 0; y < d->height; y++)
        memcpy(rgb->rgb + (size_t)y * (size_t)d->width * 3,
               d->conv + (size_t)y * (size_t)d->conv_stride, (size_t)d->width * 3);
    return CLEF_OK;
}

int clef_video_decoder_next(clef_video_decoder *d, int convert, clef_rgb_image *frame,
                            int64_t *index, int *done) {
    *done = 0;
    for (;;) {
        int err = avcodec_receive_frame(d->codec, d->frame);
        if (err == 0) {
            *index = d->next_index++;
            int rc = convert ? to_rgb(d, d->frame, frame) : CLEF_OK;
            av_frame_unref(d->frame);
            return rc;
        }
        if (err == AVERROR_EOF) {
            *done = 1;
            return CLEF_OK;
        }
        if (err != AVERROR(EAGAIN))
            return av_failure(d->what, "decode a frame", err);
        if (d->eof_sent) {
            *done = 1;
            return CLEF_OK;
        }
        err = av_read_frame(d->fmt, d->packet);
        if (err == AVERROR_EOF) {
            d->eof_sent = 1;
            err = avcodec_send_packet(d->codec, NULL); /* flush the frames still queued */
        } else if (err < 0) {
            return av_failure(d->what, "read a packet", err);
        } else {
            if (d->packet->stream_index == d->stream)
                err = avcodec_send_packet(d->codec, d->packet);
            av_packet_unref(d->packet);
        }
        if (err < 0 && err != AVERROR(EAGAIN) && err != AVERROR_EOF)
            return av_failure(d->what, "decode a packet", err);
    }
}
