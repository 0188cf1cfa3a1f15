/*
 * cli-args.h - argument helpers shared by the CLI subcommands.
 */
#ifndef JEV_COMMON_CLI_ARGS_H
#define JEV_COMMON_CLI_ARGS_H

/* Parses a whole decimal integer in [lo, hi] into *out; 0 on success, -1 when s is not a
 * number, has trailing characters or is out of range (*out is then unchanged). */
int cli_parse_long(const char *s, long lo, long hi, long *out);

#endif
