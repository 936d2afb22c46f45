/*
 * log.c — the settable log callback. Set once at start-up (not synchronised against
 * concurrent clef_log calls, as in llama_log_set).
 */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static void log_default(clef_log_level level, const char *text, void *user) {
    (void)user;
    if (level <= CLEF_LOG_WARN)
        fprintf(stderr, "clef: %s\n", text);
}

static clef_log_callback log_cb = log_default;
static void *log_user = NULL;

void clef_log_set(clef_log_callback cb, void *user) {
    log_cb = cb ? cb : log_default;
    log_user = cb ? user : NULL;
}

void clef_log(clef_log_level level, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    log_cb(level, line, log_user);
}
