/* Writing a file the user named ([debug] dump_vars and dump_lr, [train]
 * metrics_csv and trace, [evaluator] metrics_csv).
 *
 * What is at the path decides how (lstat, so a link is seen as one):
 *   nothing or a regular file: a new temp file next to it (createfile.h:
 *     a name taken by anything is skipped, never followed), written whole,
 *     fsync'd, renamed over it, and the directory fsync'd; a failure
 *     removes the temp file and leaves the old file as it was. A replaced
 *     file keeps its permission bits; a new one is 0644 less the umask.
 *   a FIFO, character device or socket: written in place, never replaced.
 *     A FIFO must have a reader already (strata does not wait for one); a
 *     socket must be listening (SOCK_STREAM). SIGPIPE is an error, not the
 *     end of the process.
 *   a symbolic link: refused, neither replaced nor followed.
 *   anything else (a directory, a block device): refused.
 * Every write, fsync and close is checked; a failure or refusal is one
 * error line naming the path and returns STRATA_EIO. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "createfile.h"
#include "fault.h"
#include "internal.h"

#define WHO "output"

static const char *type_name(mode_t m)
{
    switch (m & S_IFMT) {
    case S_IFREG:  return "regular file";
    case S_IFDIR:  return "directory";
    case S_IFLNK:  return "symbolic link";
    case S_IFIFO:  return "FIFO";
    case S_IFCHR:  return "character device";
    case S_IFBLK:  return "block device";
    case S_IFSOCK: return "socket";
    default:       return "file of unknown type";
    }
}

/* All `len` bytes to fd, through short writes and EINTR. SIGPIPE is
 * blocked meanwhile and, when this write raised it, taken back: a reader
 * that went away is EPIPE. Returns 0 or an errno value. */
static int write_all(int fd, const void *data, size_t len)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    int was_pending = sigpending(&pending) == 0 &&
                      sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    const char *p = data;
    int err = 0;
    while (len > 0) {
        ssize_t n = STRATA_FAULT(IO) ? -1 : write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            err = n < 0 ? errno : EIO;
            break;
        }
        p += n;
        len -= (size_t)n;
    }
    if (err == EPIPE && !was_pending) {
        static const struct timespec zero;
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return err;
}

/* The directory that holds `path` ("." for a bare name), fsync'd so that
 * the rename itself is durable. Returns 0 or an errno value; file systems
 * that cannot sync a directory (EINVAL) are fine. */
static int sync_dir(const char *path, char *dir, size_t cap)
{
    char copy[PATH_MAX];
    snprintf(copy, sizeof copy, "%s", path);
    snprintf(dir, cap, "%s", dirname(copy));
    int fd = STRATA_FAULT(IO) ? -1 : open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int err = (STRATA_FAULT(IO) || fsync(fd) != 0) && errno != EINVAL ? errno : 0;
    if (STRATA_CLOSE_POINT(fd) != 0 && !err)
        err = errno;
    return err;
}

/* Nothing or a regular file at `path` (`old`, NULL when nothing): a temp
 * file renamed over it. */
static int replace(const char *path, const struct stat *old, const void *data,
                   size_t len)
{
    char tmp[PATH_MAX];
    int err = 0;
    /* Two contexts may write at once: the second one's name is taken, so
     * it gets the next. */
    int fd = strata__create_temp(path, tmp, sizeof tmp, 0644);
    if (fd == -ENAMETOOLONG) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: path too long", path);
        return STRATA_EIO;
    }
    if (fd < 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot create the temp file "
                    "%s: %s", path, tmp, strerror(-fd));
        return STRATA_EIO;
    }
    const char *step = "cannot write";
    if (old && (STRATA_FAULT(IO) || fchmod(fd, old->st_mode & 0777) != 0)) {
        err = errno;
        step = "cannot set the mode of the temp file";
    }
    if (!err)
        err = write_all(fd, data, len);
    if (!err && (STRATA_FAULT(IO) || fsync(fd) != 0)) {
        err = errno;
        step = "fsync failed";
    }
    if (STRATA_CLOSE_POINT(fd) != 0 && !err) {
        err = errno;
        step = "close failed";
    }
    if (!err && (STRATA_FAULT(IO) || rename(tmp, path) != 0)) {
        err = errno;
        step = "cannot rename the temp file over it";
    }
    if (err) {
        unlink(tmp);
        strata__log(STRATA_LOG_ERROR, WHO, "%s: %s: %s (%s)", path, step,
                    strerror(err), old ? "the old file is left as it was"
                                       : "nothing written");
        return STRATA_EIO;
    }
    char dir[PATH_MAX];
    if ((err = sync_dir(path, dir, sizeof dir)) != 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: written, but fsync of its "
                    "directory %s failed: %s", path, dir, strerror(err));
        return STRATA_EIO;
    }
    return STRATA_OK;
}

/* A connected SOCK_STREAM socket to the Unix socket `path`, or -1 with
 * errno set. */
static int connect_unix(const char *path)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof a.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(a.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rc;
    while ((rc = connect(fd, (struct sockaddr *)&a, sizeof a)) != 0 &&
           errno == EINTR)
        ;
    if (rc != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* A FIFO, character device or socket (`type`): written in place. */
static int in_place(const char *path, mode_t type, const void *data,
                    size_t len)
{
    /* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of
     * waiting for one; cleared once open. */
    int fd = S_ISSOCK(type)
                 ? connect_unix(path)
                 : open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW |
                                  O_CLOEXEC);
    if (fd < 0) {
        if (S_ISFIFO(type) && errno == ENXIO)
            strata__log(STRATA_LOG_ERROR, WHO, "%s: FIFO with no reader: "
                        "start its reader first (strata does not wait for "
                        "one)", path);
        else
            strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot open the %s: %s",
                        path, type_name(type), strerror(errno));
        return STRATA_EIO;
    }
    struct stat st;
    int err = 0, fl;
    const char *step = "cannot write";
    if (fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) != type) {
        close(fd);
        strata__log(STRATA_LOG_ERROR, WHO, "%s: was a %s, is now a %s; not "
                    "written", path, type_name(type), type_name(st.st_mode));
        return STRATA_EIO;
    }
    if ((fl = fcntl(fd, F_GETFL)) < 0 ||
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        err = errno;
        step = "cannot make it blocking";
    }
    if (!err)
        err = write_all(fd, data, len);
    /* A device may have nothing to sync (EINVAL); FIFOs and sockets never. */
    if (!err && S_ISCHR(type) && fsync(fd) != 0 && errno != EINVAL &&
        errno != EROFS) {
        err = errno;
        step = "fsync failed";
    }
    if (close(fd) != 0 && !err) {
        err = errno;
        step = "close failed";
    }
    if (err) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: %s: %s", path, step,
                    strerror(err));
        return STRATA_EIO;
    }
    return STRATA_OK;
}

int strata__write_fd(int fd, const void *data, size_t len)
{
    return write_all(fd, data, len);
}

int strata__write_atomic(const char *path, const void *data, size_t len)
{
    struct stat st;
    if (!path || !path[0] || (!data && len > 0))
        return STRATA_EINVAL;
    if (STRATA_FAULT(IO) || lstat(path, &st) != 0) {
        if (errno == ENOENT)
            return replace(path, NULL, data, len);
        strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot stat: %s", path,
                    strerror(errno));
        return STRATA_EIO;
    }
    if (S_ISREG(st.st_mode))
        return replace(path, &st, data, len);
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISSOCK(st.st_mode))
        return in_place(path, st.st_mode & S_IFMT, data, len);
    if (S_ISLNK(st.st_mode))
        strata__log(STRATA_LOG_ERROR, WHO, "%s is a symbolic link; strata "
                    "does not replace or follow it: name the file itself",
                    path);
    else
        strata__log(STRATA_LOG_ERROR, WHO, "%s is a %s; strata writes a "
                    "regular file (replaced whole) or a FIFO, character "
                    "device or socket (in place)", path,
                    type_name(st.st_mode));
    return STRATA_EIO;
}
