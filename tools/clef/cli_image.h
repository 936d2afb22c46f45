/*
 * cli_image.h — image and video files given on the command line (`clef run --image FILE`,
 * `--video FILE`, both repeatable) as the data URLs of a record's "images" / "videos" lists.
 */
#ifndef CLEF_TOOLS_CLI_IMAGE_H
#define CLEF_TOOLS_CLI_IMAGE_H

#include <stddef.h>

/* Read the image file at path and return "data:image/<png|jpeg|webp>;base64,<bytes>" in
 * *out (malloc'd). The type comes from the file's first bytes; another kind of file is
 * refused. On failure prints "clef run: --image '<path>': <why>" and returns 1; 0 on success. */
int cli_image_data_url(const char *path, char **out);

/* The same for a video: "data:video/<mp4|x-matroska|x-msvideo>;base64,..." by the file's
 * signature (MP4 / QuickTime, WebM / Matroska, AVI); messages name --video. */
int cli_video_data_url(const char *path, char **out);

/* The record text (one JSON object) with "images": [urls...] added as its last member, so it
 * takes the place of an "images" the record already has (the last of duplicate keys wins,
 * as in Python). *out is malloc'd. Returns 0, or 1 with a message on stderr. */
int cli_record_add_images(const char *record, size_t len, char *const *urls, int n, char **out,
                          size_t *out_len);

/* The same with any list name (cli_record_add_images is "images"). */
int cli_record_add_list(const char *record, size_t len, const char *key, char *const *urls,
                        int n, char **out, size_t *out_len);

#endif
