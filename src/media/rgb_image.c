/*
 * rgb_image.c — allocation of decoded RGB images (see rgb_image.h).
 */
#include "media/rgb_image.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

int clef_rgb_image_alloc(clef_rgb_image *image, int64_t width, int64_t height, const char *what) {
    memset(image, 0, sizeof *image);
    if (width <= 0 || height <= 0 || width > INT32_MAX || height > INT32_MAX ||
        (uint64_t)width * (uint64_t)height > SIZE_MAX / 3)
        return clef_fail(CLEF_ERR_REQUEST_INVALID, "%s: image size %lldx%lld out of range", what,
                         (long long)width, (long long)height);
    image->rgb = malloc((size_t)width * (size_t)height * 3);
    if (!image->rgb)
        return clef_fail(CLEF_ERR_OUT_OF_MEMORY, "%s: no memory for a %lldx%lld RGB image", what,
                         (long long)width, (long long)height);
    image->width = width;
    image->height = height;
    return CLEF_OK;
}

void clef_rgb_image_free(clef_rgb_image *image) {
    if (!image)
        return;
    free(image->rgb);
    memset(image, 0, sizeof *image);
}
