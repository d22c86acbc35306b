/* The files a run writes where the user says ([debug] dump_vars, [train]
 * metrics_csv), through `strata train`: a regular file is replaced
 * atomically with exactly the variables' bytes; a FIFO, character device
 * or socket is written in place and stays what it was; a symbolic link or
 * a directory is refused and left alone; every failure (a full device, a
 * FIFO without a reader) is one line naming the path and a non-zero exit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

static spawn_result_t R;

/* A tiny run (that prints its variables' hash) with `--set set`; with a
 * validation set, so that its stderr holds no warning of the test set
 * validating. */
static int train(const char *set)
{
    char *argv[] = { (char *)spawn_strata_bin(), "train",
                     "--set", "data.limit_train=320",
                     "--set", "data.validation_split=0.25",
                     "--set", "data.limit_test=100",
                     "--set", "train.epochs=1",
                     "--set", "train.progress=none",
                     "--set", "train.devices=cpu:0",
                     "--set", "debug.hash_vars=true",
                     "--set", (char *)set, NULL };
    spawn_run(argv, 120, &R);
    return R.code;
}

static int train_to(const char *key, const char *path)
{
    char set[600];
    snprintf(set, sizeof set, "%s=%s", key, path);
    return train(set);
}

/* FNV-1a, as strata's hash_vars prints it. */
static unsigned long long fnv1a(const unsigned char *p, size_t n)
{
    unsigned long long h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The hash the last run printed; 0 when none. */
static unsigned long long printed_hash(void)
{
    const char *p = strstr(R.out, "variables hash (rank 0): ");
    return p ? strtoull(p + strlen("variables hash (rank 0): "), NULL, 16)
             : 0;
}

static mode_t type_of(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode & S_IFMT : 0;
}

/* Entries of the temp dir (temp files left behind show up here). */
static int count_entries(void)
{
    DIR *d = opendir(tmpdir_);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* Everything readable from `fd` (until EOF) into the file `out`: the body
 * of a reader child. Waits for data with poll, so that a FIFO opened with
 * O_NONBLOCK before its writer came is read only once one did. */
static void drain_to(int fd, const char *out)
{
    FILE *f = fopen(out, "wb");
    char buf[65536];
    for (;;) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 60000) <= 0)
            _exit(3);
        ssize_t n = read(fd, buf, sizeof buf);
        if (n == 0)
            break;
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (n < 0 || !f || fwrite(buf, 1, (size_t)n, f) != (size_t)n)
            _exit(4);
    }
    _exit(f && fclose(f) == 0 ? 0 : 5);
}

/* The child's exit code, after at most `secs` (then it is killed: -1). */
static int reap(pid_t pid, int secs)
{
    int status = 0;
    for (int i = 0; i < secs * 100; i++) {
        if (waitpid(pid, &status, WNOHANG) == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* A reader of the FIFO `path` into `out`, there before strata starts. */
static pid_t fifo_reader(const char *path, const char *out)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    CHECK(fd >= 0);
    pid_t pid = fork();
    if (pid == 0)
        drain_to(fd, out);
    close(fd);
    return pid;
}

/* A listener on the Unix socket `path` that reads one connection into
 * `out`. */
static pid_t socket_reader(const char *path, const char *out)
{
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int ls = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&a, sizeof a) == 0 &&
          listen(ls, 1) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct pollfd p = { .fd = ls, .events = POLLIN };
        int fd = poll(&p, 1, 60000) == 1 ? accept(ls, NULL, NULL) : -1;
        if (fd < 0)
            _exit(2);
        drain_to(fd, out);
    }
    close(ls);
    return pid;
}

/* The file at `path` holds exactly `want` (n bytes). */
static int same_bytes(const char *path, const unsigned char *want, size_t n)
{
    size_t got_n = 0;
    unsigned char *got = read_all(path, &got_n);
    int same = got && got_n == n && memcmp(got, want, n) == 0;
    free(got);
    return same;
}

int main(void)
{
    if (!getenv("STRATA_BIN"))
        CHECK_SKIP("STRATA_BIN not set (run by ctest)");
    tmp_make("output");
    mode_t um = umask(022);
    umask(um);

    /* A new file: exactly the variables' bytes (their printed hash), mode
     * 0644 less the umask, no temp file left. */
    const char *vars = tmp_path("vars.bin");
    CHECKF(train_to("debug.dump_vars", vars) == 0, "%s", R.err);
    size_t n = 0;
    unsigned char *want = read_all(vars, &n);
    unsigned long long h = printed_hash();
    CHECKF(want && n > 0 && n % 4 == 0 && h != 0 && fnv1a(want, n) == h,
           "%zu bytes, hash %016llx, printed %016llx", n,
           want ? fnv1a(want, n) : 0, h);
    struct stat st;
    CHECK(stat(vars, &st) == 0 && (st.st_mode & 0777) == (0644 & ~um));
    CHECK(count_entries() == 1);

    /* An existing file is replaced, not rewritten: a second name of the old
     * one still holds the old bytes; its mode is kept. */
    const char *old = tmp_path("old.bin");
    write_file(vars, "old", 3);
    CHECK(chmod(vars, 0600) == 0 && link(vars, old) == 0);
    CHECKF(train_to("debug.dump_vars", vars) == 0, "%s", R.err);
    CHECK(want && same_bytes(vars, want, n));
    CHECK(same_bytes(old, (const unsigned char *)"old", 3));
    CHECK(stat(vars, &st) == 0 && (st.st_mode & 0777) == 0600);
    CHECK(count_entries() == 2);
    unlink(old);

    /* A full device: written in place, fails; the line names it; exit 1;
     * still the device. */
    if (type_of("/dev/full") == S_IFCHR) {
        CHECK(train_to("debug.dump_vars", "/dev/full") == 1);
        CHECKF(count_lines(R.err) == 2 &&
               strstr(R.err, "output: error: /dev/full: cannot write: No "
                             "space left on device"), "%s", R.err);
        CHECK(train_to("train.metrics_csv", "/dev/full") == 1);
        CHECKF(strstr(R.err, "/dev/full: cannot write: No space left"), "%s",
               R.err);
        CHECK(type_of("/dev/full") == S_IFCHR);
    } else {
        printf("skipped: no /dev/full\n");
    }

    /* metrics_csv to a regular file: the header and one row. */
    const char *csv = tmp_path("m.csv");
    CHECKF(train_to("train.metrics_csv", csv) == 0, "%s", R.err);
    char *text = read_all(csv, NULL);
    CHECK(text && strncmp(text, "epoch,steps,", 12) == 0 &&
          count_lines(text) == 2);
    free(text);
    unlink(csv);

    /* A FIFO with a reader: it gets the bytes; still a FIFO. */
    const char *fifo = tmp_path("fifo"), *got = tmp_path("got.bin");
    CHECK(mkfifo(fifo, 0600) == 0);
    pid_t rd = fifo_reader(fifo, got);
    CHECKF(train_to("debug.dump_vars", fifo) == 0, "%s", R.err);
    CHECK(reap(rd, 60) == 0);
    CHECK(want && same_bytes(got, want, n));
    CHECK(type_of(fifo) == S_IFIFO);
    unlink(got);

    /* Without a reader: a clear error at once, no wait. */
    CHECK(train_to("debug.dump_vars", fifo) == 1 && !R.timed_out);
    CHECKF(strstr(R.err, fifo) && strstr(R.err, "FIFO with no reader: start "
                                         "its reader first"), "%s", R.err);
    CHECK(type_of(fifo) == S_IFIFO);

    /* A listening Unix socket: it gets the bytes; still a socket. */
    const char *sock = tmp_path("sock");
    rd = socket_reader(sock, got);
    CHECKF(train_to("debug.dump_vars", sock) == 0, "%s", R.err);
    CHECK(reap(rd, 60) == 0);
    CHECK(want && same_bytes(got, want, n));
    CHECK(type_of(sock) == S_IFSOCK);
    unlink(got);

    /* A character device (a second /dev/null; mknod needs root). */
    const char *dev = tmp_path("null");
    if (mknod(dev, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        CHECKF(train_to("debug.dump_vars", dev) == 0, "%s", R.err);
        CHECK(lstat(dev, &st) == 0 && S_ISCHR(st.st_mode) &&
              st.st_rdev == makedev(1, 3));
    } else {
        printf("skipped: mknod: %s\n", strerror(errno));
    }

    /* A symbolic link: refused; the link and its target untouched. */
    const char *target = tmp_path("target"), *lnk = tmp_path("link");
    write_file(target, "keep", 4);
    CHECK(symlink(target, lnk) == 0);
    CHECK(train_to("debug.dump_vars", lnk) == 1);
    char line[700];
    snprintf(line, sizeof line, "%s is a symbolic link; strata does not "
             "replace or follow it: name the file itself", lnk);
    CHECKF(count_lines(R.err) == 2 && strstr(R.err, line), "%s", R.err);
    char to[600] = "";
    CHECK(readlink(lnk, to, sizeof to - 1) > 0 && strcmp(to, target) == 0);
    CHECK(type_of(lnk) == S_IFLNK && same_bytes(target, (const unsigned char
                                                         *)"keep", 4));
    CHECK(train_to("train.metrics_csv", lnk) == 1 &&
          strstr(R.err, "is a symbolic link"));

    /* A directory: refused. */
    const char *sub = tmp_path("sub");
    CHECK(mkdir(sub, 0755) == 0);
    CHECK(train_to("debug.dump_vars", sub) == 1);
    CHECKF(strstr(R.err, sub) && strstr(R.err, "is a directory"), "%s",
           R.err);
    CHECK(type_of(sub) == S_IFDIR);

    free(want);
    tmp_cleanup();
    return CHECK_DONE();
}
