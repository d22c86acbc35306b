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
 *      port_base and slurm_ps of the section apply to SLURM (4.).
 *   3. TF_CONFIG, TensorFlow's JSON:
 *        {"cluster": {"chief": ["h:p"], "worker": ["h:p", ...], "ps": [...],
 *                     "evaluator": ["h:p"]},
 *         "task": {"type": "worker", "index": 1}}
 *      Unset, empty or "{}": not defined. "environment" and "rpc_layer" are
 *      accepted and ignored, as is task.trial; any other key is an error.
 *   4. SLURM (when SLURM_PROCID is set): SLURM_NTASKS tasks on the hosts of
 *      SLURM_NODELIST, mapped to hosts in block order by
 *      SLURM_TASKS_PER_NODE ("2(x3),1") or SLURM_NTASKS_PER_NODE; a task's
 *      port is [cluster] port_base + its local index on its host. Tasks
 *      0 .. slurm_ps-1 are ps 0.., the rest workers 0..; worker 0 acts as
 *      the chief (rank 0), there is no separate chief task.
 *   5. torchrun (when RANK or WORLD_SIZE is set): WORLD_SIZE workers, this
 *      one worker RANK; rendezvous = MASTER_ADDR:MASTER_PORT. Worker
 *      addresses are unknown (NULL: announced through the rendezvous)
 *      unless LOCAL_WORLD_SIZE == WORLD_SIZE (one node): then worker i is
 *      MASTER_ADDR:(MASTER_PORT + 1 + i).
 *   6. None: one local task, worker 0, rank 0, address NULL ("single").
 *
 * The result, whatever the source: tasks in the order chief, workers, ps,
 * evaluator (each by index); rank = 0 for the chief, then the workers in
 * index order; -1 for ps and evaluator. At most one chief and one
 * evaluator, at least one chief or worker, no address twice. source names
 * what was used: "TF_CONFIG", "--task + SLURM", ...
 *
 * Every error is STRATA_ECONFIG with one log line that names the source
 * ("TF_CONFIG: ...", "SLURM_NODELIST '...': ...", "[cluster] task = ...",
 * "torchrun: ...", "--task ..."). */
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
} strata__cluster_t;

/* The [cluster] keys (strata__cluster_options fills this struct). */
typedef struct strata__cluster_cfg {
    const char *chief, *worker, *ps, *evaluator, *task;
    int64_t     port_base;   /* SLURM: port of a host's first task       */
    int64_t     slurm_ps;    /* SLURM: the first slurm_ps tasks are ps   */
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
