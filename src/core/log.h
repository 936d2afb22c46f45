/*
 * log.h — the library's one logging path. Every line goes to the callback set with
 * clef_log_set(); the default writes WARN and ERROR to stderr. Never stdout.
 */
#ifndef CLEF_CORE_LOG_H
#define CLEF_CORE_LOG_H

#include "clef.h"
#include "core/error.h"

void clef_log(clef_log_level level, const char *fmt, ...) CLEF_PRINTF(2, 3);

#define CLEF_LOG_E(...) clef_log(CLEF_LOG_ERROR, __VA_ARGS__)
#define CLEF_LOG_W(...) clef_log(CLEF_LOG_WARN, __VA_ARGS__)
#define CLEF_LOG_I(...) clef_log(CLEF_LOG_INFO, __VA_ARGS__)
#define CLEF_LOG_D(...) clef_log(CLEF_LOG_DEBUG, __VA_ARGS__)

#endif /* CLEF_CORE_LOG_H */
