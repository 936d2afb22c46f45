/*
 * image_orient.c — EXIF orientations 2..8 as pixel moves (see image_orient.h). Each output
 * pixel (ox, oy) is read from the source pixel the transform maps it from; Pillow's
 * transpose methods are the oracle (test_media_decode has a file for every orientation).
 */
#include "media/image_orient.h"

#include "core/error.h"

#include <string.h>

int clef_rgb_image_orient(clef_rgb_image *image, int orientation, const char *what) {
    if (orientation < 2 || orientation > 8)
        return CLEF_OK;
    const int64_t w = image->width, h = image->height;
    const int swaps = orientation >= 5;
    clef_rgb_image out;
    int rc = clef_rgb_image_alloc(&out, swaps ? h : w, swaps ? w : h, what);
    if (rc != CLEF_OK)
        return rc;
    for (int64_t oy = 0; oy < out.height; oy++) {
        uint8_t *dst = out.rgb + (size_t)(oy * out.width) * 3;
        for (int64_t ox = 0; ox < out.width; ox++, dst += 3) {
            int64_t x, y; /* source pixel */
            switch (orientation) {
            case 2: x = w - 1 - ox; y = oy; break;              /* FLIP_LEFT_RIGHT */
            case 3: x = w - 1 - ox; y = h - 1 - oy; break;      /* ROTATE_180 */
            case 4: x = ox; y = h - 1 - oy; break;              /* FLIP_TOP_BOTTOM */
            case 5: x = oy; y = ox; break;                      /* TRANSPOSE */
            case 6: x = oy; y = h - 1 - ox; break;              /* ROTATE_270 (clockwise) */
            case 7: x = w - 1 - oy; y = h - 1 - ox; break;      /* TRANSVERSE */
            default: x = w - 1 - oy; y = ox; break;             /* 8: ROTATE_90 */
            }
            memcpy(dst, image->rgb + (size_t)(y * w + x) * 3, 3);
        }
    }
    clef_rgb_image_free(image);
    *image = out;
    return CLEF_OK;
}
