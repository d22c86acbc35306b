/* The strata command on a CPU newer than its BLAS. */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli.h"

/* OpenBLAS picks its kernels once, while it loads, from the CPU's model
 * number: a CPU newer than the library gets its SSE3 fallback. The remedy,
 * OPENBLAS_CORETYPE, is read only then, so the command starts itself again,
 * once, with it set (the new process finds it set and goes on). Returns
 * only when nothing needs doing or the exec failed; a run then warns. */
void cli_blas_reexec(char **argv)
{
    const char *want = strata_blas_coretype_hint();
    if (!want)
        return;
    /* The binary itself, not argv[0]: PATH may name another (and under an
     * emulator /proc/self/exe is the emulated program). */
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return;
    self[n] = '\0';
    if (setenv("OPENBLAS_CORETYPE", want, 1) != 0)
        return;
    execv(self, argv);
    unsetenv("OPENBLAS_CORETYPE");
}
