/*
 * cmd-run.c - `jev run`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_run

int cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev run: not available in this build yet\n");
    return 1;
}
