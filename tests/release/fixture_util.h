/*
 * fixture_util.h — helpers for the release tests: copy a committed fixture release into a
 * fresh temporary directory, damage it in one precise way (bytes, safetensors header fields,
 * JSON text, files), and remove it again.
 */
#ifndef CLEF_TESTS_RELEASE_FIXTURE_UTIL_H
#define CLEF_TESTS_RELEASE_FIXTURE_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define FIXTURES "tests/release/fixtures"

/* A temporary workspace: root/ holds rel/ (the copied release) and may hold files "outside"
 * it (for symlink escapes). */
typedef struct scratch {
    char root[256];
    char rel[300];
} scratch;

/* fixture: a name under FIXTURES, or a path from the repository root with a '/' in it
 * (e.g. "demo/clef-demo"). 0 ok. */
int scratch_copy(scratch *s, const char *fixture);
void scratch_remove(scratch *s);                      /* recursive, best effort */
char *scratch_path(const scratch *s, const char *name); /* malloc'd rel/name */

/* File edits inside the copy; each returns 0 on success (a failure is a test bug). */
int file_replace(const scratch *s, const char *name, const char *old, const char *new_text, int all);
int file_truncate(const scratch *s, const char *name, uint64_t size);
int file_append(const scratch *s, const char *name, const void *data, size_t n);
int file_write_at(const scratch *s, const char *name, uint64_t offset, const void *data, size_t n);
int file_remove(const scratch *s, const char *name);
int file_write(const scratch *s, const char *name, const char *text);

/* File kinds and links: replace name by a FIFO or a directory; move it outside the release
 * and leave a symlink to it (the same bytes, outside); replace it by a symlink to a new file
 * outside holding text; by a symlink to nothing; copy a file from src (a repository path)
 * into the copy as name. */
int file_make_fifo(const scratch *s, const char *name);
int file_make_dir(const scratch *s, const char *name);
int file_link_out(const scratch *s, const char *name);
int file_link_to_text(const scratch *s, const char *name, const char *text);
int file_link_dangling(const scratch *s, const char *name);
int file_copy_in(const scratch *s, const char *src, const char *name);

/* safetensors header edits: replace the header JSON wholesale (data kept), overwrite the
 * 8-byte length, or set one field of one tensor to a raw JSON value. */
int st_set_header_text(const scratch *s, const char *name, const char *json);
int st_set_header_len(const scratch *s, const char *name, uint64_t len);
int st_set_field(const scratch *s, const char *name, const char *tensor, const char *field,
                 const char *json_value);
/* Replace the first occurrence of old in the header JSON of a safetensors file (data kept). */
int st_replace_in_header(const scratch *s, const char *name, const char *old, const char *new_text);
/* The current data_offsets of a tensor (from the header in the copy). */
int st_get_offsets(const scratch *s, const char *name, const char *tensor, uint64_t *begin,
                   uint64_t *end, uint64_t *data_start);

#endif
