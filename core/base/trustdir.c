/* The directories above a trusted file (see trustdir.h). */
#include "trustdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 0, or -1 when others could replace what st is; `above`: a directory
 * above the one that holds the file. */
static int refused(const struct stat *st, int above)
{
    uid_t me = geteuid();
    if (st->st_uid != 0 && st->st_uid != me)
        return -1;
    if (!S_ISDIR(st->st_mode))
        return -1;
    return (st->st_mode & (S_IWGRP | S_IWOTH)) &&
                   !(above && (st->st_mode & S_ISVTX)) ? -1 : 0;
}

int strata__trust_dirs(const char *dir, strata__untrusted_t *bad)
{
    memset(bad, 0, sizeof *bad);
    char *real = realpath(dir, NULL);
    if (!real || strlen(real) >= sizeof bad->path) {
        bad->err = real ? ENAMETOOLONG : errno;
        snprintf(bad->path, sizeof bad->path, "%s", dir);
        free(real);
        return -1;
    }
    snprintf(bad->path, sizeof bad->path, "%s", real);
    free(real);
    for (int above = 0;; above = 1) {
        if (stat(bad->path, &bad->st) != 0) {
            bad->err = errno;
            return -1;
        }
        if (refused(&bad->st, above) != 0)
            return -1;
        char *slash = strrchr(bad->path, '/');
        if (!slash || !strcmp(bad->path, "/"))
            break;
        slash[slash == bad->path] = '\0'; /* "/a" -> "/", "/a/b" -> "/a" */
    }
    memset(bad, 0, sizeof *bad);
    return 0;
}

const char *strata__untrusted_why(const strata__untrusted_t *bad, char *buf,
                                  size_t cap)
{
    uid_t me = geteuid();
    const char *p = bad->path;
    if (bad->err)
        snprintf(buf, cap, "%s cannot be checked: %s", p, strerror(bad->err));
    else if (bad->st.st_uid != 0 && bad->st.st_uid != me)
        snprintf(buf, cap, "%s is owned by uid %u, neither root nor you (uid "
                 "%u), so its owner could have replaced what is under it: "
                 "chown it to one of you", p, (unsigned)bad->st.st_uid,
                 (unsigned)me);
    else if (!S_ISDIR(bad->st.st_mode))
        snprintf(buf, cap, "%s is not a directory", p);
    else
        snprintf(buf, cap, "%s is %s-writable (mode %04o), so others could "
                 "have replaced what is under it: chmod go-w %s", p,
                 bad->st.st_mode & S_IWOTH ? "world" : "group",
                 (unsigned)(bad->st.st_mode & 07777), p);
    return buf;
}
