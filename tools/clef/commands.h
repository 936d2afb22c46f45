/*
 * commands.h — the subcommands of the `clef` tool. Each lives in its own cmd_<name>.c,
 * takes the arguments after its name, prints its own --help, and returns the process
 * exit status (0 ok, 1 a problem with the input, 2 bad usage).
 */
#ifndef CLEF_TOOLS_COMMANDS_H
#define CLEF_TOOLS_COMMANDS_H

int cmd_eval(int argc, char **argv);
int cmd_inspect(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
