/* Who could have replaced a file strata trusts (the job's keys, a plugin):
 * every directory from the file's own up to `/`, as OpenSSH's StrictModes
 * walks them (secure_filename / safe_path in its misc.c). */
#ifndef STRATA_CORE_TRUSTDIR_H
#define STRATA_CORE_TRUSTDIR_H

#include <limits.h>
#include <stddef.h>
#include <sys/stat.h>

/* The first directory that is not trusted, and why. */
typedef struct strata__untrusted {
    char        path[PATH_MAX];
    struct stat st;      /* of path, when err == 0                    */
    int         err;     /* errno of realpath or stat; 0: st says why */
} strata__untrusted_t;

/* `dir` (resolved with realpath) and every directory above it up to `/`
 * must be owned by root or the effective uid. `dir` itself must be
 * writable by no one else. A directory above it may be writable by others
 * only when it is sticky (/tmp, /var/tmp, /dev/shm): there others may add
 * names but may neither rename nor remove ours, and the directory below it
 * is checked in turn; anything else others may write is refused (they
 * could rename our directory away and put theirs in its place). Returns
 * 0, or -1 with *bad naming the first directory refused. */
int strata__trust_dirs(const char *dir, strata__untrusted_t *bad);

/* Why *bad was refused and the fix, for a log line: "/a is
 * world-writable (mode 0777), so others could have replaced what is under
 * it: chmod go-w /a". */
const char *strata__untrusted_why(const strata__untrusted_t *bad, char *buf,
                                  size_t cap);

#endif /* STRATA_CORE_TRUSTDIR_H */
