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
 * (kc_conv2d_*_bf16: bf16 inputs, fp32 sums), rated against the same fp32
 * peak (fma_peak prints the bf16 one too). The last line is JSON. */
#include "kernels_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern void openblas_set_num_threads(int n);

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
};
/* how many times each shape runs in one ResNet-14 step (two blocks a
 * stage: s1's 3x3 four times, s2's and s3's stride-1 3x3 three times) */
static const int per_step[] = { 1, 4, 1, 3, 1, 1, 3, 1, 0, 0, 0, 0 };

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
            if (op != FWD)
                fwd(g, X, W, b, Y, col, len);
            double t0 = cpu_seconds();
            if (op == FWD)
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
    int reps = 5, batch = 64;
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
        else {
            fprintf(stderr, "usage: conv_bench [--reps N] [--peak GFLOPS] "
                            "[--batch N] [--paths gemm,auto,scalar,avx2,avx512,bf16]\n");
            return 2;
        }
    }
    openblas_set_num_threads(1);
    warm_up();
    static const char *const names[] = { "auto", "gemm", "scalar", "avx2",
                                         "avx512", "bf16" };
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
    double step_t[6] = { 0 }, step_fl = 0;
    char json[8192];
    size_t jl = (size_t)snprintf(json, sizeof json, "{\"batch\": %d, "
                                 "\"peak\": %.2f, \"rows\": [", batch, peak);
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const struct shape *sh = &shapes[si];
        kops_conv2d_t g = { batch, sh->h, sh->w, sh->c, sh->k, sh->k, sh->f,
                            sh->s, sh->s, 0, 0, 0, 0, 0, 0 };
        g.oh = axis(sh->h, sh->k, sh->s, sh->same, &g.pad_top);
        g.ow = axis(sh->w, sh->k, sh->s, sh->same, &g.pad_left);
        size_t nx = (size_t)batch * g.h * g.w * g.c,
               ny = (size_t)batch * g.oh * g.ow * g.f,
               nw = (size_t)g.kh * g.kw * g.c * g.f;
        size_t len = kc_conv2d_col_len(&g) * (size_t)batch;
        float *X = malloc(nx * 4), *W = malloc(nw * 4), *b = malloc(g.f * 4u),
              *Y = malloc(ny * 4), *dY = malloc(ny * 4), *dW = malloc(nw * 4),
              *db = malloc(g.f * 4u), *dX = malloc(nx * 4),
              *col = malloc(len * 4);
        if (!X || !W || !b || !Y || !dY || !dW || !db || !dX || !col)
            return 1;
        fill(X, nx, 1), fill(W, nw, 2), fill(b, (size_t)g.f, 3),
            fill(dY, ny, 4);
        double fl = 2.0 * (double)ny * g.kh * g.kw * g.c;
        step_fl += (sh->c == 1 ? 2 : 3) * fl * per_step[si];
        for (int k = 0; k < np; k++) {
            int p = plist[k];
            int eff = p;
            if (p == BF16) {
                if (!kc_bf16_usable())
                    continue;
                g_wlen = kops_conv2d_bf16_len(&g);
                if (!(g_work = malloc(g_wlen * sizeof *g_work)))
                    return 1;
            } else {
                if (kc_conv2d_force_path(p) != 0)
                    continue;
                eff = kc_conv2d_path(&g);
            }
            double tf = best(FWD, &g, X, W, b, Y, dY, dW, db, dX, col, len, reps);
            double tw = best(BWD_W, &g, X, W, b, Y, dY, dW, db, dX, col, len, reps);
            double ta = best(BWD_ALL, &g, X, W, b, Y, dY, dW, db, dX, col, len, reps);
            double td = ta - tw;
            if (td < 1e-9)
                td = 1e-9;
            /* a first layer (c = 1) has no dX to compute in a step */
            step_t[p] += (tf + (sh->c == 1 ? tw : ta)) * per_step[si];
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
    for (int k = 0; k < np; k++)
        printf("ResNet-14 step's convs (fwd + bwd, no dX for the stem), "
               "%-6s: %.1f GFLOP/s, %.1f ms of CPU for one replica\n",
               names[plist[k]],
               step_fl / step_t[plist[k]] * 1e-9, 1e3 * step_t[plist[k]]);
    printf("%s]}\n", json);
    return 0;
}
