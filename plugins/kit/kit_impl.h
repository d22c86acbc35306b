/* The kit's insides, shared by its files. The host context a
 * plugin is handed is the strata_kit_t itself. */
#ifndef STRATA_KIT_IMPL_H
#define STRATA_KIT_IMPL_H

#include <stdatomic.h>

#include <strata/kit.h>

struct strata_kit {
    strata_host_v2_t    host;    /* the table, cut to the minor posed as */
    strata_kit_config_t cfg;
    strata_kit_hooks_t  hooks;   /* zeroed when cfg.hooks is NULL         */
    strata_kit_device_t dev;     /* zeroed when cfg.device is NULL        */
    atomic_size_t       placed;
    /* ABI 2.13: the parts part_write recorded (host.c), each a copy with
     * its pieces' array and their data (one block per piece) the kit's */
    strata_part_t      *parts;
    int                 nparts, cap_parts;
};

static inline strata_kit_t *kit_of(strata_hctx_t *hc)
{
    return (strata_kit_t *)(void *)hc;
}

void strata__kit_log(strata_kit_t *kit, int level, const char *who,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* transport.c: the t_* entries of the table. */
void strata__kit_transport_entries(strata_host_v2_t *h);

/* t's barrier for the replica threads of one process (a core before 2.5
 * has it as a ctl op only). */
static inline int strata__kit_barrier(const strata_host_v2_t *host,
                                      strata_hctx_t *hc,
                                      strata_transport_t *t, int slot)
{
    return STRATA_HAS_FIELD(strata_host_v2_t, host, t_barrier)
               ? host->t_barrier(hc, t, slot)
               : host->t_ctl(hc, t, STRATA_CTL_BARRIER, &slot);
}

/* sparse.c: all-reduce the ranges of op->buf outside the tables that go
 * as rows (rows[j] != 0), skipping empty ones (every member alike). */
int strata__kit_sparse_gaps(const strata_host_v2_t *host, strata_hctx_t *hc,
                            strata_transport_t *t, const strata_op_t *op,
                            const unsigned char *rows);

/* sparse.c: count each table's choice (rows[j]: as rows) in s and copy
 * the rows of the tables that go dense into their ranges of op->buf. */
int strata__kit_sparse_tally(const strata_host_v2_t *host, strata_hctx_t *hc,
                             strata_kit_sparse_t *s, const strata_op_t *op,
                             const unsigned char *rows);
/* sparse_local.c: rows[j] for the replica threads of one process, from
 * every replica's op in pub: whether table j goes as rows (pol's
 * threshold; none with one replica or sparse_as_dense). */
void strata__kit_sparse_choose_local(const strata_kit_sparse_policy_t *pol,
                                     int n, const strata_op_t *const *pub,
                                     const strata_op_t *op,
                                     unsigned char *rows);

/* sparse.c: s->mark holds at least `rows` bytes, the new ones 0 (MEAN's
 * marks of the rows scaled, a byte per table row). */
int strata__kit_sparse_marks(strata_kit_sparse_t *s, size_t rows);

#endif
