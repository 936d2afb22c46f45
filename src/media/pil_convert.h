/*
 * pil_convert.h — one row of a decoded image in its file's pixel layout to 8-bit RGB, by the
 * rules of Pillow's Image.convert("RGB") (libImaging/Convert.c), which is what the reference
 * processor applies to every image. The rules, all exact integer arithmetic:
 *   L (8-bit gray) and "1" (bilevel, stored 0 / 255): (v, v, v)
 *   LA (gray + alpha): (v, v, v) — alpha DROPPED, not composited over a background
 *   RGBA: (r, g, b) — alpha dropped likewise
 *   P (palette): the palette's entry; an index past the entries the file defines gives black
 *     (0, 0, 0), as in Pillow 11; transparency (tRNS) is ignored
 *   I;16 (16-bit gray): min(v, 255) — a clamp, not a rescale: 16-bit gray turns mostly white,
 *     exactly as in Pillow
 *   CMYK as stored in JPEG files (Adobe convention, inverted): each byte is first inverted
 *     (Pillow's "CMYK;I" raw mode), then r = clip(nk - muldiv255(c, nk)) with nk = 255 - k.
 * 16-bit RGB, RGBA and LA samples are read by Pillow as their most significant byte; the
 * decoders hand those over already stripped to 8 bits.
 */
#ifndef CLEF_MEDIA_PIL_CONVERT_H
#define CLEF_MEDIA_PIL_CONVERT_H

#include <stddef.h>
#include <stdint.h>

/* A palette as Pillow holds it: 256 RGB entries, those past the file's count black. */
typedef struct clef_pil_palette {
    uint8_t rgb[256][3];
} clef_pil_palette;

/* Fills the palette from `count` RGB triples (count <= 256), the rest black. */
void clef_pil_palette_init(clef_pil_palette *palette, const uint8_t *rgb_triples, int count);

void clef_pil_gray_to_rgb(uint8_t *out, const uint8_t *in, size_t n);       /* L, "1" */
void clef_pil_gray_alpha_to_rgb(uint8_t *out, const uint8_t *in, size_t n); /* LA */
void clef_pil_rgba_to_rgb(uint8_t *out, const uint8_t *in, size_t n);       /* RGBA, RGBX */
void clef_pil_palette_to_rgb(uint8_t *out, const uint8_t *in, size_t n,
                             const clef_pil_palette *palette);               /* P */
/* I;16: `in` holds n samples in host order. */
void clef_pil_gray16_to_rgb(uint8_t *out, const uint16_t *in, size_t n);
/* CMYK bytes as libjpeg returns them for an Adobe JPEG (inverted, 4 per pixel). */
void clef_pil_inverted_cmyk_to_rgb(uint8_t *out, const uint8_t *in, size_t n);

#endif /* CLEF_MEDIA_PIL_CONVERT_H */
