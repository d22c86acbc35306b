/* strata CLI -- subcommands in their own files. */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include <strata/strata.h>

/* strata launch [...]: returns the process exit code. */
int cli_launch(int argc, char **argv);

/* strata compare [...]: returns the process exit code. */
int cli_compare(int argc, char **argv);

/* strata keygen [...]: returns the process exit code. */
int cli_keygen(int argc, char **argv);
/* Make `dir` (0700) or check an existing one is not writable by others;
 * 0 or 1 after a message. */
int cli_keygen_dir(const char *dir);
/* One task's key pair (TYPE-INDEX.key and .key_secret) in dir; 0 or 1. */
int cli_keygen_task(const char *dir, const char *type, long index, int force);

#endif
