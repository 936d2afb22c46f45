/*
 * fuzz_image.c — libFuzzer target for the whole pixel path of an image: the header probe,
 * the PNG / JPEG / WebP decoders (libpng, libjpeg-turbo, libwebp with their error channels
 * captured), EXIF orientation (libexif), Pillow's convert("RGB") rules, the bicubic resize,
 * normalization and patchify.
 *
 * The input is an image file; its format is read from its signature, as a request's image is
 * checked against its declared type. Inputs declaring more than 4 megapixels are skipped (the
 * caps and refusals of larger ones are the probe's, fuzzed by fuzz_media; here they would only
 * slow the campaign down). The processor runs with small settings (patch 4, merge 2, at most
 * 4,096 pixels) so every accepted input goes through resize and patchify quickly.
 * Checked: no crash, hang, leak or sanitizer report; every status is OK or a documented one;
 * an accepted image has the grid smart_resize promises.
 */
#include "clef.h"
#include "media/image_processor.h"
#include "media/image_probe.h"
#include "media/image_source.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    clef_image_file file = {clef_image_sniff(data, size), (uint8_t *)data, size};
    if (file.format == 0)
        return 0;
    int64_t w = 0, h = 0;
    if (clef_image_probe(&file, "fuzz", &w, &h) == CLEF_OK && w * h > ((int64_t)4 << 20))
        return 0;
    clef_image_processor_params params;
    clef_image_processor_default_params(&params);
    params.patch_size = 4;
    params.merge_size = 2;
    params.min_pixels = 64;
    params.max_pixels = 4096;
    clef_image_pixels px;
    int st = clef_image_process(&file, &params, "fuzz", &px);
    if (st == CLEF_OK) {
        if (px.grid_t != 1 || px.grid_h % 2 || px.grid_w % 2 ||
            px.resized_w * px.resized_h > 4096 || px.n_rows != px.grid_h * px.grid_w ||
            px.row_len != 3 * 2 * 4 * 4)
            abort();
    } else if (st != CLEF_ERR_REQUEST_INVALID && st != CLEF_ERR_REQUEST_TOO_LONG &&
               st != CLEF_ERR_OUT_OF_MEMORY && st != CLEF_ERR_UNSUPPORTED) {
        abort();
    }
    clef_image_pixels_free(&px);
    return 0;
}
