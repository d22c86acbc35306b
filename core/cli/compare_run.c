/* strata compare: one strategy's run. A child `strata train` (mirrored,
 * central) or `strata launch` (mwms, ps: the way users start them), its
 * output in a log, reaped with wait4 for its peak RSS; with --link, in a
 * network namespace of its own whose loopback tc limits. Then its metrics
 * CSV is read back. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "compare.h"
#include "base/createfile.h"

#define GRACE_S 15 /* after SIGTERM, SIGKILL to the whole job */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static int multi_process(const cmp_run_t *r)
{
    return r->kind != CMP_ONE;
}

int cli_compare_has_task(const cmp_run_t *r, const char *task)
{
    char type[16];
    int index, end = 0;
    if (sscanf(task, "%15[a-z]:%d%n", type, &index, &end) != 2 ||
        task[end] || index < 0)
        return 0;
    if (!multi_process(r))
        return !strcmp(type, "worker") && index == 0; /* a single task */
    if (!strcmp(type, "worker"))
        return index < r->workers;
    if (r->kind == CMP_PS && !strcmp(type, "chief"))
        return index == 0;
    return r->kind == CMP_PS && !strcmp(type, "ps") && index < r->ps;
}

/* ---- a link of limited rate -------------------------------------------- */

/* Run ip or tc (iproute2), looked up on PATH and in the sbin dirs that a
 * non-login root shell may lack; its messages go to our stderr. */
static int tool(char *const argv[])
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        char path[64];
        execvp(argv[0], argv);
        snprintf(path, sizeof path, "/usr/sbin/%s", argv[0]);
        execv(path, argv);
        snprintf(path, sizeof path, "/sbin/%s", argv[0]);
        execv(path, argv);
        fprintf(stderr, "strata: compare: %s not found (install iproute2)\n",
                argv[0]);
        _exit(127);
    }
    int st = 0;
    for (int i = 0; i < 1000 && waitpid(pid, &st, WNOHANG) == 0; i++)
        nap_ms(10);
    if (waitpid(pid, &st, WNOHANG) == 0) { /* 10 s: give up on it */
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        return -1;
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* In this (child) process: a network namespace of its own, its loopback up
 * and limited to `rate` by tc htb. Every process started from here talks
 * to the others through that one link. */
static int shape_loopback(const char *rate)
{
    if (unshare(CLONE_NEWNET) != 0) {
        fprintf(stderr, "strata: compare: --link: cannot make a network "
                "namespace: %s (needs root: CAP_SYS_ADMIN and CAP_NET_ADMIN)"
                "\n", strerror(errno));
        return -1;
    }
    char *up[] = { "ip", "link", "set", "lo", "up", NULL };
    char *qdisc[] = { "tc", "qdisc", "add", "dev", "lo", "root", "handle",
                      "1:", "htb", "default", "1", NULL };
    char *cls[] = { "tc", "class", "add", "dev", "lo", "parent", "1:",
                    "classid", "1:1", "htb", "rate", (char *)rate, "ceil",
                    (char *)rate, "quantum", "65536", NULL };
    if (tool(up) != 0 || tool(qdisc) != 0 || tool(cls) != 0) {
        fprintf(stderr, "strata: compare: --link: tc could not limit the "
                "loopback of a new network namespace to %s (needs root: "
                "CAP_NET_ADMIN, and iproute2)\n", rate);
        return -1;
    }
    return 0;
}

/* Bits/s through the shaped loopback: one tcp stream of ~0.4 s at the
 * rate, sent by a child, timed by the receiver; 0 when it fails. */
static double measure_link(double rate_bps)
{
    double want = rate_bps / 8.0 * 0.4;
    size_t bytes = want < 256e3 ? 256000 : want > 64e6 ? 64000000 : (size_t)want;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(ls, 1) != 0 || getsockname(ls, (struct sockaddr *)&a, &alen))
        return 0;
    pid_t pid = fork();
    if (pid == 0) {
        static char chunk[65536];
        int s = socket(AF_INET, SOCK_STREAM, 0);
        if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof a) != 0)
            _exit(1);
        for (size_t sent = 0; sent < bytes;) {
            size_t n = bytes - sent < sizeof chunk ? bytes - sent : sizeof chunk;
            ssize_t w = write(s, chunk, n);
            if (w <= 0)
                _exit(1);
            sent += (size_t)w;
        }
        _exit(close(s) == 0 ? 0 : 1);
    }
    double bps = 0;
    struct pollfd p = { .fd = ls, .events = POLLIN };
    int c = pid > 0 && poll(&p, 1, 10000) == 1 ? accept(ls, NULL, NULL) : -1;
    if (c >= 0) {
        static char buf[65536];
        size_t got = 0;
        double t0 = now_s();
        p.fd = c;
        while (poll(&p, 1, 10000) == 1) {
            ssize_t n = read(c, buf, sizeof buf);
            if (n <= 0)
                break;
            got += (size_t)n;
        }
        double t = now_s() - t0;
        if (got == bytes && t > 0)
            bps = (double)got * 8.0 / t;
        close(c);
    }
    close(ls);
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
    return bps;
}

int cli_compare_link_probe(const char *rate, double rate_bps, double *bps)
{
    *bps = 0;
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fd[0]);
        close(fd[1]);
        return -1;
    }
    if (pid == 0) {
        close(fd[0]);
        if (shape_loopback(rate) != 0)
            _exit(1);
        char text[64];
        int n = snprintf(text, sizeof text, "%.0f\n", measure_link(rate_bps));
        _exit(write(fd[1], text, (size_t)n) == n ? 0 : 1);
    }
    close(fd[1]);
    char text[64] = "";
    ssize_t n = 0, got = 0;
    struct pollfd p = { .fd = fd[0], .events = POLLIN };
    while (got < (ssize_t)sizeof text - 1 && poll(&p, 1, 30000) == 1 &&
           (n = read(fd[0], text + got, sizeof text - 1 - (size_t)got)) > 0)
        got += n;
    close(fd[0]);
    kill(pid, SIGKILL); /* done or stuck: it has said what it will */
    int st = 0;
    waitpid(pid, &st, 0);
    if (got <= 0)
        return -1;
    *bps = atof(text);
    return 0;
}

/* ---- one run ----------------------------------------------------------- */

typedef struct args {
    char **v;
    int    n, cap;
} args_t;

static int push(args_t *a, const char *s)
{
    if (a->n + 1 >= a->cap)
        return -1;
    a->v[a->n] = strdup(s);
    return a->v[a->n++] ? 0 : -1;
}

/* --set with a formatted SECTION.KEY=VALUE. */
static int push_set(args_t *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int push_set(args_t *a, const char *fmt, ...)
{
    char kv[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(kv, sizeof kv, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof kv)
        return -1;
    return push(a, "--set") == 0 && push(a, kv) == 0 ? 0 : -1;
}

static void args_free(args_t *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->v[i]);
    free(a->v);
}

/* strata train|launch ... : the job with this strategy. Settings in order
 * (a later --set wins): a launched worker's one replica, the user's --set,
 * then what compare needs (epochs, straggler, strategy, metrics file). */
static int build_args(const cmp_opts_t *o, const cmp_run_t *r, args_t *a)
{
    char num[16];
    a->cap = 40 + 2 * o->nsets;
    a->v = calloc((size_t)a->cap, sizeof *a->v);
    if (!a->v)
        return -1;
    int rc = push(a, "strata");
    if (r->kind == CMP_WORKERS) {
        snprintf(num, sizeof num, "%d", r->workers);
        rc |= push(a, "launch") | push(a, "-n") | push(a, num);
    } else if (r->kind == CMP_PS) {
        snprintf(num, sizeof num, "%d", r->ps);
        rc |= push(a, "launch") | push(a, "--ps") | push(a, num);
        snprintf(num, sizeof num, "%d", r->workers);
        rc |= push(a, "--workers") | push(a, num) | push(a, "--chief");
    } else {
        rc |= push(a, "train");
    }
    if (o->config)
        rc |= push(a, "-c") | push(a, o->config);
    if (multi_process(r))
        rc |= push_set(a, "train.devices=cpu:0");
    for (int i = 0; i < o->nsets; i++)
        rc |= push(a, "--set") | push(a, o->sets[i]);
    if (o->epochs > 0)
        rc |= push_set(a, "train.epochs=%d", o->epochs);
    if (o->straggler[0])
        rc |= push_set(a, "debug.delay_task=%s", o->straggler) |
              push_set(a, "debug.step_delay_ms=%d", o->straggler_ms);
    if (o->link && multi_process(r)) /* over tcp, through the link */
        rc |= push_set(a, "transport.zmq.shm=off");
    rc |= push_set(a, "strategy.plugin=%s", r->plugin) |
          push_set(a, "train.metrics_csv=%s", r->csv);
    return rc ? -1 : 0;
}

/* The command line at the top of the log, as a shell would take it. */
static void log_command(FILE *f, const args_t *a, const cmp_opts_t *o,
                        const cmp_run_t *r)
{
    if (o->link && multi_process(r))
        fprintf(f, "# in a network namespace of its own, its loopback "
                "limited to %s (tc htb)\n", o->link);
    fputc('$', f);
    for (int i = 0; i < a->n; i++) {
        const char *s = a->v[i];
        if (strpbrk(s, " \t'\"\\$;&|<>()*?[]#~`") == NULL && *s) {
            fprintf(f, " %s", s);
            continue;
        }
        fputs(" '", f);
        for (; *s; s++)
            if (*s == '\'')
                fputs("'\\''", f);
            else
                fputc(*s, f);
        fputc('\'', f);
    }
    fputc('\n', f);
}

/* The child: its own process group (so that a whole job can be killed),
 * output to the log, no cluster from our environment, SIGTERM if we die. */
static void exec_child(const cmp_opts_t *o, const cmp_run_t *r, args_t *a,
                       int logfd, pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent)
        _exit(1);
    setpgid(0, 0);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
        dup2(logfd, STDOUT_FILENO) < 0 || dup2(logfd, STDERR_FILENO) < 0)
        _exit(1);
    /* Every strategy runs on this machine, whatever cluster the
     * environment of compare names (launch sets its own TF_CONFIG). */
    unsetenv("TF_CONFIG");
    unsetenv("SLURM_PROCID");
    unsetenv("RANK");
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (o->link && multi_process(r) && shape_loopback(o->link) != 0)
        _exit(1);
    execv("/proc/self/exe", a->v);
    fprintf(stderr, "strata: compare: exec: %s\n", strerror(errno));
    _exit(127);
}

/* Reap what is left of a job whose launch did not (killed): its tasks,
 * orphaned, come to us (PR_SET_CHILD_SUBREAPER). Bounded. */
static void reap_orphans(pid_t group)
{
    kill(-group, SIGKILL);
    for (int i = 0; i < 500; i++) {
        pid_t w = waitpid(-1, NULL, WNOHANG);
        if (w < 0)
            return; /* ECHILD: none left */
        if (w == 0)
            nap_ms(10);
    }
}

/* The first error line of a failed run's log, for the table. */
static void first_error(const char *log, char *why, size_t cap)
{
    FILE *f = fopen(log, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "error") && line[0] != '$') {
            size_t n = strcspn(line, "\r\n");
            if (n >= cap)
                n = cap - 1;
            memcpy(why, line, n);
            why[n] = '\0';
            break;
        }
    if (f)
        fclose(f);
}

/* A run's log, new: a temp file (strata__create_temp) renamed over `path`
 * at once, so that what was there (an earlier run's log, a link) is
 * replaced, never followed or truncated. The fd, or -1 with errno set. */
static int create_log(const char *path)
{
    char tmp[4200];
    int fd = strata__create_temp(path, tmp, sizeof tmp, 0644);
    if (fd < 0) {
        errno = -fd;
        return -1;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
        return -1;
    }
    return fd;
}

int cli_compare_run(const cmp_opts_t *o, cmp_run_t *r,
                    volatile sig_atomic_t *stop)
{
    args_t a = { 0 };
    if (build_args(o, r, &a) != 0) {
        args_free(&a);
        fprintf(stderr, "strata: compare: %s: arguments too long\n", r->spec);
        return -1;
    }
    int logfd = create_log(r->log);
    FILE *lf = logfd >= 0 ? fdopen(dup(logfd), "w") : NULL;
    if (!lf) {
        fprintf(stderr, "strata: compare: cannot write %s: %s\n", r->log,
                strerror(errno));
        if (logfd >= 0)
            close(logfd);
        args_free(&a);
        return -1;
    }
    log_command(lf, &a, o, r);
    fclose(lf);
    unlink(r->csv); /* a failed run shows no metrics of an earlier one */
    double t0 = now_s();
    pid_t parent = getpid(), pid = fork();
    if (pid == 0)
        exec_child(o, r, &a, logfd, parent);
    close(logfd);
    args_free(&a);
    if (pid < 0) {
        fprintf(stderr, "strata: compare: fork: %s\n", strerror(errno));
        return -1;
    }
    r->ran = 1;
    setpgid(pid, pid); /* as the child does: no race on kill(-pid) */
    struct rusage ru = { 0 };
    int st = 0, termed = 0;
    double kill_at = 0;
    for (;;) {
        pid_t w = wait4(pid, &st, WNOHANG, &ru);
        if (w == pid || (w < 0 && errno != EINTR))
            break;
        double t = now_s();
        if (!termed && (*stop || t - t0 > o->timeout_s)) {
            r->timed_out = !*stop;
            kill(pid, SIGTERM); /* launch forwards it to every task */
            termed = 1;
            kill_at = t + GRACE_S;
        } else if (termed && kill_at > 0 && t > kill_at) {
            kill(-pid, SIGKILL);
            kill_at = 0;
        }
        nap_ms(20);
    }
    r->wall_s = now_s() - t0;
    r->maxrss_kib = ru.ru_maxrss;
    r->code = WIFEXITED(st) ? WEXITSTATUS(st)
            : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    if (termed || r->code != 0)
        reap_orphans(pid);
    if (r->timed_out)
        snprintf(r->why, sizeof r->why, "stopped after --timeout %d s",
                 o->timeout_s);
    else if (r->code != 0)
        first_error(r->log, r->why, sizeof r->why);
    if (r->code == 0 && cli_compare_read_metrics(r->csv, r) != 0)
        r->code = -1; /* it said it succeeded, yet left no usable metrics */
    else if (r->code != 0 && access(r->csv, F_OK) == 0) {
        /* The epochs it finished, for the plot; the failure is its exit. */
        char why[sizeof r->why];
        memcpy(why, r->why, sizeof why);
        cli_compare_read_metrics(r->csv, r);
        memcpy(r->why, why, sizeof why);
    }
    return 0;
}

/* ---- the metrics CSV --------------------------------------------------- */

enum { C_EPOCH, C_TRAIN_LOSS, C_TRAIN_ACC, C_TEST_LOSS, C_TEST_ACC,
       C_SECONDS, C_SPS, C_WALL, NCOLS };
/* The train run's metrics CSV names them as Keras does. */
static const char *const k_cols[NCOLS] = {
    "epoch", "loss", "accuracy", "val_loss", "val_accuracy", "seconds",
    "samples_per_s", "wall_s",
};

/* The columns of the header line: idx[c] = position of column c, or -1. */
static void header(char *line, int idx[NCOLS])
{
    for (int c = 0; c < NCOLS; c++)
        idx[c] = -1;
    int pos = 0;
    for (char *save = NULL, *t = strtok_r(line, ",\r\n", &save); t;
         t = strtok_r(NULL, ",\r\n", &save), pos++)
        for (int c = 0; c < NCOLS; c++)
            if (!strcmp(t, k_cols[c]))
                idx[c] = pos;
}

/* A data line into e; empty test columns: no test this epoch. */
static int row(char *line, const int idx[NCOLS], cmp_epoch_t *e)
{
    double v[NCOLS] = { 0 };
    int have[NCOLS] = { 0 }, pos = 0;
    char *p = line;
    for (;; pos++) {
        size_t len = strcspn(p, ",\r\n");
        char end = p[len];
        p[len] = '\0';
        for (int c = 0; c < NCOLS; c++)
            if (idx[c] == pos && len > 0) {
                char *stop;
                v[c] = strtod(p, &stop);
                if (*stop || !isfinite(v[c]))
                    return -1;
                have[c] = 1;
            }
        if (end != ',')
            break;
        p += len + 1;
    }
    for (int c = 0; c < NCOLS; c++)
        if (!have[c] && c != C_TEST_LOSS && c != C_TEST_ACC)
            return -1;
    *e = (cmp_epoch_t){ .epoch = (int)v[C_EPOCH],
                        .has_test = have[C_TEST_ACC] && have[C_TEST_LOSS],
                        .train_loss = v[C_TRAIN_LOSS],
                        .train_acc = v[C_TRAIN_ACC],
                        .seconds = v[C_SECONDS], .samples_per_s = v[C_SPS],
                        .wall_s = v[C_WALL] };
    if (e->has_test) {
        e->test_loss = v[C_TEST_LOSS];
        e->test_acc = v[C_TEST_ACC];
    }
    return 0;
}

int cli_compare_read_metrics(const char *path, cmp_run_t *r)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(r->why, sizeof r->why, "no metrics: %.100s: %s", path,
                 strerror(errno));
        return -1;
    }
    char line[1024];
    int idx[NCOLS], rc = 0, lineno = 1;
    if (!fgets(line, sizeof line, f)) {
        rc = -1;
    } else {
        header(line, idx);
        for (int c = 0; c < NCOLS; c++)
            if (idx[c] < 0)
                rc = -1;
    }
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        cmp_epoch_t *ep = realloc(r->ep, (size_t)(r->nep + 1) * sizeof *ep);
        if (!ep || row(line, idx, &ep[r->nep]) != 0)
            rc = -1;
        if (ep)
            r->ep = ep;
        if (rc == 0)
            r->nep++;
    }
    fclose(f);
    if (rc != 0 || r->nep == 0) {
        snprintf(r->why, sizeof r->why, "%.80s:%d: not a metrics CSV with "
                 "the columns %s..%s", path, lineno, k_cols[0],
                 k_cols[NCOLS - 1]);
        return -1;
    }
    return 0;
}
