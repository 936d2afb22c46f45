/*
 * st_fixture.h — test and bench helper: one safetensors fixture file as a table of
 * clef_tensor_info and a clef_tensor_source, so tests can feed oracle-written tensors (head
 * weights, inputs, expected outputs) to the model code without a whole release directory.
 * The header is parsed and checked by the release reader's safetensors parser
 * (src/release/safetensors.h); this file only adapts it.
 */
#ifndef CLEF_TESTS_ST_FIXTURE_H
#define CLEF_TESTS_ST_FIXTURE_H

#include "clef.h"
#include "core/io.h"
#include "json/json.h"
#include "model/joint_head.h"
#include "release/safetensors.h"

#include <stddef.h>

typedef struct st_fixture {
    char *bytes;              /* the whole file after st_fixture_load; NULL after _open */
    size_t size;
    clef_file file;           /* open for pread after st_fixture_open (fd -1 otherwise) */
    st_header header;
    clef_tensor_info *tensors;
    size_t n_tensors;
} st_fixture;

/* Load path whole; returns 0 or prints why and returns -1. */
int st_fixture_load(st_fixture *f, const char *path);
/* Read only the header of path and keep the file open: the source reads tensors with pread
 * (big files, e.g. benches: no second copy of the weights in memory). st_fixture_data is not
 * available then. */
int st_fixture_open(st_fixture *f, const char *path);
void st_fixture_free(st_fixture *f);

const clef_tensor_info *st_fixture_find(const st_fixture *f, const char *name);
/* Pointer to a tensor's bytes inside a loaded file (NULL if absent or after _open). */
const void *st_fixture_data(const st_fixture *f, const char *name, size_t *n_bytes);
/* A __metadata__ string (NULL if absent). */
const char *st_fixture_meta(const st_fixture *f, const char *key);

clef_tensor_source st_fixture_source(st_fixture *f);

#endif
