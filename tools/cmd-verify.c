/*
 * cmd-verify.c - `jev verify`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_verify

int cmd_verify(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev verify: not available in this build yet\n");
    return 1;
}
