/* Cluster resolution: the tasks of the job and which one this process is.
 * The sources, their precedence and the result are described in cluster.h.
 *
 * Each source appends tasks through add_task() (index = order of appearance
 * within the type) and names this process's task; finish() then checks what
 * every source must satisfy, puts the tasks in canonical order, ranks them
 * and applies --task. Every message starts with the source it is about. */
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cluster.h"

#define WHO "cluster"
#define ERR(...) strata__log(STRATA_LOG_ERROR, WHO, __VA_ARGS__)

#define MAX_HOST      255       /* characters of a host name                */
#define MAX_ADDR      (MAX_HOST + 8)
#define MAX_TF_CONFIG (1 << 20) /* bytes of TF_CONFIG                       */
#define MAX_HOSTLIST  65536     /* characters of SLURM_NODELIST             */
#define MAX_BRACKETS  8         /* bracket groups in one hostlist name      */
#define NOT_DEFINED   1         /* a source that does not define a cluster  */

/* The canonical order of tasks, and of ranks. */
enum { T_CHIEF, T_WORKER, T_PS, T_EVAL, NTYPES };
static const char *const k_types[NTYPES] = { "chief", "worker", "ps",
                                             "evaluator" };
#define TYPE_LIST "chief, worker, ps or evaluator"

#define C strata__cluster_cfg_t
#define STR(k, m, help) \
    { (k), STRATA_OPT_STRING, 0, "", offsetof(C, m), 1, 0, NULL, (help) }
const strata_option_t strata__cluster_options[] = {
    STR("chief", chief, "the chief's host:port; empty = no chief task"),
    STR("worker", worker,
        "the workers' host:port, comma-separated, in index order"),
    STR("ps", ps, "the parameter servers' host:port, comma-separated"),
    STR("evaluator", evaluator,
        "the evaluator's host:port; empty = no evaluator task"),
    STR("task", task,
        "this process's task as TYPE:INDEX, e.g. worker:1 (--task overrides)"),
    { "port_base", STRATA_OPT_INT, 0, "29400", offsetof(C, port_base), 1,
      65535, NULL,
      "SLURM: port of the first task on each node; the next tasks of the "
      "node take the next ports" },
    { "slurm_ps", STRATA_OPT_INT, 0, "0", offsetof(C, slurm_ps), 0,
      STRATA_MAX_TASKS - 1, NULL,
      "SLURM: how many tasks, the first ones, are parameter servers" },
    STR("rendezvous", rendezvous,
        "torchrun, Open MPI: host:port where rank 0 serves the rendezvous "
        "(a free port of its node); empty = torchrun's MASTER_ADDR:"
        "MASTER_PORT (+1 under torchrun's agent store), or for Open MPI on "
        "one node a local socket"),
    { "rendezvous_timeout_s", STRATA_OPT_FLOAT, 0, "300",
      offsetof(C, rendezvous_timeout_s), 0.1, 86400, NULL,
      "how long, in seconds, the rendezvous waits for every task to "
      "register and for the table" },
    { 0 }
};
#undef STR
#undef C

typedef struct build {
    strata__cluster_t *c;
    const char        *src;        /* "TF_CONFIG": first word of messages */
    int                cli;        /* --task given: a source may omit its task */
    int                count[NTYPES];
    int                self_type;  /* the source's own task; -1: none      */
    long               self_index;
} build_t;

/* ---- small helpers ---------------------------------------------------------- */

static int nomem(void)
{
    ERR("out of memory");
    return STRATA_ENOMEM;
}

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (; envp && *envp; envp++)
        if (strncmp(*envp, name, n) == 0 && (*envp)[n] == '=')
            return *envp + n + 1;
    return NULL;
}

/* At most n-1 characters of s for a message, "..." marking a cut. */
static const char *clip(const char *s, char *buf, size_t n)
{
    if (strlen(s) < n)
        return s;
    snprintf(buf, n, "%.*s...", (int)(n - 4), s);
    return buf;
}

static int type_of(const char *s)
{
    for (int t = 0; t < NTYPES; t++)
        if (strcmp(s, k_types[t]) == 0)
            return t;
    return -1;
}

/* Reads 1..18 decimal digits at p into *v; returns the end, NULL if none. */
static const char *digits(const char *p, unsigned long long *v)
{
    const char *s = p;
    *v = 0;
    while (isdigit((unsigned char)*p) && p - s < 18)
        *v = *v * 10 + (unsigned long long)(*p++ - '0');
    return p == s || isdigit((unsigned char)*p) ? NULL : p;
}

/* The whole of s is a decimal integer (no sign, no blanks) in [lo, hi]. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
    unsigned long long v;
    const char *e = s ? digits(s, &v) : NULL;
    if (!e || *e || v < (unsigned long long)lo || v > (unsigned long long)hi)
        return -1;
    *out = (long)v;
    return 0;
}

/* Python's str(True), and the usual spellings of yes. */
static int is_true(const char *s)
{
    return !strcmp(s, "True") || !strcmp(s, "true") || !strcmp(s, "1");
}

static int host_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '-' || ch == '.' || ch == '_';
}

/* "host:port" or "[v6addr]:port", port in [1, 65535]; else why says. */
static int check_addr(const char *a, char *why, size_t n)
{
    const char *colon, *h = a;
    if (!*a) {
        snprintf(why, n, "empty address");
        return -1;
    }
    if (strlen(a) > MAX_ADDR) {
        snprintf(why, n, "address longer than %d characters", MAX_ADDR);
        return -1;
    }
    if (*a == '[') {
        const char *close = strchr(a, ']');
        if (!close || close == a + 1 || close[1] != ':') {
            snprintf(why, n, "expected [ipv6-address]:port");
            return -1;
        }
        for (h = a + 1; h < close; h++)
            if (!isxdigit((unsigned char)*h) && *h != ':' && *h != '.') {
                snprintf(why, n, "bad character '%c' in IPv6 address", *h);
                return -1;
            }
        colon = close + 1;
    } else {
        colon = strrchr(a, ':');
        if (!colon) {
            snprintf(why, n, "expected host:port");
            return -1;
        }
        if (colon == a) {
            snprintf(why, n, "empty host before ':'");
            return -1;
        }
        for (; h < colon; h++)
            if (!host_char(*h)) {
                snprintf(why, n, *h == ':' ? "expected host:port (an IPv6 "
                                             "address goes in [brackets])"
                                           : "bad character '%c' in host",
                         *h);
                return -1;
            }
    }
    long port;
    if (parse_long(colon + 1, 1, 65535, &port) != 0) {
        snprintf(why, n, "port '%s' is not an integer in [1, 65535]",
                 colon + 1);
        return -1;
    }
    return 0;
}

/* host:port, bracketing an IPv6 host. */
static void fmt_addr(char *buf, size_t n, const char *host, long port)
{
    int v6 = strchr(host, ':') && host[0] != '[';
    snprintf(buf, n, "%s%s%s:%ld", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* "TYPE:INDEX" -> type, index. */
static int parse_task(const char *s, int *type, long *index)
{
    const char *colon = strchr(s, ':');
    char name[16];
    if (!colon || (size_t)(colon - s) >= sizeof name)
        return -1;
    memcpy(name, s, (size_t)(colon - s));
    name[colon - s] = '\0';
    *type = type_of(name);
    return *type < 0 || parse_long(colon + 1, 0, INT32_MAX, index) != 0 ? -1
                                                                        : 0;
}

/* "1 chief, 2 worker" */
static void describe(const build_t *b, char *buf, size_t n)
{
    size_t len = 0;
    snprintf(buf, n, "no tasks");
    for (int t = 0; t < NTYPES && len < n; t++)
        if (b->count[t]) {
            int w = snprintf(buf + len, n - len, "%s%d %s", len ? ", " : "",
                             b->count[t], k_types[t]);
            len = w < 0 ? n : len + (size_t)w;
        }
}

/* Why task type:index is not in the cluster built so far, or 0. */
static int self_problem(const build_t *b, int type, long index, char *why,
                        size_t n)
{
    char has[96];
    describe(b, has, sizeof has);
    if (b->count[type] == 0) {
        snprintf(why, n, "type '%s' is not in the cluster (its tasks: %s)",
                 k_types[type], has);
        return -1;
    }
    if (index >= b->count[type]) {
        snprintf(why, n, "index %ld out of range: cluster has %d %s task%s",
                 index, b->count[type], k_types[type],
                 b->count[type] == 1 ? "" : "s");
        return -1;
    }
    return 0;
}

static int add_task(build_t *b, int type, const char *addr)
{
    strata__cluster_t *c = b->c;
    if (c->pub.ntasks >= STRATA_MAX_TASKS) {
        ERR("%s: more than %d tasks", b->src, STRATA_MAX_TASKS);
        return STRATA_ECONFIG;
    }
    char *copy = NULL;
    if (addr && !(copy = strdup(addr)))
        return nomem();
    c->tasks[c->pub.ntasks++] = (strata_task_t){
        .type = k_types[type], .index = b->count[type]++, .rank = -1,
        .address = copy };
    return 0;
}

/* ---- 2. the INI [cluster] section ------------------------------------------ */

static const char *origin_of(const strata__cfg_t *cfg, const char *key)
{
    const char *o = cfg ? strata__cfg_origin(cfg, "cluster", key) : NULL;
    return o ? o : "default";
}

/* One key's comma-separated host:port list. */
static int ini_list(build_t *b, const strata__cfg_t *cfg, int type,
                    const char *value)
{
    const char *key = k_types[type], *origin = origin_of(cfg, key);
    char cut[120], why[160], item[MAX_ADDR + 2];
    int n = 0;
    for (const char *s = value;; n++) {
        const char *e = strchr(s, ',');
        if (!e)
            e = s + strlen(s);
        while (s < e && isspace((unsigned char)*s))
            s++;
        size_t len = (size_t)(e - s);
        while (len && isspace((unsigned char)s[len - 1]))
            len--;
        snprintf(item, sizeof item, "%.*s", (int)len, s);
        if (len > MAX_ADDR)
            snprintf(why, sizeof why, "address %d is longer than %d "
                     "characters", n + 1, MAX_ADDR);
        else if (!len)
            snprintf(why, sizeof why, "address %d of the list is empty",
                     n + 1);
        if (len > MAX_ADDR || !len || check_addr(item, why, sizeof why) != 0) {
            ERR("[cluster] %s = '%s': %s (%s)", key,
                clip(value, cut, sizeof cut), why, origin);
            return STRATA_ECONFIG;
        }
        if ((type == T_CHIEF || type == T_EVAL) && n > 0) {
            ERR("[cluster] %s = '%s': one host:port expected, there is at "
                "most one %s (%s)", key, clip(value, cut, sizeof cut), key,
                origin);
            return STRATA_ECONFIG;
        }
        int rc = add_task(b, type, item);
        if (rc != 0)
            return rc;
        if (!*e)
            return 0;
        s = e + 1;
    }
}

static int from_ini(build_t *b, const strata__cluster_cfg_t *k,
                    const strata__cfg_t *cfg)
{
    const char *vals[NTYPES] = { k->chief, k->worker, k->ps, k->evaluator };
    int any = 0;
    for (int t = 0; t < NTYPES; t++)
        any |= vals[t][0] != '\0';
    if (!any) {
        if (k->task[0]) {
            ERR("[cluster] task = %s: [cluster] lists no chief, worker, ps "
                "or evaluator address (%s); use --task to pick a task of "
                "TF_CONFIG, SLURM or torchrun", k->task,
                origin_of(cfg, "task"));
            return STRATA_ECONFIG;
        }
        return NOT_DEFINED;
    }
    for (int t = 0; t < NTYPES; t++)
        if (vals[t][0]) {
            int rc = ini_list(b, cfg, t, vals[t]);
            if (rc != 0)
                return rc;
        }
    char why[200];
    if (k->task[0]) {
        int type;
        long index;
        if (parse_task(k->task, &type, &index) != 0) {
            ERR("[cluster] task = %s: expected TYPE:INDEX with TYPE "
                TYPE_LIST " (%s)", k->task, origin_of(cfg, "task"));
            return STRATA_ECONFIG;
        }
        if (self_problem(b, type, index, why, sizeof why) != 0) {
            ERR("[cluster] task = %s: %s (%s)", k->task, why,
                origin_of(cfg, "task"));
            return STRATA_ECONFIG;
        }
        b->self_type = type;
        b->self_index = index;
    } else if (!b->cli) {
        describe(b, why, sizeof why);
        ERR("[cluster] lists tasks (%s) but not which one this process is: "
            "set [cluster] task = TYPE:INDEX or pass --task (%s)", why,
            origin_of(cfg, NULL));
        return STRATA_ECONFIG;
    }
    return 0;
}

/* ---- 3. TF_CONFIG -------------------------------------------------------------- */

/* Whether an earlier member of it's object has the same name. Objects here
 * are checked against a handful of names first, so this stays short. */
static int repeated(const cJSON *obj, const cJSON *it)
{
    for (const cJSON *p = obj->child; p && p != it; p = p->next)
        if (strcmp(p->string, it->string) == 0)
            return 1;
    return 0;
}

static int tf_cluster(build_t *b, const cJSON *cluster)
{
    char cut[120], why[160];
    if (!cJSON_IsObject(cluster)) {
        ERR("TF_CONFIG: \"cluster\" must be an object of job name -> list "
            "of \"host:port\"");
        return STRATA_ECONFIG;
    }
    for (const cJSON *job = cluster->child; job; job = job->next) {
        int type = type_of(job->string);
        if (type < 0) {
            ERR("TF_CONFIG: unknown job '%s' in cluster (expected " TYPE_LIST
                ")", clip(job->string, cut, sizeof cut));
            return STRATA_ECONFIG;
        }
        if (repeated(cluster, job)) {
            ERR("TF_CONFIG: job '%s' appears twice in cluster", job->string);
            return STRATA_ECONFIG;
        }
        if (!cJSON_IsArray(job)) {
            ERR("TF_CONFIG: cluster.%s must be a list of \"host:port\" "
                "strings", job->string);
            return STRATA_ECONFIG;
        }
        int n = cJSON_GetArraySize(job);
        if ((type == T_CHIEF || type == T_EVAL) && n > 1) {
            ERR("TF_CONFIG: cluster.%s lists %d tasks; there is at most one "
                "%s", job->string, n, job->string);
            return STRATA_ECONFIG;
        }
        int i = 0;
        for (const cJSON *a = job->child; a; a = a->next, i++) {
            if (!cJSON_IsString(a)) {
                ERR("TF_CONFIG: cluster.%s[%d]: expected a \"host:port\" "
                    "string", job->string, i);
                return STRATA_ECONFIG;
            }
            if (check_addr(a->valuestring, why, sizeof why) != 0) {
                ERR("TF_CONFIG: cluster.%s[%d] = '%s': %s", job->string, i,
                    clip(a->valuestring, cut, sizeof cut), why);
                return STRATA_ECONFIG;
            }
            int rc = add_task(b, type, a->valuestring);
            if (rc != 0)
                return rc;
        }
    }
    return 0;
}

static int tf_task(build_t *b, const cJSON *task)
{
    char cut[120], why[200];
    const cJSON *type = NULL, *index = NULL;
    if (!cJSON_IsObject(task)) {
        ERR("TF_CONFIG: \"task\" must be an object {\"type\": ..., "
            "\"index\": ...}");
        return STRATA_ECONFIG;
    }
    for (const cJSON *it = task->child; it; it = it->next) {
        if (strcmp(it->string, "type") == 0)
            type = it;
        else if (strcmp(it->string, "index") == 0)
            index = it;
        else if (strcmp(it->string, "trial") != 0) {
            ERR("TF_CONFIG: unknown key '%s' in task (expected type, index)",
                clip(it->string, cut, sizeof cut));
            return STRATA_ECONFIG;
        }
        if (repeated(task, it)) {
            ERR("TF_CONFIG: key '%s' appears twice in task", it->string);
            return STRATA_ECONFIG;
        }
    }
    if (!cJSON_IsString(type)) {
        ERR("TF_CONFIG: task.type must be a string: " TYPE_LIST);
        return STRATA_ECONFIG;
    }
    int t = type_of(type->valuestring);
    if (t < 0) {
        ERR("TF_CONFIG: task type '%s' unknown (expected " TYPE_LIST ")",
            clip(type->valuestring, cut, sizeof cut));
        return STRATA_ECONFIG;
    }
    long i = 0;
    if (index) {
        double v = cJSON_IsNumber(index) ? index->valuedouble : -1;
        if (!(v >= 0 && v <= INT32_MAX && (double)(long)v == v)) {
            ERR("TF_CONFIG: task.index must be an integer >= 0");
            return STRATA_ECONFIG;
        }
        i = (long)v;
    }
    if (self_problem(b, t, i, why, sizeof why) != 0) {
        ERR("TF_CONFIG: task %s", why);
        return STRATA_ECONFIG;
    }
    b->self_type = t;
    b->self_index = i;
    return 0;
}

static int tf_root(build_t *b, const cJSON *root)
{
    char cut[120];
    const cJSON *cluster = NULL, *task = NULL;
    if (!cJSON_IsObject(root)) {
        ERR("TF_CONFIG: expected a JSON object {\"cluster\": ..., "
            "\"task\": ...}");
        return STRATA_ECONFIG;
    }
    if (!root->child)
        return NOT_DEFINED; /* "{}", as TensorFlow: no cluster */
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "cluster") == 0)
            cluster = it;
        else if (strcmp(it->string, "task") == 0)
            task = it;
        else if (strcmp(it->string, "environment") != 0
                 && strcmp(it->string, "rpc_layer") != 0) {
            ERR("TF_CONFIG: unknown key '%s' (expected cluster, task, "
                "environment, rpc_layer)", clip(it->string, cut, sizeof cut));
            return STRATA_ECONFIG;
        }
        if (repeated(root, it)) {
            ERR("TF_CONFIG: key '%s' appears twice", it->string);
            return STRATA_ECONFIG;
        }
    }
    if (!cluster) {
        ERR("TF_CONFIG: no \"cluster\"");
        return STRATA_ECONFIG;
    }
    int rc = tf_cluster(b, cluster);
    if (rc == 0 && task)
        rc = tf_task(b, task);
    else if (rc == 0 && !b->cli) {
        ERR("TF_CONFIG: no \"task\": add \"task\": {\"type\": \"worker\", "
            "\"index\": N} or pass --task");
        rc = STRATA_ECONFIG;
    }
    return rc;
}

static int from_tf_config(build_t *b, const char *text)
{
    if (!text || !text[strspn(text, " \t\r\n")])
        return NOT_DEFINED;
    if (strlen(text) > MAX_TF_CONFIG) {
        ERR("TF_CONFIG: longer than %d bytes", MAX_TF_CONFIG);
        return STRATA_ECONFIG;
    }
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root) {
        size_t off = end ? (size_t)(end - text) : 0;
        if (text[off])
            ERR("TF_CONFIG: malformed JSON at offset %zu: '%.24s'", off,
                text + off);
        else
            ERR("TF_CONFIG: malformed JSON: it ends at offset %zu too early",
                off);
        return STRATA_ECONFIG;
    }
    int rc = tf_root(b, root);
    cJSON_Delete(root);
    return rc;
}

/* ---- 4. Open MPI ---------------------------------------------------------------- */

/* The rendezvous of an mpirun job whose ranks all run on this node: an
 * abstract Unix socket (no file to clean up), named after this user and the
 * job (PMIX_NAMESPACE, else OMPI_MCA_ess_base_jobid, hashed), so that two
 * jobs or two users never meet. */
static int mpi_local_rendezvous(char *const *envp, char *out, size_t n)
{
    const char *job = env_get(envp, "PMIX_NAMESPACE");
    if (!job || !*job)
        job = env_get(envp, "OMPI_MCA_ess_base_jobid");
    if (!job || !*job)
        return -1;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = job; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    snprintf(out, n, "%sstrata-%u-%016llx", STRATA_RDZV_UNIX,
             (unsigned)geteuid(), (unsigned long long)h);
    return 0;
}

/* An optional variable of the form 0..hi; *out keeps its value when unset. */
static int mpi_opt(char *const *envp, const char *name, long lo, long hi,
                   long *out)
{
    const char *s = env_get(envp, name);
    char cut[120];
    if (s && parse_long(s, lo, hi, out) != 0) {
        ERR("Open MPI: %s='%s': expected an integer in [%ld, %ld]", name,
            clip(s, cut, sizeof cut), lo, hi);
        return STRATA_ECONFIG;
    }
    return 0;
}

static int from_mpi(build_t *b, char *const *envp,
                    const strata__cluster_cfg_t *k)
{
    const char *size_s = env_get(envp, "OMPI_COMM_WORLD_SIZE");
    const char *rank_s = env_get(envp, "OMPI_COMM_WORLD_RANK");
    const char *pmix_s = env_get(envp, "PMIX_RANK");
    char cut[120];
    if (!size_s && !rank_s)
        return NOT_DEFINED;
    long size, rank = -1, pmix = -1, lsize = 0, lrank = 0;
    if (!size_s) {
        ERR("Open MPI: OMPI_COMM_WORLD_RANK is set but OMPI_COMM_WORLD_SIZE "
            "is not");
        return STRATA_ECONFIG;
    }
    if (parse_long(size_s, 1, STRATA_MAX_TASKS, &size) != 0) {
        ERR("Open MPI: OMPI_COMM_WORLD_SIZE='%s': expected an integer in "
            "[1, %d]", clip(size_s, cut, sizeof cut), STRATA_MAX_TASKS);
        return STRATA_ECONFIG;
    }
    if (!rank_s && !pmix_s) {
        ERR("Open MPI: OMPI_COMM_WORLD_SIZE is set but neither "
            "OMPI_COMM_WORLD_RANK nor PMIX_RANK is");
        return STRATA_ECONFIG;
    }
    int rc = mpi_opt(envp, "OMPI_COMM_WORLD_RANK", 0, size - 1, &rank);
    if (rc == 0)
        rc = mpi_opt(envp, "PMIX_RANK", 0, size - 1, &pmix);
    if (rc == 0)
        rc = mpi_opt(envp, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, size, &lsize);
    if (rc == 0)
        rc = mpi_opt(envp, "OMPI_COMM_WORLD_LOCAL_RANK", 0,
                     (lsize ? lsize : size) - 1, &lrank);
    if (rc != 0)
        return rc;
    if (rank >= 0 && pmix >= 0 && rank != pmix) {
        ERR("Open MPI: OMPI_COMM_WORLD_RANK=%ld but PMIX_RANK=%ld: they must "
            "name the same process", rank, pmix);
        return STRATA_ECONFIG;
    }
    char addr[MAX_ADDR + 1];
    const char *where = k->rendezvous;
    if (!where[0] && size > 1) {
        if (lsize != size) {
            if (lsize)
                ERR("Open MPI: the %ld ranks run on several nodes "
                    "(OMPI_COMM_WORLD_LOCAL_SIZE=%ld): set [cluster] "
                    "rendezvous = HOST:PORT, a free port on the node of rank "
                    "0 (mpirun -x STRATA_CLUSTER_RENDEZVOUS=HOST:PORT)", size,
                    lsize);
            else
                ERR("Open MPI: OMPI_COMM_WORLD_LOCAL_SIZE is not set, so "
                    "whether the %ld ranks share one node is unknown: set "
                    "[cluster] rendezvous = HOST:PORT, a free port on the "
                    "node of rank 0", size);
            return STRATA_ECONFIG;
        }
        if (mpi_local_rendezvous(envp, addr, sizeof addr) != 0) {
            ERR("Open MPI: neither PMIX_NAMESPACE nor OMPI_MCA_ess_base_jobid "
                "names the job, so its ranks cannot meet on this node: set "
                "[cluster] rendezvous = HOST:PORT");
            return STRATA_ECONFIG;
        }
        where = addr;
    }
    if (where[0] && !(b->c->pub.rendezvous = strdup(where)))
        return nomem();
    for (long i = 0; i < size; i++)
        if ((rc = add_task(b, T_WORKER, NULL)) != 0)
            return rc;
    b->self_type = T_WORKER;
    b->self_index = rank >= 0 ? rank : pmix;
    return 0;
}

/* ---- 5. SLURM ------------------------------------------------------------------- */

typedef struct hostlist {
    char **out;
    int    max, n;
    char  *why;
    size_t whylen;
} hostlist_t;

static int hl_fail(hostlist_t *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int hl_fail(hostlist_t *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->why, h->whylen, fmt, ap);
    va_end(ap);
    return STRATA_ECONFIG;
}

/* One element of a bracket, "07" or "01-03", in [s, e): 0, or -1 when it is
 * not numbers, -2 when the range runs backwards. width: digits of lo. */
static int hl_range(const char *s, const char *e, unsigned long long *lo,
                    unsigned long long *hi, int *width)
{
    const char *p = digits(s, lo);
    if (!p || p > e)
        return -1;
    *width = (int)(p - s);
    *hi = *lo;
    if (p < e && (*p != '-' || !(p = digits(p + 1, hi)) || p != e))
        return -1;
    return *lo > *hi ? -2 : 0;
}

/* Appends the names of pattern [p, end) to name[0, len). */
static int hl_expand(hostlist_t *h, const char *p, const char *end,
                     char *name, size_t len)
{
    for (; p < end && *p != '['; p++) {
        if (*p == ']')
            return hl_fail(h, "']' without '['");
        if (!host_char(*p))
            return hl_fail(h, "unexpected character '%c'", *p);
        if (len >= MAX_HOST)
            return hl_fail(h, "host name longer than %d characters",
                           MAX_HOST);
        name[len++] = *p;
    }
    if (p == end) {
        name[len] = '\0';
        if (h->n >= h->max)
            return hl_fail(h, "more than %d hosts", h->max);
        if (!(h->out[h->n] = strdup(name)))
            return STRATA_ENOMEM;
        h->n++;
        return 0;
    }
    const char *open = p, *close = p + 1;
    while (close < end && *close != ']' && *close != '[')
        close++;
    if (close == end)
        return hl_fail(h, "missing ']'");
    if (*close == '[')
        return hl_fail(h, "'[' inside brackets");
    /* check the whole bracket before expanding any of it */
    for (int pass = 0; pass < 2; pass++)
        for (const char *s = open + 1;; s++) {
            const char *e = s;
            while (e < close && *e != ',')
                e++;
            unsigned long long lo, hi;
            int width, rc = hl_range(s, e, &lo, &hi, &width);
            if (rc != 0)
                return hl_fail(h, "%s '%.*s' in [%.*s]",
                               rc == -2 ? "bad range" : "expected N or N-M, got",
                               (int)(e - s), s, (int)(close - open - 1),
                               open + 1);
            for (unsigned long long v = lo; pass == 1 && v <= hi; v++) {
                int w = snprintf(name + len, MAX_HOST + 1 - len, "%0*llu",
                                 width, v);
                if (w < 0 || len + (size_t)w > MAX_HOST)
                    return hl_fail(h, "host name longer than %d characters",
                                   MAX_HOST);
                rc = hl_expand(h, close + 1, end, name, len + (size_t)w);
                if (rc != 0)
                    return rc;
            }
            if (e == close)
                break;
            s = e;
        }
    return 0;
}

/* strata__slurm_hostlist without the log line: the problem goes to why. */
static int hostlist(const char *spec, char **out, int max, char *why,
                    size_t whylen)
{
    hostlist_t h = { out, max, 0, why, whylen };
    int rc = 0;
    if (!*spec)
        rc = hl_fail(&h, "empty host list");
    else if (strlen(spec) > MAX_HOSTLIST)
        rc = hl_fail(&h, "longer than %d characters", MAX_HOSTLIST);
    for (const char *s = spec; rc == 0;) {
        const char *e = s;
        int open = 0, brackets = 0;
        for (; *e && (open || *e != ','); e++)
            if (*e == '[' || *e == ']') {
                open = *e == '[';
                brackets += open;
            }
        char name[MAX_HOST + 1];
        if (e == s)
            rc = hl_fail(&h, "empty host name");
        else if (brackets > MAX_BRACKETS)
            rc = hl_fail(&h, "more than %d bracket groups in one name",
                         MAX_BRACKETS);
        else
            rc = hl_expand(&h, s, e, name, 0);
        if (!*e)
            break;
        s = e + 1;
    }
    if (rc == 0)
        return h.n;
    while (h.n > 0) {
        free(out[--h.n]);
        out[h.n] = NULL;
    }
    return rc;
}

int strata__slurm_hostlist(const char *spec, char **out, int max)
{
    char why[200], cut[120];
    int rc = hostlist(spec ? spec : "", out, max, why, sizeof why);
    if (rc == STRATA_ECONFIG)
        ERR("SLURM_NODELIST '%s': %s", clip(spec ? spec : "", cut, sizeof cut),
            why);
    else if (rc == STRATA_ENOMEM)
        nomem();
    return rc;
}

/* SLURM_TASKS_PER_NODE "2(x3),1" -> 2 2 2 1 in per[] (at most max). */
static int tasks_per_node(const char *s, int *per, int max, char *why,
                          size_t n)
{
    int k = 0;
    for (const char *p = s;; p++) {
        unsigned long long c, r = 1;
        const char *q = digits(p, &c);
        if (!q || c < 1 || c > STRATA_MAX_TASKS) {
            snprintf(why, n, "expected a task count in [1, %d] at '%s'",
                     STRATA_MAX_TASKS, p);
            return -1;
        }
        if (*q == '(') {
            if (q[1] != 'x' || !(q = digits(q + 2, &r)) || *q != ')' || r < 1
                || r > STRATA_MAX_TASKS) {
                snprintf(why, n, "expected (xN) after the count at '%s'", p);
                return -1;
            }
            q++;
        }
        if ((unsigned long long)k + r > (unsigned long long)max) {
            snprintf(why, n, "more than %d nodes", max);
            return -1;
        }
        for (unsigned long long i = 0; i < r; i++)
            per[k++] = (int)c;
        if (!*q)
            return k;
        if (*q != ',') {
            snprintf(why, n, "unexpected '%c' at '%s'", *q, q);
            return -1;
        }
        p = q;
    }
}

/* How many tasks each node of the list runs, in block order. */
static int slurm_layout(char *const *envp, int nhosts, long ntasks, int *per)
{
    char why[200], cut[120];
    const char *tpn = env_get(envp, "SLURM_TASKS_PER_NODE");
    const char *ntpn = env_get(envp, "SLURM_NTASKS_PER_NODE");
    if (tpn) {
        int n = tasks_per_node(tpn, per, STRATA_MAX_TASKS, why, sizeof why);
        long sum = 0;
        for (int i = 0; i < n; i++)
            sum += per[i];
        if (n < 0)
            ERR("SLURM_TASKS_PER_NODE '%s': %s", clip(tpn, cut, sizeof cut),
                why);
        else if (n != nhosts)
            ERR("SLURM_TASKS_PER_NODE '%s' describes %d nodes, "
                "SLURM_NODELIST has %d", clip(tpn, cut, sizeof cut), n,
                nhosts);
        else if (sum != ntasks)
            ERR("SLURM_TASKS_PER_NODE '%s' adds up to %ld tasks, "
                "SLURM_NTASKS is %ld", clip(tpn, cut, sizeof cut), sum,
                ntasks);
        return n == nhosts && sum == ntasks ? 0 : STRATA_ECONFIG;
    }
    long k = 0;
    if (ntpn) {
        if (parse_long(ntpn, 1, STRATA_MAX_TASKS, &k) != 0) {
            ERR("SLURM_NTASKS_PER_NODE '%s': expected an integer in [1, %d]",
                clip(ntpn, cut, sizeof cut), STRATA_MAX_TASKS);
            return STRATA_ECONFIG;
        }
        if (k * nhosts < ntasks) {
            ERR("SLURM: SLURM_NTASKS_PER_NODE=%ld on %d nodes holds %ld "
                "tasks, SLURM_NTASKS is %ld", k, nhosts, k * nhosts, ntasks);
            return STRATA_ECONFIG;
        }
    } else if (nhosts == 1 || nhosts == ntasks) {
        k = ntasks / nhosts;
    } else {
        ERR("SLURM: cannot place %ld tasks on %d nodes: neither "
            "SLURM_TASKS_PER_NODE nor SLURM_NTASKS_PER_NODE is set", ntasks,
            nhosts);
        return STRATA_ECONFIG;
    }
    for (int i = 0; i < nhosts; i++)
        per[i] = (int)k;
    return 0;
}

/* An optional SLURM_NODEID / SLURM_LOCALID must agree with block order. */
static int slurm_check_place(char *const *envp, long procid, int node,
                             int local, const char *host)
{
    static const char *const k_var[2] = { "SLURM_NODEID", "SLURM_LOCALID" };
    const long want[2] = { node, local };
    for (int i = 0; i < 2; i++) {
        const char *s = env_get(envp, k_var[i]);
        long v;
        if (s && (parse_long(s, 0, INT32_MAX, &v) != 0 || v != want[i])) {
            ERR("SLURM: %s=%s, but in block order task %ld is task %d of "
                "node %d (%s): launch with srun --distribution=block",
                k_var[i], s, procid, local, node, host);
            return STRATA_ECONFIG;
        }
    }
    return 0;
}

static int slurm_place(build_t *b, char *const *envp,
                       const strata__cluster_cfg_t *k, char **hosts,
                       int nhosts, long ntasks, long procid)
{
    int per[STRATA_MAX_TASKS];
    int rc = slurm_layout(envp, nhosts, ntasks, per);
    long t = 0;
    for (int node = 0; rc == 0 && node < nhosts && t < ntasks; node++)
        for (int local = 0; rc == 0 && local < per[node] && t < ntasks;
             local++, t++) {
            long port = (long)k->port_base + local;
            char addr[MAX_ADDR + 1];
            if (port > 65535) {
                ERR("SLURM: task %ld is task %d of node %s: port %ld "
                    "([cluster] port_base %ld + %d) is above 65535", t, local,
                    hosts[node], port, (long)k->port_base, local);
                return STRATA_ECONFIG;
            }
            fmt_addr(addr, sizeof addr, hosts[node], port);
            rc = add_task(b, t < k->slurm_ps ? T_PS : T_WORKER, addr);
            if (rc == 0 && t == procid)
                rc = slurm_check_place(envp, procid, node, local, hosts[node]);
        }
    return rc;
}

static int from_slurm(build_t *b, char *const *envp,
                      const strata__cluster_cfg_t *k, const strata__cfg_t *cfg)
{
    char cut[120], why[200];
    const char *procid_s = env_get(envp, "SLURM_PROCID");
    if (!procid_s)
        return NOT_DEFINED;
    const char *ntasks_s = env_get(envp, "SLURM_NTASKS");
    const char *nodelist = env_get(envp, "SLURM_NODELIST");
    long ntasks, procid;
    if (!ntasks_s || !nodelist) {
        ERR("SLURM: SLURM_PROCID is set but %s is not",
            ntasks_s ? "SLURM_NODELIST" : "SLURM_NTASKS");
        return STRATA_ECONFIG;
    }
    if (parse_long(ntasks_s, 1, STRATA_MAX_TASKS, &ntasks) != 0) {
        ERR("SLURM: SLURM_NTASKS='%s': expected an integer in [1, %d]",
            clip(ntasks_s, cut, sizeof cut), STRATA_MAX_TASKS);
        return STRATA_ECONFIG;
    }
    if (parse_long(procid_s, 0, ntasks - 1, &procid) != 0) {
        ERR("SLURM: SLURM_PROCID='%s': expected an integer in [0, %ld] "
            "(SLURM_NTASKS=%ld)", clip(procid_s, cut, sizeof cut), ntasks - 1,
            ntasks);
        return STRATA_ECONFIG;
    }
    if (k->slurm_ps >= ntasks) {
        ERR("[cluster] slurm_ps = %ld: SLURM runs %ld task%s and at least "
            "one must be a worker (%s)", (long)k->slurm_ps, ntasks,
            ntasks == 1 ? "" : "s", origin_of(cfg, "slurm_ps"));
        return STRATA_ECONFIG;
    }
    char **hosts = calloc(STRATA_MAX_TASKS, sizeof *hosts);
    if (!hosts)
        return nomem();
    int rc = hostlist(nodelist, hosts, STRATA_MAX_TASKS, why, sizeof why);
    if (rc == STRATA_ECONFIG)
        ERR("SLURM_NODELIST '%s': %s", clip(nodelist, cut, sizeof cut), why);
    else if (rc == STRATA_ENOMEM)
        nomem();
    int nhosts = rc > 0 ? rc : 0;
    if (rc > 0)
        rc = slurm_place(b, envp, k, hosts, nhosts, ntasks, procid);
    for (int i = 0; i < nhosts; i++)
        free(hosts[i]);
    free(hosts);
    if (rc != 0)
        return rc;
    b->self_type = procid < k->slurm_ps ? T_PS : T_WORKER;
    b->self_index = procid < k->slurm_ps ? procid : procid - k->slurm_ps;
    return 0;
}

/* ---- 6. torchrun --------------------------------------------------------------- */

static int from_torchrun(build_t *b, char *const *envp,
                         const strata__cluster_cfg_t *k)
{
    static const char *const k_need[] = { "RANK", "WORLD_SIZE", "MASTER_ADDR",
                                          "MASTER_PORT" };
    const char *v[4];
    char cut[120], why[160];
    for (int i = 0; i < 4; i++)
        v[i] = env_get(envp, k_need[i]);
    if (!v[0] && !v[1])
        return NOT_DEFINED;
    for (int i = 0; i < 4; i++)
        if (!v[i]) {
            ERR("torchrun: %s is set but %s is not", k_need[v[0] ? 0 : 1],
                k_need[i]);
            return STRATA_ECONFIG;
        }
    long ws, rank, port, lws = 0, lrank;
    if (parse_long(v[1], 1, STRATA_MAX_TASKS, &ws) != 0) {
        ERR("torchrun: WORLD_SIZE='%s': expected an integer in [1, %d]",
            clip(v[1], cut, sizeof cut), STRATA_MAX_TASKS);
        return STRATA_ECONFIG;
    }
    if (parse_long(v[0], 0, ws - 1, &rank) != 0) {
        ERR("torchrun: RANK='%s': expected an integer in [0, %ld] "
            "(WORLD_SIZE=%ld)", clip(v[0], cut, sizeof cut), ws - 1, ws);
        return STRATA_ECONFIG;
    }
    if (parse_long(v[3], 1, 65535, &port) != 0) {
        ERR("torchrun: MASTER_PORT='%s': expected a port in [1, 65535]",
            clip(v[3], cut, sizeof cut));
        return STRATA_ECONFIG;
    }
    const char *lws_s = env_get(envp, "LOCAL_WORLD_SIZE");
    const char *lrank_s = env_get(envp, "LOCAL_RANK");
    if (lws_s && parse_long(lws_s, 1, ws, &lws) != 0) {
        ERR("torchrun: LOCAL_WORLD_SIZE='%s': expected an integer in [1, "
            "WORLD_SIZE=%ld]", clip(lws_s, cut, sizeof cut), ws);
        return STRATA_ECONFIG;
    }
    if (lrank_s && parse_long(lrank_s, 0, (lws ? lws : ws) - 1, &lrank) != 0) {
        ERR("torchrun: LOCAL_RANK='%s': expected an integer in [0, %ld)",
            clip(lrank_s, cut, sizeof cut), lws ? lws : ws);
        return STRATA_ECONFIG;
    }
    char addr[MAX_ADDR + 1];
    if (strlen(v[2]) > MAX_HOST) {
        ERR("torchrun: MASTER_ADDR is longer than %d characters", MAX_HOST);
        return STRATA_ECONFIG;
    }
    fmt_addr(addr, sizeof addr, v[2], port);
    if (check_addr(addr, why, sizeof why) != 0) {
        ERR("torchrun: MASTER_ADDR='%s': %s", clip(v[2], cut, sizeof cut),
            why);
        return STRATA_ECONFIG;
    }
    int one_node = lws == ws;
    if (one_node && port + ws > 65535) {
        ERR("torchrun: MASTER_PORT=%ld: the workers' ports MASTER_PORT+1 .. "
            "MASTER_PORT+%ld go above 65535", port, ws);
        return STRATA_ECONFIG;
    }
    /* Under torchrun's static rendezvous its agent's store holds
     * MASTER_PORT on rank 0's node: strata's rendezvous takes the next. */
    const char *store = env_get(envp, "TORCHELASTIC_USE_AGENT_STORE");
    if (!one_node && !k->rendezvous[0] && store && is_true(store)) {
        if (port == 65535) {
            ERR("torchrun: MASTER_PORT=65535 is torchrun's agent store "
                "(TORCHELASTIC_USE_AGENT_STORE=%s) and strata's rendezvous "
                "takes MASTER_PORT+1: choose a lower --master_port", store);
            return STRATA_ECONFIG;
        }
        fmt_addr(addr, sizeof addr, v[2], port + 1);
    }
    if (!(b->c->pub.rendezvous = strdup(k->rendezvous[0] && !one_node
                                            ? k->rendezvous : addr)))
        return nomem();
    for (long i = 0; i < ws; i++) {
        if (one_node)
            fmt_addr(addr, sizeof addr, v[2], port + 1 + i);
        int rc = add_task(b, T_WORKER, one_node ? addr : NULL);
        if (rc != 0)
            return rc;
    }
    b->self_type = T_WORKER;
    b->self_index = rank;
    return 0;
}

/* ---- the result ------------------------------------------------------------------ */

static int by_type_index(const void *a, const void *b)
{
    const strata_task_t *x = a, *y = b;
    int tx = type_of(x->type), ty = type_of(y->type);
    if (tx != ty)
        return tx < ty ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int finish(build_t *b, const char *cli_task, int cli_type,
                  long cli_index)
{
    strata__cluster_t *c = b->c;
    strata_task_t *t = c->tasks;
    int n = c->pub.ntasks;
    char cut[120], why[200], n1[40], n2[40];
    if (b->count[T_CHIEF] > 1 || b->count[T_EVAL] > 1) {
        ERR("%s: more than one %s task", b->src,
            b->count[T_CHIEF] > 1 ? "chief" : "evaluator");
        return STRATA_ECONFIG;
    }
    if (b->count[T_CHIEF] + b->count[T_WORKER] == 0) {
        describe(b, why, sizeof why);
        ERR("%s: no chief and no worker task: nothing would train (its "
            "tasks: %s)", b->src, why);
        return STRATA_ECONFIG;
    }
    for (int i = 0; i < n; i++)
        for (int j = i + 1; t[i].address && j < n; j++)
            if (t[j].address && strcmp(t[i].address, t[j].address) == 0) {
                ERR("%s: address '%s' is given to both %s and %s", b->src,
                    t[i].address, strata__task_name(&t[i], n1, sizeof n1),
                    strata__task_name(&t[j], n2, sizeof n2));
                return STRATA_ECONFIG;
            }
    if (cli_task) {
        if (self_problem(b, cli_type, cli_index, why, sizeof why) != 0) {
            ERR("--task %s: %s (the cluster comes from %s)",
                clip(cli_task, cut, sizeof cut), why, b->src);
            return STRATA_ECONFIG;
        }
        b->self_type = cli_type;
        b->self_index = cli_index;
    }
    if (b->self_type < 0) { /* each source reports its own missing task */
        ERR("%s: which task this process is is unknown", b->src);
        return STRATA_EINTERNAL;
    }
    qsort(t, (size_t)n, sizeof *t, by_type_index);
    int32_t rank = 0;
    for (int i = 0; i < n; i++) {
        int ty = type_of(t[i].type);
        t[i].rank = ty == T_CHIEF || ty == T_WORKER ? rank++ : -1;
        if (ty == b->self_type && t[i].index == b->self_index)
            c->pub.self = i;
    }
    c->pub.nworkers = rank;
    snprintf(c->source, sizeof c->source, "%s%s", cli_task ? "--task + " : "",
             b->src);
    c->pub.source = c->source;
    return 0;
}

static int load_cfg(const strata__cfg_t *cfg, strata__cluster_cfg_t *k)
{
    strata__cfg_t *empty = NULL;
    int rc = cfg ? 0 : strata__cfg_new(&empty);
    if (rc == 0)
        rc = strata__cfg_apply(cfg ? cfg : empty, "cluster",
                               strata__cluster_options, k, NULL);
    strata__cfg_free(empty); /* defaults point to static text */
    return rc;
}

int strata__cluster_resolve(const strata__cfg_t *cfg, const char *cli_task,
                            char *const *envp, strata__cluster_t *out)
{
    memset(out, 0, sizeof *out);
    strata__cluster_cfg_t k;
    memset(&k, 0, sizeof k);
    int rc = load_cfg(cfg, &k);
    if (rc != 0)
        return rc;
    build_t b = { .c = out, .cli = cli_task != NULL, .self_type = -1 };
    int cli_type = -1;
    long cli_index = 0;
    char cut[120];
    if (cli_task && parse_task(cli_task, &cli_type, &cli_index) != 0) {
        ERR("--task '%s': expected TYPE:INDEX with TYPE " TYPE_LIST
            " (e.g. worker:1)", clip(cli_task, cut, sizeof cut));
        return STRATA_ECONFIG;
    }
    char why[160];
    if (k.rendezvous[0] && check_addr(k.rendezvous, why, sizeof why) != 0) {
        ERR("[cluster] rendezvous = '%s': %s (%s)",
            clip(k.rendezvous, cut, sizeof cut), why,
            origin_of(cfg, "rendezvous"));
        return STRATA_ECONFIG;
    }
    out->pub.struct_size = sizeof out->pub;
    out->pub.tasks = out->tasks;
    out->rendezvous_timeout_s = k.rendezvous_timeout_s;

    /* In order of precedence; the first that defines a cluster wins. Open
     * MPI comes before SLURM: mpirun sets its variables for the very
     * process it starts, while SLURM's are inherited by everything in an
     * allocation (an sbatch script's mpirun included). */
    static const char *const k_src[] = { "[cluster]", "TF_CONFIG", "Open MPI",
                                         "SLURM", "torchrun", "single" };
    int used = 0;
    rc = NOT_DEFINED;
    for (; rc == NOT_DEFINED && used < 6; used += rc == NOT_DEFINED) {
        b.src = k_src[used];
        switch (used) {
        case 0: rc = from_ini(&b, &k, cfg); break;
        case 1: rc = from_tf_config(&b, env_get(envp, "TF_CONFIG")); break;
        case 2: rc = from_mpi(&b, envp, &k); break;
        case 3: rc = from_slurm(&b, envp, &k, cfg); break;
        case 4: rc = from_torchrun(&b, envp, &k); break;
        default:
            rc = add_task(&b, T_WORKER, NULL);
            b.self_type = T_WORKER;
            b.self_index = 0;
        }
    }
    if (rc == 0)
        rc = finish(&b, cli_task, cli_type, cli_index);
    if (rc != 0) {
        strata__cluster_free(out);
        return rc;
    }
    /* Lower sources that are present too are ignored: say so, quietly. */
    static const char *const k_var[] = { NULL, "TF_CONFIG",
                                         "OMPI_COMM_WORLD_SIZE",
                                         "SLURM_PROCID", "RANK" };
    for (int i = used + 1; i < 5; i++)
        if (env_get(envp, k_var[i]))
            strata__log(STRATA_LOG_DEBUG, WHO, "%s is set, ignored: the "
                        "cluster comes from %s", k_var[i], b.src);
    return 0;
}

void strata__cluster_free(strata__cluster_t *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->pub.ntasks && i < STRATA_MAX_TASKS; i++)
        free((char *)c->tasks[i].address);
    free((char *)c->pub.rendezvous);
    memset(c, 0, sizeof *c);
}

int strata__cluster_check_addr(const char *addr, char *why, size_t len)
{
    return check_addr(addr, why, len);
}

const char *strata__task_name(const strata_task_t *t, char *buf, size_t len)
{
    if (len)
        snprintf(buf, len, "%s:%d", t && t->type ? t->type : "?",
                 t ? t->index : -1);
    return buf;
}
