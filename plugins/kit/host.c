/* The kit's host table: the CPU entries (log, config, memory, arithmetic,
 * SGD, clipping), the services a test may hook, and the cut to a minor.
 * The contracts are core/plugin/host.c's; the transports are in transport.c. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kit_impl.h"

static void vlog_line(strata_kit_t *kit, int level, const char *who,
                      const char *fmt, va_list ap)
{
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    if (!who || !*who)
        who = kit && kit->cfg.name ? kit->cfg.name : "kit";
    if (kit && kit->cfg.log) {
        kit->cfg.log(kit->cfg.log_user, level, who, line);
        return;
    }
    static const char *const lv[] = { "error: ", "warning: ", "", "debug: " };
    int max = kit ? kit->cfg.log_level : STRATA_LOG_WARN;
    if (level <= max)
        fprintf(stderr, "%s: %s%s\n", who,
                level >= 0 && level <= 3 ? lv[level] : "", line);
}

void strata__kit_log(strata_kit_t *kit, int level, const char *who,
                     const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog_line(kit, level, who, fmt, ap);
    va_end(ap);
}

static void k_log(strata_hctx_t *hc, int level, const char *who,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void k_log(strata_hctx_t *hc, int level, const char *who,
                  const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog_line(kit_of(hc), level, who, fmt, ap);
    va_end(ap);
}

/* The index of "section.key=" in the table, or -1. */
static int cfg_find(const strata_kit_t *kit, const char *section,
                    const char *key)
{
    if (!kit || !kit->cfg.cfg || !section || !key)
        return -1;
    size_t sl = strlen(section), kl = strlen(key);
    for (int i = 0; kit->cfg.cfg[i]; i++) {
        const char *e = kit->cfg.cfg[i];
        if (strncmp(e, section, sl) == 0 && e[sl] == '.' &&
            strncmp(e + sl + 1, key, kl) == 0 && e[sl + 1 + kl] == '=')
            return i;
    }
    return -1;
}

static const char *k_cfg_get(strata_hctx_t *hc, const char *section,
                             const char *key)
{
    strata_kit_t *kit = kit_of(hc);
    int i = cfg_find(kit, section, key);
    return i < 0 ? NULL : strchr(kit->cfg.cfg[i], '=') + 1;
}

/* "kit cfg[3]": where the value came from, for a plugin's messages. */
static const char *const k_origins[] = {
    "kit cfg[0]", "kit cfg[1]", "kit cfg[2]", "kit cfg[3]", "kit cfg[4]",
    "kit cfg[5]", "kit cfg[6]", "kit cfg[7]", "kit cfg[8]", "kit cfg[9]",
};

static const char *k_cfg_origin(strata_hctx_t *hc, const char *section,
                                const char *key)
{
    int i = cfg_find(kit_of(hc), section, key);
    if (i < 0)
        return NULL;
    return i < 10 ? k_origins[i] : "kit cfg";
}

static int is_cpu(int32_t device)
{
    return STRATA_DEVICE_TYPE(device) == STRATA_DEV_CPU;
}

/* A device the test brought no entry for: one line, STRATA_EDEVICE. */
static int no_device(strata_kit_t *kit, const char *what, int32_t device)
{
    strata__kit_log(kit, STRATA_LOG_ERROR, "kit", "%s on device %d:%d: the "
                    "kit has no such device (strata_kit_config_t.device)",
                    what, (int)STRATA_DEVICE_TYPE(device),
                    (int)STRATA_DEVICE_INDEX(device));
    return STRATA_EDEVICE;
}

static void *k_alloc(strata_hctx_t *hc, int32_t device, size_t bytes)
{
    strata_kit_t *kit = kit_of(hc);
    void *p = NULL;
    if (is_cpu(device)) {
        size_t n = bytes ? (bytes + 63) / 64 * 64 : 64;
        if (n >= bytes && (p = aligned_alloc(64, n)) != NULL)
            memset(p, 0, n);
    } else if (kit->dev.alloc) {
        p = kit->dev.alloc(kit->dev.user, device, bytes);
    } else {
        no_device(kit, "alloc", device);
    }
    if (p)
        atomic_fetch_add(&kit->placed, bytes);
    return p;
}

static void k_free(strata_hctx_t *hc, int32_t device, void *p)
{
    strata_kit_t *kit = kit_of(hc);
    if (!p)
        return;
    if (is_cpu(device))
        free(p);
    else if (kit->dev.free)
        kit->dev.free(kit->dev.user, device, p);
    else
        no_device(kit, "free", device);
}

static int k_copy(strata_hctx_t *hc, int32_t dst_device, void *dst,
                  int32_t src_device, const void *src, size_t bytes)
{
    strata_kit_t *kit = kit_of(hc);
    if (bytes && (!dst || !src))
        return STRATA_EINVAL;
    if (is_cpu(dst_device) && is_cpu(src_device)) {
        if (bytes)
            memmove(dst, src, bytes);
        return STRATA_OK;
    }
    return kit->dev.copy ? kit->dev.copy(kit->dev.user, dst_device, dst,
                                         src_device, src, bytes)
                         : no_device(kit, "copy",
                                     is_cpu(dst_device) ? src_device
                                                        : dst_device);
}

static int k_axpy(strata_hctx_t *hc, int32_t device, size_t n, float a,
                  const float *x, float *y)
{
    strata_kit_t *kit = kit_of(hc);
    if (!is_cpu(device))
        return kit->dev.axpy ? kit->dev.axpy(kit->dev.user, device, n, a, x, y)
                             : no_device(kit, "axpy", device);
    for (size_t i = 0; i < n; i++)
        y[i] += a * x[i];
    return STRATA_OK;
}

static int k_scale(strata_hctx_t *hc, int32_t device, size_t n, float a,
                   float *x)
{
    strata_kit_t *kit = kit_of(hc);
    if (!is_cpu(device))
        return kit->dev.scale ? kit->dev.scale(kit->dev.user, device, n, a, x)
                              : no_device(kit, "scale", device);
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
    return STRATA_OK;
}

/* In source order, as the contract says: the same bits on every run. */
static int k_sum(strata_hctx_t *hc, int32_t device, size_t n, float *dst,
                 const float *const *srcs, int nsrc)
{
    strata_kit_t *kit = kit_of(hc);
    if (nsrc < 1 || !srcs)
        return STRATA_EINVAL;
    if (!is_cpu(device))
        return kit->dev.sum ? kit->dev.sum(kit->dev.user, device, n, dst, srcs,
                                           nsrc)
                            : no_device(kit, "sum", device);
    for (size_t i = 0; i < n; i++) {
        float s = srcs[0][i];
        for (int k = 1; k < nsrc; k++)
            s += srcs[k][i];
        dst[i] = s;
    }
    return STRATA_OK;
}

/* ---- plain SGD: no slots, a step count ---------------------------------- */

struct strata_opt {
    int32_t device;
    size_t  count;
    int64_t t;
};

static int k_opt_create(strata_hctx_t *hc, int32_t device, size_t count,
                        strata_opt_t **out)
{
    *out = NULL;
    if (!is_cpu(device))
        return no_device(kit_of(hc), "opt_create", device);
    strata_opt_t *o = calloc(1, sizeof *o);
    if (!o)
        return STRATA_ENOMEM;
    o->device = device;
    o->count = count;
    *out = o;   /* no slots: no placed bytes, as the core's sgd */
    return STRATA_OK;
}

static int k_opt_step(strata_hctx_t *hc, strata_opt_t *opt, float *param,
                      const float *grad, size_t count, float lr)
{
    (void)hc;
    if (!opt || count > opt->count || (count && (!param || !grad)))
        return STRATA_EINVAL;
    for (size_t i = 0; i < count; i++)
        param[i] -= lr * grad[i];
    opt->t++;
    return STRATA_OK;
}

/* ABI 2.10: the kit's sgd on the rows named (sgd has no slots to leave). */
static int k_opt_step_rows(strata_hctx_t *hc, strata_opt_t *opt, float *param,
                           const int64_t *rows, size_t nrows, size_t row_len,
                           const float *grad, float lr)
{
    (void)hc;
    if (!opt || row_len == 0 || opt->count % row_len != 0
        || (nrows && (!param || !grad || !rows)))
        return STRATA_EINVAL;
    for (size_t i = 0; i < nrows; i++)
        if (rows[i] < 0 || (size_t)rows[i] >= opt->count / row_len
            || (i > 0 && rows[i] <= rows[i - 1]))
            return STRATA_EINVAL;
    for (size_t i = 0; i < nrows; i++)
        for (size_t e = 0; e < row_len; e++)
            param[(size_t)rows[i] * row_len + e] -= lr * grad[i * row_len + e];
    opt->t++;
    return STRATA_OK;
}

static int k_opt_io(strata_hctx_t *hc, strata_opt_t *opt, int set,
                    float *const *slots, int nslots, int64_t *steps)
{
    (void)hc;
    (void)slots;
    if (!opt || nslots != 0 || !steps)
        return STRATA_EINVAL;
    if (set)
        opt->t = *steps;
    else
        *steps = opt->t;
    return STRATA_OK;
}

static void k_opt_destroy(strata_hctx_t *hc, strata_opt_t *opt)
{
    (void)hc;
    free(opt);
}

/* ---- 2.2: clipping ------------------------------------------------------- */

static int k_grad_sumsq(strata_hctx_t *hc, int32_t device, size_t n,
                        const float *g, double *sumsq)
{
    strata_kit_t *kit = kit_of(hc);
    if (!sumsq)
        return STRATA_EINVAL;
    *sumsq = 0.0;
    if (!(kit->cfg.clip_norm > 0.0))
        return 0;
    if (!is_cpu(device))
        return no_device(kit, "grad_sumsq", device);
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)g[i] * (double)g[i];
    *sumsq = s;
    return 1;
}

static int k_grad_clip(strata_hctx_t *hc, int32_t device, size_t n, float *g,
                       double sumsq)
{
    strata_kit_t *kit = kit_of(hc);
    double norm = sqrt(sumsq);
    if (!(kit->cfg.clip_norm > 0.0) || !(norm > kit->cfg.clip_norm))
        return STRATA_OK;
    return k_scale(hc, device, n, (float)(kit->cfg.clip_norm / norm), g);
}

/* ---- the services: the test's hooks, else STRATA_ENOTSUP ---------------- */

static int k_evaluate(strata_hctx_t *hc, double *loss, double *acc)
{
    strata_kit_hooks_t *h = &kit_of(hc)->hooks;
    return h->evaluate ? h->evaluate(h->user, loss, acc) : STRATA_ENOTSUP;
}

static int k_report(strata_hctx_t *hc, const strata_report_t *r)
{
    strata_kit_hooks_t *h = &kit_of(hc)->hooks;
    return h->report ? h->report(h->user, r) : STRATA_ENOTSUP;
}

static int k_boundary_due(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                          int64_t step)
{
    strata_kit_hooks_t *h = &kit_of(hc)->hooks;
    return h->boundary_due ? h->boundary_due(h->user, epoch, batch, step)
                           : STRATA_ENOTSUP;
}

static int k_boundary(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                      int64_t step)
{
    strata_kit_hooks_t *h = &kit_of(hc)->hooks;
    return h->boundary ? h->boundary(h->user, epoch, batch, step)
                       : STRATA_ENOTSUP;
}

static int k_training_done(strata_hctx_t *hc)
{
    strata_kit_hooks_t *h = &kit_of(hc)->hooks;
    return h->training_done ? h->training_done(h->user) : 0;
}

static int k_membership(strata_hctx_t *hc, int64_t committed, int timeout_ms,
                        strata_membership_t *out)
{
    strata_kit_hooks_t *h = &kit_of(hc)->hooks;
    return h->membership ? h->membership(h->user, committed, timeout_ms, out)
                         : STRATA_ENOTSUP;
}

/* ABI 2.11: the rows a batch reads, as the test's hook says. */
static int k_batch_rows(strata_hctx_t *hc, int32_t epoch, int64_t batch,
                        strata_sparse_t *out, size_t cap, size_t *n)
{
    strata_kit_hooks_t *h = &kit_of(hc)->hooks;
    if (!n)
        return STRATA_EINVAL;
    *n = 0;
    return h->batch_rows ? h->batch_rows(h->user, epoch, batch, out, cap, n)
                         : STRATA_ENOTSUP;
}

/* ABI 2.12: a variable's initial values in part: the kit's variables
 * carry theirs in var->init (strata_kit_replicas_create and the test's
 * own). */
static int k_init_values(strata_hctx_t *hc, const strata_var_t *var,
                         size_t lo, size_t n, float *dst)
{
    (void)hc;
    if (!var || !var->init || lo > var->count || n > var->count - lo ||
        (n && !dst))
        return STRATA_EINVAL;
    memcpy(dst, var->init + lo, n * sizeof *dst);
    return STRATA_OK;
}

/* ABI 2.12: zeros over a range of the kit's CPU memory. */
static int k_discard(strata_hctx_t *hc, int32_t device, void *ptr,
                     size_t bytes)
{
    (void)hc;
    if (STRATA_DEVICE_TYPE(device) != STRATA_DEV_CPU || (bytes && !ptr))
        return STRATA_EINVAL;
    if (bytes)
        memset(ptr, 0, bytes);
    return STRATA_OK;
}

/* ---- 2.13: a task's part of a checkpoint, kept in memory ---------------- */

/* Variable v's rows along dimension 0 and floats per row, as the test
 * named it (strata_kit_config_t.vars); 0 when the kit does not know it. */
static int part_var(const strata_kit_t *kit, int32_t v, int64_t *rows,
                    size_t *per_row)
{
    if (!kit->cfg.vars || v < 0 || v >= kit->cfg.nvars)
        return 0;
    const strata_var_t *var = &kit->cfg.vars[v];
    if (var->ndim == 0) {
        *rows = 1;
        *per_row = var->count;
    } else {
        if (var->shape[0] <= 0 || var->count % (size_t)var->shape[0] != 0)
            return 0;
        *rows = var->shape[0];
        *per_row = var->count / (size_t)var->shape[0];
    }
    return *per_row > 0;
}

static void part_free(strata_part_t *p)
{
    for (int32_t i = 0; p->pieces && i < p->npieces; i++)
        free((void *)p->pieces[i].data);
    free((void *)p->pieces);
    memset(p, 0, sizeof *p);
}

static int part_refuse(strata_kit_t *kit, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int part_refuse(strata_kit_t *kit, const char *fmt, ...)
{
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    strata__kit_log(kit, STRATA_LOG_ERROR, "kit", "part_write: %s", why);
    return STRATA_EINVAL;
}

/* Checked as the core checks it, except that the kit knows the variables
 * the test named only and that its optimizer (sgd) has no slots; kept in
 * memory, not written (the kit has no [checkpoint] dir to write to). */
static int k_part_write(strata_hctx_t *hc, strata_part_t *part)
{
    strata_kit_t *kit = kit_of(hc);
    if (!part || part->struct_size < sizeof *part)
        return part_refuse(kit, "no part, or a struct_size below %zu",
                           sizeof *part);
    if (part->count < 1 || part->index < 0 || part->index >= part->count)
        return part_refuse(kit, "part %d of %d", (int)part->index,
                           (int)part->count);
    if (part->step < 0)
        return part_refuse(kit, "step %lld", (long long)part->step);
    if (part->npieces < 0 || (part->npieces > 0 && !part->pieces))
        return part_refuse(kit, "%d pieces at %p", (int)part->npieces,
                           (const void *)part->pieces);
    if (part->npieces > 0 && kit->cfg.nvars <= 0)
        return part_refuse(kit, "the kit knows no variables to size a "
                           "piece by (strata_kit_config_t.vars)");
    size_t total = 0;
    for (int32_t i = 0; i < part->npieces; i++) {
        const strata_part_piece_t *pc = &part->pieces[i];
        int64_t nrows = 0;
        size_t per_row = 0;
        if (!pc->data || pc->rows < 1 || pc->row0 < 0 || pc->slot < -1)
            return part_refuse(kit, "piece %d: data %p, rows %lld, row0 "
                               "%lld, slot %d", (int)i,
                               (const void *)pc->data, (long long)pc->rows,
                               (long long)pc->row0, (int)pc->slot);
        if (!part_var(kit, pc->var, &nrows, &per_row))
            return part_refuse(kit, "piece %d: variable %d is not one of "
                               "the %d the kit was given", (int)i,
                               (int)pc->var, kit->cfg.nvars);
        if (pc->slot >= 0)
            return part_refuse(kit, "piece %d: slot %d, but the kit's "
                               "optimizer (sgd) has none", (int)i,
                               (int)pc->slot);
        if (pc->row0 > nrows || pc->rows > nrows - pc->row0)
            return part_refuse(kit, "piece %d: rows [%lld, %lld) outside "
                               "variable %d's %lld", (int)i,
                               (long long)pc->row0,
                               (long long)(pc->row0 + pc->rows),
                               (int)pc->var, (long long)nrows);
        for (int32_t j = 0; j < i; j++) {
            const strata_part_piece_t *q = &part->pieces[j];
            if (q->var == pc->var && q->slot == pc->slot &&
                q->row0 < pc->row0 + pc->rows && pc->row0 < q->row0 + q->rows)
                return part_refuse(kit, "pieces %d and %d overlap (variable "
                                   "%d, slot %d)", (int)j, (int)i,
                                   (int)pc->var, (int)pc->slot);
        }
        total += (size_t)pc->rows * per_row;
    }
    /* the copy */
    strata_part_t rec = *part;
    rec.struct_size = sizeof rec;
    rec.pieces = NULL;
    rec.bytes = (int64_t)(total * sizeof(float));
    strata_part_piece_t *pcs = NULL;
    if (part->npieces > 0 &&
        !(pcs = calloc((size_t)part->npieces, sizeof *pcs)))
        return STRATA_ENOMEM;
    rec.pieces = pcs;
    for (int32_t i = 0; i < part->npieces; i++) {
        int64_t nrows = 0;
        size_t per_row = 0, n; /* checked above: known */
        part_var(kit, part->pieces[i].var, &nrows, &per_row);
        n = (size_t)part->pieces[i].rows * per_row;
        float *d = malloc(n * sizeof *d);
        if (!d) {
            rec.npieces = i;
            part_free(&rec);
            return STRATA_ENOMEM;
        }
        memcpy(d, part->pieces[i].data, n * sizeof *d);
        pcs[i] = part->pieces[i];
        pcs[i].data = d;
    }
    int at = 0;
    while (at < kit->nparts &&
           !(kit->parts[at].step == part->step &&
             kit->parts[at].index == part->index &&
             kit->parts[at].count == part->count))
        at++;
    if (at == kit->nparts && kit->nparts == kit->cap_parts) {
        int cap = kit->cap_parts ? 2 * kit->cap_parts : 4;
        strata_part_t *grown = realloc(kit->parts, (size_t)cap * sizeof *grown);
        if (!grown) {
            part_free(&rec);
            return STRATA_ENOMEM;
        }
        kit->parts = grown;
        kit->cap_parts = cap;
    }
    if (at < kit->nparts)
        part_free(&kit->parts[at]);
    else
        kit->nparts++;
    kit->parts[at] = rec;
    part->bytes = rec.bytes;
    return STRATA_OK;
}

int strata_kit_parts_written(strata_kit_t *kit, int i,
                             const strata_part_t **out)
{
    if (out)
        *out = kit && i >= 0 && i < kit->nparts ? &kit->parts[i] : NULL;
    return kit ? kit->nparts : 0;
}

/* ABI 2.8: the kit's fake run has a model without layer states. */
static int k_states_get(strata_hctx_t *hc, float *buf, size_t cap, size_t *n)
{
    (void)hc, (void)buf, (void)cap;
    if (!n)
        return STRATA_EINVAL;
    *n = 0;
    return STRATA_OK;
}

static int k_states_set(strata_hctx_t *hc, const float *buf, size_t n)
{
    (void)hc, (void)buf;
    return n == 0 ? STRATA_OK : STRATA_EINVAL;
}

/* ---- the table, cut to a minor ------------------------------------------- */

size_t strata_kit_host_size(int abi_minor)
{
    switch (abi_minor) {
    case 0: case 1: return offsetof(strata_host_v2_t, grad_sumsq);
    case 2:         return offsetof(strata_host_v2_t, membership);
    case 3: case 4: return offsetof(strata_host_v2_t, t_reduce_scatter);
    case 5: case 6: case 7: return offsetof(strata_host_v2_t, states_get);
    case 8: case 9: return offsetof(strata_host_v2_t, opt_step_rows);
    case 10:        return offsetof(strata_host_v2_t, batch_rows);
    case 11:        return offsetof(strata_host_v2_t, init_values);
    case 12:        return offsetof(strata_host_v2_t, part_write);
    case 13:        return sizeof(strata_host_v2_t);
    default:        return 0;
    }
}

int strata_kit_host(const strata_kit_config_t *cfg, strata_kit_t **out)
{
    if (!out)
        return STRATA_EINVAL;
    *out = NULL;
    size_t size = cfg ? strata_kit_host_size(cfg->abi_minor) : 0;
    if (!size || cfg->abi_minor > STRATA_ABI_MINOR) {
        strata__kit_log(NULL, STRATA_LOG_ERROR, "kit", "strata_kit_host: "
                        "abi_minor %d is not a released minor of ABI 2 "
                        "(0..%d)", cfg ? cfg->abi_minor : -1,
                        STRATA_ABI_MINOR);
        return STRATA_EINVAL;
    }
    strata_kit_t *kit = calloc(1, sizeof *kit);
    if (!kit)
        return STRATA_ENOMEM;
    kit->cfg = *cfg;
    if (cfg->hooks)
        kit->hooks = *cfg->hooks;
    if (cfg->device)
        kit->dev = *cfg->device;
    atomic_init(&kit->placed, 0);
    strata_host_v2_t *h = &kit->host;
    h->log = k_log;
    h->cfg_get = k_cfg_get;
    h->alloc = k_alloc;
    h->free = k_free;
    h->copy = k_copy;
    h->axpy = k_axpy;
    h->scale = k_scale;
    h->sum = k_sum;
    h->opt_create = k_opt_create;
    h->opt_step = k_opt_step;
    h->opt_io = k_opt_io;
    h->opt_destroy = k_opt_destroy;
    h->evaluate = k_evaluate;
    h->report = k_report;
    h->boundary_due = k_boundary_due;
    h->boundary = k_boundary;
    h->grad_sumsq = k_grad_sumsq;
    h->grad_clip = k_grad_clip;
    h->training_done = k_training_done;
    h->membership = k_membership;
    h->cfg_origin = k_cfg_origin;
    h->states_get = k_states_get;
    h->states_set = k_states_set;
    h->opt_step_rows = k_opt_step_rows;
    h->batch_rows = k_batch_rows;
    h->init_values = k_init_values;
    h->discard = k_discard;
    h->part_write = k_part_write;
    strata__kit_transport_entries(h);
    /* Posing as an older minor: its size, and nothing of a later one (a
     * plugin that reads past struct_size finds NULL, not a stale entry). */
    memset((char *)h + size, 0, sizeof *h - size);
    h->struct_size = (uint32_t)size;
    h->abi_major = 2;
    h->abi_minor = (uint16_t)cfg->abi_minor;
    *out = kit;
    return STRATA_OK;
}

void strata_kit_free(strata_kit_t *kit)
{
    for (int i = 0; kit && i < kit->nparts; i++)
        part_free(&kit->parts[i]);
    if (kit)
        free(kit->parts);
    free(kit);
}

const strata_host_v2_t *strata_kit_table(const strata_kit_t *kit)
{
    return kit ? &kit->host : NULL;
}

strata_hctx_t *strata_kit_hctx(strata_kit_t *kit)
{
    return (strata_hctx_t *)(void *)kit;
}

size_t strata_kit_placed(const strata_kit_t *kit)
{
    return kit ? atomic_load(&((strata_kit_t *)kit)->placed) : 0;
}
