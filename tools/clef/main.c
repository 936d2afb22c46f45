/*
 * main.c — the `clef` command-line tool: dispatches to a subcommand.
 */
#include "clef.h"
#include "commands.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"eval", cmd_eval, "compare releases with a reference: decisions, logits, hidden states"},
    {"inspect", cmd_inspect, "check a release directory and describe what it holds"},
    {"quantize", cmd_quantize, "make an NF4, FP8 or INT8 ConvRot release from a BF16 one"},
    {"run", cmd_run, "decide one record with a release and print the answer"},
    {"serve", cmd_serve, "serve a release over HTTP (SystemOne and Workers AI APIs)"},
};

static void usage(FILE *out) {
    fprintf(out, "clef %s — an engine for Clef decision models\n\n", clef_version());
    fprintf(out, "usage: clef <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "  %-10s %s\n", "version", "print the version");
    fprintf(out, "\n`clef <command> --help` describes a command's options.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "version") || !strcmp(name, "--version")) {
        printf("clef %s\n", clef_version());
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(name, commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "clef: unknown command '%s'\n\n", name);
    usage(stderr);
    return 2;
}
