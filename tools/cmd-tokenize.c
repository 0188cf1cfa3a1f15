/*
 * cmd-tokenize.c - `jev tokenize`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_tokenize

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev tokenize: not available in this build yet\n");
    return 1;
}
