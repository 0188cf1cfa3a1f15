/*
 * cmd-decide.c - `jev decide`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_decide

int cmd_decide(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev decide: not available in this build yet\n");
    return 1;
}
