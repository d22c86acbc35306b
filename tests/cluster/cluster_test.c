/* Cluster resolution: every source ([cluster], TF_CONFIG, SLURM, torchrun,
 * single), --task, precedence, ranks, the SLURM hostlist, and the one error
 * line each bad input gives (stderr is captured and checked).
 *
 * usage: cluster_test <dir of this file> <etc dir>. Runs in <dir of this
 * file>, so origins read "good.ini:7". */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cluster/cluster.h"
#include "testutil.h"

static char g_etc[PATH_MAX];

#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define NOENV ((const char *const[]){ NULL })
#define SETS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* ---- running one case ------------------------------------------------------ */

/* Loads `ini` (may be NULL), then `sets` as --set, then resolves with `cli`
 * and `env`. Whatever was logged goes to *log (captured_, valid until the
 * next capture). */
static int resolve(const char *ini, const char *const *sets, const char *cli,
                   const char *const *env, strata__cluster_t *c,
                   const char **log)
{
    strata__cfg_t *cfg = NULL;
    int rc = 0;
    capture_begin();
    if (ini || sets) {
        rc = strata__cfg_new(&cfg);
        if (rc == 0 && ini)
            rc = strata__cfg_load_file(cfg, ini);
        for (; rc == 0 && sets && *sets; sets++)
            rc = strata__cfg_set(cfg, *sets, STRATA__CFG_CLI, "--set");
    }
    if (rc == 0)
        rc = strata__cluster_resolve(cfg, cli, (char *const *)env, c);
    /* the result must not point into the config */
    strata__cfg_free(cfg);
    *log = capture_end();
    return rc;
}

/* A case that must resolve, silently. */
static int ok_case(const char *ini, const char *const *sets, const char *cli,
                   const char *const *env, strata__cluster_t *c, int line)
{
    const char *log = NULL;
    int rc = resolve(ini, sets, cli, env, c, &log);
    CHECKF(rc == 0 && log && !*log, "line %d: rc %d, log '%s'", line, rc,
           log ? log : "");
    return rc;
}
#define OK(ini, sets, cli, env, c) ok_case(ini, sets, cli, env, c, __LINE__)

/* A case that must fail with STRATA_ECONFIG and exactly one error line that
 * names the source `who` (a prefix of the message after "error: ") and
 * contains `what`. */
static void err_case(const char *ini, const char *const *sets,
                     const char *cli, const char *const *env, const char *who,
                     const char *what, int line)
{
    strata__cluster_t c;
    memset(&c, 0x5a, sizeof c);
    const char *log = NULL;
    int rc = resolve(ini, sets, cli, env, &c, &log);
    CHECKF(rc == STRATA_ECONFIG, "line %d: rc %d", line, rc);
    const char *msg = log ? strstr(log, "error: ") : NULL;
    CHECKF(count_lines(log) == 1 && msg
               && strncmp(msg + 7, who, strlen(who)) == 0
               && strstr(msg, what),
           "line %d: want one error line starting with '%s', with '%s'; "
           "got '%s'", line, who, what, log ? log : "(null)");
    /* a failed resolve leaves the struct empty; freeing it is harmless */
    CHECKF(c.pub.ntasks == 0 && c.pub.tasks == NULL && c.pub.source == NULL
               && c.pub.rendezvous == NULL,
           "line %d: not left empty", line);
    strata__cluster_free(&c);
}
#define ERRC(ini, sets, cli, env, who, what) \
    err_case(ini, sets, cli, env, who, what, __LINE__)
/* TF_CONFIG alone */
#define TF_ERR(json, what) \
    ERRC(NULL, NULL, NULL, ENV("TF_CONFIG=" json), "TF_CONFIG: ", what)

static int task_is(const strata__cluster_t *c, int i, const char *type,
                   int index, int rank, const char *addr)
{
    if (i < 0 || i >= c->pub.ntasks)
        return 0;
    const strata_task_t *t = &c->pub.tasks[i];
    return strcmp(t->type, type) == 0 && t->index == index && t->rank == rank
           && (addr ? t->address && strcmp(t->address, addr) == 0
                    : t->address == NULL);
}
#define TASK(c, i, type, index, rank, addr) \
    CHECKF(task_is(c, i, type, index, rank, addr), "task %d", i)

/* ---- single -------------------------------------------------------------- */

static void check_single(const strata__cluster_t *c, const char *source)
{
    CHECK(c->pub.struct_size == sizeof(strata_cluster_t));
    CHECK(c->pub.ntasks == 1 && c->pub.self == 0 && c->pub.nworkers == 1);
    CHECK(c->pub.tasks == c->tasks);
    TASK(c, 0, "worker", 0, 0, NULL);
    CHECK(c->pub.rendezvous == NULL);
    CHECKF(c->pub.source && strcmp(c->pub.source, source) == 0, "'%s'",
           c->pub.source ? c->pub.source : "(null)");
}

static void test_single(void)
{
    strata__cluster_t c;
    if (OK(NULL, NULL, NULL, NULL, &c) == 0)
        check_single(&c, "single");
    strata__cluster_free(&c);
    strata__cluster_free(&c); /* twice: zeroed */
    strata__cluster_free(NULL);
    if (OK(NULL, NULL, NULL, ENV("HOME=/root", "PATH=/bin", "RANKX=3",
                                 "SLURM_JOB_ID=7", "MASTER_ADDR=h"),
           &c) == 0)
        check_single(&c, "single");
    strata__cluster_free(&c);
    /* empty TF_CONFIG, blank TF_CONFIG and {} define nothing, as in TF */
    if (OK(NULL, NULL, NULL, ENV("TF_CONFIG="), &c) == 0)
        check_single(&c, "single");
    strata__cluster_free(&c);
    if (OK(NULL, NULL, NULL, ENV("TF_CONFIG= \n "), &c) == 0)
        check_single(&c, "single");
    strata__cluster_free(&c);
    if (OK(NULL, NULL, NULL, ENV("TF_CONFIG={ }"), &c) == 0)
        check_single(&c, "single");
    strata__cluster_free(&c);
    /* etc/strata.ini: every [cluster] key at its default: no cluster */
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/strata.ini", g_etc);
    if (OK(path, NULL, NULL, NOENV, &c) == 0)
        check_single(&c, "single");
    strata__cluster_free(&c);
    if (OK(NULL, NULL, "worker:0", NOENV, &c) == 0)
        check_single(&c, "--task + single");
    strata__cluster_free(&c);

    ERRC(NULL, NULL, "worker:1", NOENV, "--task worker:1: ",
         "index 1 out of range: cluster has 1 worker task (the cluster comes "
         "from single)");
    ERRC(NULL, NULL, "ps:0", NOENV, "--task ps:0: ",
         "type 'ps' is not in the cluster (its tasks: 1 worker)");
    ERRC(NULL, NULL, "boss:0", NOENV, "--task 'boss:0': ", "expected TYPE:INDEX");
    ERRC(NULL, NULL, "worker", NOENV, "--task 'worker': ", "expected TYPE:INDEX");
    ERRC(NULL, NULL, "worker:", NOENV, "--task ", "expected TYPE:INDEX");
    ERRC(NULL, NULL, "worker:-1", NOENV, "--task ", "expected TYPE:INDEX");
    ERRC(NULL, NULL, "worker:1x", NOENV, "--task ", "expected TYPE:INDEX");
    ERRC(NULL, NULL, "worker: 1", NOENV, "--task ", "expected TYPE:INDEX");
    ERRC(NULL, NULL, "", NOENV, "--task ", "expected TYPE:INDEX");

    char name[16];
    strata_task_t t = { "ps", 3, -1, NULL };
    CHECK(strcmp(strata__task_name(&t, name, sizeof name), "ps:3") == 0);
    CHECK(strcmp(strata__task_name(NULL, name, sizeof name), "?:-1") == 0);
}

/* ---- [cluster] ------------------------------------------------------------ */

static void test_ini(void)
{
    strata__cluster_t c;
    if (OK("good.ini", NULL, NULL, NOENV, &c) == 0) {
        CHECK(c.pub.ntasks == 6 && c.pub.nworkers == 3);
        TASK(&c, 0, "chief", 0, 0, "chief-host:2222");
        TASK(&c, 1, "worker", 0, 1, "w0:2222");
        TASK(&c, 2, "worker", 1, 2, "w1:2222");
        TASK(&c, 3, "ps", 0, -1, "p0:2222");
        TASK(&c, 4, "ps", 1, -1, "p1:2222");
        TASK(&c, 5, "evaluator", 0, -1, "ev:2222");
        CHECK(c.pub.self == 2);
        CHECK(strcmp(c.pub.source, "[cluster]") == 0);
        CHECK(c.pub.rendezvous == NULL);
    }
    strata__cluster_free(&c);
    /* --task overrides the file's task */
    if (OK("good.ini", NULL, "ps:1", NOENV, &c) == 0) {
        CHECK(c.pub.self == 4);
        CHECK(strcmp(c.pub.source, "--task + [cluster]") == 0);
    }
    strata__cluster_free(&c);
    if (OK("good.ini", NULL, "chief:0", NOENV, &c) == 0)
        CHECK(c.pub.self == 0 && c.pub.tasks[0].rank == 0);
    strata__cluster_free(&c);
    /* --set and the environment's STRATA_CLUSTER_* reach the section too */
    if (OK("good.ini", SETS("cluster.task=evaluator:0"), NULL, NOENV, &c) == 0)
        CHECK(c.pub.self == 5);
    strata__cluster_free(&c);
    /* a chief and no worker is fine */
    if (OK(NULL, SETS("cluster.chief=c:1", "cluster.task=chief:0"), NULL,
           NOENV, &c) == 0) {
        CHECK(c.pub.ntasks == 1 && c.pub.nworkers == 1 && c.pub.self == 0);
        TASK(&c, 0, "chief", 0, 0, "c:1");
    }
    strata__cluster_free(&c);
    /* no chief: worker 0 has rank 0; IPv6 and blanks in lists */
    if (OK(NULL, SETS("cluster.worker=[::1]:5000 ,  [fe80::1]:1",
                      "cluster.ps=h-1.example.com:1", "cluster.task=ps:0"),
           NULL, NOENV, &c) == 0) {
        CHECK(c.pub.nworkers == 2 && c.pub.self == 2);
        TASK(&c, 0, "worker", 0, 0, "[::1]:5000");
        TASK(&c, 1, "worker", 1, 1, "[fe80::1]:1");
        TASK(&c, 2, "ps", 0, -1, "h-1.example.com:1");
    }
    strata__cluster_free(&c);
    /* no task in the file, but --task says */
    if (OK("no_task.ini", NULL, "worker:1", NOENV, &c) == 0)
        CHECK(c.pub.self == 1 && strcmp(c.pub.source, "--task + [cluster]")
                                     == 0);
    strata__cluster_free(&c);

    ERRC("task_range.ini", NULL, NULL, NOENV, "[cluster] task = worker:5: ",
         "index 5 out of range: cluster has 2 worker tasks "
         "(task_range.ini:4)");
    ERRC("good.ini", NULL, "worker:2", NOENV, "--task worker:2: ",
         "(the cluster comes from [cluster])");
    ERRC("no_task.ini", NULL, NULL, NOENV, "[cluster] lists tasks (2 worker) but not",
         "set [cluster] task = TYPE:INDEX or pass --task (no_task.ini:2)");
    ERRC("bad_port.ini", NULL, NULL, NOENV, "[cluster] worker = ",
         "'w0:2222, w1:99999': port '99999' is not an integer in [1, 65535] "
         "(bad_port.ini:3)");
    /* the section's keys are checked by the config layer */
    ERRC("unknown_key.ini", NULL, NULL, NOENV,
         "unknown_key.ini:2: [cluster] unknown key 'workers'",
         "did you mean 'worker'?");
    ERRC(NULL, SETS("cluster.port_base=0"), NULL, NOENV,
         "--set: [cluster] port_base = '0'", "[1, 65535]");
    ERRC(NULL, SETS("cluster.chief=a:1, b:2", "cluster.task=chief:0"), NULL,
         NOENV, "[cluster] chief = 'a:1, b:2': ", "at most one chief");
    ERRC(NULL, SETS("cluster.evaluator=a:1,b:2", "cluster.worker=w:1",
                    "cluster.task=worker:0"),
         NULL, NOENV, "[cluster] evaluator = ", "at most one evaluator");
    ERRC(NULL, SETS("cluster.worker=a:1,,b:2", "cluster.task=worker:0"), NULL,
         NOENV, "[cluster] worker = 'a:1,,b:2': ",
         "address 2 of the list is empty (--set)");
    ERRC(NULL, SETS("cluster.worker=a:1,", "cluster.task=worker:0"), NULL,
         NOENV, "[cluster] worker = ", "address 2 of the list is empty");
    ERRC(NULL, SETS("cluster.worker=a", "cluster.task=worker:0"), NULL, NOENV,
         "[cluster] worker = 'a': ", "expected host:port");
    ERRC(NULL, SETS("cluster.worker=:80", "cluster.task=worker:0"), NULL,
         NOENV, "[cluster] worker = ", "empty host");
    ERRC(NULL, SETS("cluster.worker=a:0", "cluster.task=worker:0"), NULL,
         NOENV, "[cluster] worker = ", "port '0' is not an integer");
    ERRC(NULL, SETS("cluster.worker=a:+80", "cluster.task=worker:0"), NULL,
         NOENV, "[cluster] worker = ", "port '+80' is not an integer");
    ERRC(NULL, SETS("cluster.worker=::1:80", "cluster.task=worker:0"), NULL,
         NOENV, "[cluster] worker = ", "IPv6 address goes in [brackets]");
    ERRC(NULL, SETS("cluster.worker=a b:80", "cluster.task=worker:0"), NULL,
         NOENV, "[cluster] worker = ", "bad character ' ' in host");
    ERRC(NULL, SETS("cluster.worker=[fe80::1%eth0]:1", "cluster.task=worker:0"),
         NULL, NOENV, "[cluster] worker = ",
         "bad character '%' in IPv6 address");
    ERRC(NULL, SETS("cluster.worker=[::1:80", "cluster.task=worker:0"), NULL,
         NOENV, "[cluster] worker = ", "expected [ipv6-address]:port");
    ERRC(NULL, SETS("cluster.worker=a:1, a:1", "cluster.task=worker:0"), NULL,
         NOENV, "[cluster]: ",
         "address 'a:1' is given to both worker:0 and worker:1");
    ERRC(NULL, SETS("cluster.chief=a:1", "cluster.ps=a:1",
                    "cluster.task=chief:0"),
         NULL, NOENV, "[cluster]: ",
         "address 'a:1' is given to both chief:0 and ps:0");
    ERRC(NULL, SETS("cluster.ps=a:1", "cluster.task=ps:0"), NULL, NOENV,
         "[cluster]: ", "no chief and no worker task");
    ERRC(NULL, SETS("cluster.worker=a:1", "cluster.task=ps:0"), NULL, NOENV,
         "[cluster] task = ps:0: ", "type 'ps' is not in the cluster");
    ERRC(NULL, SETS("cluster.worker=a:1", "cluster.task=worker"), NULL, NOENV,
         "[cluster] task = worker: ", "expected TYPE:INDEX");
    ERRC(NULL, SETS("cluster.task=worker:1"), NULL, NOENV,
         "[cluster] task = worker:1: ",
         "lists no chief, worker, ps or evaluator address (--set)");
}

/* STRATA_CLUSTER_* reach [cluster] through the config layer's env loader. */
static void test_ini_env(void)
{
    const char *const env[] = { "STRATA_CLUSTER_WORKER=a:1,b:2",
                                "STRATA_CLUSTER_TASK=worker:7", NULL };
    strata__cfg_t *cfg;
    strata__cluster_t c;
    CHECK(strata__cfg_new(&cfg) == 0);
    CHECK(strata__cfg_load_env(cfg, (char *const *)env) == 0);
    capture_begin();
    int rc = strata__cluster_resolve(cfg, NULL, (char *const *)env, &c);
    const char *log = capture_end();
    CHECK(rc == STRATA_ECONFIG);
    CHECKF(log && strstr(log, "[cluster] task = worker:7: index 7 out of "
                              "range: cluster has 2 worker tasks (env "
                              "STRATA_CLUSTER_TASK)"),
           "%s", log ? log : "");
    CHECK(strata__cfg_set(cfg, "cluster.task=worker:1", STRATA__CFG_CLI,
                          NULL) == 0);
    capture_begin();
    rc = strata__cluster_resolve(cfg, NULL, (char *const *)env, &c);
    log = capture_end();
    CHECKF(rc == 0 && log && !*log, "%s", log ? log : "");
    if (rc == 0) {
        CHECK(c.pub.self == 1);
        TASK(&c, 1, "worker", 1, 1, "b:2");
    }
    strata__cluster_free(&c);
    strata__cfg_free(cfg);
}

/* ---- TF_CONFIG ---------------------------------------------------------------- */

#define TF_FULL                                                              \
    "TF_CONFIG={\"cluster\": {\"ps\": [\"p0:1\", \"p1:1\"], "                \
    "\"worker\": [\"w0:1\", \"w1:1\"], \"chief\": [\"c:1\"], "               \
    "\"evaluator\": [\"e:1\"]}, \"task\": {\"type\": \"worker\", "           \
    "\"index\": 1}}"

static void test_tf_config(void)
{
    strata__cluster_t c;
    if (OK(NULL, NULL, NULL, ENV(TF_FULL), &c) == 0) {
        CHECK(c.pub.ntasks == 6 && c.pub.nworkers == 3 && c.pub.self == 2);
        TASK(&c, 0, "chief", 0, 0, "c:1");
        TASK(&c, 1, "worker", 0, 1, "w0:1");
        TASK(&c, 2, "worker", 1, 2, "w1:1");
        TASK(&c, 3, "ps", 0, -1, "p0:1");
        TASK(&c, 4, "ps", 1, -1, "p1:1");
        TASK(&c, 5, "evaluator", 0, -1, "e:1");
        CHECK(strcmp(c.pub.source, "TF_CONFIG") == 0);
        CHECK(c.pub.rendezvous == NULL);
    }
    strata__cluster_free(&c);
    /* the evaluator's own view */
    if (OK(NULL, NULL, NULL,
           ENV("TF_CONFIG={\"cluster\": {\"worker\": [\"w0:1\"], "
               "\"evaluator\": [\"e:1\"]}, \"task\": {\"type\": "
               "\"evaluator\", \"index\": 0}}"),
           &c) == 0) {
        CHECK(c.pub.self == 1 && c.pub.nworkers == 1);
        TASK(&c, 1, "evaluator", 0, -1, "e:1");
    }
    strata__cluster_free(&c);
    /* index defaults to 0; environment, rpc_layer and trial are TF's */
    if (OK(NULL, NULL, NULL,
           ENV("TF_CONFIG={\"cluster\": {\"chief\": [\"c:1\"], \"ps\": []}, "
               "\"task\": {\"type\": \"chief\", \"trial\": \"1\"}, "
               "\"environment\": \"cloud\", \"rpc_layer\": \"grpc\"}"),
           &c) == 0)
        CHECK(c.pub.ntasks == 1 && c.pub.self == 0 && c.pub.nworkers == 1);
    strata__cluster_free(&c);
    /* --task overrides TF_CONFIG's task, and may stand in for it */
    if (OK(NULL, NULL, "ps:0", ENV(TF_FULL), &c) == 0) {
        CHECK(c.pub.self == 3);
        CHECK(strcmp(c.pub.source, "--task + TF_CONFIG") == 0);
    }
    strata__cluster_free(&c);
    if (OK(NULL, NULL, "worker:0",
           ENV("TF_CONFIG={\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}}"),
           &c) == 0)
        CHECK(c.pub.self == 0 && c.pub.nworkers == 2);
    strata__cluster_free(&c);

    /* malformed */
    TF_ERR("{", "malformed JSON: it ends at offset 1 too early");
    TF_ERR("{\"cluster\": {}} x", "malformed JSON at offset 16: 'x'");
    TF_ERR("[1, 2]", "expected a JSON object");
    TF_ERR("{\"task\": {\"type\": \"worker\"}}", "no \"cluster\"");
    TF_ERR("{\"cluster\": [\"a:1\"]}", "\"cluster\" must be an object");
    TF_ERR("{\"cluster\": {}, \"clutser\": 1}", "unknown key 'clutser'");
    TF_ERR("{\"cluster\": {}, \"cluster\": {}}", "key 'cluster' appears twice");
    TF_ERR("{\"cluster\": {\"worker\": \"a:1\"}, \"task\": {\"type\": "
           "\"worker\"}}",
           "cluster.worker must be a list");
    TF_ERR("{\"cluster\": {\"worker\": [1]}, \"task\": {\"type\": "
           "\"worker\"}}",
           "cluster.worker[0]: expected a \"host:port\" string");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"], \"worker\": [\"b:1\"]}}",
           "job 'worker' appears twice in cluster");
    /* two chiefs, two evaluators */
    TF_ERR("{\"cluster\": {\"chief\": [\"a:1\", \"b:1\"]}, \"task\": "
           "{\"type\": \"chief\"}}",
           "cluster.chief lists 2 tasks; there is at most one chief");
    TF_ERR("{\"cluster\": {\"worker\": [\"w:1\"], \"evaluator\": [\"a:1\", "
           "\"b:1\"]}, \"task\": {\"type\": \"worker\"}}",
           "at most one evaluator");
    /* index out of range: the message of the contract, verbatim */
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\", \"b:1\"]}, \"task\": "
           "{\"type\": \"worker\", \"index\": 3}}",
           "TF_CONFIG: task index 3 out of range: cluster has 2 worker tasks");
    /* unknown job, unknown task type, task type not in the cluster */
    TF_ERR("{\"cluster\": {\"master\": [\"a:1\"]}, \"task\": {\"type\": "
           "\"master\"}}",
           "unknown job 'master' in cluster");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
           "\"master\"}}",
           "task type 'master' unknown");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
           "\"ps\", \"index\": 0}}",
           "task type 'ps' is not in the cluster (its tasks: 1 worker)");
    /* bad addresses */
    TF_ERR("{\"cluster\": {\"worker\": [\"a:65536\"]}, \"task\": {\"type\": "
           "\"worker\"}}",
           "cluster.worker[0] = 'a:65536': port '65536' is not an integer in "
           "[1, 65535]");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\", \"b\"]}, \"task\": "
           "{\"type\": \"worker\"}}",
           "cluster.worker[1] = 'b': expected host:port");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:x\"]}, \"task\": {\"type\": "
           "\"worker\"}}",
           "port 'x'");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\", \"a:1\"]}, \"task\": "
           "{\"type\": \"worker\"}}",
           "address 'a:1' is given to both worker:0 and worker:1");
    /* the task */
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}}", "no \"task\"");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": \"worker\"}",
           "\"task\" must be an object");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {}}",
           "task.type must be a string");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": 1}}",
           "task.type must be a string");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
           "\"worker\", \"index\": -1}}",
           "task.index must be an integer >= 0");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
           "\"worker\", \"index\": 0.5}}",
           "task.index must be an integer >= 0");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
           "\"worker\", \"index\": \"0\"}}",
           "task.index must be an integer >= 0");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
           "\"worker\", \"index\": 1e300}}",
           "task.index must be an integer >= 0");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
           "\"worker\", \"id\": 0}}",
           "unknown key 'id' in task");
    TF_ERR("{\"cluster\": {\"worker\": [\"a:1\"]}, \"task\": {\"type\": "
           "\"worker\", \"type\": \"worker\"}}",
           "key 'type' appears twice in task");
    /* nothing to train */
    TF_ERR("{\"cluster\": {\"ps\": [\"a:1\"]}, \"task\": {\"type\": \"ps\"}}",
           "no chief and no worker task");
    TF_ERR("{\"cluster\": {}, \"task\": {\"type\": \"worker\"}}",
           "task type 'worker' is not in the cluster (its tasks: no tasks)");
    /* --task naming a type the cluster lacks */
    ERRC(NULL, NULL, "evaluator:0", ENV(TF_FULL "x"), "TF_CONFIG: ",
         "malformed JSON");
    ERRC(NULL, NULL, "ps:2", ENV(TF_FULL), "--task ps:2: ",
         "index 2 out of range: cluster has 2 ps tasks (the cluster comes "
         "from TF_CONFIG)");
    ERRC(NULL, NULL, "evaluator:0",
         ENV("TF_CONFIG={\"cluster\": {\"worker\": [\"a:1\"]}}"),
         "--task evaluator:0: ", "type 'evaluator' is not in the cluster");
    /* deep nesting is refused by the parser, not the stack */
    char *deep = malloc(20000 + 16);
    if (deep) {
        strcpy(deep, "TF_CONFIG=");
        memset(deep + 10, '[', 20000);
        deep[20010] = '\0';
        ERRC(NULL, NULL, NULL, ENV(deep), "TF_CONFIG: ", "malformed JSON");
        free(deep);
    }
}

/* A TF_CONFIG of n workers on distinct ports, task worker:(n-1). */
static char *tf_workers(int n)
{
    size_t cap = 64 + (size_t)n * 16;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    size_t len = (size_t)snprintf(s, cap, "TF_CONFIG={\"cluster\": "
                                          "{\"worker\": [");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s\"h:%d\"", i ? "," : "",
                                1000 + i);
    snprintf(s + len, cap - len, "]}, \"task\": {\"type\": \"worker\", "
                                 "\"index\": %d}}", n - 1);
    return s;
}

static void test_limits(void)
{
    strata__cluster_t *c = malloc(sizeof *c);
    char *tf = tf_workers(STRATA_MAX_TASKS);
    if (c && tf && OK(NULL, NULL, NULL, ENV(tf), c) == 0) {
        CHECK(c->pub.ntasks == STRATA_MAX_TASKS);
        CHECK(c->pub.nworkers == STRATA_MAX_TASKS);
        CHECK(c->pub.self == STRATA_MAX_TASKS - 1);
        TASK(c, STRATA_MAX_TASKS - 1, "worker", STRATA_MAX_TASKS - 1,
             STRATA_MAX_TASKS - 1, "h:2023");
    }
    if (c)
        strata__cluster_free(c);
    free(tf);
    tf = tf_workers(STRATA_MAX_TASKS + 1);
    if (tf)
        ERRC(NULL, NULL, NULL, ENV(tf), "TF_CONFIG: ", "more than 1024 tasks");
    free(tf);
    free(c);
}

/* ---- SLURM hostlist ------------------------------------------------------------ */

static void hostlist_ok(const char *spec, const char *want, int max, int line)
{
    char *out[64] = { 0 };
    capture_begin();
    int n = strata__slurm_hostlist(spec, out, max);
    const char *log = capture_end();
    char got[1024] = "";
    for (int i = 0; i < n; i++) {
        size_t len = strlen(got);
        snprintf(got + len, sizeof got - len, "%s%s", i ? " " : "", out[i]);
        free(out[i]);
    }
    CHECKF(n > 0 && strcmp(got, want) == 0 && log && !*log,
           "line %d: '%s' -> %d '%s', want '%s' (%s)", line, spec, n, got,
           want, log ? log : "");
}
#define HL_OK(spec, want) hostlist_ok(spec, want, 64, __LINE__)

static void hostlist_bad(const char *spec, const char *what, int max,
                         int line)
{
    char *out[64] = { 0 };
    capture_begin();
    int n = strata__slurm_hostlist(spec, out, max);
    const char *log = capture_end();
    char head[256];
    /* a long spec is cut in the message */
    snprintf(head, sizeof head, "error: SLURM_NODELIST '%.100s%s", spec,
             strlen(spec) > 100 ? "" : "': ");
    CHECKF(n == STRATA_ECONFIG && count_lines(log) == 1 && strstr(log, head)
               && strstr(log, what),
           "line %d: '%s' -> %d, log '%s', want '%s'", line, spec, n,
           log ? log : "", what);
    int clean = 1;
    for (int i = 0; i < 64; i++)
        clean &= out[i] == NULL;
    CHECKF(clean, "line %d: names left behind", line);
}
#define HL_BAD(spec, what) hostlist_bad(spec, what, 64, __LINE__)

static void test_hostlist(void)
{
    HL_OK("node1", "node1");
    HL_OK("a,b.example.com,c_d", "a b.example.com c_d");
    HL_OK("node[01-03,07],gpu-a[1-2],login1",
          "node01 node02 node03 node07 gpu-a1 gpu-a2 login1");
    HL_OK("n[8-10]", "n8 n9 n10");
    HL_OK("n[08-10]", "n08 n09 n10");
    HL_OK("n[098-101]", "n098 n099 n100 n101");
    HL_OK("n[7]", "n7");
    HL_OK("[1-2]", "1 2");
    HL_OK("n[1-2]-ib", "n1-ib n2-ib");
    HL_OK("r[1-2]n[01-02]", "r1n01 r1n02 r2n01 r2n02");
    HL_OK("r[1-2]n[3,5]x,y", "r1n3x r1n5x r2n3x r2n5x y");
    hostlist_ok("n[1-4]", "n1 n2 n3 n4", 4, __LINE__);

    HL_BAD("n[3-1]", "bad range '3-1' in [3-1]");
    HL_BAD("n[1-2,5-4]", "bad range '5-4'");
    HL_BAD("", "empty host list");
    HL_BAD("a,,b", "empty host name");
    HL_BAD("a,", "empty host name");
    HL_BAD(",a", "empty host name");
    HL_BAD("n[1-", "missing ']'");
    HL_BAD("n[1-2", "missing ']'");
    HL_BAD("n[1-2],m[3", "missing ']'");
    HL_BAD("n1]", "']' without '['");
    HL_BAD("n[]", "expected N or N-M, got ''");
    HL_BAD("n[a]", "expected N or N-M, got 'a'");
    HL_BAD("n[1,]", "expected N or N-M, got ''");
    HL_BAD("n[,1]", "expected N or N-M");
    HL_BAD("n[1-2-3]", "expected N or N-M, got '1-2-3'");
    HL_BAD("n[-2]", "expected N or N-M");
    HL_BAD("n[1-]", "expected N or N-M");
    HL_BAD("n[1[2]]", "'[' inside brackets");
    HL_BAD("n[1234567890123456789]", "expected N or N-M");
    HL_BAD("a b", "unexpected character ' '");
    HL_BAD("a[1-2] ", "unexpected character ' '");
    HL_BAD("n[0-99999]", "more than 64 hosts");
    hostlist_bad("n[1-4]", "more than 3 hosts", 3, __LINE__);
    HL_BAD("a[1]b[1]c[1]d[1]e[1]f[1]g[1]h[1]i[1]",
           "more than 8 bracket groups in one name");
    char longname[400];
    memset(longname, 'x', 300);
    longname[300] = '\0';
    HL_BAD(longname, "host name longer than 255 characters");
    memset(longname, 'x', 250);
    strcpy(longname + 250, "[100000-100001]");
    HL_BAD(longname, "host name longer than 255 characters");
}

/* ---- SLURM ------------------------------------------------------------------ */

static void test_slurm(void)
{
    strata__cluster_t c;
    if (OK(NULL, NULL, NULL,
           ENV("SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-2]",
               "SLURM_TASKS_PER_NODE=2(x2)", "SLURM_NODEID=1",
               "SLURM_LOCALID=1"),
           &c) == 0) {
        CHECK(c.pub.ntasks == 4 && c.pub.nworkers == 4 && c.pub.self == 3);
        TASK(&c, 0, "worker", 0, 0, "n1:29400");
        TASK(&c, 1, "worker", 1, 1, "n1:29401");
        TASK(&c, 2, "worker", 2, 2, "n2:29400");
        TASK(&c, 3, "worker", 3, 3, "n2:29401");
        CHECK(strcmp(c.pub.source, "SLURM") == 0);
        CHECK(c.pub.rendezvous == NULL);
    }
    strata__cluster_free(&c);
    /* SLURM_NTASKS_PER_NODE instead */
    if (OK(NULL, NULL, NULL,
           ENV("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-2]",
               "SLURM_NTASKS_PER_NODE=2"),
           &c) == 0) {
        TASK(&c, 1, "worker", 1, 1, "n1:29401");
        TASK(&c, 2, "worker", 2, 2, "n2:29400");
    }
    strata__cluster_free(&c);
    /* the "2(x3),1" form over a compressed list of two ranges */
    if (OK(NULL, NULL, NULL,
           ENV("SLURM_PROCID=6", "SLURM_NTASKS=7",
               "SLURM_NODELIST=gpu[08-10],cpu1",
               "SLURM_TASKS_PER_NODE=2(x3),1"),
           &c) == 0) {
        CHECK(c.pub.ntasks == 7 && c.pub.self == 6);
        TASK(&c, 0, "worker", 0, 0, "gpu08:29400");
        TASK(&c, 3, "worker", 3, 3, "gpu09:29401");
        TASK(&c, 5, "worker", 5, 5, "gpu10:29401");
        TASK(&c, 6, "worker", 6, 6, "cpu1:29400");
    }
    strata__cluster_free(&c);
    /* plain comma list, one task each (no tasks-per-node variable) */
    if (OK(NULL, NULL, NULL,
           ENV("SLURM_PROCID=1", "SLURM_NTASKS=3", "SLURM_NODELIST=a,b,c"),
           &c) == 0) {
        TASK(&c, 1, "worker", 1, 1, "b:29400");
        TASK(&c, 2, "worker", 2, 2, "c:29400");
    }
    strata__cluster_free(&c);
    /* one node, every task on it; port_base from [cluster] */
    if (OK(NULL, SETS("cluster.port_base=5000"), NULL,
           ENV("SLURM_PROCID=2", "SLURM_NTASKS=3", "SLURM_NODELIST=solo"),
           &c) == 0) {
        TASK(&c, 0, "worker", 0, 0, "solo:5000");
        TASK(&c, 2, "worker", 2, 2, "solo:5002");
        CHECK(c.pub.self == 2);
    }
    strata__cluster_free(&c);
    /* ps split: the first slurm_ps tasks are ps, worker 0 is rank 0 */
    const char *const ps_env[] = { "SLURM_PROCID=1", "SLURM_NTASKS=4",
                                   "SLURM_NODELIST=n[1-2]",
                                   "SLURM_TASKS_PER_NODE=2(x2)", NULL };
    if (OK(NULL, SETS("cluster.slurm_ps=1"), NULL, ps_env, &c) == 0) {
        CHECK(c.pub.ntasks == 4 && c.pub.nworkers == 3);
        TASK(&c, 0, "worker", 0, 0, "n1:29401");
        TASK(&c, 1, "worker", 1, 1, "n2:29400");
        TASK(&c, 2, "worker", 2, 2, "n2:29401");
        TASK(&c, 3, "ps", 0, -1, "n1:29400");
        CHECK(c.pub.self == 0); /* SLURM_PROCID 1 = worker:0 */
    }
    strata__cluster_free(&c);
    if (OK(NULL, SETS("cluster.slurm_ps=2"), NULL,
           ENV("SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-2]",
               "SLURM_TASKS_PER_NODE=2(x2)"),
           &c) == 0) {
        CHECK(c.pub.nworkers == 2);
        TASK(&c, 3, "ps", 1, -1, "n1:29401");
        CHECK(c.pub.self == 3); /* SLURM_PROCID 1 = ps:1 */
    }
    strata__cluster_free(&c);
    /* --task overrides SLURM_PROCID */
    if (OK(NULL, SETS("cluster.slurm_ps=1"), "ps:0", ps_env, &c) == 0) {
        CHECK(c.pub.self == 3);
        CHECK(strcmp(c.pub.source, "--task + SLURM") == 0);
    }
    strata__cluster_free(&c);

    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=3", "SLURM_NODELIST=n[3-1]"),
         "SLURM_NODELIST 'n[3-1]': ", "bad range");
    ERRC(NULL, NULL, NULL, ENV("SLURM_PROCID=0", "SLURM_NODELIST=n1"),
         "SLURM: ", "SLURM_PROCID is set but SLURM_NTASKS is not");
    ERRC(NULL, NULL, NULL, ENV("SLURM_PROCID=0", "SLURM_NTASKS=1"), "SLURM: ",
         "SLURM_PROCID is set but SLURM_NODELIST is not");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=4", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-4]"),
         "SLURM: ",
         "SLURM_PROCID='4': expected an integer in [0, 3] (SLURM_NTASKS=4)");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=x", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-4]"),
         "SLURM: ", "SLURM_PROCID='x': expected an integer");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=0", "SLURM_NODELIST=n1"),
         "SLURM: ", "SLURM_NTASKS='0': expected an integer in [1, 1024]");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=2000", "SLURM_NODELIST=n1"),
         "SLURM: ", "SLURM_NTASKS='2000'");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-2]",
             "SLURM_TASKS_PER_NODE=2(x3)"),
         "SLURM_TASKS_PER_NODE '2(x3)' ",
         "describes 3 nodes, SLURM_NODELIST has 2");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-2]",
             "SLURM_TASKS_PER_NODE=2,1"),
         "SLURM_TASKS_PER_NODE '2,1' ",
         "adds up to 3 tasks, SLURM_NTASKS is 4");
    static const char *const k_bad_tpn[] = {
        "SLURM_TASKS_PER_NODE=2(x", "SLURM_TASKS_PER_NODE=2(3)",
        "SLURM_TASKS_PER_NODE=2(x2", "SLURM_TASKS_PER_NODE=x",
        "SLURM_TASKS_PER_NODE=0", "SLURM_TASKS_PER_NODE=2,,2",
        "SLURM_TASKS_PER_NODE=2;2", "SLURM_TASKS_PER_NODE=",
        "SLURM_TASKS_PER_NODE=2(x0)", "SLURM_TASKS_PER_NODE=1(x2000)",
        NULL };
    for (int i = 0; k_bad_tpn[i]; i++)
        ERRC(NULL, NULL, NULL,
             ENV("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-2]",
                 k_bad_tpn[i]),
             "SLURM_TASKS_PER_NODE '", "': ");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=5", "SLURM_NODELIST=n[1-2]",
             "SLURM_NTASKS_PER_NODE=2"),
         "SLURM: ", "SLURM_NTASKS_PER_NODE=2 on 2 nodes holds 4 tasks");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-2]",
             "SLURM_NTASKS_PER_NODE=two"),
         "SLURM_NTASKS_PER_NODE 'two': ", "expected an integer");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=3", "SLURM_NODELIST=n[1-2]"),
         "SLURM: ", "cannot place 3 tasks on 2 nodes");
    ERRC(NULL, SETS("cluster.slurm_ps=2"), NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODELIST=n[1-2]"),
         "[cluster] slurm_ps = 2: ",
         "SLURM runs 2 tasks and at least one must be a worker (--set)");
    ERRC(NULL, SETS("cluster.port_base=65535"), NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODELIST=n1"),
         "SLURM: ", "port 65536 ([cluster] port_base 65535 + 1)");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NODELIST=n[1-2]",
             "SLURM_LOCALID=1"),
         "SLURM: ", "SLURM_LOCALID=1, but in block order task 1 is task 0 of "
                    "node 1 (n2)");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=1", "SLURM_NTASKS=4", "SLURM_NODELIST=n[1-2]",
             "SLURM_NTASKS_PER_NODE=2", "SLURM_NODEID=1"),
         "SLURM: ", "--distribution=block");
    ERRC(NULL, NULL, NULL,
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODELIST=n1,n1"),
         "SLURM: ", "address 'n1:29400' is given to both worker:0 and "
                    "worker:1");
    ERRC(NULL, NULL, "chief:0",
         ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_NODELIST=n1"),
         "--task chief:0: ", "type 'chief' is not in the cluster (its tasks: "
                             "2 worker) (the cluster comes from SLURM)");
}

/* ---- torchrun ------------------------------------------------------------------ */

static void test_torchrun(void)
{
    strata__cluster_t c;
    if (OK(NULL, NULL, NULL,
           ENV("RANK=1", "WORLD_SIZE=4", "MASTER_ADDR=10.0.0.1",
               "MASTER_PORT=29500", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=2"),
           &c) == 0) {
        CHECK(c.pub.ntasks == 4 && c.pub.nworkers == 4 && c.pub.self == 1);
        for (int i = 0; i < 4; i++)
            TASK(&c, i, "worker", i, i, NULL);
        CHECK(c.pub.rendezvous
              && strcmp(c.pub.rendezvous, "10.0.0.1:29500") == 0);
        CHECK(strcmp(c.pub.source, "torchrun") == 0);
    }
    strata__cluster_free(&c);
    /* LOCAL_WORLD_SIZE missing: still unknown addresses */
    if (OK(NULL, NULL, NULL,
           ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1"),
           &c) == 0)
        TASK(&c, 1, "worker", 1, 1, NULL);
    strata__cluster_free(&c);
    /* one node: MASTER_ADDR:(MASTER_PORT+1+i) */
    if (OK(NULL, NULL, NULL,
           ENV("RANK=2", "WORLD_SIZE=3", "MASTER_ADDR=localhost",
               "MASTER_PORT=29500", "LOCAL_WORLD_SIZE=3"),
           &c) == 0) {
        TASK(&c, 0, "worker", 0, 0, "localhost:29501");
        TASK(&c, 2, "worker", 2, 2, "localhost:29503");
        CHECK(c.pub.self == 2);
        CHECK(strcmp(c.pub.rendezvous, "localhost:29500") == 0);
    }
    strata__cluster_free(&c);
    if (OK(NULL, NULL, NULL,
           ENV("RANK=0", "WORLD_SIZE=1", "MASTER_ADDR=::1",
               "MASTER_PORT=29500", "LOCAL_WORLD_SIZE=1"),
           &c) == 0) {
        TASK(&c, 0, "worker", 0, 0, "[::1]:29501");
        CHECK(strcmp(c.pub.rendezvous, "[::1]:29500") == 0);
    }
    strata__cluster_free(&c);
    if (OK(NULL, NULL, "worker:3",
           ENV("RANK=1", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=1"),
           &c) == 0) {
        CHECK(c.pub.self == 3);
        CHECK(strcmp(c.pub.source, "--task + torchrun") == 0);
    }
    strata__cluster_free(&c);

    ERRC(NULL, NULL, NULL,
         ENV("RANK=4", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=1"),
         "torchrun: ",
         "RANK='4': expected an integer in [0, 3] (WORLD_SIZE=4)");
    ERRC(NULL, NULL, NULL,
         ENV("RANK=-1", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=1"),
         "torchrun: ", "RANK='-1': expected an integer");
    ERRC(NULL, NULL, NULL, ENV("RANK=0", "MASTER_ADDR=m", "MASTER_PORT=1"),
         "torchrun: ", "RANK is set but WORLD_SIZE is not");
    ERRC(NULL, NULL, NULL, ENV("WORLD_SIZE=2", "MASTER_PORT=1"), "torchrun: ",
         "WORLD_SIZE is set but RANK is not");
    ERRC(NULL, NULL, NULL, ENV("RANK=0", "WORLD_SIZE=2", "MASTER_PORT=1"),
         "torchrun: ", "RANK is set but MASTER_ADDR is not");
    ERRC(NULL, NULL, NULL, ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m"),
         "torchrun: ", "RANK is set but MASTER_PORT is not");
    ERRC(NULL, NULL, NULL,
         ENV("RANK=0", "WORLD_SIZE=0", "MASTER_ADDR=m", "MASTER_PORT=1"),
         "torchrun: ", "WORLD_SIZE='0': expected an integer in [1, 1024]");
    ERRC(NULL, NULL, NULL,
         ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=70000"),
         "torchrun: ", "MASTER_PORT='70000': expected a port in [1, 65535]");
    ERRC(NULL, NULL, NULL,
         ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=bad host",
             "MASTER_PORT=1"),
         "torchrun: ", "MASTER_ADDR='bad host': bad character ' '");
    ERRC(NULL, NULL, NULL,
         ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=", "MASTER_PORT=1"),
         "torchrun: ", "MASTER_ADDR='': empty host");
    ERRC(NULL, NULL, NULL,
         ENV("RANK=0", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=1",
             "LOCAL_WORLD_SIZE=5"),
         "torchrun: ", "LOCAL_WORLD_SIZE='5'");
    ERRC(NULL, NULL, NULL,
         ENV("RANK=0", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=1",
             "LOCAL_WORLD_SIZE=2", "LOCAL_RANK=2"),
         "torchrun: ", "LOCAL_RANK='2': expected an integer in [0, 2)");
    ERRC(NULL, NULL, NULL,
         ENV("RANK=0", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=65533",
             "LOCAL_WORLD_SIZE=4"),
         "torchrun: ", "go above 65535");
    ERRC(NULL, NULL, "ps:0",
         ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=1"),
         "--task ps:0: ", "(the cluster comes from torchrun)");
}

/* torchrun's agent store, [cluster] rendezvous */
static void test_torchrun_rendezvous(void)
{
    strata__cluster_t c;
#define TWO_NODES "RANK=1", "WORLD_SIZE=4", "MASTER_ADDR=10.0.0.1", \
                  "MASTER_PORT=29500", "LOCAL_WORLD_SIZE=2"
    /* static rendezvous: the agent's store has MASTER_PORT */
    if (OK(NULL, NULL, NULL,
           ENV(TWO_NODES, "TORCHELASTIC_USE_AGENT_STORE=True"), &c) == 0) {
        CHECK(strcmp(c.pub.rendezvous, "10.0.0.1:29501") == 0);
        TASK(&c, 3, "worker", 3, 3, NULL);
    }
    strata__cluster_free(&c);
    if (OK(NULL, NULL, NULL,
           ENV(TWO_NODES, "TORCHELASTIC_USE_AGENT_STORE=False"), &c) == 0)
        CHECK(strcmp(c.pub.rendezvous, "10.0.0.1:29500") == 0);
    strata__cluster_free(&c);
    /* [cluster] rendezvous wins over MASTER_ADDR:PORT */
    if (OK(NULL, SETS("cluster.rendezvous=[fd00::1]:7000"), NULL,
           ENV(TWO_NODES, "TORCHELASTIC_USE_AGENT_STORE=True"), &c) == 0) {
        CHECK(strcmp(c.pub.rendezvous, "[fd00::1]:7000") == 0);
        CHECK(c.rendezvous_timeout_s == 300);
    }
    strata__cluster_free(&c);
    /* on one node the addresses are known: the store changes nothing */
    if (OK(NULL, NULL, NULL,
           ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=h", "MASTER_PORT=100",
               "LOCAL_WORLD_SIZE=2", "TORCHELASTIC_USE_AGENT_STORE=True"),
           &c) == 0) {
        TASK(&c, 1, "worker", 1, 1, "h:102");
        CHECK(strcmp(c.pub.rendezvous, "h:100") == 0);
    }
    strata__cluster_free(&c);
    if (OK(NULL, SETS("cluster.rendezvous_timeout_s=2.5"), NULL,
           ENV(TWO_NODES), &c) == 0)
        CHECK(c.rendezvous_timeout_s == 2.5);
    strata__cluster_free(&c);
    ERRC(NULL, NULL, NULL,
         ENV("RANK=0", "WORLD_SIZE=4", "MASTER_ADDR=m", "MASTER_PORT=65535",
             "LOCAL_WORLD_SIZE=2", "TORCHELASTIC_USE_AGENT_STORE=True"),
         "torchrun: ", "MASTER_PORT=65535 is torchrun's agent store");
    ERRC(NULL, SETS("cluster.rendezvous=nohost"), NULL, ENV(TWO_NODES),
         "[cluster] rendezvous = 'nohost': ", "expected host:port (--set)");
    /* checked whatever the source */
    ERRC(NULL, SETS("cluster.rendezvous=h:0"), NULL, NOENV,
         "[cluster] rendezvous = 'h:0': ", "port '0'");
    ERRC(NULL, SETS("cluster.rendezvous_timeout_s=0"), NULL, NOENV,
         "", "rendezvous_timeout_s");
#undef TWO_NODES
}

/* ---- Open MPI ------------------------------------------------------------------ */

static void test_mpi(void)
{
    strata__cluster_t c;
    char want[64];
    /* one node: an abstract socket named after the user and the job */
    if (OK(NULL, NULL, NULL,
           ENV("OMPI_COMM_WORLD_RANK=2", "OMPI_COMM_WORLD_SIZE=3",
               "OMPI_COMM_WORLD_LOCAL_RANK=2", "OMPI_COMM_WORLD_LOCAL_SIZE=3",
               "PMIX_RANK=2", "PMIX_NAMESPACE=980811777"), &c) == 0) {
        CHECK(c.pub.ntasks == 3 && c.pub.nworkers == 3 && c.pub.self == 2);
        for (int i = 0; i < 3; i++)
            TASK(&c, i, "worker", i, i, NULL);
        snprintf(want, sizeof want, "unix:@strata-%u-", (unsigned)geteuid());
        CHECKF(strncmp(c.pub.rendezvous, want, strlen(want)) == 0
                   && strlen(c.pub.rendezvous) == strlen(want) + 16,
               "%s", c.pub.rendezvous);
        CHECK(strcmp(c.pub.source, "Open MPI") == 0);
    }
    /* another job, another name; the jobid when there is no namespace */
    strata__cluster_t d;
    if (OK(NULL, NULL, NULL,
           ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=3",
               "OMPI_COMM_WORLD_LOCAL_SIZE=3",
               "OMPI_MCA_ess_base_jobid=980811778"), &d) == 0)
        CHECK(strcmp(c.pub.rendezvous, d.pub.rendezvous) != 0);
    strata__cluster_free(&d);
    strata__cluster_free(&c);
    /* several nodes: [cluster] rendezvous (here from the environment) */
    if (OK(NULL, SETS("cluster.rendezvous=nodeA:29400"), NULL,
           ENV("OMPI_COMM_WORLD_RANK=3", "OMPI_COMM_WORLD_SIZE=4",
               "OMPI_COMM_WORLD_LOCAL_SIZE=2"), &c) == 0) {
        CHECK(strcmp(c.pub.rendezvous, "nodeA:29400") == 0);
        CHECK(c.pub.self == 3);
    }
    strata__cluster_free(&c);
    /* PMIx's rank alone; a job of one needs no rendezvous */
    if (OK(NULL, NULL, NULL,
           ENV("OMPI_COMM_WORLD_SIZE=2", "PMIX_RANK=1",
               "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=x"), &c) == 0)
        CHECK(c.pub.self == 1);
    strata__cluster_free(&c);
    if (OK(NULL, NULL, NULL,
           ENV("OMPI_COMM_WORLD_SIZE=1", "OMPI_COMM_WORLD_RANK=0"), &c) == 0)
        CHECK(c.pub.ntasks == 1 && c.pub.rendezvous == NULL);
    strata__cluster_free(&c);
    if (OK(NULL, NULL, "worker:0",
           ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1",
               "OMPI_COMM_WORLD_LOCAL_SIZE=2", "PMIX_NAMESPACE=x"), &c) == 0)
        CHECK(c.pub.self == 0 && strcmp(c.pub.source, "--task + Open MPI")
                                     == 0);
    strata__cluster_free(&c);

    ERRC(NULL, NULL, NULL,
         ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4",
             "OMPI_COMM_WORLD_LOCAL_SIZE=2"),
         "Open MPI: ", "the 4 ranks run on several nodes "
                      "(OMPI_COMM_WORLD_LOCAL_SIZE=2): set [cluster] "
                      "rendezvous = HOST:PORT");
    ERRC(NULL, NULL, NULL,
         ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=4"),
         "Open MPI: ", "OMPI_COMM_WORLD_LOCAL_SIZE is not set");
    ERRC(NULL, NULL, NULL,
         ENV("OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2",
             "OMPI_COMM_WORLD_LOCAL_SIZE=2"),
         "Open MPI: ", "neither PMIX_NAMESPACE nor OMPI_MCA_ess_base_jobid");
    ERRC(NULL, NULL, NULL, ENV("OMPI_COMM_WORLD_RANK=0"), "Open MPI: ",
         "OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE is not");
    ERRC(NULL, NULL, NULL, ENV("OMPI_COMM_WORLD_SIZE=2"), "Open MPI: ",
         "neither OMPI_COMM_WORLD_RANK nor PMIX_RANK");
    ERRC(NULL, NULL, NULL,
         ENV("OMPI_COMM_WORLD_SIZE=0", "OMPI_COMM_WORLD_RANK=0"), "Open MPI: ",
         "OMPI_COMM_WORLD_SIZE='0': expected an integer in [1, 1024]");
    ERRC(NULL, NULL, NULL,
         ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=2"), "Open MPI: ",
         "OMPI_COMM_WORLD_RANK='2': expected an integer in [0, 1]");
    ERRC(NULL, NULL, NULL,
         ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1",
             "PMIX_RANK=0"), "Open MPI: ",
         "OMPI_COMM_WORLD_RANK=1 but PMIX_RANK=0");
    ERRC(NULL, NULL, NULL,
         ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=1",
             "OMPI_COMM_WORLD_LOCAL_SIZE=3"), "Open MPI: ",
         "OMPI_COMM_WORLD_LOCAL_SIZE='3'");
    ERRC(NULL, NULL, NULL,
         ENV("OMPI_COMM_WORLD_SIZE=4", "OMPI_COMM_WORLD_RANK=1",
             "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=2"),
         "Open MPI: ", "OMPI_COMM_WORLD_LOCAL_RANK='2': expected an integer "
                       "in [0, 1]");
}

/* ---- precedence ----------------------------------------------------------------- */

#define SLURM_ENV "SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_NODELIST=s[1-2]"
#define TORCH_ENV "RANK=1", "WORLD_SIZE=3", "MASTER_ADDR=m", "MASTER_PORT=9"
#define MPI_ENV "OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=5", \
                "OMPI_COMM_WORLD_LOCAL_SIZE=5", "PMIX_NAMESPACE=j"
#define TF_ENV                                                               \
    "TF_CONFIG={\"cluster\": {\"worker\": [\"t:1\", \"t:2\", \"t:3\", "      \
    "\"t:4\"]}, \"task\": {\"type\": \"worker\", \"index\": 3}}"

static void check_source(const char *ini, const char *cli,
                         const char *const *env, const char *source,
                         int ntasks, int self, int line)
{
    strata__cluster_t c;
    const char *log = NULL;
    int rc = resolve(ini, NULL, cli, env, &c, &log);
    CHECKF(rc == 0 && log && !*log && strcmp(c.pub.source, source) == 0
               && c.pub.ntasks == ntasks && c.pub.self == self,
           "line %d: rc %d, source '%s', %d tasks, self %d; log '%s'", line,
           rc, rc == 0 ? c.pub.source : "", c.pub.ntasks, c.pub.self,
           log ? log : "");
    strata__cluster_free(&c);
}
#define SOURCE(ini, cli, env, source, n, self) \
    check_source(ini, cli, env, source, n, self, __LINE__)

static void test_precedence(void)
{
    SOURCE("good.ini", NULL, ENV(TF_ENV, SLURM_ENV, TORCH_ENV), "[cluster]", 6,
           2);
    SOURCE(NULL, NULL, ENV(TF_ENV, SLURM_ENV, TORCH_ENV), "TF_CONFIG", 4, 3);
    SOURCE(NULL, NULL, ENV(TORCH_ENV, SLURM_ENV), "SLURM", 2, 1);
    SOURCE(NULL, NULL, ENV(TORCH_ENV), "torchrun", 3, 1);
    /* Open MPI: below TF_CONFIG, above SLURM (an sbatch script's mpirun
     * passes SLURM's variables on) and torchrun */
    SOURCE(NULL, NULL, ENV(MPI_ENV, SLURM_ENV, TORCH_ENV), "Open MPI", 5, 0);
    SOURCE(NULL, NULL, ENV(TF_ENV, MPI_ENV), "TF_CONFIG", 4, 3);
    SOURCE("good.ini", NULL, ENV(MPI_ENV), "[cluster]", 6, 2);
    SOURCE(NULL, "worker:0", ENV(TF_ENV, SLURM_ENV, TORCH_ENV),
           "--task + TF_CONFIG", 4, 0);
    SOURCE("good.ini", "evaluator:0", ENV(TF_ENV), "--task + [cluster]", 6, 5);
    /* a source below the winner is not even parsed */
    SOURCE("good.ini", NULL, ENV("TF_CONFIG={", "SLURM_PROCID=x", "RANK=x"),
           "[cluster]", 6, 2);
    SOURCE(NULL, NULL, ENV(TF_ENV, "SLURM_PROCID=x", "RANK=x"), "TF_CONFIG",
           4, 3);
    SOURCE(NULL, NULL, ENV(SLURM_ENV, "RANK=x"), "SLURM", 2, 1);
    /* the environment's first definition counts, as getenv */
    SOURCE(NULL, NULL, ENV(TORCH_ENV, "RANK=2"), "torchrun", 3, 1);
    /* but a bad source above a good one is an error */
    ERRC(NULL, NULL, NULL, ENV("TF_CONFIG={", SLURM_ENV, TORCH_ENV),
         "TF_CONFIG: ", "malformed JSON");
    ERRC("task_range.ini", NULL, NULL, ENV(TF_ENV), "[cluster] task = ",
         "out of range");
    ERRC(NULL, NULL, NULL, ENV("SLURM_PROCID=9", "SLURM_NTASKS=2",
                               "SLURM_NODELIST=n1", TORCH_ENV),
         "SLURM: ", "SLURM_PROCID='9'");
}

int main(int argc, char **argv)
{
    enter_test_dir(argc, argv, "cluster", g_etc);
    strata__log_set_level(STRATA_LOG_INFO);
    test_single();
    test_ini();
    test_ini_env();
    test_tf_config();
    test_limits();
    test_hostlist();
    test_slurm();
    test_torchrun();
    test_torchrun_rendezvous();
    test_mpi();
    test_precedence();
    return CHECK_DONE();
}
