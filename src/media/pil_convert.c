/*
 * pil_convert.c — Pillow's convert("RGB") rules for each decoded pixel layout (see
 * pil_convert.h). Written from the rules, checked pixel for pixel against Pillow by
 * test_media_decode.
 */
#include "media/pil_convert.h"

void clef_pil_palette_init(clef_pil_palette *palette, const uint8_t *rgb_triples, int count) {
    for (int i = 0; i < 256; i++) {
        for (int c = 0; c < 3; c++)
            palette->rgb[i][c] = i < count ? rgb_triples[3 * i + c] : 0;
    }
}

void clef_pil_gray_to_rgb(uint8_t *out, const uint8_t *in, size_t n) {
    for (size_t i = 0; i < n; i++, out += 3)
        out[0] = out[1] = out[2] = in[i];
}

void clef_pil_gray_alpha_to_rgb(uint8_t *out, const uint8_t *in, size_t n) {
    for (size_t i = 0; i < n; i++, out += 3)
        out[0] = out[1] = out[2] = in[2 * i];
}

void clef_pil_rgba_to_rgb(uint8_t *out, const uint8_t *in, size_t n) {
    for (size_t i = 0; i < n; i++, out += 3, in += 4) {
        out[0] = in[0];
        out[1] = in[1];
        out[2] = in[2];
    }
}

void clef_pil_palette_to_rgb(uint8_t *out, const uint8_t *in, size_t n,
                             const clef_pil_palette *palette) {
    for (size_t i = 0; i < n; i++, out += 3) {
        const uint8_t *entry = palette->rgb[in[i]];
        out[0] = entry[0];
        out[1] = entry[1];
        out[2] = entry[2];
    }
}

void clef_pil_gray16_to_rgb(uint8_t *out, const uint16_t *in, size_t n) {
    for (size_t i = 0; i < n; i++, out += 3) {
        uint8_t v = in[i] > 255 ? 255 : (uint8_t)in[i];
        out[0] = out[1] = out[2] = v;
    }
}

/* (a * b + 127) / 255 the way Pillow computes it (its MULDIV255). */
static int muldiv255(int a, int b) {
    int t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

static uint8_t clip8(int v) {
    return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)v;
}

void clef_pil_inverted_cmyk_to_rgb(uint8_t *out, const uint8_t *in, size_t n) {
    for (size_t i = 0; i < n; i++, out += 3, in += 4) {
        int k = 255 - in[3]; /* "CMYK;I": stored inverted */
        int nk = 255 - k;
        for (int c = 0; c < 3; c++)
            out[c] = clip8(nk - muldiv255(255 - in[c], nk));
    }
}
