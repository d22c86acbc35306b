/* conv_bench: every conv2d shape of etc/resnet.ini, etc/cnn.ini and
 * etc/seeds-cnn.ini (28x28x1 inputs) at a batch of 64 (one replica's half
 * of 128), each op -- forward, backward-data, backward-weights -- on the
 * im2col + GEMM path and on the direct path (kernels_cpu.h), in GFLOP/s
 * per CPU-second of the process (every thread: time other processes take
 * on a shared machine does not count), best of --reps.
 *
 *   conv_bench [--reps N] [--peak GFLOPS] [--batch N] [--paths gemm,avx512]
 *
 * FLOPs of every op: 2 n oh ow f kh kw c. Backward-weights is
 * kc_conv2d_bwd with dX = NULL (bias gradient included); backward-data is
 * kc_conv2d_bwd with dX minus that. GEMM runs as the layer runs it: the
 * workspace holds the batch, so backward reuses forward's im2col. With
 * --peak (fma_peak's fp32 GFLOP/s per core) each rate also prints as a
 * fraction of it. The path bf16 (`--paths avx512,bf16`, where the CPU has
 * AVX512_BF16) is [train] precision = mixed_bfloat16's kernels
 * (kc_conv2d_*_bf16, kc_dense_*_bf16: bf16 inputs, fp32 sums; a conv2d
 * of one input channel in float32, as training runs it), rated against the same fp32
 * peak (fma_peak prints the bf16 one too).
 *
 * The dense layers of the two CNNs run too (kc_dense_fwd / _bwd: the
 * direct micro-kernel, or CBLAS on the gemm path; FLOPs 2 n k u per op),
 * and a summary per model adds up one replica's step of its GEMM-shaped
 * ops (forward, dW and dX of every conv2d and dense, no dX for the first
 * layer): `--model keras|seeds|resnet` runs only that model's shapes.
 * The last line is JSON. */
#include "kernels_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern void openblas_set_num_threads(int n);

/* A conv2d (k > 0) or a dense layer (k == 0: c inputs, f outputs). */
struct shape {
    const char *name;
    int h, w, c, k, f, s, same;
};

static const struct shape shapes[] = {
    { "resnet stem", 28, 28, 1, 3, 16, 1, 1 },
    { "resnet s1 3x3", 28, 28, 16, 3, 16, 1, 1 },
    { "resnet s2_c1 s2", 28, 28, 16, 3, 32, 2, 1 },
    { "resnet s2 3x3", 14, 14, 32, 3, 32, 1, 1 },
    { "resnet s2_pc 1x1 s2", 28, 28, 16, 1, 32, 2, 0 },
    { "resnet s3_c1 s2", 14, 14, 32, 3, 64, 2, 1 },
    { "resnet s3 3x3", 7, 7, 64, 3, 64, 1, 1 },
    { "resnet s3_pc 1x1 s2", 14, 14, 32, 1, 64, 2, 0 },
    { "cnn conv1", 28, 28, 1, 3, 32, 1, 0 },
    { "cnn conv2", 13, 13, 32, 3, 64, 1, 0 },
    { "seeds conv1", 28, 28, 1, 3, 32, 1, 0 },
    { "seeds conv2", 26, 26, 32, 3, 64, 1, 0 },
    { "cnn dense", 0, 0, 1600, 0, 10, 0, 0 },
    { "seeds dense1", 0, 0, 36864, 0, 64, 0, 0 },
    { "seeds dense2", 0, 0, 64, 0, 10, 0, 0 },
};
enum { NSHAPES = sizeof shapes / sizeof *shapes };

/* How many times each shape runs in one step of each model; a first layer
 * (one channel) computes no dX. ResNet-14: two blocks a stage, s1's 3x3
 * four times, s2's and s3's stride-1 3x3 three times (its dense layer,
 * 64 -> 10 after global pooling, is left out: 0.01 % of the FLOPs). */
static const struct model {
    const char *key, *name;
    int count[NSHAPES];
} models[] = {
    { "resnet", "ResNet-14", { 1, 4, 1, 3, 1, 1, 3, 1 } },
    { "keras", "Keras CNN", { [8] = 1, [9] = 1, [12] = 1 } },
    { "seeds", "seeds' CNN", { [10] = 1, [11] = 1, [13] = 1, [14] = 1 } },
};
enum { NMODELS = sizeof models / sizeof *models };

static int axis(int n, int k, int s, int same, int *pad)
{
    if (!same) {
        *pad = 0;
        return (n - k) / s + 1;
    }
    int out = (n + s - 1) / s, total = (out - 1) * s + k - n;
    *pad = total > 0 ? total / 2 : 0;
    return out;
}

/* CPU time of the process (every thread), to the nanosecond: getrusage's
 * is counted in scheduler ticks, too coarse to time one call. The
 * kernels make no system calls, so this is their user time. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fill(float *x, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

/* n floats at a 64-byte boundary, as strata's buffers (core/device's
 * host allocations): glibc's malloc returns large blocks 16 bytes past a
 * page, where every 64-byte vector store would cross two cache lines. */
static float *falloc(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    return aligned_alloc(64, bytes ? bytes : 64);
}

enum { FWD, BWD_W, BWD_ALL };

/* the bf16 path: its workspace (kops_conv2d_bf16_len) when on */
static float *g_work;
static size_t g_wlen;

static void fwd(const kops_conv2d_t *g, const float *X, const float *W,
                const float *b, float *Y, float *col, size_t len)
{
    if (g_work)
        kc_conv2d_fwd_bf16(g, X, W, b, Y, g_work, g_wlen);
    else
        kc_conv2d_fwd(g, X, W, b, Y, col, len);
}

/* Half a second of one shape's forward, untimed: the first shape timed
 * in a process ran at half its rate for its first ~150 ms (the seeds'
 * conv2 forward: 42 and 35 ms a call, then 17-19), which best of 3 reps
 * did not outlast: the core's clock comes up under load. */
static void warm_up(void)
{
    kops_conv2d_t g = { .n = 8, .h = 26, .w = 26, .c = 32, .kh = 3, .kw = 3,
                        .f = 64, .stride_h = 1, .stride_w = 1, .oh = 24,
                        .ow = 24 };
    size_t nx = 8u * 26 * 26 * 32, ny = 8u * 24 * 24 * 64, nw = 9u * 32 * 64;
    size_t len = kc_conv2d_col_len(&g);
    float *X = calloc(nx, 4), *W = calloc(nw, 4), *Y = malloc(ny * 4),
          *col = malloc(len * 4);
    double t0 = cpu_seconds();
    while (X && W && Y && col && cpu_seconds() - t0 < 0.5)
        kc_conv2d_fwd(&g, X, W, NULL, Y, col, len);
    free(X), free(W), free(Y), free(col);
}

/* The memory's rate in bytes per CPU-second, read and written counted
 * (memcpy of 64 MiB, best of 5): with --peak, each model's summary adds
 * the bound that follows from it and the peak -- every op at least its
 * FLOPs at the peak and at least its operands and result (once each)
 * through memory at this rate. */
static double copy_rate(void)
{
    size_t n = (size_t)64 << 20;
    char *a = malloc(n), *b = malloc(n);
    double bestt = 1e30;
    if (!a || !b) {
        free(a), free(b);
        return 0;
    }
    memset(a, 1, n), memset(b, 2, n);
    for (int r = 0; r < 5; r++) {
        double t0 = cpu_seconds();
        memcpy(r % 2 ? a : b, r % 2 ? b : a, n);
        double t = cpu_seconds() - t0;
        if (t < bestt)
            bestt = t;
    }
    free(a), free(b);
    return 2.0 * (double)n / bestt;
}

/* user-CPU seconds of one call, best of reps (each rep repeats the call
 * until it has run >= 20 ms of CPU) */
static double best(int op, const kops_conv2d_t *g, const float *X,
                   const float *W, const float *b, float *Y, const float *dY,
                   float *dW, float *db, float *dX, float *col, size_t len,
                   int reps)
{
    double bestt = 1e30;
    kops_conv2d_t gb = *g;
    gb.col_ready = 1;
    for (int r = 0; r < reps; r++) {
        int calls = 0;
        double t = 0;
        do {
            /* backward after a forward (untimed): as in a step, col holds
             * the forward's im2col on the GEMM path */
            if (op != FWD && g->kh > 0)
                fwd(g, X, W, b, Y, col, len);
            double t0 = cpu_seconds();
            if (g->kh == 0 && op == FWD && g_work)
                kc_dense_fwd_bf16(g->n, g->c, g->f, X, W, b, Y, g_work,
                                  g_wlen);
            else if (g->kh == 0 && op == FWD)
                kc_dense_fwd(g->n, g->c, g->f, X, W, b, Y);
            else if (g->kh == 0 && g_work)
                kc_dense_bwd_bf16(g->n, g->c, g->f, X, W, dY, dW, db,
                                  op == BWD_ALL ? dX : NULL, g_work, g_wlen);
            else if (g->kh == 0)
                kc_dense_bwd(g->n, g->c, g->f, X, W, dY, dW, db,
                             op == BWD_ALL ? dX : NULL);
            else if (op == FWD)
                fwd(g, X, W, b, Y, col, len);
            else if (g_work)
                kc_conv2d_bwd_bf16(g, X, W, dY, dW, db,
                                   op == BWD_ALL ? dX : NULL, g_work, g_wlen);
            else
                kc_conv2d_bwd(&gb, X, W, dY, dW, db,
                              op == BWD_ALL ? dX : NULL, col, len);
            t += cpu_seconds() - t0;
            calls++;
        } while (t < 0.05);
        if (t / calls < bestt)
            bestt = t / calls;
    }
    return bestt;
}

int main(int argc, char **argv)
{
    int reps = 5, batch = 64, only = -1;
    double peak = 0;
    const char *paths = "gemm,auto";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--peak") && i + 1 < argc)
            peak = atof(argv[++i]);
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--paths") && i + 1 < argc)
            paths = argv[++i];
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            const char *key = argv[++i];
            for (only = 0; only < NMODELS; only++)
                if (!strcmp(key, models[only].key))
                    break;
            if (only == NMODELS) {
                fprintf(stderr, "conv_bench: --model %s: not resnet, keras "
                                "or seeds\n", key);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: conv_bench [--reps N] [--peak GFLOPS] "
                            "[--batch N] [--paths gemm,auto,scalar,avx2,avx512,bf16] "
                            "[--model resnet|keras|seeds]\n");
            return 2;
        }
    }
    openblas_set_num_threads(1);
    warm_up();
    static const char *const names[] = { "auto", "gemm", "scalar", "avx2",
                                         "avx512", "bf16" };
    /* a conv the direct kernels take: its path is the dense layers' too */
    kops_conv2d_t probe = { .n = 1, .h = 26, .w = 26, .c = 32, .kh = 3,
                            .kw = 3, .f = 64, .stride_h = 1, .stride_w = 1,
                            .oh = 24, .ow = 24 };
    enum { BF16 = 5 };
    int np = 0, plist[6];
    for (int p = 0; p < 6; p++) {
        const char *at = strstr(paths, names[p]);
        size_t ln = strlen(names[p]);
        if (at && (at[ln] == ',' || at[ln] == 0) &&
            (at == paths || at[-1] == ','))
            plist[np++] = p;
    }
    printf("%-20s %-6s %8s %8s %8s  (GFLOP/s per user-CPU-second%s)\n",
           "shape", "path", "fwd", "bwd-data", "bwd-w",
           peak > 0 ? "; % of FMA peak" : "");
    double step_t[NMODELS][6] = { { 0 } }, step_fl[NMODELS] = { 0 };
    double bw = peak > 0 ? copy_rate() : 0, step_bound[NMODELS] = { 0 };
    if (bw > 0)
        printf("memory: %.1f GB/s per CPU-second (memcpy of 64 MiB, read "
               "and written)\n", bw * 1e-9);
    char json[8192];
    size_t jl = (size_t)snprintf(json, sizeof json, "{\"batch\": %d, "
                                 "\"peak\": %.2f, \"rows\": [", batch, peak);
    for (int si = 0; si < NSHAPES; si++) {
        const struct shape *sh = &shapes[si];
        if (only >= 0 && !models[only].count[si])
            continue;
        int dense = sh->k == 0;
        kops_conv2d_t g = { batch, sh->h, sh->w, sh->c, sh->k, sh->k, sh->f,
                            sh->s, sh->s, 0, 0, 0, 0, 0, 0 };
        if (dense) {
            g.h = g.w = g.oh = g.ow = 1;
        } else {
            g.oh = axis(sh->h, sh->k, sh->s, sh->same, &g.pad_top);
            g.ow = axis(sh->w, sh->k, sh->s, sh->same, &g.pad_left);
        }
        size_t nx = (size_t)batch * g.h * g.w * g.c,
               ny = (size_t)batch * g.oh * g.ow * g.f,
               nw = (size_t)(dense ? 1 : g.kh * g.kw) * g.c * g.f;
        size_t len = dense ? 1 : kc_conv2d_col_len(&g) * (size_t)batch;
        float *X = falloc(nx), *W = falloc(nw), *b = falloc((size_t)g.f),
              *Y = falloc(ny), *dY = falloc(ny), *dW = falloc(nw),
              *db = falloc((size_t)g.f), *dX = falloc(nx), *col = falloc(len);
        if (!X || !W || !b || !Y || !dY || !dW || !db || !dX || !col)
            return 1;
        fill(X, nx, 1), fill(W, nw, 2), fill(b, (size_t)g.f, 3),
            fill(dY, ny, 4);
        double fl = 2.0 * (double)ny * (dense ? 1 : g.kh * g.kw) * g.c;
        /* a first layer (c = 1) has no dX to compute in a step; each op
         * reads two of X, W, Y's gradient and writes the third (fwd: Y) */
        double by[3] = { 4.0 * (double)(nx + nw + ny),
                         4.0 * (double)(nx + ny + nw),
                         4.0 * (double)(ny + nw + nx) };
        for (int mi = 0; mi < NMODELS; mi++) {
            step_fl[mi] += (sh->c == 1 ? 2 : 3) * fl * models[mi].count[si];
            for (int op = 0; bw > 0 && op < (sh->c == 1 ? 2 : 3); op++) {
                double tc = fl / (peak * 1e9), tm = by[op] / bw;
                step_bound[mi] += (tc > tm ? tc : tm) * models[mi].count[si];
            }
        }
        for (int k = 0; k < np; k++) {
            int p = plist[k];
            int eff = p;
            if (p == BF16 && !dense && sh->c == 1) {
                /* mixed_bfloat16 keeps a conv2d of one input channel in
                 * float32 (core/run/precision.c): the step counts that */
                kc_conv2d_force_path(KC_CONV_AUTO);
                eff = kc_conv2d_path(&g);
            } else if (p == BF16) {
                if (!kc_bf16_usable())
                    continue;
                g_wlen = dense ? kops_dense_bf16_len(g.n, g.c, g.f)
                               : kops_conv2d_bf16_len(&g);
                if (!(g_work = malloc(g_wlen * sizeof *g_work)))
                    return 1;
            } else {
                if (kc_conv2d_force_path(p) != 0)
                    continue;
                /* a dense layer takes the path's micro-kernel (gemm: CBLAS) */
                eff = kc_conv2d_path(dense ? &probe : &g);
            }
            double tf = best(FWD, &g, X, W, b, Y, dY, dW, db, dX, col, len, reps);
            double tw = best(BWD_W, &g, X, W, b, Y, dY, dW, db, dX, col, len, reps);
            double ta = best(BWD_ALL, &g, X, W, b, Y, dY, dW, db, dX, col, len, reps);
            double td = ta - tw;
            if (td < 1e-9)
                td = 1e-9;
            for (int mi = 0; mi < NMODELS; mi++)
                step_t[mi][p] += (tf + (sh->c == 1 ? tw : ta)) *
                                 models[mi].count[si];
            double r[3] = { fl / tf * 1e-9, fl / td * 1e-9, fl / tw * 1e-9 };
            printf("%-20s %-6s %8.1f %8.1f %8.1f", sh->name, names[eff], r[0],
                   r[1], r[2]);
            if (peak > 0)
                printf("   %3.0f%% %3.0f%% %3.0f%%", 100 * r[0] / peak,
                       100 * r[1] / peak, 100 * r[2] / peak);
            printf("\n");
            jl += (size_t)snprintf(json + jl, sizeof json - jl,
                                   "%s{\"shape\": \"%s\", \"path\": \"%s\", "
                                   "\"fwd\": %.2f, \"bwd_data\": %.2f, "
                                   "\"bwd_w\": %.2f}",
                                   jl > 40 && json[jl - 1] == '}' ? ", " : "",
                                   sh->name, names[eff], r[0], r[1], r[2]);
            free(g_work);
            g_work = NULL;
        }
        kc_conv2d_force_path(KC_CONV_AUTO);
        free(X), free(W), free(b), free(Y), free(dY), free(dW), free(db),
            free(dX), free(col);
    }
    jl += (size_t)snprintf(json + jl, sizeof json - jl, "], \"steps\": [");
    const char *sep = "";
    for (int mi = 0; mi < NMODELS; mi++) {
        if (only >= 0 && mi != only)
            continue;
        for (int k = 0; k < np; k++) {
            double t = step_t[mi][plist[k]];
            if (t <= 0)
                continue;
            double rate = step_fl[mi] / t * 1e-9;
            printf("%s step's GEMM ops (conv2d%s fwd + bwd, no dX for the "
                   "first layer), %-6s: %.1f GFLOP/s", models[mi].name,
                   mi ? " and dense" : "", names[plist[k]], rate);
            double bound = step_bound[mi] > 0
                               ? step_fl[mi] / step_bound[mi] * 1e-9 / peak
                               : 0;
            if (peak > 0)
                printf(" (%.1f %% of the FMA peak; bound %.1f %%)",
                       100 * rate / peak, 100 * bound);
            printf(", %.1f ms of CPU for one replica\n", 1e3 * t);
            jl += (size_t)snprintf(json + jl, sizeof json - jl,
                                   "%s{\"model\": \"%s\", \"path\": "
                                   "\"%s\", \"gflops\": %.2f, \"ms\": %.3f, "
                                   "\"bound\": %.4f}",
                                   sep, models[mi].key, names[plist[k]], rate,
                                   1e3 * t, bound);
            sep = ", ";
        }
    }
    printf("%s]}\n", json);
    return 0;
}
