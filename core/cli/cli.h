/* strata CLI -- subcommands in their own files. */
#ifndef STRATA_CLI_H
#define STRATA_CLI_H

#include <strata/strata.h>

/* strata launch [...]: returns the process exit code. */
int cli_launch(int argc, char **argv);

#endif
