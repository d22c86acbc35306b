/* strata launch: start a whole job on this machine. Every task is a child
 * `strata train` process, or the command given after the options (a
 * Python script of strata.collectives), that learns the cluster from
 * TF_CONFIG (free loopback ports picked here). Output lines are prefixed
 * with the task name; SIGINT/SIGTERM are forwarded; when one task fails
 * the others are stopped; every child is reaped. */
#include <errno.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "cli.h"
#include "launch_elastic.h"

#define MAX_TASKS 64
#define GRACE_S 10 /* SIGTERM, then SIGKILL after this long */

typedef struct child {
    char  name[32];      /* "worker:1" */
    char  type[16];
    int   index;
    int   port;
    pid_t pid;
    int   fd[2];         /* stdout, stderr pipes; -1 once closed */
    char  buf[2][4096];  /* partial lines */
    size_t len[2];
    int   status;        /* exit status once reaped */
    int   done;
    int   restarts;      /* times this task was restarted alone */
    double restart_at;   /* > 0: due to be started again then */
    int   lost;          /* a ps worker gone for good: not the job's end */
    int   keyfd;         /* its keys (launch_keys.c), -1: the job's own */
    int   hold;          /* holds `port` for the task (free_port), or -1 */
} child_t;

/* How launch supervises one start of the job. */
typedef struct plan {
    char **targv;        /* argv of every child */
    int    by_role;      /* a ps job: a dead worker is restarted alone */
    int    max_restarts; /* per task (by_role), or of the whole job */
    int    has_chief;    /* else worker 0 coordinates (no restart alone) */
    int    elastic;      /* --elastic: every worker is restarted alone */
    esvc_t *svc;         /* the membership service, when this launch hosts
                            it (one machine, or node 0), else NULL */
} plan_t;

/* The task that coordinates a ps job: the chief, else worker 0. */
static int coordinates(const child_t *ci, const plan_t *pl)
{
    return !strcmp(ci->type, pl->has_chief ? "chief" : "worker") &&
           ci->index == 0;
}

static pid_t g_launch_pid;              /* for the children's parent check */
static esvc_t *g_svc;                   /* --elastic: the membership service */
static int g_svc_keys;                  /* its keys are launch's own        */
static cli_nodes_t g_nodes = CLI_NODES_INIT; /* --nnodes: launch_nodes.c */
static int g_elastic;                   /* --elastic */
static int g_command;                   /* the tasks run the given command */
static char g_self_host[256];           /* --elastic --nnodes: our address */
static char g_token[80];                /* --elastic --nnodes: the service's */
static cli_tasks_t g_tasks;             /* --tasks: launch_tasks.c */
static volatile sig_atomic_t g_signal;  /* to forward; cleared once done */
static volatile sig_atomic_t g_stopped; /* launch was asked to stop: never
                                           restart the job */

static void on_signal(int sig)
{
    g_signal = sig;
    g_stopped = 1;
}

static const char *const k_usage =
    "usage: strata launch [-n WORKERS | --workers N] [--ps M] [--chief]\n"
    "                     [--evaluator] [--max-restarts R] [--elastic MIN:MAX]\n"
    "                     [-c FILE] [--set SECTION.KEY=VALUE]...\n"
    "       strata launch [-n WORKERS] [--chief] ... [--] COMMAND [ARG]...\n"
    "       strata launch --nnodes N --node-rank K --rendezvous HOST:PORT -n M ...\n"
    "\n"
    "Start a job of N workers (and M parameter servers, and a separate chief\n"
    "with --chief) on this machine, on free loopback ports. Each task is a\n"
    "`strata train` process whose TF_CONFIG names the cluster and its task.\n"
    "Output lines are prefixed with the task (\"[worker:1] ...\");\n"
    "SIGINT/SIGTERM are forwarded to every task; when a task fails the others\n"
    "are stopped (SIGTERM, SIGKILL after 10 s) and launch exits with the\n"
    "failed task's exit code. With --max-restarts R, a job that failed is\n"
    "started again, whole, up to R times; with a [checkpoint] dir it resumes\n"
    "from the newest checkpoint. Never restarted: a bad configuration or\n"
    "plugin (exit 2, 3), a task stopped on request (75), a signal to launch.\n"
    "With --ps, a worker that dies is not the job's end: its step goes to\n"
    "another worker, and launch starts it again alone (after 1, 2, 4... s),\n"
    "up to R times, then lets the job finish without it; a ps or the chief\n"
    "that dies still stops (and, with R, restarts) the whole job.\n"
    "With --elastic MIN:MAX (a strategy with the elastic capability, e.g.\n"
    "mwms), the workers form an elastic job ([strategy.NAME] elastic = true,\n"
    "min_workers = MIN, max_workers = MAX;\n"
    "-n defaults to MAX): launch hosts its membership service, a worker that\n"
    "dies is restarted alone (after 1, 2, 4... s, up to R times) while the\n"
    "others go on without it and take it back at a step boundary; fewer than\n"
    "MIN workers for longer than [strategy.NAME] rendezvous_timeout_s stops\n"
    "the job (exit 1). With --nnodes too, MIN:MAX counts the workers of every\n"
    "machine, node 0's launch hosts the service at the --rendezvous address,\n"
    "and each launch restarts its own workers.\n"
    "With --tasks TYPE:INDEX,..., launch runs this machine's tasks of a job\n"
    "whose [cluster] names every task's host:port (a ps job across\n"
    "machines: one launch per machine); a dead worker that does not\n"
    "coordinate is restarted alone, any other death ends this machine's part.\n"
    "The tasks authenticate and encrypt their connections with CURVE keys\n"
    "that launch makes for the job in a private temporary directory (unless\n"
    "[security] keys names the job's own, or [security] mode = off).\n"
    "If launch itself dies (even by kill -9), every task gets SIGTERM.\n"
    "With --nnodes, the same command on each of N machines (K = 0..N-1) forms\n"
    "one job of N x M workers, as torchrun does: each task gets RANK = K*M+i,\n"
    "WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR/PORT; rank 0 (node\n"
    "0) serves the rendezvous at exactly HOST:PORT. Workers only; the job's\n"
    "keys ([security] keys) must be shared by every machine.\n"
    "With a COMMAND, every task runs it instead of `strata train` (found\n"
    "along PATH), in the same environment: a program that joins the job\n"
    "itself, e.g. `python3 train.py` calling strata.collectives.init();\n"
    "-c and --set are then its own business (not accepted here); with\n"
    "--elastic it re-forms its world itself (strata_comm_regroup).\n"
    "With --evaluator, a sidecar evaluator task scores each new checkpoint of\n"
    "[checkpoint] dir; its failure is reported and becomes launch's exit\n"
    "code, but never stops training.\n"
    "\n"
    "  -n, --workers N      worker tasks (default 2)\n"
    "      --ps M           parameter-server tasks (default 0)\n"
    "      --chief          a separate chief (coordinator) task\n"
    "      --evaluator      a sidecar evaluator task (needs [checkpoint] dir)\n"
    "      --max-restarts R restarts of a failed job (default 0)\n"
    "      --elastic MIN:MAX an elastic mwms job of MIN to MAX workers\n"
    "      --nnodes N       machines in the job, one launch on each\n"
    "      --node-rank K    this machine's place, 0..N-1 (0 hosts rank 0)\n"
    "      --rendezvous H:P node 0's address and a free port there\n"
    "      --tasks LIST     this machine's tasks of the job's [cluster]\n"
    "  -c, --config FILE, -s, --set K=V   passed to every task\n";

/* A socket bound to `port` (0: any) on 127.0.0.1, kept to hold it, or -1;
 * *got: which port. It binds without SO_REUSEADDR, so a port that any
 * socket holds (a listener, another launch's hold) is refused, then sets
 * SO_REUSEADDR on it: Linux lets a socket that sets it too bind and listen
 * beside one that is bound but not listening (the task's zmq listener
 * does), while plain bind()s -- another launch's probe -- and the kernel's
 * choice of a port for bind(0) or connect() keep away from it. */
static int hold_port(int port, int *got)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = { .sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;
    int one = 1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) {
        close(fd);
        return -1;
    }
    *got = ntohs(a.sin_port);
    return fd;
}

/* A free TCP port on 127.0.0.1 for a task to listen on, held by launch
 * (*hold) until the job's end: a port probed and let go went to the next
 * bind(0) or outgoing connection of any process, or to another launch's
 * task beside this one (a test suite's), before this task bound it.
 * Drawn at random below Linux's ephemeral range (32768 and up), which the
 * kernel fills; falls back to the kernel's choice. -1: none. */
static int free_port(int *hold)
{
    static unsigned seed;
    if (!seed)
        seed = (unsigned)getpid() ^ (unsigned)time(NULL) * 2654435761u;
    int port = -1;
    for (int tries = 0; tries < 64; tries++) {
        int want = 20000 + (int)(rand_r(&seed) % 12768u);
        if ((*hold = hold_port(want, &port)) >= 0)
            return port;
    }
    return (*hold = hold_port(0, &port)) >= 0 ? port : -1;
}

/* Append to a bounded string; returns -1 once it no longer fits. */
static int put(char *out, size_t cap, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int put(char *out, size_t cap, size_t *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + *at, cap - *at, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *at)
        return -1;
    *at += (size_t)n;
    return 0;
}

/* TensorFlow's TF_CONFIG for task `self` of the job. */
static int tf_config(const child_t *c, int n, int self, char *out, size_t cap)
{
    static const char *const types[] = { "chief", "worker", "ps", "evaluator" };
    size_t at = 0;
    int rc = put(out, cap, &at, "{\"cluster\": {");
    int lists = 0;
    for (int t = 0; t < 4; t++) {
        int members = 0;
        for (int i = 0; i < n; i++) {
            if (strcmp(c[i].type, types[t]) != 0)
                continue;
            if (members++ == 0)
                rc |= put(out, cap, &at, "%s\"%s\": [", lists++ ? ", " : "",
                          types[t]);
            else
                rc |= put(out, cap, &at, ", ");
            rc |= put(out, cap, &at, "\"127.0.0.1:%d\"", c[i].port);
        }
        if (members)
            rc |= put(out, cap, &at, "]");
    }
    rc |= put(out, cap, &at, "}, \"task\": {\"type\": \"%s\", \"index\": %d}}",
              c[self].type, c[self].index);
    return rc;
}

static int start_child(child_t *c, int n, int self, char **train_argv)
{
    char tf[8192];
    if (tf_config(c, n, self, tf, sizeof tf) != 0) {
        fprintf(stderr, "strata: launch: TF_CONFIG too long\n");
        return -1;
    }
    int out[2], err[2];
    if (pipe(out) != 0 || pipe(err) != 0) {
        fprintf(stderr, "strata: launch: pipe: %s\n", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "strata: launch: fork: %s\n", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        /* Launch gone, even by -9: the task is told (SIGTERM: it stops at
         * its next step boundary, with a checkpoint when configured) rather
         * than left to run unsupervised. A launch that died before this
         * line is noticed by the parent check. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != g_launch_pid)
            _exit(1);
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        close(out[0]);
        close(out[1]);
        close(err[0]);
        close(err[1]);
        if (g_tasks.n ? cli_tasks_env(c[self].name) != 0
            : g_nodes.nnodes && g_elastic
                ? cli_nodes_elastic_env(&g_nodes, c[self].index, g_self_host,
                                        c[self].port) != 0
            : g_nodes.nnodes ? cli_nodes_env(&g_nodes, c[self].index) != 0
                             : setenv("TF_CONFIG", tf, 1) != 0)
            _exit(1);
        if (cli_launch_keys_pass(c[self].keyfd) != 0)
            _exit(1);
        /* The parent's choice of terminal rules the progress display. */
        setenv("STRATA_LAUNCHED", c[self].name, 1);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (g_command)
            execvp(train_argv[0], train_argv);
        else
            execv("/proc/self/exe", train_argv);
        fprintf(stderr, "strata: launch: exec %s: %s\n",
                g_command ? train_argv[0] : "strata", strerror(errno));
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    c[self].pid = pid;
    if (g_svc && !strcmp(c[self].type, "worker"))
        esvc_alive(g_svc, c[self].index, 1);
    c[self].fd[0] = out[0];
    c[self].fd[1] = err[0];
    if (g_tasks.n)
        printf("[launch] %s: pid %ld, %s\n", c[self].name, (long)pid,
               g_tasks.addr[self]);
    else if (g_nodes.nnodes)
        printf("[launch] %s: pid %ld, rendezvous %s:%d\n", c[self].name,
               (long)pid, g_nodes.host, g_nodes.port);
    else
        printf("[launch] %s: pid %ld, 127.0.0.1:%d\n", c[self].name,
               (long)pid, c[self].port);
    fflush(stdout);
    return 0;
}

/* Read what a child wrote and print whole lines with its name in front. */
/* Error and warning lines already printed, by their text without the task
 * prefix: a bad setting that every task reports (a plugin's key, checked
 * in each task) is printed once, with the first task's name; the same line
 * from the other tasks is counted and said once at the end. A task's own
 * repeats are all printed. */
#define SEEN_MAX 256
static struct { uint64_t hash; const child_t *by; } g_seen[SEEN_MAX];
static int g_nseen, g_repeats;

static uint64_t fnv1a(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
    return h;
}

static int repeated(const child_t *c, const char *line, size_t n)
{
    if (!memmem(line, n, ": error: ", 9) && !memmem(line, n, ": warning: ", 11))
        return 0;
    uint64_t h = fnv1a(line, n);
    for (int i = 0; i < g_nseen; i++)
        if (g_seen[i].hash == h) {
            if (g_seen[i].by == c)
                return 0;
            g_repeats++;
            return 1;
        }
    if (g_nseen < SEEN_MAX) {
        g_seen[g_nseen].hash = h;
        g_seen[g_nseen++].by = c;
    }
    return 0;
}

static void emit(const child_t *c, FILE *to, const char *line, size_t n)
{
    if (to == stderr && repeated(c, line, n))
        return;
    fprintf(to, "[%s] %.*s\n", c->name, (int)n, line);
}

static void drain(child_t *c, int which)
{
    FILE *to = which == 0 ? stdout : stderr;
    char *buf = c->buf[which];
    ssize_t n = read(c->fd[which], buf + c->len[which],
                     sizeof c->buf[which] - 1 - c->len[which]);
    if (n <= 0) {
        if (c->len[which] > 0)
            emit(c, to, buf, c->len[which]);
        c->len[which] = 0;
        close(c->fd[which]);
        c->fd[which] = -1;
        return;
    }
    c->len[which] += (size_t)n;
    size_t start = 0;
    for (size_t i = 0; i < c->len[which]; i++)
        if (buf[i] == '\n' || buf[i] == '\r') {
            emit(c, to, buf + start, i - start);
            start = i + 1;
        }
    /* A line longer than the buffer is printed in pieces. */
    if (start == 0 && c->len[which] == sizeof c->buf[which] - 1) {
        emit(c, to, buf, c->len[which]);
        start = c->len[which];
    }
    memmove(buf, buf + start, c->len[which] - start);
    c->len[which] -= start;
    fflush(to);
}

static void signal_all(child_t *c, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (c[i].pid > 0 && !c[i].done)
            kill(c[i].pid, sig);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double backoff_s(int restarts)
{
    double s = 1.0;
    for (int k = 0; k < restarts && s < 30.0; k++)
        s *= 2.0;
    return s;
}

/* A failure that a fresh start can mend: not a bad configuration (2) or
 * plugin (3), which would fail the same way, nor a stop on request (75). */
static int restartable(int code)
{
    return code != 0 && code != 2 && code != 3 && code != 75;
}

/* A task that ended with `ec`. In a ps job a dead worker is the
 * coordinator's business (it re-schedules the worker's step): launch
 * starts that worker again alone, after a backoff, up to max_restarts
 * times, and after that lets the job go on without it. So in an elastic
 * job, for every worker (the others re-form without it; it joins again).
 * Anything else that fails stops the job. Returns 1 when the job goes on. */
static int worker_down(child_t *ci, int ec, const plan_t *pl, int over)
{
    /* An elastic job: any worker, until training is over, unless what
     * failed would fail again (its configuration, a plugin). */
    int alone = pl->elastic ? !over && restartable(ec)
                        : pl->by_role && !coordinates(ci, pl) &&
                              ec != 2 && ec != 3; /* would fail again */
    if (!alone || strcmp(ci->type, "worker") != 0 || g_stopped)
        return 0;
    if (ci->restarts < pl->max_restarts) {
        double wait = backoff_s(ci->restarts);
        ci->restarts++;
        ci->restart_at = now_s() + wait;
        fprintf(stderr, "[launch] %s failed (exit %d); restarting it alone in "
                "%.0f s (restart %d of %d); the others go on\n", ci->name, ec,
                wait, ci->restarts, pl->max_restarts);
    } else {
        ci->lost = 1;
        fprintf(stderr, "[launch] %s failed (exit %d)%s; the job goes on "
                "without it\n", ci->name, ec, pl->max_restarts
                ? " and has no restarts left" : "");
    }
    return 1;
}

/* Poll output and children until all are reaped. Returns launch's exit code:
 * 0, or the first failed task's code (128+N for a signal); a ps worker lost
 * for good does not count. */
static int supervise(child_t *c, int n, const plan_t *pl)
{
    int code = 0, alive = n, stopping = 0, due = 0, over = 0, eval_code = 0;
    double stop_at = 0; /* when set: SIGKILL the rest at this time */
    while (alive > 0 || due) {
        struct pollfd pfd[2 * MAX_TASKS + ESVC_MAX_FDS];
        int idx[2 * MAX_TASKS], np = 0;
        for (int i = 0; i < n; i++)
            for (int w = 0; w < 2; w++)
                if (c[i].fd[w] >= 0) {
                    pfd[np] = (struct pollfd){ .fd = c[i].fd[w], .events = POLLIN };
                    idx[np++] = 2 * i + w;
                }
        int ns = pl->svc ? esvc_pollfds(pl->svc, pfd + np, ESVC_MAX_FDS) : 0;
        int r = poll(pfd, (nfds_t)(np + ns), 100);
        for (int k = 0; r > 0 && k < np; k++)
            if (pfd[k].revents)
                drain(&c[idx[k] / 2], idx[k] % 2);
        /* The service gave up (too few workers for too long): the job
         * stops, its error is launch's. */
        if (pl->svc && esvc_serve(pl->svc, pfd + np, ns) && !stopping) {
            code = 1;
            signal_all(c, n, SIGTERM);
            stop_at = now_s() + GRACE_S;
            stopping = 1;
        }
        if (g_signal) {
            fprintf(stderr, "[launch] signal %d: forwarding to every task\n",
                    (int)g_signal);
            signal_all(c, n, (int)g_signal);
            /* The tasks' own exit codes say how it ended (75: stopped with
             * a checkpoint, restart to resume). */
            stopping = 1;
            g_signal = 0;
            if (stop_at == 0)
                stop_at = now_s() + GRACE_S;
        }
        due = 0;
        for (int i = 0; i < n; i++) {
            if (c[i].restart_at > 0 && (stopping || now_s() >= c[i].restart_at)) {
                c[i].restart_at = 0;
                /* What the dead one wrote last, before its pipes go. */
                for (int w = 0; w < 2; w++)
                    while (c[i].fd[w] >= 0)
                        drain(&c[i], w);
                if (!stopping && start_child(c, n, i, pl->targv) == 0) {
                    c[i].done = 0;
                    alive++;
                }
            }
            due |= c[i].restart_at > 0;
            if (c[i].done)
                continue;
            int st;
            if (waitpid(c[i].pid, &st, WNOHANG) != c[i].pid)
                continue;
            /* Keep reading its pipes until they close (poll above). */
            c[i].done = 1;
            alive--;
            if (pl->svc && !strcmp(c[i].type, "worker"))
                esvc_alive(pl->svc, c[i].index, 0);
            int ec = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            c[i].status = ec;
            if (ec != 0 && !stopping && worker_down(&c[i], ec, pl, over)) {
                due |= c[i].restart_at > 0;
                continue;
            }
            /* The sidecar evaluator watches; training never waits for it. */
            if (ec != 0 && !strcmp(c[i].type, "evaluator")) {
                fprintf(stderr, "[launch] %s failed (exit %d); training goes "
                        "on without it\n", c[i].name, ec);
                eval_code = ec;
                continue;
            }
            if (ec != 0 && code == 0) {
                code = ec;
                if (!stopping) {
                    fprintf(stderr, "[launch] %s failed (exit %d); stopping "
                            "the other tasks\n", c[i].name, ec);
                    signal_all(c, n, SIGTERM);
                    stop_at = now_s() + GRACE_S;
                    stopping = 1;
                }
            } else if (ec == 0) {
                printf("[launch] %s finished\n", c[i].name);
                /* The job is over: a worker due to restart has nothing to
                 * rejoin. */
                if (pl->elastic || (pl->by_role && coordinates(&c[i], pl)))
                    for (int k = 0; k < n; k++)
                        c[k].restart_at = 0;
                over = 1;
            }
        }
        if (stop_at > 0 && now_s() > stop_at) {
            signal_all(c, n, SIGKILL);
            stop_at = now_s() + 3600; /* once */
        }
        if (alive == 0 && due) /* nothing to poll: wait for the restart */
            usleep(100000);
    }
    /* An elastic job whose workers are all gone for good before training
     * ended (none left to restart) failed, whatever the service waits for. */
    int lost = 0;
    for (int i = 0; i < n; i++)
        lost += c[i].lost;
    if (g_tasks.n && lost == n && code == 0) {
        fprintf(stderr, "[launch] every task of this launch is gone for good "
                "(no restarts left); this part of the job failed\n");
        code = 1;
    }
    if (pl->elastic && !over && !stopping && code == 0) {
        fprintf(stderr, "[launch] elastic: every worker %sis gone and none "
                "is left to restart before training ended; the job failed\n",
                g_nodes.nnodes > 1 ? "of this machine " : "");
        code = 1;
    }
    /* Flush what the pipes still hold. */
    for (int i = 0; i < n; i++)
        for (int w = 0; w < 2; w++)
            while (c[i].fd[w] >= 0)
                drain(&c[i], w);
    return code ? code : eval_code;
}

/* --elastic: the membership service, hosted by this launch on one
 * machine, by node 0's across machines (at the rendezvous address, with a
 * token every machine derives alike); the other machines' launches point
 * their workers at it. 0 or 1 after a message. */
static int open_membership(int emin, int emax, int workers)
{
    if (g_nodes.nnodes <= 1)
        return (g_svc = esvc_open(emin, emax, NULL, 0, NULL)) ? 0 : -1;
    char addr[300];
    if (g_nodes.node_rank == 0) {
        if (!(g_svc = esvc_open(emin, emax, g_nodes.host, g_nodes.port,
                                g_token)))
            return -1;
        int first = cli_nodes_first(&g_nodes);
        for (int k = 0; k < g_nodes.nnodes * workers; k++)
            if (k < first || k >= first + workers)
                esvc_remote(g_svc, k);
        return 0;
    }
    snprintf(addr, sizeof addr, strchr(g_nodes.host, ':') ? "[%s]:%d" : "%s:%d",
             g_nodes.host, g_nodes.port);
    return setenv("STRATA_ELASTIC", addr, 1) == 0 &&
           setenv("STRATA_ELASTIC_TOKEN", g_token, 1) == 0 ? 0 : -1;
}

static void release_ports(child_t *c, int n)
{
    for (int i = 0; i < n; i++)
        if (c[i].hold >= 0) {
            close(c[i].hold);
            c[i].hold = -1;
        }
}

/* One start of the whole job on fresh ports: every task started, supervised
 * and reaped. Returns the job's exit code; *started: tasks started. */
static int run_job(child_t *c, int n, const plan_t *pl, int *started)
{
    char **targv = pl->targv;
    *started = 0;
    for (int i = 0; i < n; i++) {
        child_t keep = c[i];
        memset(&c[i], 0, sizeof c[i]);
        memcpy(c[i].name, keep.name, sizeof c[i].name);
        memcpy(c[i].type, keep.type, sizeof c[i].type);
        c[i].index = keep.index;
        c[i].keyfd = keep.keyfd;
        c[i].fd[0] = c[i].fd[1] = -1;
        /* distinct: the ports held already are refused */
        if ((c[i].port = free_port(&c[i].hold)) <= 0) {
            fprintf(stderr, "strata: launch: no free port: %s\n",
                    strerror(errno));
            release_ports(c, i);
            return 1;
        }
    }
    int code = 0;
    for (int i = 0; i < n; i++) {
        if (start_child(c, n, i, targv) != 0) {
            code = 1;
            signal_all(c, i, SIGTERM);
            break;
        }
        (*started)++;
    }
    int sup = supervise(c, *started, pl);
    release_ports(c, n);
    return code ? code : sup;
}

/* A worker's secret certificate of launch's own keys: the membership
 * service's key of it. */
static void worker_cert(void *user, int i, const char *cert)
{
    const child_t *c = user;
    if (!strcmp(c[i].type, "worker"))
        (void)esvc_worker_cert(g_svc, c[i].index, cert);
}

/* --elastic: the membership service authenticates each worker with the
 * job's keys when its tasks have keys ([security] keys, or launch's own),
 * with the token only in plaintext mode. The keys of [security] keys are
 * read here; launch's own when it makes them (*own_keys set). 0 or -1
 * after a message. */
static int secure_membership(char **targv, int nt, int launch_keys,
                             int *own_keys)
{
    char mode[64], keys[4096];
    *own_keys = 0;
    if (!g_svc || cli_job_security(targv, nt, mode, keys, sizeof keys) != 0)
        return g_svc ? -1 : 0;
    if (!strcmp(mode, "off") || (!keys[0] && !launch_keys))
        return 0; /* no keys: the tasks run in plaintext, the token */
    esvc_secure(g_svc);
    if (!keys[0]) {
        *own_keys = 1;
        return 0;
    }
    int got = 0;
    for (int i = 0; i < MAX_TASKS; i++) {
        char path[4200], buf[CLI_CERT_MAX];
        snprintf(path, sizeof path, "%s/worker-%d.key_secret", keys, i);
        FILE *f = fopen(path, "rb");
        size_t k = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[k] = '\0';
        got += k > 0 && esvc_worker_cert(g_svc, i, buf) == 0;
        sodium_memzero(buf, sizeof buf);
    }
    if (!got)
        fprintf(stderr, "strata: launch: elastic: no worker's secret key "
                "in %s: the membership service cannot authenticate its "
                "workers (every machine's launch needs them)\n", keys);
    return got ? 0 : -1;
}

/* Ephemeral CURVE keys for the job's tasks (launch_keys.c: never on
 * disk), so that a job on one machine is authenticated and encrypted with
 * no setup; the tasks use them when [security] keys is not set. */
static int make_job_keys(child_t *c, int n)
{
    const char *type[MAX_TASKS];
    int index[MAX_TASKS], fd[MAX_TASKS];
    for (int i = 0; i < n; i++) {
        type[i] = c[i].type;
        index[i] = c[i].index;
    }
    if (cli_launch_keys_seen(n, type, index, fd, g_svc_keys ? worker_cert
                                                            : NULL, c) != 0)
        return -1;
    for (int i = 0; i < n; i++)
        c[i].keyfd = fd[i];
    return 0;
}

static void close_job_keys(child_t *c, int n)
{
    for (int i = 0; i < n; i++)
        cli_launch_keys_close(&c[i].keyfd, 1);
}

static int parse_count(const char *flag, const char *v, int *out)
{
    char *end;
    long n = v ? strtol(v, &end, 10) : -1;
    if (!v || *end || n < 0 || n > MAX_TASKS) {
        fprintf(stderr, "strata: launch: %s needs a count in [0, %d]\n%s",
                flag, MAX_TASKS, k_usage);
        return -1;
    }
    *out = (int)n;
    return 0;
}

int cli_launch(int argc, char **argv)
{
    int workers = 2, ps = 0, chief = 0, evaluator = 0, restarts = 0;
    int emin = 0, emax = 0;
    int given_n = 0, nodes_arg;
    /* argv of every child: strata train [-c FILE] [--set K=V]... */
    char **targv = calloc((size_t)argc + 9, sizeof *targv);
    if (!targv)
        return 1;
    int nt = 0;
    targv[nt++] = "strata";
    targv[nt++] = "train";
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(k_usage, stdout);
            free(targv);
            return 0;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--workers")) {
            if (parse_count(a, i + 1 < argc ? argv[++i] : NULL, &workers) != 0)
                goto usage;
            given_n = 1;
        } else if (!strcmp(a, "--elastic")) {
            if (esvc_parse(i + 1 < argc ? argv[++i] : NULL, MAX_TASKS, &emin,
                           &emax) != 0)
                goto usage;
        } else if (!strcmp(a, "--ps")) {
            if (parse_count(a, i + 1 < argc ? argv[++i] : NULL, &ps) != 0)
                goto usage;
        } else if (!strcmp(a, "--max-restarts")) {
            if (parse_count(a, i + 1 < argc ? argv[++i] : NULL, &restarts) != 0)
                goto usage;
        } else if (!strcmp(a, "--chief")) {
            chief = 1;
        } else if (!strcmp(a, "--evaluator")) {
            evaluator = 1;
        } else if (!strcmp(a, "--tasks")) {
            if (cli_tasks_arg(&g_tasks, i + 1 < argc ? argv[++i] : NULL) != 0)
                goto usage;
        } else if ((nodes_arg = cli_nodes_arg(&g_nodes, argc, argv, &i))) {
            if (nodes_arg < 0)
                goto usage;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--config") ||
                   !strcmp(a, "-s") || !strcmp(a, "--set")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "strata: launch: %s needs a value\n%s", a,
                        k_usage);
                goto usage;
            }
            targv[nt++] = argv[i];
            targv[nt++] = argv[++i];
        } else if (!strcmp(a, "--") || a[0] != '-') {
            /* the command: the rest of the line, as it is */
            if (nt > 2) {
                fprintf(stderr, "strata: launch: -c and --set are for "
                        "strata train; a COMMAND reads its own "
                        "configuration\n%s", k_usage);
                goto usage;
            }
            i += !strcmp(a, "--");
            if (i >= argc) {
                fprintf(stderr, "strata: launch: -- needs a COMMAND\n%s",
                        k_usage);
                goto usage;
            }
            nt = 0;
            while (i < argc)
                targv[nt++] = argv[i++];
            g_command = 1;
        } else {
            fprintf(stderr, "strata: launch: unknown argument '%s'\n%s", a,
                    k_usage);
            goto usage;
        }
    }
    /* The options below read the job's INI from targv: strata train's. */
    if (g_command && (g_tasks.n || g_nodes.nnodes ||
                      g_nodes.node_rank >= 0 || g_nodes.host[0])) {
        fprintf(stderr, "strata: launch: a COMMAND runs as a one-machine "
                "job: no --tasks or --nnodes with it\n");
        goto usage;
    }
    if (emax > 0) { /* an elastic mwms job: workers only */
        int machines = g_nodes.nnodes > 1 ? g_nodes.nnodes : 1;
        if (!given_n)
            workers = machines > 1 ? 0 : emax;
        int total = machines * workers;
        if (ps || chief || total < emin || total > emax) {
            fprintf(stderr, "strata: launch: --elastic %d:%d starts %d to %d "
                    "workers in all (-n on each machine%s), no --ps or "
                    "--chief\n", emin, emax, emin, emax,
                    machines > 1 ? ", given with --nnodes" : "");
            goto usage;
        }
        g_elastic = 1;
        /* a COMMAND joins the service itself (strata_comm_regroup) */
        if (!g_command && esvc_job_args(targv, &nt, emin, emax) != 0) {
            free(targv);
            return 2;
        }
    }
    if (evaluator && g_nodes.nnodes > 1) {
        fprintf(stderr, "strata: launch: --evaluator runs with a one-machine "
                "job; across machines start it with [cluster]/TF_CONFIG and "
                "--task evaluator:0\n");
        goto usage;
    }
    if (g_tasks.n && (given_n || ps || chief || evaluator || emax ||
                      g_nodes.nnodes || g_nodes.node_rank >= 0 ||
                      g_nodes.host[0])) {
        fprintf(stderr, "strata: launch: --tasks runs tasks of the job's "
                "[cluster] as they are listed there: no -n, --ps, --chief, "
                "--evaluator, --elastic or --nnodes with it\n");
        goto usage;
    }
    if (g_tasks.n && cli_tasks_check(&g_tasks, targv, nt) != 0)
        goto usage;
    int n = g_tasks.n ? g_tasks.n : chief + workers + ps + evaluator;
    if (!g_tasks.n && (workers + chief < 1 || n > MAX_TASKS)) {
        fprintf(stderr, "strata: launch: need at least one worker (or "
                "--chief), at most %d tasks in all\n", MAX_TASKS);
        goto usage;
    }
    if (cli_nodes_check(&g_nodes, workers, ps, chief, targv, nt) != 0)
        goto usage;
    /* Across machines, an elastic job's service is node 0's: every launch
     * needs its address on the way there and the token they share. */
    if (g_elastic && g_nodes.nnodes > 1 &&
        (cli_nodes_self_host(&g_nodes, g_self_host, sizeof g_self_host) != 0 ||
         cli_nodes_token(&g_nodes, targv, nt, g_token, sizeof g_token) != 0))
        goto usage;
    child_t *c = calloc((size_t)n, sizeof *c);
    if (!c) {
        free(targv);
        return 1;
    }
    int k = 0;
    for (int i = 0; i < chief; i++, k++)
        snprintf(c[k].type, sizeof c[k].type, "chief"), c[k].index = i;
    for (int i = 0; i < workers; i++, k++)
        snprintf(c[k].type, sizeof c[k].type, "worker"),
            c[k].index = cli_nodes_first(&g_nodes) + i;
    for (int i = 0; i < ps; i++, k++)
        snprintf(c[k].type, sizeof c[k].type, "ps"), c[k].index = i;
    if (evaluator)
        snprintf(c[k].type, sizeof c[k].type, "evaluator"), c[k].index = 0;
    for (int i = 0; i < g_tasks.n; i++)
        snprintf(c[i].type, sizeof c[i].type, "%s",
                 cli_tasks_type(g_tasks.type[i])), c[i].index = g_tasks.index[i];
    for (int i = 0; i < n; i++)
        snprintf(c[i].name, sizeof c[i].name, "%s:%d", c[i].type, c[i].index);
    struct sigaction sa = { .sa_handler = on_signal };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    g_launch_pid = getpid();
    if (emax > 0 && open_membership(emin, emax, workers) != 0) {
        free(c);
        free(targv);
        return 1;
    }
    /* A ps job: a dead worker is the coordinator's business, and launch
     * restarts it alone; any other death restarts the whole job (an
     * elastic one: see worker_down). */
    const plan_t plan = {
        .targv = targv, .by_role = g_tasks.n ? g_tasks.has_ps : ps > 0,
        .max_restarts = restarts,
        .has_chief = g_tasks.n ? g_tasks.has_chief : chief,
        .elastic = g_elastic, .svc = g_svc };
    for (int i = 0; i < n; i++)
        c[i].keyfd = -1;
    /* Several machines share the keys of [security] keys, not launch's. */
    int launch_keys = g_nodes.nnodes <= 1 && !g_tasks.n;
    if (secure_membership(targv, nt, launch_keys, &g_svc_keys) != 0 ||
        (launch_keys && make_job_keys(c, n) != 0)) {
        esvc_close(g_svc);
        free(c);
        free(targv);
        return 1;
    }
    int code, started;
    for (int attempt = 0;; attempt++) {
        code = run_job(c, n, &plan, &started);
        /* An elastic job restarts its workers alone, never whole; so does
         * one machine's part of a job (--tasks). */
        if (code == 0 || g_stopped || attempt >= restarts || g_elastic ||
            g_tasks.n || !restartable(code))
            break;
        fprintf(stderr, "[launch] restart %d/%d: the job failed (exit %d); "
                "starting every task again\n", attempt + 1, restarts, code);
    }
    if (g_repeats > 0)
        fprintf(stderr, "[launch] %d error or warning line%s that other "
                "tasks had printed already not shown again\n", g_repeats,
                g_repeats == 1 ? "" : "s");
    /* 75: stopped on request with a checkpoint (strata train's code). */
    printf("[launch] %s: %d task%s, exit %d\n",
           code == 75 ? "stopped, run it again to resume" : code ? "failed"
                                                              : "done",
           started, started == 1 ? "" : "s", code);
    close_job_keys(c, n);
    esvc_close(g_svc);
    g_svc = NULL;
    free(c);
    free(targv);
    return code;
usage:
    free(targv);
    return 2;
}
