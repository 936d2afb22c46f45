/*
 * image_orient.h — the EXIF orientation applied to decoded pixels, as Pillow's
 * ImageOps.exif_transpose does before the reference processor sees an image.
 *
 * Orientation 1 (or any value other than 2..8) leaves the image as stored; 2 mirrors it left
 * to right, 3 turns it 180 degrees, 4 mirrors it top to bottom, 5 transposes (swaps x and y),
 * 6 turns it 90 degrees clockwise, 7 transverses (transpose + 180), 8 turns it 90 degrees
 * counter-clockwise. 5..8 swap width and height.
 */
#ifndef CLEF_MEDIA_IMAGE_ORIENT_H
#define CLEF_MEDIA_IMAGE_ORIENT_H

#include "media/rgb_image.h"

/* Replaces *image by its oriented copy (unchanged for orientation 1 and unknown values).
 * Returns CLEF_OK or CLEF_ERR_OUT_OF_MEMORY (the image is left as it was). */
int clef_rgb_image_orient(clef_rgb_image *image, int orientation, const char *what);

#endif /* CLEF_MEDIA_IMAGE_ORIENT_H */
