/*
 * commands.h - the subcommands of the `jev` CLI, one file each
 * (tools/cmd-NAME.c). Each takes the arguments after its name and returns
 * the process exit status: 0 ok, 1 failure, 2 usage error.
 */
#ifndef JEV_TOOLS_COMMANDS_H
#define JEV_TOOLS_COMMANDS_H

int cmd_synth(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_decide(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_download(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
