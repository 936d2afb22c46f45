/*
 * test.h — the minimal assertion helpers every C test uses.
 *
 * A test program calls CHECK*() as often as it likes and ends with `return test_summary();`
 * which prints "N passed, N failed" and returns non-zero on any failure. A failed check
 * prints file:line and both values; it does not stop the program, so one run shows every
 * failure.
 */
#ifndef CLEF_TEST_H
#define CLEF_TEST_H

#include <math.h>
#include <stdio.h>
#include <string.h>

static int test_passed_count, test_failed_count;

#define CHECK(cond)                                                               \
    do {                                                                          \
        if (cond) {                                                               \
            test_passed_count++;                                                  \
        } else {                                                                  \
            test_failed_count++;                                                  \
            fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); \
        }                                                                         \
    } while (0)

#define CHECK_MSG(cond, ...)                                                      \
    do {                                                                          \
        if (cond) {                                                               \
            test_passed_count++;                                                  \
        } else {                                                                  \
            test_failed_count++;                                                  \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                        \
    do {                                                                          \
        long long va_ = (long long)(a), vb_ = (long long)(b);                     \
        CHECK_MSG(va_ == vb_, "%s = %lld, expected %s = %lld", #a, va_, #b, vb_); \
    } while (0)

#define CHECK_EQ_STR(a, b)                                                        \
    do {                                                                          \
        const char *sa_ = (a), *sb_ = (b);                                        \
        CHECK_MSG(sa_ && sb_ && strcmp(sa_, sb_) == 0, "%s = \"%s\", expected \"%s\"", #a, \
                  sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)");                    \
    } while (0)

static inline int test_summary(void) {
    printf("%d passed, %d failed\n", test_passed_count, test_failed_count);
    return test_failed_count != 0 || test_passed_count == 0;
}

#endif /* CLEF_TEST_H */
