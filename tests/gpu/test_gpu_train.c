/* Training on GPUs follows training on one CPU: mirrored on gpu:0 (and on
 * gpu:0, gpu:1 where two GPUs exist, replicas checked bitwise equal after
 * every step) ends within 1e-4 relative L2 distance per variable of the
 * single-CPU run after 50 steps at the same global batch and seed (GPU GEMM
 * and loss sums differ from the CPU's in the last bits, so the bound is
 * looser than the CPU strategies' 1e-5); so does central on gpu:0 (staged
 * through the host); and mixed_bfloat16 on gpu:0 (compute capability 8.0
 * and up: the banner says cuBLAS multiplies) within 0.15 of the CPU's
 * float32 run and 0.03 of the CPU's mixed_bfloat16 run. Without a CUDA
 * device: exit 77 with the reason. */
#include <math.h>

#include "check.h"
#include "dumps.h"
#include "spawn.h"
#include "cuda/kernels_cuda.h"

static spawn_result_t g_last;

static int train_dump(const char *strategy, const char *devices,
                      const char *transport, const char *dump,
                      const char *extra)
{
    char dev[128], dv[512], st[128], tr[128];
    snprintf(dev, sizeof dev, "train.devices=%s", devices);
    snprintf(dv, sizeof dv, "debug.dump_vars=%s", dump);
    snprintf(st, sizeof st, "strategy.plugin=%s", strategy);
    snprintf(tr, sizeof tr, "transport.plugin=%s", transport);
    char *argv[] = { (char *)spawn_strata_bin(), "train",
                     "--set", "train.max_steps=50", "--set", "train.epochs=1",
                     "--set", "train.eval=false", "--set", "train.progress=none",
                     "--set", "model.layers=dense 128 relu, dense 10",
                     "--set", "data.limit_train=4000", "--set", dev,
                     "--set", "train.batch_size=32", "--set", dv,
                     "--set", st, "--set", tr, "--set", (char *)extra, NULL };
    spawn_run(argv, 120, &g_last);
    if (g_last.code != 0)
        fprintf(stderr, "strata (%s, %s) exited %d:\n%s\n", strategy, devices,
                g_last.code, g_last.err);
    return g_last.code;
}

int main(void)
{
    int gpus = 0;
    if (kg_device_count(&gpus) != 0 || gpus == 0)
        CHECK_SKIP("no CUDA device: %s", kg_last_error());

    char dir[] = "/tmp/strata-gputrainXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char cpu[600], g1[600], g2[600];
    snprintf(cpu, sizeof cpu, "%s/cpu.bin", dir);
    snprintf(g1, sizeof g1, "%s/gpu1.bin", dir);
    snprintf(g2, sizeof g2, "%s/gpu2.bin", dir);

    if (train_dump("mirrored", "cpu:0", "local", cpu, "debug.check_sync=true"))
        CHECK_SKIP("the single-CPU reference run fails here (exit %d)",
                   g_last.code);

    CHECK(train_dump("mirrored", "gpu:0", "nccl", g1,
                     "debug.check_sync=true") == 0);
    dump_compare(cpu, g1, "mirrored gpu:0 vs cpu:0, batch 32", 0.0001);

    if (gpus >= 2) {
        CHECK(train_dump("mirrored", "gpu:0, gpu:1", "nccl", g2,
                         "debug.check_sync=true") == 0);
        dump_compare(cpu, g2, "mirrored gpu:0, gpu:1 vs cpu:0, batch 32", 0.0001);
    } else {
        printf("SKIPPED part: mirrored on gpu:0, gpu:1 needs two GPUs; this "
               "machine has one\n");
    }

    /* The shipped two-GPU example runs. */
    if (gpus >= 2) {
        char ini[600];
        const char *src = getenv("STRATA_SRC");
        snprintf(ini, sizeof ini, "%s/etc/gpu-mirrored.ini", src ? src : ".");
        char *argv[] = { (char *)spawn_strata_bin(), "train", "-c", ini,
                         "--set", "train.max_steps=20", "--set",
                         "data.limit_train=1280", "--set", "train.eval=false",
                         NULL };
        spawn_run(argv, 120, &g_last);
        CHECKF(g_last.code == 0, "etc/gpu-mirrored.ini: exit %d\n%s",
               g_last.code, g_last.err);
    }

    /* mixed_bfloat16: bf16 GEMM inputs, fp32 sums on the tensor cores */
    int major = 0, minor = 0;
    if (kg_device_arch(0, &major, &minor) == 0 && major >= 8) {
        CHECK(train_dump("mirrored", "gpu:0", "nccl", g1,
                         "train.precision=mixed_bfloat16") == 0);
        CHECKF(strstr(g_last.out, "precision: mixed_bfloat16 (cuBLAS") !=
               NULL, "banner:\n%s", g_last.out);
        /* bf16 inputs move the weights by 1-7 % from float32's after 50
         * steps (the CPU's own mixed_bfloat16 run: 0.019, 0.069, 0.006,
         * 0.015 on a Xeon with AMX; the H200's 0.018, 0.066, 0.006,
         * 0.015), so against float32 the bound only catches a broken
         * path. Against the CPU's mixed_bfloat16, where the CPU has bf16
         * dot products, the H200 ends 0.0058, 0.017, 0.0017, 0.0020 away:
         * 0.03 fails a GPU that multiplied in float32 (0.069). */
        dump_compare(cpu, g1, "mixed_bfloat16 gpu:0 vs float32 cpu:0", 0.15);
        char cbf[600];
        snprintf(cbf, sizeof cbf, "%s/cpu-bf16.bin", dir);
        if (train_dump("mirrored", "cpu:0", "local", cbf,
                       "train.precision=mixed_bfloat16") == 0) {
            dump_compare(cbf, g1, "mixed_bfloat16 gpu:0 vs cpu:0", 0.03);
            unlink(cbf);
        } else {
            printf("SKIPPED part: this CPU has no bf16 dot products\n");
        }
    } else {
        printf("SKIPPED part: mixed_bfloat16 needs compute capability 8.0; "
               "gpu:0 has %d.%d\n", major, minor);
    }

    /* central keeps the variables on the host; GPU replicas read a staged
     * copy refreshed every step and send their gradients to the host. */
    CHECK(train_dump("central", "gpu:0", "local", g2, "debug.check_sync=true")
          == 0);
    dump_compare(cpu, g2, "central gpu:0 vs cpu:0, batch 32", 0.0001);

    unlink(cpu);
    unlink(g1);
    unlink(g2);
    rmdir(dir);
    return CHECK_DONE();
}
