/*
 * codec_png.c — PNG files to RGB through libpng's classic API (see codec.h).
 *
 * The file is read in its own layout and converted by Pillow's rules, not by libpng's
 * transforms, where the two differ: a palette image is read as indices and looked up in a
 * 256-entry palette whose undefined entries are black, as Pillow's are (libpng's own
 * expansion would not say what they are), 16-bit gray is read whole and clamped (Pillow's I;16 -> RGB). What libpng does
 * the same way Pillow does is left to it: 1/2/4-bit gray scaled to 8 bits (0x55, 0x11 steps),
 * 16-bit color and gray+alpha cut to their high byte (png_set_strip_16 = Pillow's ";16B" raw
 * modes), interlacing. No gamma, sRGB or ICC handling (Pillow applies none either); tRNS is
 * ignored (convert("RGB") drops transparency).
 *
 * libpng reports errors by longjmp (to png_jmpbuf): everything the decode allocates lives in one struct owned
 * by the caller, so the jump leaves nothing behind that cannot be freed.
 */
#include "media/codec.h"

#include "core/error.h"
#include "media/pil_convert.h"

#include <png.h>

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct png_job {
    const uint8_t *bytes;
    size_t size, pos;
    png_structp png;
    png_infop info, end_info;
    char message[200];
    /* decoded */
    uint32_t width, height;
    int color_type, bit_depth; /* after the transforms */
    size_t row_bytes;
    uint8_t *native;           /* [height, row_bytes] */
    png_bytep *rows;
    clef_pil_palette palette;
    int orientation;
} png_job;

static void png_job_read(png_structp png, png_bytep out, size_t n) {
    png_job *job = png_get_io_ptr(png);
    if (n > job->size - job->pos)
        png_error(png, "file truncated");
    memcpy(out, job->bytes + job->pos, n);
    job->pos += n;
}

static void png_job_error(png_structp png, png_const_charp message) {
    png_job *job = png_get_error_ptr(png);
    if (job)
        snprintf(job->message, sizeof job->message, "%s", message);
    png_longjmp(png, 1); /* to png_jmpbuf: ours, or libpng's own while the struct is created */
}

static void png_job_warning(png_structp png, png_const_charp message) {
    (void)png;
    (void)message; /* benign (e.g. a bad ancillary chunk CRC): Pillow decodes on too */
}

static void read_exif(png_job *job, png_infop info) {
#ifdef PNG_eXIf_SUPPORTED
    png_uint_32 n = 0;
    png_bytep exif = NULL;
    if (job->orientation == 1 && png_get_eXIf_1(job->png, info, &n, &exif) && exif && n > 0)
        job->orientation = clef_codec_exif_orientation(exif, n);
#else
    (void)job;
    (void)info;
#endif
}

/* Everything that may longjmp; returns 0, or 1 after a libpng error (message in job). */
static int png_job_run(png_job *job) {
    if (setjmp(png_jmpbuf(job->png)))
        return 1;
    png_set_read_fn(job->png, job, png_job_read);
    png_read_info(job->png, job->info);
    png_uint_32 w, h;
    int bit_depth, color_type, interlace;
    png_get_IHDR(job->png, job->info, &w, &h, &bit_depth, &color_type, &interlace, NULL, NULL);
    if (color_type == PNG_COLOR_TYPE_PALETTE) {
        png_colorp plte = NULL;
        int count = 0;
        uint8_t triples[256 * 3];
        if (!png_get_PLTE(job->png, job->info, &plte, &count) || count > 256)
            png_error(job->png, "palette image without a valid PLTE chunk");
        for (int i = 0; i < count; i++) {
            triples[3 * i] = plte[i].red;
            triples[3 * i + 1] = plte[i].green;
            triples[3 * i + 2] = plte[i].blue;
        }
        clef_pil_palette_init(&job->palette, triples, count);
        if (bit_depth < 8)
            png_set_packing(job->png); /* one index per byte, not scaled */
    } else if (color_type == PNG_COLOR_TYPE_GRAY) {
        if (bit_depth < 8)
            png_set_expand_gray_1_2_4_to_8(job->png);
    } else if (bit_depth == 16) {
        png_set_strip_16(job->png); /* RGB, RGBA, gray+alpha: the high byte */
    }
    if (interlace != PNG_INTERLACE_NONE)
        png_set_interlace_handling(job->png);
    png_read_update_info(job->png, job->info);
    job->width = w;
    job->height = h;
    job->color_type = png_get_color_type(job->png, job->info);
    job->bit_depth = png_get_bit_depth(job->png, job->info);
    job->row_bytes = png_get_rowbytes(job->png, job->info);
    read_exif(job, job->info);
    job->native = malloc(job->row_bytes * h);
    job->rows = malloc(sizeof(png_bytep) * h);
    if (!job->native || !job->rows)
        png_error(job->png, "out of memory");
    for (png_uint_32 y = 0; y < h; y++)
        job->rows[y] = job->native + job->row_bytes * y;
    png_read_image(job->png, job->rows);
    png_read_end(job->png, job->end_info);
    read_exif(job, job->end_info); /* an eXIf chunk after the image data */
    return 0;
}

static int convert_rows(png_job *job, clef_rgb_image *out) {
    const size_t w = job->width;
    for (uint32_t y = 0; y < job->height; y++) {
        const uint8_t *in = job->rows[y];
        uint8_t *dst = out->rgb + (size_t)y * w * 3;
        switch (job->color_type) {
        case PNG_COLOR_TYPE_GRAY:
            if (job->bit_depth == 16) {
                for (size_t x = 0; x < w; x++) {
                    uint16_t v = (uint16_t)(in[2 * x] << 8 | in[2 * x + 1]); /* big-endian */
                    clef_pil_gray16_to_rgb(dst + 3 * x, &v, 1);
                }
            } else {
                clef_pil_gray_to_rgb(dst, in, w);
            }
            break;
        case PNG_COLOR_TYPE_GRAY_ALPHA: clef_pil_gray_alpha_to_rgb(dst, in, w); break;
        case PNG_COLOR_TYPE_PALETTE: clef_pil_palette_to_rgb(dst, in, w, &job->palette); break;
        case PNG_COLOR_TYPE_RGB: memcpy(dst, in, w * 3); break;
        case PNG_COLOR_TYPE_RGB_ALPHA: clef_pil_rgba_to_rgb(dst, in, w); break;
        default: return -1;
        }
    }
    return 0;
}

int clef_codec_png_decode(const uint8_t *bytes, size_t size, const char *what,
                          clef_rgb_image *out, int *orientation) {
    memset(out, 0, sizeof *out);
    png_job *job = calloc(1, sizeof *job);
    if (!job)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a PNG", what);
    job->bytes = bytes;
    job->size = size;
    job->orientation = 1;
    int rc = CLEF_OK;
    job->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, png_job_error, png_job_warning);
    if (job->png) {
        job->info = png_create_info_struct(job->png);
        job->end_info = png_create_info_struct(job->png);
    }
    if (!job->png || !job->info || !job->end_info) {
        rc = clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a PNG", what);
    } else if (png_job_run(job) != 0) {
        rc = strcmp(job->message, "out of memory") == 0
                 ? clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory to decode a PNG", what)
                 : clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: corrupt or truncated PNG: %s", what,
                             job->message);
    } else if ((rc = clef_rgb_image_alloc(out, job->width, job->height, what)) == CLEF_OK) {
        if (convert_rows(job, out) != 0) {
            clef_rgb_image_free(out);
            rc = clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: PNG color type %d not supported",
                           what, job->color_type);
        }
    }
    *orientation = job->orientation;
    if (job->png)
        png_destroy_read_struct(&job->png, job->info ? &job->info : NULL,
                                job->end_info ? &job->end_info : NULL);
    free(job->rows);
    free(job->native);
    free(job);
    return rc;
}
