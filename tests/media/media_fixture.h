/* media_fixture.h — reading a media fixture file whole, for the tests under tests/media.
 * A thin wrapper over the engine's own clef_read_file (src/core/io.h), so every media test
 * reads its images and videos the same way instead of carrying its own read loop. */
#ifndef CLEF_TESTS_MEDIA_FIXTURE_H
#define CLEF_TESTS_MEDIA_FIXTURE_H

#include "core/io.h"
#include "clef.h"

#include <stddef.h>
#include <stdint.h>

/* Fixtures are small (a few hundred KB); the bound only keeps a wrong path from reading a
 * huge file. */
#define MEDIA_FIXTURE_MAX_BYTES ((size_t)64 << 20)

/* The whole file, malloc'd (free with free()), or NULL when it cannot be read. */
static inline uint8_t *media_fixture_read(const char *path, size_t *size) {
    char *buf = NULL;
    if (clef_read_file(path, MEDIA_FIXTURE_MAX_BYTES, &buf, size) != CLEF_OK)
        return NULL;
    return (uint8_t *)buf;
}

#endif /* CLEF_TESTS_MEDIA_FIXTURE_H */
