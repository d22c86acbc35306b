/* Every file strata creates is created new (O_CREAT|O_EXCL|O_NOFOLLOW,
 * core/base/createfile.h) or put in place by a rename: nothing is ever written
 * through an object planted at a name a writer uses. For every writer, a
 * symbolic link to a victim file, a dangling link, a FIFO without a reader
 * and (where a device node can be made: root) a second /dev/null are
 * planted at each of its names before it runs, and then:
 *
 *   - temp names (OUT.tmp.<pid>, OUT.tmp.<pid>.1) and TensorBoard's event
 *     file names: skipped, left as they were; the output is written anyway;
 *   - names that strata replaces by a rename (checkpoints, best.safetensors,
 *     keygen --force, compare's logs and reports): the planted entry is
 *     replaced by the new regular file;
 *   - a file the user named (dump_vars, metrics_csv, trace, dump_lr, the
 *     evaluator's metrics_csv): a link, dangling or not, is refused, a FIFO
 *     without a reader is an error, a device is written in place (all as
 *     documented in fileio.c);
 *   - step_log: all four refused, and a file with a second name too; only
 *     its own regular file is continued;
 *   - TensorBoard's run directory (DIR/train): anything but a directory of
 *     its own refused, a link to a directory included;
 *   - keygen without --force: whatever is at the name is kept;
 *
 * and in every case the victim keeps its bytes, nothing appears at the
 * dangling link's target, and no run blocks (one still running after
 * RUN_LIMIT_S is killed, and fails). Names with the writing process's pid
 * are planted for the right pid: the test forks the child that execs
 * strata, plants, and only then lets it go on.
 *
 * launch's key directory is not here: mkdtemp names it (0700, unguessable)
 * and its files are keygen's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"

#define RUN_LIMIT_S 60
#define MAX_PLANTS  1024
#define VICTIM_TEXT "the victim: never written\n"

/* The smallest job that writes every output: 2 steps, one evaluation. */
#define TINY "--set", "data.limit_train=64", "--set", "data.limit_test=32",    \
             "--set", "train.batch_size=32", "--set", "train.epochs=1",       \
             "--set", "train.progress=none", "--set", "train.devices=cpu:0",  \
             "--set", "model.layers=dense 16 relu, dense 10"
#define LAST_CKPT "ckpt-0000000002.safetensors"

enum kind { LINK, DANGLING, FIFO, DEV, NKINDS };
static const char *const k_kind[NKINDS] = {
    "link to a victim", "dangling link", "FIFO", "device",
};

/* What a run must leave at a planted name. */
enum expect { KEPT, REPLACED };

typedef struct plant {
    char        path[512];
    const char *target;  /* a link's */
    enum kind   kind;
    enum expect expect;
} plant_t;

static plant_t g_plants[MAX_PLANTS];
static int g_nplants, g_nkinds = NKINDS;  /* DEV last: left out when no mknod */
static char g_victim[512], g_victim_dir[512], g_nowhere[512];
static spawn_result_t R;

/* ---- planting and checking -------------------------------------------- */

static void make_dir(const char *fmt, const char *dir)
{
    char p[512];
    snprintf(p, sizeof p, fmt, dir);
    CHECKF(mkdir(p, 0700) == 0, "mkdir %s: %s", p, strerror(errno));
}

static void plant_at(enum expect e, enum kind k, const char *target,
                     const char *path)
{
    if (g_nplants == MAX_PLANTS) {
        CHECKF(0, "more than %d plants", MAX_PLANTS);
        return;
    }
    plant_t *p = &g_plants[g_nplants++];
    if (snprintf(p->path, sizeof p->path, "%s", path) >= (int)sizeof p->path) {
        CHECKF(0, "path too long to plant at: %s", path);
        g_nplants--;
        return;
    }
    p->kind = k;
    p->expect = e;
    p->target = k == LINK ? target : k == DANGLING ? g_nowhere : NULL;
    int rc = p->target ? symlink(p->target, path)
           : k == FIFO ? mkfifo(path, 0600)
                       : mknod(path, S_IFCHR | 0666, makedev(1, 3));
    CHECKF(rc == 0, "planting a %s at %s: %s", k_kind[k], path,
           strerror(errno));
}

__attribute__((format(printf, 3, 4)))
static void plant(enum expect e, enum kind k, const char *fmt, ...)
{
    char path[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    plant_at(e, k, g_victim, path);
}

/* The temp names strata__create_temp tries first for `out`. */
static void plant_temps(enum kind k, pid_t pid, const char *out)
{
    plant(KEPT, k, "%s.tmp.%ld", out, (long)pid);
    plant(KEPT, k, "%s.tmp.%ld.1", out, (long)pid);
}

/* `out`, replaced by a rename, and its temp names. */
static void plant_renamed(enum kind k, pid_t pid, const char *out)
{
    plant(REPLACED, k, "%s", out);
    plant_temps(k, pid, out);
}

/* TensorBoard's names in `dir` for every second of the next 90: the first
 * (events.out.tfevents.TIME.HOST) and the next (...HOST.PID.1). */
static void plant_event_names(enum kind k, pid_t pid, const char *dir)
{
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0)
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    long long now = (long long)time(NULL);
    for (long long t = now - 1; t <= now + 90; t++) {
        plant(KEPT, k, "%s/events.out.tfevents.%010lld.%s", dir, t, host);
        plant(KEPT, k, "%s/events.out.tfevents.%010lld.%s.%ld.1", dir, t, host,
              (long)pid);
    }
}

static int is_planted(const plant_t *p, const struct stat *st)
{
    char to[600];
    ssize_t n;
    switch (p->kind) {
    case LINK:
    case DANGLING:
        n = S_ISLNK(st->st_mode) ? readlink(p->path, to, sizeof to - 1) : -1;
        return n > 0 && (to[n] = '\0', strcmp(to, p->target) == 0);
    case FIFO:
        return S_ISFIFO(st->st_mode);
    default:
        return S_ISCHR(st->st_mode) && st->st_rdev == makedev(1, 3);
    }
}

/* Each plant as it must be after a run (`what`); the victims untouched;
 * nothing at the dangling links' target. Forgets the plants. */
static void check_plants(const char *what, enum kind k)
{
    for (int i = 0; i < g_nplants; i++) {
        const plant_t *p = &g_plants[i];
        struct stat st;
        int there = lstat(p->path, &st) == 0;
        if (p->expect == REPLACED)
            CHECKF(there && S_ISREG(st.st_mode), "%s, %s: %s is not the new "
                   "regular file", what, k_kind[k], p->path);
        else
            CHECKF(there && is_planted(p, &st), "%s, %s: the %s at %s was "
                   "touched", what, k_kind[k], k_kind[p->kind], p->path);
    }
    g_nplants = 0;
    size_t n = 0;
    char *text = read_all(g_victim, &n);
    int same = text && n == strlen(VICTIM_TEXT) && !memcmp(text, VICTIM_TEXT,
                                                            n);
    CHECKF(same, "%s, %s: the victim was written: %zu bytes", what,
           k_kind[k], n);
    free(text);
    struct stat st;
    int nothing = lstat(g_nowhere, &st) != 0 && errno == ENOENT;
    CHECKF(nothing, "%s, %s: a file appeared at the dangling links' target",
           what, k_kind[k]);
    /* Undone, so that the next check sees its own run only. */
    if (!same)
        write_file(g_victim, VICTIM_TEXT, strlen(VICTIM_TEXT));
    if (!nothing)
        unlink(g_nowhere);
    DIR *d = opendir(g_victim_dir);
    int entries = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        entries += e->d_name[0] != '.';
    if (d)
        closedir(d);
    CHECKF(d && entries == 0, "%s, %s: %d files in the victim directory",
           what, k_kind[k], entries);
    if (entries) {
        rm_tree(g_victim_dir);
        make_dir("%s", g_victim_dir);
    }
}

/* ---- running ---------------------------------------------------------- */

typedef struct job {
    enum kind kind;  /* what is planted */
    char      dir[400]; /* where the outputs go (test_named: the file) */
} job_t;

typedef void planter_t(pid_t pid, const job_t *j);

/* `strata ARGS...` as spawn_run runs it, but planter(pid of the strata
 * process, j) is called between fork and exec. A run still going after
 * RUN_LIMIT_S is killed (R.timed_out). */
static void run_planted(char *const args[], planter_t *planter,
                        const job_t *j)
{
    char *argv[64] = { (char *)spawn_strata_bin() };
    for (int i = 0; args[i] && i < 62; i++)
        argv[i + 1] = args[i];
    char outp[] = "/tmp/strata-test-outXXXXXX";
    char errp[] = "/tmp/strata-test-errXXXXXX";
    int ofd = mkstemp(outp), efd = mkstemp(errp), go[2];
    if (ofd < 0 || efd < 0 || pipe(go) != 0) {
        perror("run_planted");
        exit(2);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(126);
        dup2(ofd, 1);
        dup2(efd, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(go[0]);
    close(ofd);
    close(efd);
    if (pid > 0 && planter)
        planter(pid, j);
    CHECK(pid > 0 && write(go[1], "g", 1) == 1);
    close(go[1]);
    int status = 0;
    R.timed_out = 0;
    for (int t = 0; pid > 0 && waitpid(pid, &status, WNOHANG) != pid; t++) {
        if (t >= RUN_LIMIT_S * 100) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            R.timed_out = 1;
            break;
        }
        usleep(10000);
    }
    R.code = pid < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status)
                                               : 128 + WTERMSIG(status);
    spawn_read_file_(outp, R.out, sizeof R.out);
    spawn_read_file_(errp, R.err, sizeof R.err);
    unlink(outp);
    unlink(errp);
}

static char *set(char *buf, size_t cap, const char *key, const char *dir,
                 const char *file)
{
    snprintf(buf, cap, "%s=%s/%s", key, dir, file);
    return buf;
}

static int is_regular(const char *dir, const char *file)
{
    char p[900];
    struct stat st;
    snprintf(p, sizeof p, "%s/%s", dir, file);
    return lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* Regular files in `dir`; with `temps`, only those named *.tmp.*. */
static int count_regular(const char *dir, int temps)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat st;
        n += fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
             S_ISREG(st.st_mode) && (!temps || strstr(e->d_name, ".tmp."));
    }
    if (d)
        closedir(d);
    return n;
}

/* ---- training: checkpoints, best, TensorBoard, every temp name --------- */

static void plant_train(pid_t pid, const job_t *j)
{
    static const char *const outs[] = { "vars.bin", "m.csv", "trace.json",
                                        "lr.txt" };
    char p[600];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", j->dir, outs[i]);
        plant_temps(j->kind, pid, p);
    }
    snprintf(p, sizeof p, "%s/ck/" LAST_CKPT, j->dir);
    plant_renamed(j->kind, pid, p);
    snprintf(p, sizeof p, "%s/ck/best.safetensors", j->dir);
    plant_renamed(j->kind, pid, p);
    snprintf(p, sizeof p, "%s/tb/train", j->dir);
    plant_event_names(j->kind, pid, p);
    snprintf(p, sizeof p, "%s/tb/validation", j->dir);
    plant_event_names(j->kind, pid, p);
}

static void plant_evaluator(pid_t pid, const job_t *j)
{
    char p[600];
    snprintf(p, sizeof p, "%s/ev.csv", j->dir);
    plant_temps(j->kind, pid, p);
    snprintf(p, sizeof p, "%s/tb/evaluation", j->dir);
    plant_event_names(j->kind, pid, p);
}

/* --set cluster.worker=... and cluster.evaluator=...: an evaluator task. */
static char g_cluster_w[64], g_cluster_e[64];

/* A run with every output, then an evaluator of its checkpoints. */
static void test_train(enum kind k)
{
    job_t j = { .kind = k };
    snprintf(j.dir, sizeof j.dir, "%s/train-%d", tmpdir_, (int)k);
    make_dir("%s", j.dir);
    make_dir("%s/ck", j.dir);
    make_dir("%s/tb", j.dir);
    make_dir("%s/tb/train", j.dir);
    make_dir("%s/tb/validation", j.dir);
    make_dir("%s/tb/evaluation", j.dir);
    char ck[600], tb[600], trace[600], lr[600], vars[600], csv[600], ev[600];
    set(ck, sizeof ck, "checkpoint.dir", j.dir, "ck");
    set(tb, sizeof tb, "train.tensorboard", j.dir, "tb");
    char *train[] = { "train", TINY, "--set", ck,
                      "--set", "checkpoint.keep_best=true",
                      /* the planted checkpoint names are not to resume */
                      "--set", "checkpoint.restore=never", "--set", tb,
                      "--set", set(trace, sizeof trace, "train.trace", j.dir,
                                   "trace.json"),
                      "--set", set(lr, sizeof lr, "debug.dump_lr", j.dir,
                                   "lr.txt"),
                      "--set", set(vars, sizeof vars, "debug.dump_vars",
                                   j.dir, "vars.bin"),
                      "--set", set(csv, sizeof csv, "train.metrics_csv",
                                   j.dir, "m.csv"), NULL };
    run_planted(train, plant_train, &j);
    CHECKF(R.code == 0 && !R.timed_out, "train, %s: exit %d%s: %s",
           k_kind[k], R.code, R.timed_out ? " (killed: it blocked)" : "",
           R.err);
    check_plants("train", k);
    char ckdir[600];
    snprintf(ckdir, sizeof ckdir, "%s/ck", j.dir);
    CHECK(is_regular(j.dir, "vars.bin") && is_regular(j.dir, "m.csv") &&
          is_regular(j.dir, "trace.json") && is_regular(j.dir, "lr.txt"));
    CHECK(is_regular(ckdir, LAST_CKPT) &&
          is_regular(ckdir, "best.safetensors"));
    CHECK(count_regular(j.dir, 1) == 0 && count_regular(ckdir, 1) == 0);
    snprintf(tb, sizeof tb, "%s/tb/train", j.dir);
    CHECKF(count_regular(tb, 0) == 1, "%s, %s: no event file", tb, k_kind[k]);
    snprintf(tb, sizeof tb, "%s/tb/validation", j.dir);
    CHECKF(count_regular(tb, 0) == 1, "%s, %s: no event file", tb, k_kind[k]);

    /* The evaluator scores the checkpoint just written (a valid one). */
    set(tb, sizeof tb, "train.tensorboard", j.dir, "tb");
    char *eval[] = { "train", TINY, "--set", ck, "--set", tb,
                     "--set", set(ev, sizeof ev, "evaluator.metrics_csv",
                                  j.dir, "ev.csv"),
                     "--set", g_cluster_w, "--set", g_cluster_e,
                     "--set", "evaluator.timeout_s=10",
                     "--task", "evaluator:0", NULL };
    run_planted(eval, plant_evaluator, &j);
    CHECKF(R.code == 0 && !R.timed_out && strstr(R.out, "1 checkpoint "
           "scored"), "evaluator, %s: exit %d: %s", k_kind[k], R.code, R.err);
    check_plants("evaluator", k);
    CHECK(is_regular(j.dir, "ev.csv") && count_regular(j.dir, 1) == 0);
    snprintf(tb, sizeof tb, "%s/tb/evaluation", j.dir);
    CHECKF(count_regular(tb, 0) == 1, "%s, %s: no event file", tb, k_kind[k]);
}

/* ---- files the user names ---------------------------------------------- */

static void plant_named(pid_t pid, const job_t *j)
{
    (void)pid;
    plant(KEPT, j->kind, "%s", j->dir); /* here: the file itself */
}

typedef struct named {
    const char *key;
    int         evaluator; /* written by an evaluator task */
    int         append;    /* step_log: continued, never written in place */
} named_t;

enum { STEP_LOG = 5 };
static const named_t k_named[] = {
    { "debug.dump_vars", 0, 0 },
    { "train.metrics_csv", 0, 0 },
    { "train.trace", 0, 0 },
    { "debug.dump_lr", 0, 0 },
    { "evaluator.metrics_csv", 1, 0 },
    [STEP_LOG] = { "debug.step_log", 0, 1 },
};

/* `key` = `path` (with a checkpoint directory `ckdir` for an evaluator). */
static void run_named(const named_t *w, const char *path, const char *ckdir,
                      planter_t *planter, const job_t *j)
{
    char kv[600], ck[600];
    snprintf(kv, sizeof kv, "%s=%s", w->key, path);
    snprintf(ck, sizeof ck, "checkpoint.dir=%s", ckdir);
    char *train[] = { "train", TINY, "--set", kv, NULL };
    char *eval[] = { "train", TINY, "--set", kv, "--set", ck,
                     "--set", g_cluster_w, "--set", g_cluster_e,
                     "--set", "evaluator.timeout_s=10",
                     "--task", "evaluator:0", NULL };
    run_planted(w->evaluator ? eval : train, planter, j);
}

/* A link or a FIFO without a reader (step_log: anything) at the name: one
 * error naming it, at once; a device is written in place. */
static void test_named(const named_t *w, enum kind k, const char *ckdir)
{
    job_t j = { .kind = k };
    snprintf(j.dir, sizeof j.dir, "%s/named-%d-%s", tmpdir_, (int)k, w->key);
    run_named(w, j.dir, ckdir, plant_named, &j);
    int fine = k == DEV && !w->append;
    CHECKF(!R.timed_out && (fine ? R.code == 0 : R.code != 0 &&
                            strstr(R.err, j.dir) && strstr(R.err, "error")),
           "%s, %s: exit %d%s: %s", w->key, k_kind[k], R.code,
           R.timed_out ? " (killed: it blocked)" : "", R.err);
    check_plants(w->key, k);
}

/* step_log goes on in its own regular file; one with a second name (a hard
 * link planted to the victim) is refused. */
static void test_step_log_continued(const char *ckdir)
{
    const named_t *w = &k_named[STEP_LOG];
    const char *log = tmp_path("steps.log"), *hard = tmp_path("hard.log");
    write_file(log, "old\n", 4);
    run_named(w, log, ckdir, NULL, NULL);
    char *text = read_all(log, NULL);
    CHECKF(R.code == 0 && text && !strncmp(text, "old\n", 4) &&
           count_lines(text) > 1, "exit %d: %s", R.code, R.err);
    free(text);
    CHECK(link(g_victim, hard) == 0);
    run_named(w, hard, ckdir, NULL, NULL);
    CHECKF(R.code != 0 && strstr(R.err, "hard links"), "exit %d: %s", R.code,
           R.err);
    check_plants("step_log, a hard link", LINK);
    unlink(hard);
}

/* ---- TensorBoard's run directory --------------------------------------- */

static void plant_run_dir(pid_t pid, const job_t *j)
{
    (void)pid;
    char p[600];
    snprintf(p, sizeof p, "%s/train", j->dir);
    /* A link: to a directory, where an event file could be made. */
    plant_at(KEPT, j->kind, g_victim_dir, p);
}

static void test_run_dir(enum kind k)
{
    job_t j = { .kind = k };
    snprintf(j.dir, sizeof j.dir, "%s/tb-%d", tmpdir_, (int)k);
    make_dir("%s", j.dir);
    char tb[600];
    snprintf(tb, sizeof tb, "train.tensorboard=%s", j.dir);
    char *train[] = { "train", TINY, "--set", tb, NULL };
    run_planted(train, plant_run_dir, &j);
    CHECKF(R.code != 0 && !R.timed_out && strstr(R.err, "/train is not a "
           "directory"), "tensorboard, %s: exit %d: %s", k_kind[k], R.code,
           R.err);
    check_plants("tensorboard's run directory", k);
}

/* ---- keygen ------------------------------------------------------------ */

static void plant_keys(pid_t pid, const job_t *j, int force)
{
    static const char *const names[] = { "worker-0.key_secret",
                                         "worker-0.key" };
    char p[600];
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof p, "%s/%s", j->dir, names[i]);
        if (force)
            plant_renamed(j->kind, pid, p);
        else
            plant(KEPT, j->kind, "%s", p);
    }
}

static void plant_keys_kept(pid_t pid, const job_t *j)
{
    plant_keys(pid, j, 0);
}

static void plant_keys_forced(pid_t pid, const job_t *j)
{
    plant_keys(pid, j, 1);
}

static void test_keygen(enum kind k)
{
    job_t j = { .kind = k };
    snprintf(j.dir, sizeof j.dir, "%s/keys-%d", tmpdir_, (int)k);
    make_dir("%s", j.dir);
    char *keep[] = { "keygen", j.dir, "worker:0", NULL };
    run_planted(keep, plant_keys_kept, &j);
    CHECKF(R.code == 1 && strstr(R.err, "exists; keeping it"),
           "keygen, %s: exit %d: %s", k_kind[k], R.code, R.err);
    check_plants("keygen", k);

    /* --force: renamed over whatever is there. */
    char *force[] = { "keygen", "--force", j.dir, "worker:0", NULL };
    rm_tree(j.dir);
    make_dir("%s", j.dir);
    run_planted(force, plant_keys_forced, &j);
    CHECKF(R.code == 0, "keygen --force, %s: exit %d: %s", k_kind[k], R.code,
           R.err);
    check_plants("keygen --force", k);
    char p[600];
    struct stat st;
    snprintf(p, sizeof p, "%s/worker-0.key_secret", j.dir);
    CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode) &&
          (st.st_mode & 0777) == 0600);
    CHECK(count_regular(j.dir, 0) == 2);
}

/* ---- compare ----------------------------------------------------------- */

static void plant_compare(pid_t pid, const job_t *j)
{
    static const char *const reports[] = { "compare.csv",
                                           "compare-epochs.csv",
                                           "compare.svg", "mirrored.log" };
    char p[600];
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/%s", j->dir, reports[i]);
        plant_renamed(j->kind, pid, p);
        /* The temp name of earlier versions, which fopen(3) followed. */
        plant(KEPT, j->kind, "%s.tmp-%ld", p, (long)pid);
    }
    /* The run's metrics: removed before the run, written by it. */
    plant(REPLACED, j->kind, "%s/mirrored.metrics.csv", j->dir);
}

static void test_compare(enum kind k)
{
    job_t j = { .kind = k };
    snprintf(j.dir, sizeof j.dir, "%s/compare-%d", tmpdir_, (int)k);
    make_dir("%s", j.dir);
    char *args[] = { "compare", "--strategies", "mirrored", "--epochs", "1",
                     "--out", j.dir, "--timeout", "50", TINY, NULL };
    run_planted(args, plant_compare, &j);
    CHECKF(R.code == 0 && !R.timed_out, "compare, %s: exit %d: %s%s",
           k_kind[k], R.code, R.out, R.err);
    check_plants("compare", k);
    CHECK(count_regular(j.dir, 0) == 5 && count_regular(j.dir, 1) == 0);
}

/* ---- main ---------------------------------------------------------------- */

/* A device node made here can be planted only when mknod works (root) and
 * the node can be opened (no device cgroup in the way). */
static int devices_plantable(void)
{
    const char *p = tmp_path("devcheck");
    if (mknod(p, S_IFCHR | 0666, makedev(1, 3)) != 0) {
        printf("SKIP device plants: mknod: %s (needs root)\n",
               strerror(errno));
        return 0;
    }
    int fd = open(p, O_WRONLY);
    int e = errno;
    unlink(p);
    if (fd < 0) {
        printf("SKIP device plants: a device node made here cannot be "
               "opened: %s\n", strerror(e));
        return 0;
    }
    close(fd);
    return 1;
}

int main(void)
{
    if (!getenv("STRATA_BIN"))
        CHECK_SKIP("STRATA_BIN not set (run by ctest)");
    tmp_make("planted");
    snprintf(g_victim, sizeof g_victim, "%s/victim", tmpdir_);
    snprintf(g_victim_dir, sizeof g_victim_dir, "%s/victim.d", tmpdir_);
    snprintf(g_nowhere, sizeof g_nowhere, "%s/nowhere", tmpdir_);
    write_file(g_victim, VICTIM_TEXT, strlen(VICTIM_TEXT));
    make_dir("%s", g_victim_dir);
    if (!devices_plantable())
        g_nkinds = DEV;
    snprintf(g_cluster_w, sizeof g_cluster_w, "cluster.worker=127.0.0.1:%d",
             spawn_free_port());
    snprintf(g_cluster_e, sizeof g_cluster_e,
             "cluster.evaluator=127.0.0.1:%d", spawn_free_port());

    for (int k = 0; k < g_nkinds; k++)
        test_train((enum kind)k);
    /* A valid checkpoint for the evaluator's own runs. */
    char ckdir[600];
    snprintf(ckdir, sizeof ckdir, "%s/train-0/ck", tmpdir_);
    for (size_t w = 0; w < sizeof k_named / sizeof k_named[0]; w++)
        for (int k = 0; k < g_nkinds; k++)
            test_named(&k_named[w], (enum kind)k, ckdir);
    test_step_log_continued(ckdir);
    for (int k = 0; k < g_nkinds; k++) {
        test_run_dir((enum kind)k);
        test_keygen((enum kind)k);
        test_compare((enum kind)k);
    }
    tmp_cleanup();
    return CHECK_DONE();
}
