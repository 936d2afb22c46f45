/*
 * torch_resize.h — torchvision's resize(..., BICUBIC, antialias=True) of an 8-bit RGB image,
 * bit for bit: the resize of transformers' Qwen3-VL video processor.
 *
 * The video processor runs on transformers' torchvision backend: the decoded frames are uint8
 * tensors and torchvision hands them, uint8, to torch's CPU antialiased bicubic upsampling
 * (ATen UpSampleKernel.cpp, `_upsample_bicubic2d_aa`). That kernel is Pillow's algorithm with
 * torch's own fixed point, so it is NOT Pillow's bytes (pil_resize.h): the same separable
 * passes (horizontal first, then vertical, each rounded and clamped to uint8; a pass whose
 * size does not change is skipped) and the same bicubic kernel (a = -0.5) and support
 * (2, stretched by the scale when shrinking), but the normalized double weights are turned
 * into int16 at a precision chosen per axis (the largest number of bits, at most 22, for
 * which twice the axis's largest weight stays under 2^15), where Pillow always uses 22 bits
 * in int32. The outputs differ from Pillow's by 1 in a few percent of the values.
 */
#ifndef CLEF_MEDIA_TORCH_RESIZE_H
#define CLEF_MEDIA_TORCH_RESIZE_H

#include "media/rgb_image.h"

/* Resizes `in` to out_width x out_height into *out (allocated here; free with
 * clef_rgb_image_free). Returns CLEF_OK, CLEF_ERR_INVALID_ARG (a size <= 0) or
 * CLEF_ERR_OUT_OF_MEMORY. */
int clef_torch_resize_bicubic(const clef_rgb_image *in, int64_t out_width, int64_t out_height,
                              const char *what, clef_rgb_image *out);

#endif /* CLEF_MEDIA_TORCH_RESIZE_H */
