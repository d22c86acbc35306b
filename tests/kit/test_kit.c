/* The plugin kit (include/strata/kit.h) posing as every released minor of
 * ABI 2, with real plugins:
 *  - the table's size and minor are that minor's (tests/abi's figures),
 *    the entries of later minors absent (STRATA_HAS_FIELD false, NULL);
 *  - local.so (dlopen, as the core loads it) opened through t_open, two
 *    replica threads: all-reduce SUM exact, broadcast, barrier (through
 *    t_barrier where the minor has it, else the 2.4 ctl op);
 *  - each bad collective refused with STRATA_EINVAL and the very line the
 *    core logs for it: the same op sent through the core's host table
 *    (strata__host_v2, a real context) is compared code and text;
 *  - a tiny strategy built on the kit's replica helpers (init, create_var,
 *    reduce through host->t_reduce MEAN, update by SGD, state GET/SET):
 *    replicas bitwise equal and equal to p - lr * mean(g); clipping
 *    applied where the minor has grad_clip (2.2 on), skipped before;
 *  - the services: STRATA_ENOTSUP without hooks, the hook's answer with;
 *  - strata_kit_cfg: local.so's defaults, an override, a bad value and an
 *    unknown key refused; an unreleased minor refused; unbounded options
 *    refuse what is not finite and integers what int64_t cannot hold,
 *    before any conversion (UBSan: 1e300 reached one). */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>

#include <strata/kit.h>

#include "check.h"
#include "runtime.h"

static const strata_plugin_v2_t *g_local;

/* ---- the log lines of the kit and of the core ------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_kit_line[512], g_core_line[512];
static int g_kit_errors;

static void kit_log(void *user, int level, const char *who, const char *line)
{
    (void)user;
    pthread_mutex_lock(&g_lock);
    if (level == STRATA_LOG_ERROR) {
        snprintf(g_kit_line, sizeof g_kit_line, "%s: error: %s", who, line);
        g_kit_errors++;
    }
    pthread_mutex_unlock(&g_lock);
}

static void core_log(void *user, int level, const char *line)
{
    (void)user;
    pthread_mutex_lock(&g_lock);
    if (level == STRATA_LOG_ERROR)
        snprintf(g_core_line, sizeof g_core_line, "%s", line);
    pthread_mutex_unlock(&g_lock);
}

static strata_kit_t *make_kit(int minor, double clip)
{
    strata_kit_config_t cfg = STRATA_KIT_CONFIG_INIT;
    static const char *const table[] = { "strategy.lr=0.5",
                                         "transport.local=local", NULL };
    cfg.abi_minor = minor;
    cfg.log = kit_log;
    cfg.cfg = table;
    cfg.clip_norm = clip;
    cfg.transport = g_local;
    strata_kit_t *kit = NULL;
    int rc = strata_kit_host(&cfg, &kit);
    CHECKF(rc == STRATA_OK, "kit posing as 2.%d: %d", minor, rc);
    return kit;
}

/* ---- 2.13: part_write, checked and kept ------------------------------- */

static void check_part_write(const strata_host_v2_t *h, strata_hctx_t *hc)
{
    /* make_kit's kit names no variables: an empty part only */
    float d0[4] = { 1, 2, 3, 4 }, s0 = 9;
    strata_part_piece_t pc[2] = {
        { .var = 0, .slot = -1, .row0 = 1, .rows = 2, .data = d0 },
        { .var = 1, .slot = -1, .row0 = 0, .rows = 1, .data = &s0 },
    };
    strata_part_t part = { .struct_size = sizeof part, .index = 1,
                           .count = 2, .npieces = 2, .step = 7,
                           .tag = 0x0123456789abcdefULL, .pieces = pc,
                           .bytes = -1 };
    CHECK(h->part_write(hc, &part) == STRATA_EINVAL && part.bytes == -1);
    part.npieces = 0;
    CHECK(h->part_write(hc, &part) == STRATA_OK && part.bytes == 0);
    part.npieces = 2;

    /* a kit that knows the model: a [3 x 2] table and a scalar */
    strata_var_t vars[2] = {
        { .struct_size = sizeof vars[0], .index = 0, .ndim = 2,
          .shape = { 3, 2 }, .count = 6 },
        { .struct_size = sizeof vars[1], .index = 1, .ndim = 0, .count = 1 },
    };
    strata_kit_config_t cfg = STRATA_KIT_CONFIG_INIT;
    cfg.log = kit_log;
    cfg.vars = vars;
    cfg.nvars = 2;
    strata_kit_t *kit = NULL;
    CHECK(strata_kit_host(&cfg, &kit) == STRATA_OK);
    if (!kit)
        return;
    h = strata_kit_table(kit);
    hc = strata_kit_hctx(kit);
    const strata_part_t *got = NULL;
    CHECK(h->part_write(hc, &part) == STRATA_OK &&
          part.bytes == 5 * (int64_t)sizeof(float));
    d0[0] = -1;   /* a copy was kept, not the caller's pointer */
    CHECK(strata_kit_parts_written(kit, 0, &got) == 1 && got &&
          got->index == 1 && got->count == 2 && got->step == 7 &&
          got->tag == 0x0123456789abcdefULL && got->npieces == 2 &&
          got->bytes == part.bytes && got->pieces != pc);
    if (got && got->npieces == 2) {
        CHECK(got->pieces[0].data != d0 && got->pieces[0].data[0] == 1 &&
              got->pieces[0].data[3] == 4 && got->pieces[0].row0 == 1 &&
              got->pieces[0].rows == 2);
        CHECK(got->pieces[1].var == 1 && got->pieces[1].data[0] == 9);
    }
    CHECK(strata_kit_parts_written(kit, 1, &got) == 1 && got == NULL);
    /* refused, nothing recorded: each breaks one rule */
    struct { const char *what; strata_part_t p; strata_part_piece_t a, b; }
        bad[] = {
        { "struct_size", part, pc[0], pc[1] },
        { "index == count", part, pc[0], pc[1] },
        { "count 0", part, pc[0], pc[1] },
        { "npieces < 0", part, pc[0], pc[1] },
        { "pieces NULL", part, pc[0], pc[1] },
        { "data NULL", part, pc[0], pc[1] },
        { "rows 0", part, pc[0], pc[1] },
        { "row0 < 0", part, pc[0], pc[1] },
        { "slot -2", part, pc[0], pc[1] },
        { "slot 0 (sgd: none)", part, pc[0], pc[1] },
        { "an unknown variable", part, pc[0], pc[1] },
        { "rows past the table", part, pc[0], pc[1] },
        { "a scalar's row 1", part, pc[0], pc[1] },
        { "overlapping pieces", part, pc[0], pc[1] },
    };
    bad[0].p.struct_size = sizeof part - 8;
    bad[1].p.index = 2;
    bad[2].p.count = 0;
    bad[3].p.npieces = -1;
    bad[5].a.data = NULL;
    bad[6].a.rows = 0;
    bad[7].a.row0 = -1;
    bad[8].a.slot = -2;
    bad[9].a.slot = 0;
    bad[10].b.var = 2;
    bad[11].a.row0 = 2;
    bad[12].b.row0 = 1;
    bad[13].b = bad[13].a;
    bad[13].b.row0 = 2;
    bad[13].b.rows = 1;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        strata_part_piece_t two[2] = { bad[i].a, bad[i].b };
        bad[i].p.pieces = i == 4 ? NULL : two;
        bad[i].p.bytes = -1;
        int rc = h->part_write(hc, &bad[i].p);
        CHECKF(rc == STRATA_EINVAL && bad[i].p.bytes == -1 &&
               strata_kit_parts_written(kit, 0, NULL) == 1,
               "%s: %d, %d parts", bad[i].what, rc,
               strata_kit_parts_written(kit, 0, NULL));
    }
    /* the same file again replaces it; another index is another part */
    part.npieces = 1;
    CHECK(h->part_write(hc, &part) == STRATA_OK &&
          part.bytes == 4 * (int64_t)sizeof(float) &&
          strata_kit_parts_written(kit, 0, &got) == 1 && got &&
          got->npieces == 1 && got->pieces[0].data[0] == -1);
    part.index = 0;
    pc[0].row0 = 0;
    pc[0].rows = 1;
    CHECK(h->part_write(hc, &part) == STRATA_OK &&
          part.bytes == 2 * (int64_t)sizeof(float) &&
          strata_kit_parts_written(kit, 1, &got) == 2 && got &&
          got->index == 0 && got->pieces[0].rows == 1);
    strata_kit_free(kit);
}

/* ---- the table of each minor ------------------------------------------- */

static void check_table(int minor)
{
    /* sizeof(strata_host_v2_t) of each minor: tests/abi/abi_history.txt */
    static const uint32_t sizes[] = { 200, 200, 224, 240, 240, 272, 272, 272,
                                      288, 288, 296, 304, 320, 328 };
    strata_kit_t *kit = make_kit(minor, 0.0);
    if (!kit)
        return;
    const strata_host_v2_t *h = strata_kit_table(kit);
    CHECKF(h->struct_size == sizes[minor] &&
           h->struct_size == strata_kit_host_size(minor) &&
           h->abi_major == 2 && h->abi_minor == minor,
           "2.%d: struct_size %u abi %u.%u", minor, h->struct_size,
           h->abi_major, h->abi_minor);
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, grad_clip) == (minor >= 2));
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, training_done) ==
          (minor >= 2));
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, membership) == (minor >= 3));
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, cfg_origin) == (minor >= 3));
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, t_barrier) == (minor >= 5));
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, t_caps) == (minor >= 5));
    /* absent means absent: no stale pointer past struct_size */
    CHECK(minor >= 2 || (h->grad_sumsq == NULL && h->training_done == NULL));
    CHECK(minor >= 3 || h->membership == NULL);
    CHECK(minor >= 5 || (h->t_barrier == NULL && h->t_caps == NULL));
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, opt_step_rows) ==
          (minor >= 10));
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, batch_rows) ==
          (minor >= 11));
    CHECK(minor >= 11 || h->batch_rows == NULL);
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, discard) == (minor >= 12));
    CHECK(minor >= 12 || (h->init_values == NULL && h->discard == NULL));
    CHECK(STRATA_HAS_FIELD(strata_host_v2_t, h, part_write) ==
          (minor >= 13));
    CHECK(minor >= 13 || h->part_write == NULL);
    /* the entries every minor has, real */
    strata_hctx_t *hc = strata_kit_hctx(kit);
    if (minor >= 10) { /* 2.10: sgd on the rows named, nothing else */
        strata_opt_t *o;
        float w[8] = { 1, 1, 1, 1, 1, 1, 1, 1 }, g[4] = { 1, 2, 3, 4 };
        int64_t rows[2] = { 1, 3 }, bad[2] = { 3, 1 };
        CHECK(h->opt_create(hc, STRATA_DEVICE(STRATA_DEV_CPU, 0), 8, &o) ==
              STRATA_OK);
        CHECK(h->opt_step_rows(hc, o, w, rows, 2, 2, g, 0.5f) == STRATA_OK);
        CHECK(w[0] == 1 && w[1] == 1 && w[2] == 0.5f && w[3] == 0 &&
              w[4] == 1 && w[5] == 1 && w[6] == -0.5f && w[7] == -1);
        CHECK(h->opt_step_rows(hc, o, w, bad, 2, 2, g, 0.5f) ==
              STRATA_EINVAL && w[2] == 0.5f);
        CHECK(h->opt_step_rows(hc, o, w, rows, 2, 3, g, 0.5f) ==
              STRATA_EINVAL);
        h->opt_destroy(hc, o);
    }
    if (minor >= 12) { /* 2.12: a range of var->init; zeros on the CPU */
        const float init[4] = { 1, 2, 3, 4 };
        strata_var_t v = { .struct_size = sizeof v, .count = 4,
                           .init = init };
        float got[3] = { 0 };
        CHECK(h->init_values(hc, &v, 1, 3, got) == STRATA_OK &&
              got[0] == 2 && got[2] == 4);
        CHECK(h->init_values(hc, &v, 2, 3, got) == STRATA_EINVAL);
        CHECK(h->discard(hc, STRATA_DEVICE(STRATA_DEV_CPU, 0), got,
                         2 * sizeof *got) == STRATA_OK &&
              got[0] == 0 && got[1] == 0 && got[2] == 4);
        CHECK(h->discard(hc, STRATA_DEVICE(STRATA_DEV_GPU, 0), got, 4) ==
              STRATA_EINVAL);
    }
    if (minor >= 13)
        check_part_write(h, hc);
    CHECK(strcmp(h->cfg_get(hc, "strategy", "lr"), "0.5") == 0);
    CHECK(h->cfg_get(hc, "strategy", "l") == NULL);
    CHECK(h->cfg_get(hc, "strategy", "momentum") == NULL);
    if (minor >= 3) {
        CHECK(strcmp(h->cfg_origin(hc, "transport", "local"),
                     "kit cfg[1]") == 0);
        CHECK(h->cfg_origin(hc, "transport", "world") == NULL);
    }
    const int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    size_t before = strata_kit_placed(kit);
    float *a = h->alloc(hc, cpu, 100 * sizeof(float));
    float *b = h->alloc(hc, cpu, 100 * sizeof(float));
    CHECK(a && b && ((uintptr_t)a & 63) == 0 && ((uintptr_t)b & 63) == 0);
    CHECK(strata_kit_placed(kit) - before == 200 * sizeof(float));
    CHECK(h->alloc(hc, STRATA_DEVICE(STRATA_DEV_GPU, 0), 16) == NULL);
    if (a && b) {
        int zero = 1;
        for (int i = 0; i < 100; i++) {
            zero &= a[i] == 0.0f;
            b[i] = (float)i;
        }
        CHECK(zero);
        CHECK(h->copy(hc, cpu, a, cpu, b, 100 * sizeof(float)) == 0);
        CHECK(h->axpy(hc, cpu, 100, 2.0f, b, a) == 0);    /* a = 3i */
        CHECK(h->scale(hc, cpu, 100, 0.5f, a) == 0);      /* a = 1.5i */
        const float *srcs[2] = { a, b };
        CHECK(h->sum(hc, cpu, 100, a, srcs, 2) == 0);     /* a = 2.5i */
        CHECK(h->sum(hc, cpu, 100, a, srcs, 0) == STRATA_EINVAL);
        CHECK(a[0] == 0.0f && a[99] == 247.5f && a[10] == 25.0f);
    }
    h->free(hc, cpu, a);
    h->free(hc, cpu, b);
    h->free(hc, cpu, NULL);
    /* the services: not supported without hooks */
    double loss, acc;
    strata_report_t rep = { .struct_size = sizeof rep };
    CHECK(h->evaluate(hc, &loss, &acc) == STRATA_ENOTSUP);
    CHECK(h->report(hc, &rep) == STRATA_ENOTSUP);
    CHECK(h->boundary_due(hc, 0, 0, 0) == STRATA_ENOTSUP);
    CHECK(h->boundary(hc, 0, 0, 0) == STRATA_ENOTSUP);
    if (minor >= 3) {
        strata_membership_t ms = { .struct_size = sizeof ms };
        CHECK(h->membership(hc, -1, 10, &ms) == STRATA_ENOTSUP);
    }
    strata_kit_free(kit);
}

/* ---- local.so through t_open: collectives and refusals ----------------- */

typedef struct member {
    const strata_host_v2_t *h;
    strata_hctx_t *hc;
    strata_transport_t *t;
    int slot, rc;
    float buf[37];
} member_t;

static void *member_main(void *arg)
{
    member_t *m = arg;
    for (int i = 0; i < 37; i++)
        m->buf[i] = (float)(i * (m->slot + 1));
    strata_op_t op = { .struct_size = sizeof op, .slot = m->slot,
                       .buf = m->buf, .count = 37,
                       .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                       .reduce_op = STRATA_REDUCE_SUM };
    m->rc = m->h->t_reduce(m->hc, m->t, &op);
    for (int i = 0; m->rc == 0 && i < 37; i++)
        if (m->buf[i] != (float)(3 * i))   /* i*1 + i*2 */
            m->rc = -100;
    int slot = m->slot;
    if (m->rc == 0)
        m->rc = STRATA_HAS_FIELD(strata_host_v2_t, m->h, t_barrier)
                    ? m->h->t_barrier(m->hc, m->t, slot)
                    : m->h->t_ctl(m->hc, m->t, STRATA_CTL_BARRIER, &slot);
    return NULL;
}

/* One bad op through both hosts: the same code, the same line. */
typedef int (*bad_fn)(const strata_host_v2_t *h, strata_hctx_t *hc,
                      strata_transport_t *t);

static int bad_reduce_op(const strata_host_v2_t *h, strata_hctx_t *hc,
                         strata_transport_t *t)
{
    float x[4] = { 0 };
    strata_op_t op = { .struct_size = sizeof op, .buf = x, .count = 4,
                       .reduce_op = 7 };
    return h->t_reduce(hc, t, &op);
}
static int bad_slot(const strata_host_v2_t *h, strata_hctx_t *hc,
                    strata_transport_t *t)
{
    float x[4] = { 0 };
    strata_op_t op = { .struct_size = sizeof op, .buf = x, .count = 4,
                       .slot = 2 };
    return h->t_reduce(hc, t, &op);
}
static int bad_buf(const strata_host_v2_t *h, strata_hctx_t *hc,
                   strata_transport_t *t)
{
    strata_op_t op = { .struct_size = sizeof op, .count = 4 };
    return h->t_reduce(hc, t, &op);
}
static int bad_op(const strata_host_v2_t *h, strata_hctx_t *hc,
                  strata_transport_t *t)
{
    return h->t_reduce(hc, t, NULL);
}
static int bad_root(const strata_host_v2_t *h, strata_hctx_t *hc,
                    strata_transport_t *t)
{
    float x[4] = { 0 };
    strata_op_t op = { .struct_size = sizeof op, .buf = x, .count = 4,
                       .root = 2 };
    return h->t_update(hc, t, &op);
}
static int bad_barrier(const strata_host_v2_t *h, strata_hctx_t *hc,
                       strata_transport_t *t)
{
    int slot = 5;
    return h->t_ctl(hc, t, STRATA_CTL_BARRIER, &slot);
}
static int bad_bounds(const strata_host_v2_t *h, strata_hctx_t *hc,
                      strata_transport_t *t)
{
    float x[4] = { 0 };
    size_t bounds[3] = { 0, 3, 2 };
    strata_op_t op = { .struct_size = sizeof op, .buf = x, .count = 4 };
    strata_shards_t sh = { .struct_size = sizeof sh, .op = &op,
                           .bounds = bounds };
    return h->t_ctl(hc, t, STRATA_CTL_REDUCE_SCATTER, &sh);
}

static void transport_checks(int minor, strata_transport_t *core_t,
                             strata_ctx_t *core)
{
    strata_kit_t *kit = make_kit(minor, 0.0);
    if (!kit)
        return;
    const strata_host_v2_t *h = strata_kit_table(kit);
    strata_hctx_t *hc = strata_kit_hctx(kit);
    int32_t devs[2] = { STRATA_DEVICE(STRATA_DEV_CPU, 0),
                        STRATA_DEVICE(STRATA_DEV_CPU, 0) };
    strata_group_t g = { .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL,
                         .size = 2, .nlocal = 2, .timeout_ms = 10000,
                         .devices = devs, .tag = "kit" };
    strata_transport_t *t = NULL;
    int rc = h->t_open(hc, &g, &t);
    CHECKF(rc == STRATA_OK && t, "2.%d: t_open local: %d", minor, rc);
    if (!t) {
        strata_kit_free(kit);
        return;
    }
    CHECK(strcmp(h->t_name(hc, t), "local") == 0);
    if (minor >= 5)
        CHECK(h->t_caps(hc, t) == STRATA_CAP_BARRIER);
    member_t m[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        m[i] = (member_t){ .h = h, .hc = hc, .t = t, .slot = i };
        pthread_create(&th[i], NULL, member_main, &m[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECKF(m[i].rc == 0, "2.%d: member %d: %d", minor, i, m[i].rc);
    }
    /* the refusals, against the core's */
    static const struct { const char *what; bad_fn fn; } bads[] = {
        { "reduce_op", bad_reduce_op }, { "slot", bad_slot },
        { "buf", bad_buf }, { "op", bad_op }, { "root", bad_root },
        { "barrier slot", bad_barrier }, { "bounds", bad_bounds },
    };
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        g_kit_line[0] = g_core_line[0] = '\0';
        int kit_rc = bads[i].fn(h, hc, t);
        int core_rc = bads[i].fn(&strata__host_v2, &core->hc, core_t);
        /* the core's line: "strata: WHO: error: ..." */
        const char *tail = strstr(g_core_line, g_kit_line);
        CHECKF(kit_rc == STRATA_EINVAL && core_rc == STRATA_EINVAL &&
               g_kit_line[0] && tail && strlen(tail) == strlen(g_kit_line),
               "2.%d %s: kit %d '%s', core %d '%s'", minor, bads[i].what,
               kit_rc, g_kit_line, core_rc, g_core_line);
    }
    /* the group still works after the refusals */
    for (int i = 0; i < 2; i++) {
        m[i] = (member_t){ .h = h, .hc = hc, .t = t, .slot = i };
        pthread_create(&th[i], NULL, member_main, &m[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECK(m[i].rc == 0);
    }
    h->t_close(hc, t);
    strata_kit_free(kit);
}

/* ---- a tiny strategy on the kit's helpers -------------------------------- */

typedef struct tiny {
    const strata_host_v2_t *h;
    strata_hctx_t          *hc;
    strata_kit_replicas_t   rs;
    strata_transport_t     *t;
} tiny_t;

static int tiny_init(const strata_host_v2_t *h, strata_hctx_t *hc,
                     const strata_env_t *env, void **pctx)
{
    tiny_t *s = calloc(1, sizeof *s);
    *pctx = NULL;
    if (!s)
        return STRATA_ENOMEM;
    s->h = h;
    s->hc = hc;
    int rc = strata_kit_replicas_init(&s->rs, h, hc, env);
    strata_group_t g = { .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL,
                         .size = env->nreplicas, .nlocal = env->nreplicas,
                         .devices = env->devices, .tag = "tiny" };
    if (rc == STRATA_OK)
        rc = h->t_open(hc, &g, &s->t);
    if (rc != STRATA_OK) {
        strata_kit_replicas_fini(&s->rs);
        free(s);
        return rc;
    }
    *pctx = s;
    return STRATA_OK;
}

static void tiny_fini(void *pctx)
{
    tiny_t *s = pctx;
    s->h->t_close(s->hc, s->t);
    strata_kit_replicas_fini(&s->rs);
    free(s);
}

static int tiny_create_var(void *pctx, strata_var_t *var)
{
    return strata_kit_replicas_create_var(&((tiny_t *)pctx)->rs, var);
}

static int tiny_reduce(void *pctx, strata_op_t *op)
{
    tiny_t *s = pctx;
    strata_op_t o = *op;
    o.reduce_op = STRATA_REDUCE_MEAN;
    return s->h->t_reduce(s->hc, s->t, &o);
}

static int tiny_update(void *pctx, strata_op_t *op)
{
    return strata_kit_replicas_update(&((tiny_t *)pctx)->rs, op);
}

static const strata_plugin_v2_t k_tiny = {
    STRATA_PLUGIN_HEADER(STRATA_KIND_STRATEGY, "tiny", "1.0.0",
                         "a strategy on the kit's replica helpers"),
    .init = tiny_init, .fini = tiny_fini, .create_var = tiny_create_var,
    .reduce = tiny_reduce, .update = tiny_update,
};

#define NV 2
#define COUNT 40  /* var 0: 24 elements, var 1: 16 */

typedef struct replica {
    void *pctx;
    int slot, rc;
    float grad[COUNT];
} replica_t;

static float grad_of(int slot, int i)
{
    return (float)((i % 7) - 3) * 0.25f + (float)slot * 0.5f;
}

static void *replica_main(void *arg)
{
    replica_t *r = arg;
    for (int i = 0; i < COUNT; i++)
        r->grad[i] = grad_of(r->slot, i);
    strata_op_t op = { .struct_size = sizeof op, .slot = r->slot,
                       .buf = r->grad, .count = COUNT,
                       .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                       .lr = 0.125f, .flags = STRATA_OP_GRADIENT };
    r->rc = k_tiny.reduce(r->pctx, &op);
    if (r->rc == STRATA_OK)
        r->rc = k_tiny.update(r->pctx, &op);
    return NULL;
}

static void strategy_checks(int minor, double clip)
{
    strata_kit_t *kit = make_kit(minor, clip);
    if (!kit)
        return;
    const strata_host_v2_t *h = strata_kit_table(kit);
    int32_t devs[2] = { STRATA_DEVICE(STRATA_DEV_CPU, 0),
                        STRATA_DEVICE(STRATA_DEV_CPU, 0) };
    strata_env_t env = { .struct_size = sizeof env,
                         .kind = STRATA_KIND_STRATEGY, .section = "strategy",
                         .nreplicas = 2, .nvars = NV, .devices = devs,
                         .model_count = COUNT };
    void *pctx = NULL;
    int rc = k_tiny.init(h, strata_kit_hctx(kit), &env, &pctx);
    CHECKF(rc == STRATA_OK, "2.%d: tiny init: %d", minor, rc);
    if (rc != STRATA_OK) {
        strata_kit_free(kit);
        return;
    }
    /* two slabs of the flat layout; sgd keeps no slots */
    CHECK(strata_kit_placed(kit) == 2 * COUNT * sizeof(float));
    float init[COUNT];
    for (int i = 0; i < COUNT; i++)
        init[i] = (float)i * 0.5f - 3.0f;
    void *value[NV][2];
    strata_var_t var[NV];
    for (int v = 0; v < NV; v++) {
        var[v] = (strata_var_t){ .struct_size = sizeof var[v], .index = v,
                                 .name = v ? "b" : "w",
                                 .dtype = STRATA_DTYPE_F32, .ndim = 1,
                                 .count = v ? 16 : 24, .offset = v ? 24 : 0,
                                 .init = init + (v ? 24 : 0),
                                 .value = value[v] };
        var[v].shape[0] = (int64_t)var[v].count;
        CHECK(k_tiny.create_var(pctx, &var[v]) == STRATA_OK);
    }
    strata_var_t over = var[1];
    over.offset = 30;   /* 30 + 16 > COUNT */
    CHECK(k_tiny.create_var(pctx, &over) == STRATA_EINVAL);
    replica_t r[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        r[i] = (replica_t){ .pctx = pctx, .slot = i };
        pthread_create(&th[i], NULL, replica_main, &r[i]);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        CHECKF(r[i].rc == 0, "2.%d: replica %d: %d", minor, i, r[i].rc);
    }
    /* expected: the mean gradient, clipped where the minor can, by SGD */
    float mean[COUNT];
    double sumsq = 0.0;
    for (int i = 0; i < COUNT; i++) {
        mean[i] = (grad_of(0, i) + grad_of(1, i)) * 0.5f;
        sumsq += (double)mean[i] * mean[i];
    }
    int clipped = clip > 0.0 && minor >= 2 && sqrt(sumsq) > clip;
    float f = clipped ? (float)(clip / sqrt(sumsq)) : 1.0f;
    int same = 1, want = 1;
    for (int v = 0; v < NV; v++)
        for (size_t i = 0; i < var[v].count; i++) {
            size_t k = var[v].offset + i;
            float a = ((float *)value[v][0])[i], b = ((float *)value[v][1])[i];
            float g = clipped ? mean[k] * f : mean[k];
            same &= memcmp(&a, &b, sizeof a) == 0;
            want &= a == init[k] - 0.125f * g;
        }
    CHECKF(same && want, "2.%d clip %g: replicas equal %d, as SGD %d",
           minor, clip, same, want);
    /* state: GET replica 0, SET it back changed, both replicas take it */
    tiny_t *s = pctx;
    float vars[COUNT];
    strata_state_t st = { .struct_size = sizeof st, .vars = vars };
    CHECK(strata_kit_replicas_state(&s->rs, 0, &st) == STRATA_OK);
    CHECK(st.opt_steps == 1 && vars[5] == ((float *)value[0][0])[5]);
    vars[5] = 42.0f;
    st.opt_steps = 9;
    CHECK(strata_kit_replicas_state(&s->rs, 1, &st) == STRATA_OK);
    CHECK(((float *)value[0][1])[5] == 42.0f);
    st.nslots = 1;   /* sgd has none */
    CHECK(strata_kit_replicas_state(&s->rs, 0, &st) == STRATA_EINVAL);
    k_tiny.fini(pctx);
    strata_kit_free(kit);
}

/* ---- hooks, options, refusals of the kit itself -------------------------- */

static int hook_eval(void *user, double *loss, double *acc)
{
    ++*(int *)user;
    *loss = 0.25;
    *acc = 0.75;
    return STRATA_OK;
}

static int hook_done(void *user)
{
    (void)user;
    return 1;
}

/* ABI 2.11: one table of 10 rows x 4, rows 2 and 7 in batch 3 of epoch
 * 1, nothing else in range. */
static int hook_batch_rows(void *user, int32_t epoch, int64_t batch,
                           strata_sparse_t *out, size_t cap, size_t *n)
{
    static const int64_t rows[2] = { 2, 7 };
    (void)user;
    *n = 1;
    if (!out)
        return STRATA_OK;
    if (cap < 1 || epoch != 1 || batch != 3)
        return STRATA_EINVAL;
    out[0] = (strata_sparse_t){ .var = 0, .count = 40, .row_len = 4,
                                .nrows = 2, .rows = rows };
    return STRATA_OK;
}

static void misc_checks(void)
{
    int calls = 0;
    strata_kit_hooks_t hooks = { .user = &calls, .evaluate = hook_eval,
                                 .training_done = hook_done,
                                 .batch_rows = hook_batch_rows };
    strata_kit_config_t cfg = STRATA_KIT_CONFIG_INIT;
    cfg.log = kit_log;
    cfg.hooks = &hooks;
    strata_kit_t *kit = NULL;
    CHECK(strata_kit_host(&cfg, &kit) == STRATA_OK);
    if (kit) {
        const strata_host_v2_t *h = strata_kit_table(kit);
        double loss = 0, acc = 0;
        CHECK(h->evaluate(strata_kit_hctx(kit), &loss, &acc) == STRATA_OK &&
              calls == 1 && loss == 0.25 && acc == 0.75);
        CHECK(h->training_done(strata_kit_hctx(kit)) == 1);
        strata_sparse_t sp[2];
        size_t n = 9;
        CHECK(h->batch_rows(strata_kit_hctx(kit), 1, 3, NULL, 0, &n) ==
              STRATA_OK && n == 1);
        CHECK(h->batch_rows(strata_kit_hctx(kit), 1, 3, sp, 2, &n) ==
              STRATA_OK && n == 1 && sp[0].nrows == 2 && sp[0].rows[1] == 7);
        CHECK(h->batch_rows(strata_kit_hctx(kit), 0, 3, sp, 2, &n) ==
              STRATA_EINVAL);
        strata_group_t g = { .struct_size = sizeof g };
        strata_transport_t *t = NULL;
        CHECK(h->t_open(strata_kit_hctx(kit), &g, &t) == STRATA_ENOTSUP &&
              t == NULL);
        strata_kit_free(kit);
    }
    cfg.abi_minor = STRATA_ABI_MINOR + 1;
    CHECK(strata_kit_host(&cfg, &kit) == STRATA_EINVAL && kit == NULL);
    cfg.abi_minor = -1;
    CHECK(strata_kit_host(&cfg, &kit) == STRATA_EINVAL);
    CHECK(strata_kit_host_size(STRATA_ABI_MINOR + 1) == 0);

    /* local.so's options: defaults, then an override */
    const strata_option_t *o = g_local->options;
    void *c = NULL;
    CHECK(strata_kit_cfg(g_local, NULL, 0, &c) == STRATA_OK && c);
    free(c);
    if (o && o->key) {
        char bad[128], unknown[] = "no_such_key=1";
        snprintf(bad, sizeof bad, "%s=%s", o->key,
                 o->type == STRATA_OPT_STRING ? "" : "not-a-value");
        const char *b[] = { bad }, *u[] = { unknown };
        if (o->type != STRATA_OPT_STRING)
            CHECK(strata_kit_cfg(g_local, b, 1, &c) == STRATA_ECONFIG);
        CHECK(strata_kit_cfg(g_local, u, 1, &c) == STRATA_ECONFIG && !c);
    }
}

/* Options without bounds: hostile numbers are refused, not converted. */
static void unbounded(void)
{
    struct opts { int64_t n, size; double x; };
    static const strata_option_t o[] = {
        { .key = "n", .type = STRATA_OPT_INT, .def = "1",
          .offset = offsetof(struct opts, n) },
        { .key = "size", .type = STRATA_OPT_SIZE, .def = "1K",
          .offset = offsetof(struct opts, size) },
        { .key = "x", .type = STRATA_OPT_FLOAT, .def = "0.5",
          .offset = offsetof(struct opts, x) },
        { .key = NULL }
    };
    strata_plugin_v2_t vt = { .options = o, .cfg_size = sizeof(struct opts) };
    vt.hdr.name = "unbounded";
    static const char *const bad[] = {
        "n=1e300", "n=-1e300", "n=9223372036854775808", "n=nan", "n=inf",
        "n=1.5", "size=1e300G", "size=nan", "x=nan", "x=-inf", "x=1e999",
    };
    void *c = NULL;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const char *over[] = { bad[i] };
        CHECKF(strata_kit_cfg(&vt, over, 1, &c) == STRATA_ECONFIG && !c,
               "%s accepted", bad[i]);
    }
    const char *good[] = { "n=-9007199254740992", "size=2M", "x=1e300" };
    CHECK(strata_kit_cfg(&vt, good, 3, &c) == STRATA_OK && c);
    if (c) {
        const struct opts *v = c;
        CHECK(v->n == -9007199254740992LL && v->size == 2 << 20 &&
              v->x == 1e300);
    }
    free(c);
}

int main(void)
{
    const char *dir = getenv("STRATA_PLUGIN_PATH");
    char path[4096];
    snprintf(path, sizeof path, "%s/local.so", dir && *dir ? dir : ".");
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (dl)
        g_local = dlsym(dl, STRATA_PLUGIN_SYMBOL);
    if (!g_local) {
        fprintf(stderr, "cannot load %s: %s\n", path, dlerror());
        return 1;
    }
    /* The core's host, for the refusals: a real context, local.so. */
    strata_ctx_t *core = NULL;
    strata_transport_t *core_t = NULL;
    int rc = strata_ctx_create(NULL, &core);
    strata_callbacks_t cb = { .struct_size = sizeof cb, .log = core_log };
    const char *sets[] = { "transport.local=local", "log.level=error", NULL };
    if (rc == STRATA_OK)
        rc = strata_ctx_set_callbacks(core, &cb);
    for (int i = 0; rc == STRATA_OK && sets[i]; i++)
        rc = strata_ctx_set(core, sets[i]);
    if (rc == STRATA_OK)
        rc = strata__ctx_resolve(core);
    int32_t devs[2] = { STRATA_DEVICE(STRATA_DEV_CPU, 0),
                        STRATA_DEVICE(STRATA_DEV_CPU, 0) };
    strata_group_t g = { .struct_size = sizeof g, .scope = STRATA_SCOPE_LOCAL,
                         .size = 2, .nlocal = 2, .timeout_ms = 10000,
                         .devices = devs, .tag = "kit" };
    if (rc == STRATA_OK)
        rc = strata__host_v2.t_open(&core->hc, &g, &core_t);
    CHECKF(rc == STRATA_OK, "the core's local.so: %d", rc);

    for (int minor = 0; minor <= STRATA_ABI_MINOR; minor++) {
        check_table(minor);
        if (core_t)
            transport_checks(minor, core_t, core);
        strategy_checks(minor, 0.0);
        strategy_checks(minor, 0.5);   /* the mean gradient's norm is ~3 */
    }
    misc_checks();
    unbounded();
    if (core_t)
        strata__host_v2.t_close(&core->hc, core_t);
    strata_ctx_destroy(core);
    return CHECK_DONE();
}
