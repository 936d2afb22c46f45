/*
 * damage_cases.h — the table of damaged release variants (damage_cases.c): each row copies a
 * fixture release, damages it in one precise way, and says at which check it must be refused,
 * with which status, and what the message must (and must not) contain.
 */
#ifndef CLEF_TESTS_RELEASE_DAMAGE_CASES_H
#define CLEF_TESTS_RELEASE_DAMAGE_CASES_H

#include "fixture_util.h"

#include <stddef.h>

/* Where a variant is refused. */
enum {
    DAMAGE_AT_OPEN = 0,      /* clef_release_open */
    DAMAGE_AT_TOKENIZER = 1, /* clef_release_check_tokenizer (open succeeds) */
    DAMAGE_AT_VALUES = 2,    /* clef_release_scan_values (open succeeds) */
};

typedef struct damage_case {
    const char *name;
    const char *fixture;   /* under tests/release/fixtures, or a repository path */
    int (*damage)(scratch *s);
    int verify;            /* open with verify_hashes */
    int expected;          /* the status */
    const char *must_name; /* the message names this file / tensor / field */
    int stage;             /* DAMAGE_AT_* */
    const char *must_not;  /* NULL, or text the message must not hold (bytes of a refused file) */
} damage_case;

extern const damage_case damage_cases[];
extern const size_t n_damage_cases;

/* Where a tensor's bytes are in the copy (through the reader on the intact copy). */
int locate(const scratch *s, const char *engine_name, char *file, size_t cap, uint64_t *offset);

/* Two damages test_release_damaged also uses on their own. */
int tensor_unexpected(scratch *s);
int tensor_shape_vs_config(scratch *s);

#endif
