/* strata core -- the communicator of strata_comm_open(): the job's world
 * of training processes over its transport plugins, for collectives that
 * any framework calls on its own buffers. Internal. */
#ifndef STRATA_CORE_COMM_H
#define STRATA_CORE_COMM_H

#include <pthread.h>

#include "runtime.h"
#include "cluster/cluster.h"
#include "member/elastic.h"

struct strata_comm {
    strata_ctx_t       *ctx;
    strata_hctx_t      *hc;       /* the opener of its transport         */
    strata__cluster_t  *cluster;  /* the job (addresses, names)          */
    strata__keys_t     *keys;     /* the job's, NULL: plaintext; the     */
                                  /* transport's group points into them  */
    strata_transport_t *t;        /* NULL in a job of one process        */
    uint32_t            caps;     /* t's (host t_caps)                   */
    int                 rank, size;
    const char        **addrs, **names; /* size each, rank order        */
    char               *name_buf;
    size_t             *bounds;   /* size + 1, for the shard collectives */
    pthread_mutex_t     lock;     /* one collective at a time            */
    /* strata launch --elastic: the membership client; the generation's
     * members are the world (their names and addresses the client's) */
    strata__elastic_t  *el;
    int64_t             resume_step; /* of the generation joined last    */
    char                tag[32];  /* of the world group, per generation  */
};

/* elastic.c: join the membership service's next generation as the world
 * (c->el set), or nothing (no service); the group is not open. */
int strata__comm_join(strata_comm_t *c, int64_t committed);
/* comm.c: open the WORLD group of c's members (size > 1). */
int strata__comm_open_world(strata_comm_t *c);

#endif /* STRATA_CORE_COMM_H */
