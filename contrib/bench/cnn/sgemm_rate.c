/* sgemm_rate: single-thread SGEMM rate at a model's own GEMM shapes, and the
 * GEMM-bound training throughput that follows from it.
 *
 *   cc -O2 -o sgemm_rate sgemm_rate.c -lopenblas
 *   OPENBLAS_NUM_THREADS=1 ./sgemm_rate --layers "conv2d 32 3 relu, ..." \
 *       --batch 64 [--input 28,28,1] [--min-time 0.1]
 *
 * Layers use strata's [model] layers syntax (NHWC): conv2d F K [stride=S]
 * [padding=valid|same] [ACT], maxpool2d P [stride=S], flatten, dropout R,
 * global_avgpool2d, dense U [ACT]. Every conv2d is counted as an im2col
 * GEMM, every dense as a plain one. A graph that is not a chain (a ResNet's
 * projection shortcut) is written as its chain plus `side` convolutions:
 * `conv2d F K ... side` is counted on the current input and leaves the
 * chain's shape as it was (write it before the chain's layers that read the
 * same input). Per layer of a training step:
 *
 *   conv2d  forward  Y[M,F]    = col[M,K] . W[K,F]     M = N*oh*ow, K = k*k*c
 *           backward dW[K,F]   = col^T . dY
 *                    dcol[M,K] = dY . W^T   (not for the first layer: the
 *                                            input needs no gradient)
 *   dense   forward  Y[N,U]    = X[N,D] . W[D,U]
 *           backward dW = X^T . dY,  dX = dY . W^T (not for the first layer)
 *
 * Each GEMM is timed with cblas_sgemm (row-major) on its own buffers, called
 * repeatedly for at least --min-time seconds (and 3 calls); its time is the
 * median call (the machine is shared: the median is what a steady training
 * loop sees, the minimum would be an unreachable best case). Pooling,
 * activations, dropout, softmax, bias adds and the optimizer are left out:
 * the bound is "only the GEMMs, at this machine's single-thread SGEMM rate".
 *
 * Printed: one line per GEMM, then the GEMM FLOPs per sample of a training
 * step, and the GEMM-bound samples/s
 *   1 core:  N / (sum of the GEMM times at batch N)
 *   2 cores: 2 * (N/2) / (sum of the GEMM times at batch N/2): two replicas,
 *            one core each, each with half the global batch (N even only)
 * and, last, the same as one JSON line for bench.py.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_GEMMS 64

struct gemm {
    char what[48];         /* e.g. "conv2d_1 fwd" */
    int ta, tb;            /* transpose A / B */
    long m, n, k;          /* C[m,n] = op(A)[m,k] . op(B)[k,n] */
};

/* GEMMs of one training step per sample: the batch multiplies m (forward,
 * dX, dcol) or k (dW) when timed. */
static struct gemm G[MAX_GEMMS];
static int ng;

static void die(const char *msg, const char *arg)
{
    fprintf(stderr, "sgemm_rate: %s%s%s\n", msg, arg ? ": " : "",
            arg ? arg : "");
    exit(2);
}

static void add(const char *layer, const char *op, int ta, int tb, long m,
                long n, long k)
{
    if (ng == MAX_GEMMS)
        die("too many GEMMs", NULL);
    snprintf(G[ng].what, sizeof G[ng].what, "%s %s", layer, op);
    G[ng].ta = ta;
    G[ng].tb = tb;
    G[ng].m = m;
    G[ng].n = n;
    G[ng].k = k;
    ng++;
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = 0;
    return s;
}

/* Parse the layers at per-sample granularity: every m below is per sample
 * (rows of one sample), multiplied by the batch when timed. */
static void parse(const char *layers, long h, long w, long c)
{
    char *buf = strdup(layers), *save = NULL, *tok;
    int idx = 0, first = 1;
    long flat = 0; /* > 0 once flattened or after a dense */
    for (tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *l = trim(tok), *save2 = NULL, *word[8];
        int nw = 0;
        char name[32];
        for (char *t = strtok_r(l, " \t", &save2); t && nw < 8;
             t = strtok_r(NULL, " \t", &save2))
            word[nw++] = t;
        if (nw == 0)
            die("empty layer in", layers);
        idx++;
        snprintf(name, sizeof name, "%s_%d", word[0], idx);
        if (!strcmp(word[0], "conv2d")) {
            if (nw < 3 || flat)
                die("bad conv2d layer (conv2d F K after an image)", word[0]);
            long f = atol(word[1]), k = atol(word[2]), s = 1;
            int same = 0, side = 0;
            for (int i = 3; i < nw; i++) {
                if (!strncmp(word[i], "stride=", 7))
                    s = atol(word[i] + 7);
                else if (!strcmp(word[i], "padding=same"))
                    same = 1;
                else if (!strcmp(word[i], "side"))
                    side = 1;
            }
            if (side && first)
                die("a side conv2d cannot be the first layer", name);
            if (f < 1 || k < 1 || s < 1)
                die("bad conv2d numbers", word[1]);
            long oh = same ? (h + s - 1) / s : (h - k) / s + 1;
            long ow = same ? (w + s - 1) / s : (w - k) / s + 1;
            if (oh < 1 || ow < 1)
                die("conv2d kernel larger than its input", name);
            long m = oh * ow, kk = k * k * c;
            add(name, "fwd  Y=col.W", 0, 0, m, f, kk);
            add(name, "bwd dW=col^T.dY", 1, 0, kk, f, m); /* m: K side */
            if (!first)
                add(name, "bwd dcol=dY.W^T", 0, 1, m, kk, f);
            if (side)
                continue;
            h = oh;
            w = ow;
            c = f;
            first = 0;
        } else if (!strcmp(word[0], "maxpool2d")) {
            if (nw < 2 || flat)
                die("bad maxpool2d layer", name);
            long p = atol(word[1]), s = p;
            for (int i = 2; i < nw; i++)
                if (!strncmp(word[i], "stride=", 7))
                    s = atol(word[i] + 7);
            if (p < 1 || s < 1)
                die("bad maxpool2d numbers", word[1]);
            h = (h - p) / s + 1;
            w = (w - p) / s + 1;
        } else if (!strcmp(word[0], "flatten")) {
            flat = h * w * c;
        } else if (!strcmp(word[0], "global_avgpool2d")) {
            if (flat)
                die("global_avgpool2d after a flat layer", name);
            flat = c;
        } else if (!strcmp(word[0], "dropout")) {
            /* no GEMM */
        } else if (!strcmp(word[0], "dense")) {
            if (nw < 2)
                die("bad dense layer", name);
            long d = flat ? flat : h * w * c, u = atol(word[1]);
            if (u < 1)
                die("bad dense units", word[1]);
            add(name, "fwd  Y=X.W", 0, 0, 1, u, d);
            add(name, "bwd dW=X^T.dY", 1, 0, d, u, 1); /* k side: batch */
            if (!first)
                add(name, "bwd dX=dY.W^T", 0, 1, 1, d, u);
            flat = u;
            first = 0;
        } else {
            die("unknown layer", word[0]);
        }
    }
    free(buf);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float *buffer(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    if (!p)
        die("out of memory", NULL);
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        p[i] = (float)((s >> 9) & 0xffff) / 65536.0f - 0.5f;
    }
    return p;
}

/* Median seconds of one call of C[m,n] = op(A) op(B) with inner k. */
static double time_gemm(int ta, int tb, long m, long n, long k,
                        double min_time)
{
    float *a = buffer((size_t)m * k), *b = buffer((size_t)k * n),
          *c = buffer((size_t)m * n);
    long lda = ta ? m : k, ldb = tb ? k : n;
    enum CBLAS_TRANSPOSE TA = ta ? CblasTrans : CblasNoTrans,
                         TB = tb ? CblasTrans : CblasNoTrans;
    static double t[100000];
    int nt = 0;
    cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, 1.0f, a, lda, b, ldb, 0.0f,
                c, n); /* warm-up: page faults, OpenBLAS buffers */
    double start = now();
    while (nt < 3 || (now() - start < min_time && nt < 100000)) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, TA, TB, m, n, k, 1.0f, a, lda, b, ldb,
                    0.0f, c, n);
        t[nt++] = now() - t0;
    }
    qsort(t, nt, sizeof t[0], cmpd);
    free(a);
    free(b);
    free(c);
    return t[nt / 2];
}

/* Time every GEMM at batch n; print them when verbose; return seconds per
 * training step (GEMMs only). */
static double step_time(long batch, double min_time, int verbose)
{
    double total = 0;
    for (int i = 0; i < ng; i++) {
        struct gemm *g = &G[i];
        /* the per-sample side scales with the batch: m for forward and
         * dX/dcol, k for dW */
        long m = g->m, n = g->n, k = g->k;
        if (strstr(g->what, "dW"))
            k *= batch;
        else
            m *= batch;
        double s = time_gemm(g->ta, g->tb, m, n, k, min_time);
        double fl = 2.0 * m * n * k;
        total += s;
        if (verbose)
            printf("  %-28s %8ld %6ld %6ld %c%c %10.1f %9.3f\n", g->what, m,
                   n, k, g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', fl / s / 1e9,
                   s * 1e3);
    }
    return total;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: sgemm_rate --layers SPEC --batch N [--input H,W,C] "
            "[--min-time S] [--quiet]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *layers = NULL;
    long batch = 0, h = 28, w = 28, c = 1;
    double min_time = 0.1;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--layers") && i + 1 < argc)
            layers = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atol(argv[++i]);
        else if (!strcmp(argv[i], "--input") && i + 1 < argc) {
            if (sscanf(argv[++i], "%ld,%ld,%ld", &h, &w, &c) != 3)
                usage();
        } else if (!strcmp(argv[i], "--min-time") && i + 1 < argc)
            min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--quiet"))
            quiet = 1;
        else
            usage();
    }
    if (!layers || batch < 1 || h < 1 || w < 1 || c < 1 || min_time < 0)
        usage();
    const char *obt = getenv("OPENBLAS_NUM_THREADS");
    if (!obt || strcmp(obt, "1"))
        fprintf(stderr, "sgemm_rate: warning: OPENBLAS_NUM_THREADS is %s, "
                        "not 1: the rate is not single-thread\n",
                obt ? obt : "unset");
    parse(layers, h, w, c);

    double flops = 0; /* GEMM FLOPs per sample of one training step */
    double fwd = 0;
    for (int i = 0; i < ng; i++) {
        double f = 2.0 * G[i].m * G[i].n * G[i].k;
        flops += f;
        if (strstr(G[i].what, "fwd"))
            fwd += f;
    }
    if (!quiet) {
        printf("model: %s\n", layers);
        printf("GEMMs of one training step at batch %ld (1 thread, median "
               "call):\n", batch);
        printf("  %-28s %8s %6s %6s %2s %10s %9s\n", "gemm", "M", "N", "K",
               "op", "GFLOP/s", "ms/call");
    }
    double t1 = step_time(batch, min_time, !quiet);
    double bound1 = batch / t1, bound2 = 0, t2 = 0;
    if (batch % 2 == 0) {
        if (!quiet)
            printf("the same at batch %ld (one replica of 2):\n", batch / 2);
        t2 = step_time(batch / 2, min_time, !quiet);
        bound2 = 2.0 * (batch / 2) / t2;
    }
    if (!quiet) {
        printf("GEMM FLOPs per sample: %.2f MFLOP per training step "
               "(forward %.2f MFLOP)\n", flops / 1e6, fwd / 1e6);
        printf("single-thread SGEMM rate over the step: %.1f GFLOP/s at "
               "batch %ld", flops * batch / t1 / 1e9, batch);
        if (t2 > 0)
            printf(", %.1f GFLOP/s at batch %ld", flops * (batch / 2) / t2 /
                   1e9, batch / 2);
        printf("\nGEMM-bound samples/s: %.0f on 1 core, %.0f on 2 cores\n",
               bound1, bound2);
    }
    printf("{\"batch\": %ld, \"gemm_flops_per_sample\": %.0f, "
           "\"forward_flops_per_sample\": %.0f, \"gflops_1thread\": %.3f, "
           "\"gflops_1thread_half\": %.3f, \"bound_1core\": %.3f, "
           "\"bound_2core\": %.3f}\n",
           batch, flops, fwd, flops * batch / t1 / 1e9,
           t2 > 0 ? flops * (batch / 2) / t2 / 1e9 : 0.0, bound1, bound2);
    return 0;
}
