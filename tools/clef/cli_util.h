/*
 * cli_util.h — helpers every `clef` subcommand shares: numeric flags with their allowed range
 * in the error, reading an input file or stdin, the machine's core count, and writing a JSON
 * string. The CLI is built on the public headers only (clef.h, clef_release.h); anything it
 * needs beyond them lives here, once.
 */
#ifndef CLEF_TOOLS_CLI_UTIL_H
#define CLEF_TOOLS_CLI_UTIL_H

#include "clef.h"

#include <stddef.h>
#include <stdio.h>

/* Cap on records, question files and state files read by the CLI. */
#define CLI_MAX_INPUT_BYTES ((size_t)64 << 20)

/* Parse text as a decimal integer in [min, max]. On failure prints
 * "clef <cmd>: <flag> expects an integer from <min> to <max>, got '<text>'" on stderr and
 * returns 2 (bad usage); 0 on success. */
int cli_parse_int(const char *cmd, const char *flag, const char *text, long min, long max, int *out);

/* Read the file at path ("-": stdin) into a malloc'd, NUL-terminated buffer of at most
 * CLI_MAX_INPUT_BYTES. what names it in messages ("--record", "--state-file"). On failure
 * prints "clef <cmd>: <what> '<path>': <why>" on stderr and returns 1; 0 on success. */
int cli_read_input(const char *cmd, const char *what, const char *path, char **out, size_t *len);

/* Online CPU cores (at least 1). */
int cli_cpu_count(void);

/* Write s[0..len) as a JSON string literal: quotes, backslashes and control characters
 * (NUL included) escaped, other bytes as they are. */
void cli_json_string_n(FILE *out, const char *s, size_t len);
/* The same for a NUL-terminated s. */
void cli_json_string(FILE *out, const char *s);

/* On stderr, for a model on a GPU: "clef <cmd>: cuda:N: weights ... resident ..., peak ...;
 * context ...; device ... of ... GiB in use" (clef_model_memory / clef_context_memory; ctx
 * may be NULL). */
void cli_report_device_memory(const char *cmd, const clef_model *model, const clef_context *ctx);

#endif
