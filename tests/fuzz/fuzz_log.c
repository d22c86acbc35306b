/* strata__log for the harnesses: every message is formatted (so that a bad
 * argument to a format is caught like any other read) and dropped, or
 * printed to stderr when STRATA_FUZZ_LOG is set (to see why a seed is
 * refused). Replaces core/base/log.c, which needs a context. */
#include <stdarg.h>
#include <stdlib.h>

#include "fuzz.h"
#include "internal.h"

void strata__log(int level, const char *who, const char *fmt, ...)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("STRATA_FUZZ_LOG") != NULL;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (verbose)
        fprintf(stderr, "strata: %s: %s%s\n", who ? who : "",
                level == STRATA_LOG_ERROR  ? "error: "
                : level == STRATA_LOG_WARN ? "warning: "
                                           : "",
                line);
}
