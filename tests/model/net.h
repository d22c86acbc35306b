/* A model ready to step on the CPU (its variables, work and a seeded
 * batch) and the checks the model tests share: its gradients against
 * central finite differences, and the same bits from two models. Header
 * only: each test binary includes it once. */
#ifndef STRATA_TESTS_MODEL_NET_H
#define STRATA_TESTS_MODEL_NET_H

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "runtime.h"

enum { ROWS = 6, NCLS = 5 };

typedef struct net {
    strata__model_t m;
    float          *flat;
    void           *slots[STRATA__MAX_VARS];
    strata__work_t  w;
} net_t;

/* Run build(arg, m) with stderr going to err (when not NULL): the one error
 * line a refusal prints. */
static inline int net_capture(int (*build)(const void *, strata__model_t *),
                              const void *arg, strata__model_t *m, char *err,
                              size_t cap)
{
    char path[] = "/tmp/strata-model-errXXXXXX";
    int fd = mkstemp(path);
    int saved = dup(2);
    fflush(stderr);
    dup2(fd, 2);
    int rc = build(arg, m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (err) {
        ssize_t n = pread(fd, err, cap - 1, 0);
        err[n > 0 ? n : 0] = '\0';
    }
    close(fd);
    unlink(path);
    return rc;
}

/* Every variable's initial values drawn again in part (a ps task's
 * shards: strata__model_init_range) are the bits of the whole draw: the
 * whole range, a middle one, the last element; a range past the end is
 * refused. */
static inline void net_check_init_range(const strata__model_t *m,
                                        uint64_t seed, const float *flat)
{
    for (int i = 0; i < m->nvars; i++) {
        const strata_var_t *v = &m->vars[i];
        size_t lo = v->count / 3, n = v->count - lo - v->count / 4;
        float *got = malloc((v->count + 1) * sizeof *got);
        CHECK(strata__model_init_range(m, seed, i, 0, v->count, got) == 0 &&
              memcmp(got, flat + v->offset, v->count * sizeof *got) == 0);
        CHECK(strata__model_init_range(m, seed, i, lo, n, got) == 0 &&
              memcmp(got, flat + v->offset + lo, n * sizeof *got) == 0);
        CHECK(strata__model_init_range(m, seed, i, v->count - 1, 1, got) ==
                  0 && got[0] == flat[v->offset + v->count - 1]);
        CHECK(strata__model_init_range(m, seed, i, v->count, 1, got) ==
              STRATA_EINVAL);
        free(got);
    }
}

/* n->m is built: seeded variables, work for ROWS samples, a seeded batch
 * of inputs in [0, 1) and labels below NCLS. */
static inline int net_ready(net_t *n)
{
    n->flat = malloc(n->m.count * sizeof(float));
    strata__model_init(&n->m, 7, n->flat);
    net_check_init_range(&n->m, 7, n->flat);
    for (int i = 0; i < n->m.nvars; i++) {
        n->slots[i] = n->flat + n->m.vars[i].offset;
        n->m.vars[i].value = &n->slots[i];
    }
    if (strata__work_alloc(&n->m, ROWS, &n->w) != 0)
        return -1;
    strata__rng_t rng;
    strata__rng_seed(&rng, 3, 1);
    for (size_t i = 0; i < (size_t)ROWS * n->w.dim; i++)
        n->w.x[i] = (float)strata__rng_uniform(&rng);
    for (int i = 0; i < ROWS; i++)
        ((int32_t *)n->w.y)[i] = (int32_t)strata__rng_below(&rng, NCLS);
    n->w.noise_seed = strata__model_step_seed(42, 5);
    n->w.row0 = 0;
    return 0;
}

static inline void net_free(net_t *n)
{
    strata__work_free(&n->w);
    free(n->flat);
}

static inline double net_loss(net_t *n, float *grads)
{
    double loss = 0.0;
    double correct = 0.0;
    CHECK(strata__model_step(&n->m, 0, &n->w, ROWS, grads, 1.0f, &loss,
                             &correct) == 0);
    return loss;
}

/* Every variable: a spread of its elements against central differences
 * of the summed loss (dropout draws the same mask each call). Max pooling
 * and relu are piecewise linear: a step that crosses a kink bends a central
 * difference. Two step sizes, and the one-sided differences besides the
 * central one: a kink on one side leaves the other side's slope true.
 * `grads` (m.count floats) receives the analytic gradients when not NULL;
 * returns the loss. */
static inline double net_check_gradients(net_t *n, const char *what,
                                         int min_checked, float *grads)
{
    /* calloc: the padding between variables is never written. */
    float *own = grads ? NULL : calloc(n->m.count, sizeof(float));
    float *g = grads ? grads : own;
    float *scratch = calloc(n->m.count, sizeof(float));
    double base = net_loss(n, g);
    CHECK(base > 0.0);
    int checked = 0, bad = 0;
    for (int v = 0; v < n->m.nvars; v++) {
        const strata_var_t *var = &n->m.vars[v];
        size_t stride = var->count > 24 ? var->count / 24 : 1;
        for (size_t j = 0; j < var->count; j += stride) {
            float *p = n->flat + var->offset + j, keep = *p;
            double an = g[var->offset + j], fd[2];
            const float eps[2] = { 1e-2f, 2e-3f };
            int ok = 0;
            for (int e = 0; e < 2; e++) {
                *p = keep + eps[e];
                double up = net_loss(n, scratch);
                *p = keep - eps[e];
                double down = net_loss(n, scratch);
                *p = keep;
                fd[e] = (up - down) / (2.0 * eps[e]);
                double side[3] = { fd[e], (up - base) / eps[e],
                                   (base - down) / eps[e] };
                for (int k = 0; k < 3; k++)
                    ok |= fabs(side[k] - an) <= 2e-2 * fabs(side[k]) + 2e-3;
            }
            checked++;
            if (!ok) {
                bad++;
                fprintf(stderr, "%s: %s[%zu]: analytic %g, numeric %g / %g\n",
                        what, var->name, j, an, fd[0], fd[1]);
            }
        }
    }
    CHECKF(bad == 0 && checked >= min_checked, "%s: %d of %d gradients off",
           what, bad, checked);
    free(own);
    free(scratch);
    return base;
}

/* `half`, the same model as `whole` with its variables, steps on each half
 * of whole's batch as two replicas would (row0 set): the losses and the
 * gradients add up to whole's (`grads`, `loss`) within 1e-5. */
static inline void net_split_adds_up(net_t *whole, net_t *half,
                                     const float *grads, double loss,
                                     const char *what)
{
    memcpy(half->flat, whole->flat, whole->m.count * sizeof(float));
    float *g2 = calloc(whole->m.count, sizeof(float));
    float *sum = calloc(whole->m.count, sizeof(float));
    double total = 0.0;
    for (int part = 0; part < 2; part++) {
        size_t rows = ROWS / 2, dim = half->w.dim;
        memcpy(half->w.x, whole->w.x + part * rows * dim,
               rows * dim * sizeof(float));
        memcpy(half->w.y, (int32_t *)whole->w.y + part * rows, rows * sizeof(int32_t));
        half->w.row0 = part * rows;
        double l = 0.0;
        double cc = 0.0;
        CHECK(strata__model_step(&half->m, 0, &half->w, (int)rows, g2, 1.0f,
                                 &l, &cc) == 0);
        total += l;
        for (size_t i = 0; i < whole->m.count; i++)
            sum[i] += g2[i];
    }
    CHECKF(fabs(total - loss) < 1e-5 * loss, "%s: halves %g, whole %g", what,
           total, loss);
    double d2 = 0, n2 = 0;
    for (size_t i = 0; i < whole->m.count; i++) {
        d2 += (sum[i] - grads[i]) * (double)(sum[i] - grads[i]);
        n2 += (double)grads[i] * grads[i];
    }
    CHECKF(sqrt(d2 / n2) < 1e-5, "%s: split gradients: rel L2 %g", what,
           sqrt(d2 / n2));
    free(g2);
    free(sum);
}

/* Two ready nets whose variables have the same layout: given the same
 * initial values, the loss and the gradients of a step must be the same
 * bits. */
static inline void net_same_bits(net_t *x, net_t *y, const char *what)
{
    CHECKF(x->m.count == y->m.count && x->m.nvars == y->m.nvars,
           "%s: layouts differ", what);
    if (x->m.count != y->m.count)
        return;
    memcpy(y->flat, x->flat, x->m.count * sizeof(float));
    float *gx = calloc(x->m.count, sizeof(float));
    float *gy = calloc(x->m.count, sizeof(float));
    double lx = net_loss(x, gx), ly = net_loss(y, gy);
    CHECKF(lx == ly && memcmp(gx, gy, x->m.count * sizeof(float)) == 0,
           "%s: loss %.9g vs %.9g, or gradients differ", what, lx, ly);
    free(gx);
    free(gy);
}

#endif
