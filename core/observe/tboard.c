/* TensorBoard's event files ([train] tensorboard = DIR), written as
 * TensorFlow writes them: DIR/train and DIR/validation (the runs of Keras'
 * TensorBoard callback), each with an events.out.tfevents.TIME.HOST file of
 * TFRecords holding tensorflow.Event protobufs: first the file_version,
 * then Summary scalars (simple_value).
 *
 * The file is a log TensorBoard reads while it grows, so it is appended to
 * (a replaced file would go unseen by a reader that holds the old one
 * open): created new (strata__create_new: a name taken by anything, a
 * link included, is skipped for the next), records buffered and
 * written whole at each flush, then fsync'd. A crash can cut the last
 * record; readers see that from its length and CRC and skip it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/createfile.h"
#include "internal.h"
#include "observe/observe.h"

#define WHO "tensorboard"

/* tensorflow/core/util/event.proto: Event and Summary.Value fields. */
enum { EV_WALL_TIME = 1, EV_STEP = 2, EV_FILE_VERSION = 3, EV_SUMMARY = 5 };
enum { SUMMARY_VALUE = 1 };
enum { VALUE_TAG = 1, VALUE_SIMPLE = 2 };

void strata__tb_event(strata__bytes_t *b, double wall_time, int64_t step,
                      const char *file_version, const char *const *tags,
                      const float *values, int n)
{
    strata__bytes_t ev = { 0 }, sum = { 0 }, val = { 0 };
    uint64_t bits;
    memcpy(&bits, &wall_time, sizeof bits);
    /* proto3: fields at their default value are left out ... */
    if (bits != 0)
        strata__pb_double(&ev, EV_WALL_TIME, wall_time);
    if (step != 0)
        strata__pb_varint(&ev, EV_STEP, (uint64_t)step);
    if (file_version)
        strata__pb_bytes(&ev, EV_FILE_VERSION, file_version,
                         strlen(file_version));
    for (int i = 0; i < n; i++) {
        val.len = 0;
        strata__pb_bytes(&val, VALUE_TAG, tags[i], strlen(tags[i]));
        /* ... but simple_value is a member of a oneof: always there, so
         * that a reader knows which member the value is, even for 0. */
        strata__pb_float(&val, VALUE_SIMPLE, values[i]);
        strata__pb_bytes(&sum, SUMMARY_VALUE, val.p, val.len);
        sum.failed |= val.failed;
    }
    if (n > 0)
        strata__pb_bytes(&ev, EV_SUMMARY, sum.p, sum.len);
    ev.failed |= sum.failed;
    if (ev.failed)
        b->failed = 1;
    else
        strata__tfrecord(b, ev.p, ev.len);
    strata__bytes_free(&val);
    strata__bytes_free(&sum);
    strata__bytes_free(&ev);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* mkdir -p: `path` and every missing directory above it (for [train]
 * tensorboard = `dir`). The last one (train, validation, evaluation: a
 * name strata picks) must be a directory itself, not a link to one: the
 * event file is created in it. */
static int make_dirs(const char *path, const char *dir)
{
    char p[PATH_MAX];
    int n = snprintf(p, sizeof p, "%s", path);
    if (n < 0 || (size_t)n >= sizeof p) {
        strata__log(STRATA_LOG_ERROR, WHO, "%s: path too long", path);
        return STRATA_EIO;
    }
    for (char *c = p + 1;; c++) {
        int end = *c == '\0';
        if (*c != '/' && !end)
            continue;
        *c = '\0';
        struct stat st = { 0 };
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            strata__log(STRATA_LOG_ERROR, WHO, "cannot make the directory "
                        "%s: %s ([train] tensorboard = %s)", p,
                        strerror(errno), dir);
            return STRATA_EIO;
        }
        if ((end ? lstat(p, &st) : stat(p, &st)) != 0 ||
            !S_ISDIR(st.st_mode)) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s is not a directory%s "
                        "([train] tensorboard = %s)", p, S_ISLNK(st.st_mode)
                        ? " but a symbolic link; strata does not follow it"
                        : "", dir);
            return STRATA_EIO;
        }
        if (end)
            return STRATA_OK;
        *c = '/';
    }
}

/* A new event file in `dir`, named as TensorFlow names it
 * (events.out.tfevents.TIME.HOST); another run of the same second on this
 * host gets .PID.N after it rather than sharing the file. */
static int create_file(strata__tb_file_t *f, const char *dir)
{
    char host[256] = "localhost", path[PATH_MAX];
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    long long now = (long long)time(NULL);
    f->fd = -1;
    for (int i = 0; f->fd < 0 && i < 100; i++) {
        int n = i == 0
                    ? snprintf(path, sizeof path, "%s/events.out.tfevents."
                               "%010lld.%s", dir, now, host)
                    : snprintf(path, sizeof path, "%s/events.out.tfevents."
                               "%010lld.%s.%ld.%d", dir, now, host,
                               (long)getpid(), i);
        if (n < 0 || (size_t)n >= sizeof path) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: path too long", dir);
            return STRATA_EIO;
        }
        f->fd = strata__create_new(path, 0666, O_APPEND);
        if (f->fd < 0 && f->fd != -EEXIST)
            break;
    }
    if (f->fd < 0) {
        strata__log(STRATA_LOG_ERROR, WHO, "cannot create an event file in "
                    "%s: %s", dir, strerror(-f->fd));
        f->fd = -1;
        return STRATA_EIO;
    }
    f->path = strdup(path);
    if (!f->path)
        return STRATA_ENOMEM;
    strata__tb_event(&f->pending, wall_now(), 0, "brain.Event:2", NULL, NULL,
                     0);
    return STRATA_OK;
}

int strata__tboard_open(strata__tboard_t *tb, const char *dir, unsigned runs)
{
    static const char *const k_run[STRATA__TB_RUNS] = { "train", "validation",
                                                        "evaluation" };
    memset(tb, 0, sizeof *tb);
    for (int i = 0; i < STRATA__TB_RUNS; i++)
        tb->run[i].fd = -1;
    int rc = STRATA_OK;
    for (int i = 0; rc == STRATA_OK && i < STRATA__TB_RUNS; i++) {
        if (!(runs & (1u << i)))
            continue;
        char sub[PATH_MAX];
        int n = snprintf(sub, sizeof sub, "%s/%s", dir, k_run[i]);
        if (n < 0 || (size_t)n >= sizeof sub) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: path too long", dir);
            rc = STRATA_EIO;
        }
        if (rc == STRATA_OK)
            rc = make_dirs(sub, dir);
        if (rc == STRATA_OK)
            rc = create_file(&tb->run[i], sub);
    }
    /* The file_version record now: TensorBoard lists the run at once. */
    if (rc == STRATA_OK)
        rc = strata__tboard_flush(tb);
    if (rc != STRATA_OK) { /* no file left behind */
        for (int i = 0; i < STRATA__TB_RUNS; i++)
            if (tb->run[i].path)
                unlink(tb->run[i].path);
        tb->failed = 1;
        strata__tboard_close(tb);
    }
    return rc;
}

void strata__tboard_scalars(strata__tboard_t *tb, int which, int64_t step,
                            const char *const *tags, const float *values,
                            int n)
{
    strata__tb_file_t *f = &tb->run[which];
    if (f->path && !tb->failed)
        strata__tb_event(&f->pending, wall_now(), step, NULL, tags, values, n);
}

int strata__tboard_flush(strata__tboard_t *tb)
{
    if (tb->failed)
        return STRATA_EIO;
    for (int i = 0; i < STRATA__TB_RUNS; i++) {
        strata__tb_file_t *f = &tb->run[i];
        if (!f->path)
            continue;
        if (f->pending.failed) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: out of memory for its "
                        "records", f->path);
            tb->failed = 1;
            return STRATA_ENOMEM;
        }
        if (f->pending.len == 0)
            continue;
        int err = strata__write_fd(f->fd, f->pending.p, f->pending.len);
        if (!err && fsync(f->fd) != 0 && errno != EINVAL)
            err = errno;
        if (err) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: cannot write: %s ([train] "
                        "tensorboard)", f->path, strerror(err));
            tb->failed = 1;
            return STRATA_EIO;
        }
        f->pending.len = 0;
    }
    return STRATA_OK;
}

int strata__tboard_close(strata__tboard_t *tb)
{
    if (!tb)
        return STRATA_OK;
    int any = 0;
    for (int i = 0; i < STRATA__TB_RUNS; i++)
        any |= tb->run[i].path != NULL;
    int rc = any ? strata__tboard_flush(tb) : STRATA_OK;
    for (int i = 0; i < STRATA__TB_RUNS; i++) {
        strata__tb_file_t *f = &tb->run[i];
        if (f->fd >= 0 && close(f->fd) != 0 && rc == STRATA_OK &&
            !tb->failed) {
            strata__log(STRATA_LOG_ERROR, WHO, "%s: close failed: %s",
                        f->path, strerror(errno));
            rc = STRATA_EIO;
        }
        f->fd = -1;
        free(f->path);
        f->path = NULL;
        strata__bytes_free(&f->pending);
    }
    return rc;
}
