/*
 * cmd-info.c - `jev info`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_info

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev info: not available in this build yet\n");
    return 1;
}
