/* strata core -- cluster resolution: which tasks make up the job and which
 * one this process is. Internal.
 *
 * Where the cluster comes from. The first source that defines a cluster
 * wins; the others are ignored (logged at debug level):
 *
 *   1. --task TYPE:INDEX (`cli_task`) does not define a cluster: it picks
 *      which task of the resolved cluster this process is, whatever the
 *      source, and overrides that source's own idea of it.
 *   2. The INI [cluster] section (also STRATA_CLUSTER_* and --set
 *      cluster.*), when one of chief, worker, ps or evaluator is not empty:
 *        chief     = host:port            one at most
 *        worker    = host:port, ...       in index order
 *        ps        = host:port, ...
 *        evaluator = host:port            one at most
 *        task      = TYPE:INDEX           this process (or --task)
 *      port_base and slurm_ps of the section apply to SLURM (5.),
 *      rendezvous to Open MPI (4.) and torchrun (6.).
 *   3. TF_CONFIG, TensorFlow's JSON:
 *        {"cluster": {"chief": ["h:p"], "worker": ["h:p", ...], "ps": [...],
 *                     "evaluator": ["h:p"]},
 *         "task": {"type": "worker", "index": 1}}
 *      Unset, empty or "{}": not defined. "environment" and "rpc_layer" are
 *      accepted and ignored, as is task.trial; any other key is an error.
 *   4. Open MPI's mpirun (when OMPI_COMM_WORLD_SIZE or _RANK is set):
 *      OMPI_COMM_WORLD_SIZE workers, this one worker OMPI_COMM_WORLD_RANK
 *      (else PMIX_RANK; both set: they must agree). Addresses come from the
 *      rendezvous, at [cluster] rendezvous = HOST:PORT when set; else, when
 *      OMPI_COMM_WORLD_LOCAL_SIZE == OMPI_COMM_WORLD_SIZE (one node), at an
 *      abstract Unix socket named after the user and the job
 *      (PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid): "unix:@strata-UID-HASH";
 *      ranks on several nodes without [cluster] rendezvous: an error. Open
 *      MPI comes before SLURM because an sbatch script's mpirun passes the
 *      script's SLURM variables on to every rank.
 *   5. SLURM (when SLURM_PROCID is set): SLURM_NTASKS tasks on the hosts of
 *      SLURM_NODELIST, mapped to hosts in block order by
 *      SLURM_TASKS_PER_NODE ("2(x3),1") or SLURM_NTASKS_PER_NODE; a task's
 *      port is [cluster] port_base + its local index on its host. Tasks
 *      0 .. slurm_ps-1 are ps 0.., the rest workers 0..; worker 0 acts as
 *      the chief (rank 0), there is no separate chief task.
 *   6. torchrun (when RANK or WORLD_SIZE is set): WORLD_SIZE workers, this
 *      one worker RANK. When LOCAL_WORLD_SIZE == WORLD_SIZE (one node)
 *      worker i is MASTER_ADDR:(MASTER_PORT + 1 + i); otherwise addresses
 *      come from the rendezvous at [cluster] rendezvous when set, else at
 *      MASTER_ADDR:MASTER_PORT, or MASTER_ADDR:(MASTER_PORT + 1) when
 *      TORCHELASTIC_USE_AGENT_STORE=True (torchrun's static rendezvous: its
 *      agent's store holds MASTER_PORT on rank 0's node).
 *   7. None: one local task, worker 0, rank 0, address NULL ("single").
 *
 * Tasks without an address (4., 6.) learn them through the rendezvous
 * (rendezvous.h) before any transport opens: rank 0 serves it, every task
 * registers its own host:port there. pub.rendezvous names it (torchrun
 * sets it on one node too, where it is not used).
 *
 * The result, whatever the source: tasks in the order chief, workers, ps,
 * evaluator (each by index); rank = 0 for the chief, then the workers in
 * index order; -1 for ps and evaluator. At most one chief and one
 * evaluator, at least one chief or worker, no address twice. source names
 * what was used: "TF_CONFIG", "--task + SLURM", ...
 *
 * Every error is STRATA_ECONFIG with one log line that names the source
 * ("TF_CONFIG: ...", "SLURM_NODELIST '...': ...", "[cluster] task = ...",
 * "Open MPI: ...", "torchrun: ...", "--task ..."). */
#ifndef STRATA_CORE_CLUSTER_H
#define STRATA_CORE_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

#ifndef STRATA_MAX_TASKS
#define STRATA_MAX_TASKS 1024 /* tasks in one job */
#endif

/* Do not copy it by value: pub.tasks points into the struct itself. */
typedef struct strata__cluster {
    strata_cluster_t pub;     /* what plugins see; pub.tasks == tasks      */
    strata_task_t    tasks[STRATA_MAX_TASKS];
    /* tasks[i].address and pub.rendezvous are malloc'd (freed by
     * strata__cluster_free); tasks[i].type points to static text. */
    char             source[48];
    double           rendezvous_timeout_s; /* [cluster] key of that name */
} strata__cluster_t;

/* The [cluster] keys (strata__cluster_options fills this struct). */
typedef struct strata__cluster_cfg {
    const char *chief, *worker, *ps, *evaluator, *task;
    int64_t     port_base;   /* SLURM: port of a host's first task       */
    int64_t     slurm_ps;    /* SLURM: the first slurm_ps tasks are ps   */
    const char *rendezvous;  /* torchrun, Open MPI: where tasks meet     */
    double      rendezvous_timeout_s;
} strata__cluster_cfg_t;
extern const strata_option_t strata__cluster_options[] STRATA_INTERNAL;

/* Resolve the cluster (see above). `cfg` may be NULL (no [cluster] keys),
 * `cli_task` NULL (no --task), `envp` NULL (empty environment); envp is read
 * instead of getenv so that tests pass their own. On failure `out` is left
 * empty (strata__cluster_free on it is a no-op) and the detail is logged. */
int  strata__cluster_resolve(const strata__cfg_t *cfg, const char *cli_task,
                             char *const *envp, strata__cluster_t *out);
/* Frees the strings and zeroes *c; accepts NULL and a zeroed struct. */
void strata__cluster_free(strata__cluster_t *c);

/* The prefix of a rendezvous at an abstract Unix socket (Open MPI on one
 * node): "unix:@NAME". */
#define STRATA_RDZV_UNIX "unix:@"

/* 0 when addr is "host:port" or "[v6]:port" with a port in [1, 65535];
 * else -1 and why says what is wrong. */
int strata__cluster_check_addr(const char *addr, char *why, size_t len);

/* "worker:1", for messages; returns buf. */
const char *strata__task_name(const strata_task_t *t, char *buf, size_t len);

/* Expand a SLURM hostlist ("node[01-03,07],gpu-a[1-2],login1", also several
 * brackets in one name: "r[1-2]n[1-2]" -> r1n1 r1n2 r2n1 r2n2) into at most
 * `max` names, strdup'd into out[] (the caller frees them). Zero padding of
 * a range's first number is kept. Returns the count, or STRATA_ECONFIG with
 * one log line "SLURM_NODELIST '<spec>': <problem>" (out[] then holds
 * nothing to free), STRATA_ENOMEM. Exposed for tests. */
int  strata__slurm_hostlist(const char *spec, char **out, int max);

#endif /* STRATA_CORE_CLUSTER_H */
