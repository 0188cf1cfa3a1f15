/*
 * cmd-synth.c - `jev synth`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_synth

int cmd_synth(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev synth: not available in this build yet\n");
    return 1;
}
