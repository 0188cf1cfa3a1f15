/*
 * cmd-bench.c - `jev bench`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_bench

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev bench: not available in this build yet\n");
    return 1;
}
