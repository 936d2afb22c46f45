/*
 * run_cmd.h — run a command line the way a user would (through the shell) and capture its
 * exit status, stdout and stderr, for the tests of the `clef` tool. Every command runs under
 * `timeout` so that a hang (a FIFO read, a lock) fails the test instead of stalling ctest.
 * Header-only: static functions, one copy per test program.
 */
#ifndef CLEF_TESTS_RUN_CMD_H
#define CLEF_TESTS_RUN_CMD_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define RUN_CMD_TIMEOUT_S 120

/* Whole file into a malloc'd NUL-terminated string ("" if unreadable). */
static char *run_cmd_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf)
        abort();
    while (f) {
        if (n + 1024 > cap && !(buf = realloc(buf, cap *= 2)))
            abort();
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        if (got == 0)
            break;
        n += got;
    }
    if (f)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

/* Run `cmd` (a shell command line). *out and *err (either may be NULL) get stdout and stderr,
 * malloc'd. Returns the exit status, 124 on timeout, -1 if it could not run. */
static int run_cmd(const char *cmd, char **out, char **err) {
    char dir[] = "/tmp/clef-run-cmd-XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    char o[64], e[64], line[8192];
    snprintf(o, sizeof o, "%s/out", dir);
    snprintf(e, sizeof e, "%s/err", dir);
    snprintf(line, sizeof line, "timeout %d %s >%s 2>%s", RUN_CMD_TIMEOUT_S, cmd, o, e);
    int status = system(line);
    if (out)
        *out = run_cmd_slurp(o);
    if (err)
        *err = run_cmd_slurp(e);
    unlink(o);
    unlink(e);
    rmdir(dir);
    return status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#endif
