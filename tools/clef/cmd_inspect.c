/*
 * cmd_inspect.c — `clef inspect DIR`: placeholder until the release reader lands (issue 2).
 */
#include "commands.h"

#include <stdio.h>

int cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "clef inspect: the release reader is not built yet\n");
    return 1;
}
