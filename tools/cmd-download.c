/*
 * cmd-download.c - `jev download`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_download

int cmd_download(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev download: not available in this build yet\n");
    return 1;
}
