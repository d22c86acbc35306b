/* fma_peak: the machine's peak FP32 FMA rate per core, the physical limit
 * that a compute-bound step is a fraction of (a BLAS's GEMM rate is only
 * what one library reaches).
 *
 *   cc -O2 -o fma_peak fma_peak.c -lpthread
 *   ./fma_peak [--threads N] [--seconds S]
 *
 * Each thread runs an unrolled loop of independent FMAs on registers
 * (12 accumulators: more than latency x ports on every x86 core since
 * Haswell, so the loop is bound by the FMA ports alone), at the widest
 * vector the CPU has: AVX-512 (16 floats), AVX2 (8), else SSE multiply-add
 * (4, two instructions). Where AVX512_BF16 exists it also times VDPBF16PS
 * (bf16 pairs into fp32: 64 FLOP per instruction), and where AMX-BF16
 * exists TDPBF16PS on tiles (16 x 16 x 32 products an instruction). A rate is the best of
 * 5 runs of S/5 seconds each (interference only ever slows a run down);
 * with N threads every thread runs at once and the rate is per core, the
 * figure for N replicas. Prints one line per kind and a JSON line. */
#define _GNU_SOURCE
#include <cpuid.h>
#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define ACC 12
/* The ACC accumulators by name, so that they live in registers: an array
 * indexed in a loop that the compiler does not unroll goes through the
 * stack, and store-to-load latency then bounds the loop, not the FMAs. */
#define EACH(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Each kernel runs `iters` rounds of ACC FMAs and returns the FLOPs done;
 * the sum it stores keeps the compiler from dropping the loop. */
static volatile float g_sink;

__attribute__((target("avx512f"))) static double fma512(long iters)
{
    __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-7f);
    __m512 a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
#define INIT(j) a##j = _mm512_set1_ps((float)j);
    EACH(INIT)
#undef INIT
    for (long i = 0; i < iters; i++) {
#define STEP(j) a##j = _mm512_fmadd_ps(a##j, x, y);
        EACH(STEP)
#undef STEP
    }
    __m512 s = a0;
#define SUM(j) s = _mm512_add_ps(s, a##j);
    EACH(SUM)
#undef SUM
    g_sink = _mm512_reduce_add_ps(s);
    return (double)iters * ACC * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double fma256(long iters)
{
    __m256 x = _mm256_set1_ps(0.999f), y = _mm256_set1_ps(1e-7f);
    float out[8];
    __m256 a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
#define INIT(j) a##j = _mm256_set1_ps((float)j);
    EACH(INIT)
#undef INIT
    for (long i = 0; i < iters; i++) {
#define STEP(j) a##j = _mm256_fmadd_ps(a##j, x, y);
        EACH(STEP)
#undef STEP
    }
    __m256 s = a0;
#define SUM(j) s = _mm256_add_ps(s, a##j);
    EACH(SUM)
#undef SUM
    _mm256_storeu_ps(out, s);
    g_sink = out[0];
    return (double)iters * ACC * 8 * 2;
}

static double mad128(long iters)
{
    __m128 x = _mm_set1_ps(0.999f), y = _mm_set1_ps(1e-7f);
    float out[4];
    __m128 a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
#define INIT(j) a##j = _mm_set1_ps((float)j);
    EACH(INIT)
#undef INIT
    for (long i = 0; i < iters; i++) {
#define STEP(j) a##j = _mm_add_ps(_mm_mul_ps(a##j, x), y);
        EACH(STEP)
#undef STEP
    }
    __m128 s = a0;
#define SUM(j) s = _mm_add_ps(s, a##j);
    EACH(SUM)
#undef SUM
    _mm_storeu_ps(out, s);
    g_sink = out[0];
    return (double)iters * ACC * 4 * 2;
}

__attribute__((target("avx512f,avx512bf16"))) static double bf16dp(long iters)
{
    __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80); /* bf16 1.0 */
    __m512bh y = (__m512bh)_mm512_set1_epi16(0x3380); /* bf16 ~6e-8 */
    __m512 a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
#define INIT(j) a##j = _mm512_set1_ps((float)j);
    EACH(INIT)
#undef INIT
    for (long i = 0; i < iters; i++) {
#define STEP(j) a##j = _mm512_dpbf16_ps(a##j, x, y);
        EACH(STEP)
#undef STEP
    }
    __m512 s = a0;
#define SUM(j) s = _mm512_add_ps(s, a##j);
    EACH(SUM)
#undef SUM
    g_sink = _mm512_reduce_add_ps(s);
    return (double)iters * ACC * 32 * 2;
}

/* AMX-BF16: TDPBF16PS on four independent 16x16 fp32 accumulator tiles
 * (16 x 16 x 32 products each); Linux lends a process the tile state only
 * when it asks (arch_prctl), and each thread configures its tiles. */
typedef struct amx_cfg {
    unsigned char palette, start_row, reserved[14];
    unsigned short colsb[16];
    unsigned char rows[16];
} amx_cfg_t;

/* AMX-TILE and AMX-BF16 from cpuid (leaf 7, EDX bits 24 and 22: older
 * compilers' __builtin_cpu_supports does not know them), then Linux's
 * permission. */
static int amx_request(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) ||
        ((d >> 22) & 5) != 5)
        return 0;
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                   18 /* XTILEDATA */) == 0;
}

__attribute__((target("amx-tile,amx-bf16"))) static double amxdp(long iters)
{
    static const unsigned short a[16 * 32] = { 0 };
    float out[16 * 16];
    amx_cfg_t c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++)
        c.colsb[t] = 64, c.rows[t] = 16;
    _tile_loadconfig(&c);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, a, 64);
    _tile_loadd(5, a, 64);
    _tile_loadd(6, a, 64);
    _tile_loadd(7, a, 64);
    for (long i = 0; i < iters; i++) {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    g_sink = out[0];
    return (double)iters * 4 * 16 * 16 * 32 * 2;
}

typedef double (*kernel_t)(long);

typedef struct job {
    kernel_t k;
    long iters;
    double flops, secs;
    pthread_barrier_t *start;
} job_t;

static void *run_job(void *p)
{
    job_t *j = p;
    pthread_barrier_wait(j->start);
    double t0 = now();
    j->flops = j->k(j->iters);
    j->secs = now() - t0;
    return NULL;
}

/* GFLOP/s per core of `k` on `threads` cores at once: the best of 5. */
static double rate(kernel_t k, int threads, double seconds)
{
    long iters = 1000;
    double t0 = now();
    k(iters);
    while (now() - t0 < 0.01 && iters < (1L << 40)) { /* calibrate */
        iters *= 2;
        t0 = now();
        k(iters);
    }
    double per = (now() - t0) / (double)iters;
    iters = (long)(seconds / 5 / (per > 0 ? per : 1e-9)) + 1;
    double best = 0;
    job_t *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (int r = 0; r < 5; r++) {
        for (int t = 0; t < threads; t++) {
            jobs[t] = (job_t){ k, iters, 0, 0, &start };
            pthread_create(&tid[t], NULL, run_job, &jobs[t]);
        }
        double sum = 0;
        for (int t = 0; t < threads; t++) {
            pthread_join(tid[t], NULL);
            sum += jobs[t].flops / jobs[t].secs;
        }
        if (sum / threads > best)
            best = sum / threads;
    }
    pthread_barrier_destroy(&start);
    free(jobs);
    free(tid);
    return best / 1e9;
}

int main(int argc, char **argv)
{
    int threads = 1;
    double seconds = 1.0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
            seconds = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: fma_peak [--threads N] [--seconds S]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 1024 || !(seconds > 0 && seconds < 3600)) {
        fprintf(stderr, "fma_peak: --threads 1..1024, --seconds (0, 3600)\n");
        return 2;
    }
    __builtin_cpu_init();
    const char *isa = "SSE";
    kernel_t k = mad128;
    if (__builtin_cpu_supports("avx512f"))
        isa = "AVX-512", k = fma512;
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        isa = "AVX2", k = fma256;
    double fp32 = rate(k, threads, seconds), bf16 = 0;
    printf("fp32 %s FMA: %.1f GFLOP/s per core (%d thread%s at once)\n", isa,
           fp32, threads, threads == 1 ? "" : "s");
    if (__builtin_cpu_supports("avx512bf16")) {
        bf16 = rate(bf16dp, threads, seconds);
        printf("bf16 VDPBF16PS: %.1f GFLOP/s per core\n", bf16);
    }
    double amx = 0;
    if (amx_request()) {
        amx = rate(amxdp, threads, seconds);
        printf("bf16 AMX TDPBF16PS: %.1f GFLOP/s per core\n", amx);
    }
    printf("{\"isa\": \"%s\", \"threads\": %d, \"fp32_gflops_per_core\": %.2f, "
           "\"bf16_gflops_per_core\": %.2f, \"amx_bf16_gflops_per_core\": "
           "%.2f}\n", isa, threads, fp32, bf16, amx);
    return 0;
}
