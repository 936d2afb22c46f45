/*
 * processor_config.h — the image processor's settings read from a release's
 * preprocessor_config.json (or, as transformers 5 writes it, the "image_processor" object of
 * processor_config.json).
 *
 * Read: size.shortest_edge / size.longest_edge (min / max pixels; the legacy top-level
 * min_pixels / max_pixels override them, as transformers' constructor does), patch_size,
 * temporal_patch_size, merge_size, image_mean, image_std, rescale_factor. Settings clef does
 * not implement are refused by name rather than ignored: do_resize, do_rescale, do_normalize
 * or do_convert_rgb false, a resample other than 3 (bicubic). Absent keys keep the values
 * already in *params (clef_image_processor_default_params: Qwen3.5's).
 */
#ifndef CLEF_MEDIA_PROCESSOR_CONFIG_H
#define CLEF_MEDIA_PROCESSOR_CONFIG_H

#include "media/image_processor.h"

#include <stddef.h>

/* Parses the text of either file (`file` names it in messages). Returns CLEF_OK,
 * CLEF_ERR_CONFIG_INVALID (not JSON, a mistyped or out-of-range field), CLEF_ERR_UNSUPPORTED
 * (a setting above that clef does not implement) or CLEF_ERR_OUT_OF_MEMORY. */
int clef_processor_config_parse(const char *text, size_t len, const char *file,
                                clef_image_processor_params *params);

/* The settings of the release in `release_dir`: defaults, then patch / temporal / merge from
 * its vision config, then preprocessor_config.json if present, else processor_config.json if
 * present. The file's patch / temporal / merge must agree with the vision config (a release
 * whose processor makes rows its tower cannot read is refused, naming both values). Returns
 * CLEF_OK, the statuses above, or CLEF_ERR_IO (a file present but unreadable). */
int clef_processor_config_load(const char *release_dir, const clef_vision_config *vision,
                               clef_image_processor_params *params);

#endif /* CLEF_MEDIA_PROCESSOR_CONFIG_H */
