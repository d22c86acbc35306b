/* strata launch's own keys: a job on one machine is authenticated and
 * encrypted with no setup. Each task gets a sealed memfd holding every
 * public certificate and its own secret one (base/keybundle.h), inherited
 * across exec; nothing is ever written to disk.
 *
 * Why a memfd and not a temporary directory: a launch killed by -9 runs no
 * handler, so a directory made for the job stays behind with every task's
 * secret key in it. A sweep of stale directories at the next start needs a
 * next start and must tell a dead launcher's directory from a live one's;
 * a directory the tasks remove once read is gone when launch restarts a
 * task. A memfd has no name to leave behind: the kernel frees it with the
 * last process that holds it, however that process ends. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cli.h"
#include "base/keybundle.h"

/* One record: header line, then the certificate. */
static int put_record(int fd, const char *type, int index, const char *ext,
                      const char *text)
{
    char name[96];
    snprintf(name, sizeof name, "%s-%d.%s", type, index, ext);
    size_t len = strlen(text);
    if (dprintf(fd, STRATA__KEYS_REC, name, len) < 0)
        return -1;
    return write(fd, text, len) == (ssize_t)len ? 0 : -1;
}

/* Task i's memfd: every public certificate, then its secret one; sealed,
 * so that nobody holding it can change it. */
static int task_fd(int n, const char *const type[], const int index[],
                   char (*pub)[CLI_CERT_MAX], const char *sec, int i)
{
    int fd = memfd_create("strata-keys", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int ok = fd >= 0;
    for (int j = 0; ok && j < n; j++)
        ok = put_record(fd, type[j], index[j], "key", pub[j]) == 0;
    ok = ok && put_record(fd, type[i], index[i], "key_secret", sec) == 0 &&
         fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE |
                                    F_SEAL_SEAL) == 0;
    if (!ok) {
        fprintf(stderr, "strata: launch: cannot hand the keys of %s:%d to "
                "it: %s\n", type[i], index[i], strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

int cli_launch_keys(int n, const char *const type[], const int index[],
                    int fd[])
{
    return cli_launch_keys_seen(n, type, index, fd, NULL, NULL);
}

int cli_launch_keys_seen(int n, const char *const type[], const int index[],
                         int fd[], void (*on_secret)(void *, int,
                                                     const char *),
                         void *user)
{
    for (int i = 0; i < n; i++)
        fd[i] = -1;
    char (*pub)[CLI_CERT_MAX] = calloc((size_t)n, sizeof *pub);
    char (*sec)[CLI_CERT_MAX] = calloc((size_t)n, sizeof *sec);
    int rc = pub && sec ? 0 : -1;
    for (int i = 0; rc == 0 && i < n; i++)
        rc = cli_keygen_pair(type[i], index[i], pub[i], sec[i], sizeof pub[i]);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = (fd[i] = task_fd(n, type, index, pub, sec[i], i)) < 0 ? -1 : 0;
    for (int i = 0; rc == 0 && on_secret && i < n; i++)
        on_secret(user, i, sec[i]);
    if (sec)
        memset(sec, 0, (size_t)n * sizeof *sec);
    free(pub);
    free(sec);
    if (rc != 0)
        cli_launch_keys_close(fd, n);
    return rc;
}

int cli_launch_keys_pass(int fd)
{
    if (fd < 0) /* keys of the job's own: never a stale inherited name */
        return unsetenv(STRATA__KEYS_FD_ENV);
    char v[16];
    snprintf(v, sizeof v, "%d", fd);
    return fcntl(fd, F_SETFD, 0) == 0 && setenv(STRATA__KEYS_FD_ENV, v, 1) == 0
               ? 0 : -1;
}

void cli_launch_keys_close(int fd[], int n)
{
    for (int i = 0; i < n; i++)
        if (fd[i] >= 0) {
            close(fd[i]);
            fd[i] = -1;
        }
}
