/*
 * cmd-serve.c - `jev serve`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_serve

int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev serve: not available in this build yet\n");
    return 1;
}
