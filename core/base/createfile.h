/* The one way strata creates a file: checkpoints and their temp files, the
 * temp files behind every output that is replaced atomically (dump_vars,
 * metrics_csv, trace, dump_lr, the evaluator's CSV), TensorBoard's event
 * files, debug.step_log, keygen's keys, compare's logs and reports.
 *
 * A file is always created new (O_CREAT|O_EXCL|O_NOFOLLOW): whatever is
 * already at the name (a file, a symbolic link, dangling or not, a FIFO, a
 * device) is EEXIST, and is neither followed, opened, truncated nor removed.
 * A file that takes the place of another is created under a temp name this
 * way, then renamed over it (rename replaces a link, never follows it).
 *
 * Header-only (static inline) because the strata command uses it too, and
 * it links libstrata.so, which exports the public API only. */
#ifndef STRATA_CORE_CREATEFILE_H
#define STRATA_CORE_CREATEFILE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

#include "fault.h"

/* Names tried for a temp file before giving up (see strata__create_temp). */
#define STRATA__TEMP_TRIES 100

/* A new file at `path`, open for writing (close-on-exec, never a
 * controlling terminal), with `mode` less the umask; `extra_flags` adds
 * open flags (O_APPEND). Returns the fd, or a negative errno: -EEXIST when
 * anything at all is at `path`. */
static inline int strata__create_new(const char *path, mode_t mode,
                                     int extra_flags)
{
    int fd;
    if (STRATA_FAULT(IO))
        return -EIO;
    do
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
                            O_NOCTTY | extra_flags, mode);
    while (fd < 0 && errno == EINTR);
    return fd >= 0 ? fd : -errno;
}

/* A new temp file beside `path`, to be renamed over it: "<path>.tmp.<pid>"
 * (the name checkpoint_dir.c recognises as a dead writer's leftover), or,
 * when that name is taken (a stale temp file of an earlier process that had
 * our pid, something planted there), the first free of "<path>.tmp.<pid>.1"
 * to ".99". A taken name is skipped, never opened or removed. The name goes
 * to tmp[cap] (the last one tried, on failure). Returns the fd, or a
 * negative errno: -ENAMETOOLONG, -EEXIST when every name was taken, or the
 * error of the first name that failed otherwise (-ENOENT: no directory). */
static inline int strata__create_temp(const char *path, char *tmp, size_t cap,
                                      mode_t mode)
{
    int fd = -EEXIST;
    for (int i = 0; fd == -EEXIST && i < STRATA__TEMP_TRIES; i++) {
        int n = i == 0 ? snprintf(tmp, cap, "%s.tmp.%ld", path,
                                  (long)getpid())
                       : snprintf(tmp, cap, "%s.tmp.%ld.%d", path,
                                  (long)getpid(), i);
        if (n < 0 || (size_t)n >= cap)
            return -ENAMETOOLONG;
        fd = strata__create_new(tmp, mode, 0);
    }
    return fd;
}

#endif /* STRATA_CORE_CREATEFILE_H */
