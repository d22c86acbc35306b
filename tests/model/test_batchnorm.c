/* batchnorm: the spec, its variables and state; the training forward
 * pass normalises each channel over the batch; the moving statistics
 * follow Keras's update and inference uses them; the gradients match
 * finite differences; and two replicas that sum their statistics
 * (SyncBatchNorm, two threads through the sum_replicas hook) compute one
 * device's loss and gradients on the whole batch. */
#include <pthread.h>

#include "graph_lines.h"
#include "net.h"

static const strata__shape_t k_img = { 5, 5, 3, 1 };

static int build_chain(const void *arg, strata__model_t *m)
{
    return strata__model_build(arg, "job.ini:7", &k_img, NCLS, m);
}

static int make(net_t *n, const char *spec)
{
    if (net_capture(build_chain, spec, &n->m, NULL, 0) != 0)
        return -1;
    return net_ready(n);
}

static void error_is(const char *spec, const char *want)
{
    static strata__model_t m;
    char err[1024];
    CHECK(net_capture(build_chain, spec, &m, err, sizeof err) ==
          STRATA_ECONFIG);
    CHECKF(strstr(err, want) != NULL, "'%s': got '%s', wanted '%s'", spec,
           err, want);
}

static void test_spec(void)
{
    static net_t n;
    CHECK(make(&n, "conv2d 4 3 padding=same, batchnorm momentum=0.9 "
                   "epsilon=0.01 sync=true, relu, flatten, dense 5") == 0);
    const strata__layer_t *bn = &n.m.layers[1];
    CHECK(bn->momentum == 0.9f && bn->epsilon == 0.01f && bn->sync == 1);
    CHECK(!strcmp(n.m.vars[2].name, "batchnorm_1/gamma") &&
          !strcmp(n.m.vars[3].name, "batchnorm_1/beta") &&
          n.m.vars[2].count == 4);
    CHECK(n.m.nstates == 2 && n.m.step_sums &&
          !strcmp(n.m.states[0].name, "batchnorm_1/moving_mean") &&
          !strcmp(n.m.states[1].name, "batchnorm_1/moving_variance"));
    CHECK(n.flat[n.m.vars[2].offset] == 1.0f &&
          n.flat[n.m.vars[3].offset] == 0.0f);
    float st[64];
    CHECK(n.m.state_count <= 64 &&
          strata__work_state_get(&n.m, &n.w, st) == 0);
    CHECK(st[n.m.states[0].offset] == 0.0f && st[n.m.states[1].offset] == 1.0f);
    net_free(&n);
    error_is("batchnorm momentum=1, flatten, dense 5",
             "layer 1 'batchnorm momentum=1': momentum '1': expected a "
             "number in [0, 1)");
    error_is("batchnorm epsilon=0, flatten, dense 5", "epsilon '0'");
    error_is("batchnorm sync=yes, flatten, dense 5",
             "sync 'yes': expected true or false");
    error_is("batchnorm 3, flatten, dense 5",
             "'3': expected momentum=M, epsilon=E or sync=true|false; "
             "expected 'batchnorm [momentum=M] [epsilon=E] "
             "[sync=true|false]'");
}

/* The training pass: batchnorm's output has, per channel, mean 0 and the
 * biased variance 1 (less epsilon's share); the moving statistics take 1 %
 * of the batch's; inference then normalises with them. */
static void test_forward(void)
{
    static net_t n;
    CHECK(make(&n, "batchnorm epsilon=0.001, flatten, dense 5") == 0);
    double loss = 0.0;
    double correct = 0.0;
    float *grads = calloc(n.m.count, sizeof(float));
    CHECK(strata__model_step(&n.m, 0, &n.w, ROWS, grads, 1.0f, &loss,
                             &correct) == 0);
    const int c = 3;
    const size_t pos = (size_t)ROWS * 25;
    float st[64];
    CHECK(strata__work_state_get(&n.m, &n.w, st) == 0);
    for (int j = 0; j < c; j++) {
        double s = 0, s2 = 0, y = 0, y2 = 0;
        for (size_t r = 0; r < pos; r++) {
            double x = n.w.x[r * c + j], o = n.w.act[0][r * c + j];
            s += x;
            s2 += x * x;
            y += o;
            y2 += o * o;
        }
        double mean = s / pos, var = s2 / pos - mean * mean;
        double ym = y / pos, yv = y2 / pos - ym * ym;
        CHECKF(fabs(ym) < 1e-5 && fabs(yv - var / (var + 1e-3)) < 1e-4,
               "channel %d: mean %g, var %g", j, ym, yv);
        CHECKF(fabs(st[n.m.states[0].offset + j] - 0.01 * mean) < 1e-6 &&
                   fabs(st[n.m.states[1].offset + j] -
                        (0.99 + 0.01 * var)) < 1e-6,
               "channel %d: moving %g %g", j, st[n.m.states[0].offset + j],
               st[n.m.states[1].offset + j]);
    }
    /* Inference: (x - moving mean) / sqrt(moving var + eps). */
    CHECK(strata__model_evaluate(&n.m, 0, &n.w, ROWS, &loss, &correct) == 0);
    for (int j = 0; j < c; j++) {
        double mm = st[n.m.states[0].offset + j];
        double mv = st[n.m.states[1].offset + j];
        double want = (n.w.x[j] - mm) / sqrt(mv + 1e-3);
        CHECKF(fabs(n.w.act[0][j] - want) < 1e-5, "inference: %g vs %g",
               n.w.act[0][j], want);
    }
    free(grads);
    net_free(&n);
}

static void test_gradients(void)
{
    static net_t n;
    CHECK(make(&n, "conv2d 4 3 padding=same, batchnorm, tanh, flatten, "
                   "dense 5") == 0);
    net_check_gradients(&n, "conv, batchnorm", 60, NULL);
    net_free(&n);
    CHECK(make(&n, "flatten, dense 8, batchnorm momentum=0.5 epsilon=0.1, "
                   "sigmoid, dense 6, batchnorm sync=true, dense 5") == 0);
    net_check_gradients(&n, "dense, batchnorm", 60, NULL);
    net_free(&n);
}

/* ---- two replicas, one batch --------------------------------------------- */

/* The core's sum across replicas, for two threads: each hands in its sums
 * and count; both get the total, added in replica order. */
typedef struct pair {
    pthread_barrier_t bar;
    double            part[2][64], count[2];
} pair_t;

typedef struct half {
    pair_t  *pair;
    int      r;
    net_t   *net;
    float   *grads;
    double   loss;
    int      rc;          /* the step's; checked on the main thread */
} half_t;

static int pair_sum(void *arg, double *sums, size_t n, double *count)
{
    half_t *h = arg;
    pair_t *p = h->pair;
    memcpy(p->part[h->r], sums, n * sizeof *sums);
    p->count[h->r] = *count;
    pthread_barrier_wait(&p->bar);
    for (size_t i = 0; i < n; i++)
        sums[i] = p->part[0][i] + p->part[1][i];
    *count = p->count[0] + p->count[1];
    pthread_barrier_wait(&p->bar);
    return 0;
}

static void *half_step(void *arg)
{
    half_t *h = arg;
    double correct = 0.0;
    h->rc = strata__model_step(&h->net->m, 0, &h->net->w, ROWS / 2, h->grads,
                               1.0f, &h->loss, &correct);
    return NULL;
}

static void test_sync_pair(void)
{
    const char *spec = "conv2d 4 3 padding=same, batchnorm sync=true, relu, "
                       "conv2d 3 3, batchnorm sync=true, tanh, flatten, "
                       "dense 5";
    static net_t whole, a, b;
    CHECK(make(&whole, spec) == 0 && make(&a, spec) == 0 &&
          make(&b, spec) == 0);
    float *gw = calloc(whole.m.count, sizeof(float));
    double lw = net_loss(&whole, gw);
    static pair_t pair;
    pthread_barrier_init(&pair.bar, NULL, 2);
    half_t h[2] = {
        { &pair, 0, &a, calloc(a.m.count, sizeof(float)), 0, -1 },
        { &pair, 1, &b, calloc(b.m.count, sizeof(float)), 0, -1 },
    };
    size_t rows = ROWS / 2, dim = a.w.dim;
    for (int r = 0; r < 2; r++) {
        net_t *n = h[r].net;
        memcpy(n->flat, whole.flat, whole.m.count * sizeof(float));
        memcpy(n->w.x, whole.w.x + r * rows * dim, rows * dim * sizeof(float));
        memcpy(n->w.y, (int32_t *)whole.w.y + r * rows, rows * sizeof(int32_t));
        n->w.row0 = r * rows;
        n->w.sum_replicas = pair_sum;
        n->w.sum_arg = &h[r];
    }
    pthread_t t[2];
    for (int r = 0; r < 2; r++)
        CHECK(pthread_create(&t[r], NULL, half_step, &h[r]) == 0);
    for (int r = 0; r < 2; r++)
        pthread_join(t[r], NULL);
    CHECK(h[0].rc == 0 && h[1].rc == 0);
    CHECKF(fabs(h[0].loss + h[1].loss - lw) < 1e-5 * lw,
           "halves %g + %g, whole %g", h[0].loss, h[1].loss, lw);
    double d2 = 0, n2 = 0;
    for (size_t i = 0; i < whole.m.count; i++) {
        double s = (double)h[0].grads[i] + h[1].grads[i];
        d2 += (s - gw[i]) * (s - gw[i]);
        n2 += (double)gw[i] * gw[i];
    }
    CHECKF(sqrt(d2 / n2) < 1e-5, "sync pair: gradients rel L2 %g",
           sqrt(d2 / n2));
    /* Both replicas moved their statistics alike, as one device did. */
    float sa[64], sb[64], sw[64];
    CHECK(strata__work_state_get(&a.m, &a.w, sa) == 0 &&
          strata__work_state_get(&b.m, &b.w, sb) == 0 &&
          strata__work_state_get(&whole.m, &whole.w, sw) == 0);
    CHECK(memcmp(sa, sb, a.m.state_count * sizeof(float)) == 0);
    double sd = 0;
    for (size_t i = 0; i < a.m.state_count; i++)
        sd = fmax(sd, fabs(sa[i] - sw[i]));
    CHECKF(sd < 1e-6, "moving statistics differ from one device by %g", sd);
    pthread_barrier_destroy(&pair.bar);
    free(h[0].grads);
    free(h[1].grads);
    free(gw);
    net_free(&whole);
    net_free(&a);
    net_free(&b);
}

int main(void)
{
    test_spec();
    test_forward();
    test_gradients();
    test_sync_pair();
    return CHECK_DONE();
}
