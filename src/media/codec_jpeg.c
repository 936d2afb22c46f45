/*
 * codec_jpeg.c — JPEG files to RGB through libjpeg-turbo (see codec.h).
 *
 * Decoded as Pillow's JPEG plugin asks libjpeg to (the same library, default settings:
 * islow IDCT, fancy upsampling): 1 component -> grayscale, 3 -> RGB (libjpeg's YCbCr or
 * Adobe-RGB conversion), 4 (CMYK or YCCK) -> CMYK, which Pillow always reads as Adobe's
 * inverted CMYK ("CMYK;I") and converts to RGB by its own rule (pil_convert.h). Other
 * component counts are refused, as Pillow refuses them.
 *
 * Refusals beyond libjpeg's own errors: data that ends before the image does (libjpeg only
 * warns and fills the rest with gray; Pillow raises "image file is truncated" when the file
 * ends early, but pads with gray when a marker ends the scan early — clef refuses both), and
 * more than
 * CLEF_JPEG_MAX_SCANS progressive scans (a file of many tiny scans costs a full pass each:
 * a CPU bomb in a small file). libjpeg's messages are captured, never printed.
 */
#include "media/codec.h"

#include "core/error.h"
#include "media/pil_convert.h"

#include <jpeglib.h>
#include <jerror.h>

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLEF_JPEG_MAX_SCANS 256 /* libjpeg-turbo's own tools suggest a limit of this order */

typedef struct jpeg_job {
    struct jpeg_error_mgr err; /* first: libjpeg hands it back as cinfo->err */
    struct jpeg_progress_mgr progress;
    struct jpeg_decompress_struct cinfo;
    jmp_buf jump;
    char message[JMSG_LENGTH_MAX + 64];
    int truncated;
    uint8_t *row; /* one decoded scanline */
    clef_rgb_image *out;
    int orientation;
} jpeg_job;

static void jpeg_job_error_exit(j_common_ptr cinfo) {
    jpeg_job *job = (jpeg_job *)cinfo->err;
    cinfo->err->format_message(cinfo, job->message);
    longjmp(job->jump, 1);
}

static void jpeg_job_emit(j_common_ptr cinfo, int level) {
    jpeg_job *job = (jpeg_job *)cinfo->err;
    /* The data ended (EOF) or a marker came (HIT_MARKER: e.g. EOI) before the scan had all
     * its data: libjpeg would go on with gray / zero pixels. Other warnings (extraneous bytes
     * between markers and the like) leave the pixels intact: decoded on, as Pillow does. */
    if (level < 0 && (cinfo->err->msg_code == JWRN_JPEG_EOF ||
                      cinfo->err->msg_code == JWRN_HIT_MARKER))
        job->truncated = 1;
}

static void jpeg_job_output(j_common_ptr cinfo) {
    (void)cinfo; /* never print */
}

static void jpeg_job_progress(j_common_ptr cinfo) {
    jpeg_job *job = (jpeg_job *)cinfo->err;
    if (job->cinfo.input_scan_number > CLEF_JPEG_MAX_SCANS) {
        snprintf(job->message, sizeof job->message,
                 "more than %d progressive scans (refused: decoding cost)", CLEF_JPEG_MAX_SCANS);
        longjmp(job->jump, 1);
    }
}

static void read_exif(jpeg_job *job) {
    /* Pillow keeps the first APP1 segment that starts with "Exif\0\0". */
    for (jpeg_saved_marker_ptr m = job->cinfo.marker_list; m; m = m->next) {
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 &&
            memcmp(m->data, "Exif\0\0", 6) == 0) {
            job->orientation = clef_codec_exif_orientation(m->data, m->data_length);
            return;
        }
    }
}

/* jpeg_create_decompress reports running out of memory through error_exit too. */
static int jpeg_job_create(jpeg_job *job) {
    if (setjmp(job->jump))
        return 1;
    jpeg_create_decompress(&job->cinfo);
    return 0;
}

/* Everything that may longjmp; returns 0, or 1 after a libjpeg error (message in job).
 * The decompress object was created by the caller, which destroys it either way. */
static int jpeg_job_run(jpeg_job *job, const uint8_t *bytes, size_t size, const char *what) {
    struct jpeg_decompress_struct *cinfo = &job->cinfo;
    if (setjmp(job->jump))
        return 1;
    jpeg_mem_src(cinfo, bytes, (unsigned long)size);
    jpeg_save_markers(cinfo, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(cinfo, TRUE);
    read_exif(job);
    switch (cinfo->num_components) {
    case 1: cinfo->out_color_space = JCS_GRAYSCALE; break;
    case 3: cinfo->out_color_space = JCS_RGB; break;
    case 4: cinfo->out_color_space = JCS_CMYK; break;
    default:
        snprintf(job->message, sizeof job->message, "cannot handle %d-component images",
                 cinfo->num_components);
        return 1;
    }
    jpeg_start_decompress(cinfo);
    if (clef_rgb_image_alloc(job->out, cinfo->output_width, cinfo->output_height, what) !=
        CLEF_OK) {
        snprintf(job->message, sizeof job->message, "out of memory");
        return 1;
    }
    const int comps = cinfo->output_components;
    job->row = malloc((size_t)cinfo->output_width * (size_t)comps);
    if (!job->row) {
        snprintf(job->message, sizeof job->message, "out of memory");
        return 1;
    }
    const size_t w = cinfo->output_width;
    while (cinfo->output_scanline < cinfo->output_height) {
        uint8_t *dst = job->out->rgb + (size_t)cinfo->output_scanline * w * 3;
        JSAMPROW rows[1] = {job->row};
        if (jpeg_read_scanlines(cinfo, rows, 1) != 1) {
            job->truncated = 1;
            break;
        }
        if (comps == 1)
            clef_pil_gray_to_rgb(dst, job->row, w);
        else if (comps == 3)
            memcpy(dst, job->row, w * 3);
        else
            clef_pil_inverted_cmyk_to_rgb(dst, job->row, w);
        if (job->truncated)
            break;
    }
    if (!job->truncated)
        jpeg_finish_decompress(cinfo);
    return 0;
}

int clef_codec_jpeg_decode(const uint8_t *bytes, size_t size, const char *what,
                           clef_rgb_image *out, int *orientation) {
    memset(out, 0, sizeof *out);
    *orientation = 1;
    jpeg_job *job = calloc(1, sizeof *job);
    if (!job)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a JPEG", what);
    job->out = out;
    job->orientation = 1;
    job->cinfo.err = jpeg_std_error(&job->err);
    job->err.error_exit = jpeg_job_error_exit;
    job->err.emit_message = jpeg_job_emit;
    job->err.output_message = jpeg_job_output;
    job->progress.progress_monitor = jpeg_job_progress;
    int rc = CLEF_OK;
    if (jpeg_job_create(job) != 0) {
        jpeg_destroy_decompress(&job->cinfo);
        free(job);
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a JPEG", what);
    }
    job->cinfo.progress = &job->progress;
    if (jpeg_job_run(job, bytes, size, what) != 0) {
        clef_rgb_image_free(out);
        rc = strcmp(job->message, "out of memory") == 0
                 ? clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a JPEG", what)
                 : clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: corrupt JPEG: %s", what,
                             job->message);
    } else if (job->truncated) {
        clef_rgb_image_free(out);
        rc = clef_fail(CLEF_ERR_REQUEST_INVALID,
                       "%s: JPEG data ends before the image does (truncated file)", what);
    }
    *orientation = job->orientation;
    jpeg_destroy_decompress(&job->cinfo);
    free(job->row);
    free(job);
    return rc;
}
