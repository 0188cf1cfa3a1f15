/*
 * cmd-report.c - `jev report`. Not built yet: answers with a clear message.
 */
#include <stdio.h>

#include "commands.h" // defines: cmd_report

int cmd_report(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "jev report: not available in this build yet\n");
    return 1;
}
