/*
 * st_fixture.h — test helper: one safetensors fixture file held in memory, as a table of
 * clef_tensor_info and a clef_tensor_source, so tests can feed oracle-written tensors (head
 * weights, inputs, expected outputs) to the model code without a whole release directory.
 * Only what the fixtures written by scripts/head/ use: a header object of
 * {dtype, shape, data_offsets} entries plus "__metadata__" (string values).
 */
#ifndef CLEF_TESTS_ST_FIXTURE_H
#define CLEF_TESTS_ST_FIXTURE_H

#include "clef.h"
#include "json/json.h"
#include "core/io.h"
#include "model/joint_head.h"

#include <stddef.h>

typedef struct st_fixture {
    char *bytes;              /* the whole file (st_fixture_load) or its header only (_open) */
    clef_file file;           /* open for pread after st_fixture_open */
    size_t size;
    const char *data;         /* start of the data area */
    clef_tensor_info *tensors;
    size_t n_tensors;
    json_doc *header;
} st_fixture;

/* Load path whole; returns 0 or prints why and returns -1. */
int st_fixture_load(st_fixture *f, const char *path);
/* Read only the header of path and keep it open: tensors are read with pread by the source
 * (for big files, e.g. benches: no second copy of the weights in memory).
 * st_fixture_data is not available then. */
int st_fixture_open(st_fixture *f, const char *path);
void st_fixture_free(st_fixture *f);

const clef_tensor_info *st_fixture_find(const st_fixture *f, const char *name);
/* Pointer to a tensor's bytes inside the file (NULL if absent). */
const void *st_fixture_data(const st_fixture *f, const char *name, size_t *n_bytes);
/* A __metadata__ string (NULL if absent). */
const char *st_fixture_meta(const st_fixture *f, const char *key);

clef_tensor_source st_fixture_source(st_fixture *f);

#endif
