/* Sparse pushes and pulls under ps (wire versions 6 and 7, plugin ABI
 * 2.10's lazy optimizer step, 2.11's batch_rows) through `strata launch
 * --ps`, on the embedding model of
 * train_sparse (a table of 400 rows x 8, up to 3 ids per sample), one
 * worker so that the steps apply in one order, the table split by rows
 * over 2 ps tasks (fixed:2):
 *  - sgd: pushing the touched rows ends on the bits of pushing the dense
 *    gradient (strategy.ps.sparse_as_dense = true), the worker and the ps
 *    tasks say which they did, and the rows cost fewer bytes; with 2
 *    replicas per worker or clip_norm the worker densifies the rows and
 *    pushes dense (with a clip_norm never reached, the same bits); the
 *    worker pulls only its batches' rows, and pulling whole
 *    (strategy.ps.pull_rows = false) ends on the same bits for more bytes;
 *  - adam: a checkpoint after every step; across step N (no shuffle, so
 *    its batch, hence its ids, is known) every row no id of the batch
 *    names keeps its value and both slots bit for bit, and every touched
 *    row follows Adam with the step count of the global step (bias
 *    correction), within 1e-6 relative of a reference computed here;
 *    resumed from the checkpoint after step 3, the job ends on the bits
 *    of the uninterrupted one; pulling whole ends on the same bits;
 *  - 2 workers: the job completes and a pull of rows costs well under a
 *    whole pull;
 *  - momentum, adagrad, rmsprop (with momentum): across a step the touched
 *    rows move, and every other row keeps its value and slots bit for
 *    bit (a dense momentum or rmsprop step would move them: the velocity
 *    and the mean square decay; adagrad's dense step leaves them too). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "ckpt_tensor.h"
#include "dumps.h"
#include "npy_write.h"
#include "spawn.h"

enum { NTRAIN = 1600, NF = 4, K = 3, VOCAB = 400, NCLS = 4, BATCH = 32 };

static char g_dir[] = "/tmp/strata-pssparseXXXXXX";
static char g_job[700];
static spawn_result_t g_r;

/* emb, feat (kernel, bias), logits (kernel, bias) */
static const size_t k_counts[] = { VOCAB * 8, NF * 8, 8, 16 * 4, 4 };
#define NVARS ((int)(sizeof k_counts / sizeof k_counts[0]))

static void write_npy(const char *name, const char *descr, size_t n,
                      size_t k, const void *data, size_t elem)
{
    npy_write_nk(g_dir, name, descr, n, k, data, elem);
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static uint32_t rnd(uint32_t below)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % below);
}

/* The class of a sample is its first id modulo NCLS; 1..3 ids, then -1. */
static void make_data(void)
{
    static float x[NTRAIN * NF];
    static int64_t y[NTRAIN], ids[NTRAIN * K];
    for (int i = 0; i < NTRAIN; i++) {
        int real = 1 + (int)rnd(K);
        for (int j = 0; j < K; j++)
            ids[i * K + j] = j < real ? (int64_t)rnd(VOCAB) : -1;
        y[i] = ids[i * K] % NCLS;
        for (int f = 0; f < NF; f++)
            x[i * NF + f] = (float)rnd(1000) / 1000.0f;
    }
    write_npy("x.npy", "<f4", NTRAIN, NF, x, sizeof *x);
    write_npy("y.npy", "<i8", NTRAIN, 0, y, sizeof *y);
    write_npy("ids.npy", "<i8", NTRAIN, K, ids, sizeof *ids);
    char text[1000];
    snprintf(text, sizeof text,
             "[data]\ndir = %s\n"
             "train_images = x.npy\ntrain_labels = y.npy\n"
             "train_ids = ids.npy\n"
             "test_images = x.npy\ntest_labels = y.npy\ntest_ids = ids.npy\n"
             "[graph]\n"
             "emb = embedding vocab=%d dim=8 combiner=mean <- ids\n"
             "feat = dense 8 tanh <- input\n"
             "both = concat <- emb, feat\n"
             "logits = dense 4\n", g_dir, VOCAB);
    snprintf(g_job, sizeof g_job, "%s/job.ini", g_dir);
    FILE *f = fopen(g_job, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* strata launch --ps 2 -n `workers` --chief of the job with `more`. */
static int ps_job_n(const char *workers, const char *const *more)
{
    static char bs[32];
    snprintf(bs, sizeof bs, "train.batch_size=%d", BATCH);
    const char *common[] = {
        "strategy.plugin=ps", "transport.plugin=zmq", "train.devices=cpu:0",
        "strategy.ps.partitioner=fixed:2", bs, "train.progress=none",
        "train.eval=false", NULL };
    char *args[48];
    int a = 0;
    const char *head[] = { "--ps", "2", "-n", workers, "--chief", "-c",
                           g_job };
    for (size_t i = 0; i < sizeof head / sizeof *head; i++)
        args[a++] = (char *)head[i];
    for (const char *const *l = common; l; l = l == common ? more : NULL)
        for (int i = 0; l[i] && a < 45; i++) {
            args[a++] = "--set";
            args[a++] = (char *)l[i];
        }
    args[a] = NULL;
    int rc = spawn_strata("launch", args, 180, &g_r);
    CHECKF(strstr(g_r.err, "exactly once: each of the 2 ps tasks applied "
                  "every one of the") != NULL, "no exactly-once line:\n%s",
           g_r.err);
    return rc;
}

static int ps_job(const char *const *more)
{
    return ps_job_n("1", more);
}

/* Parameter bytes the workers pulled and their pulls with rows, summed
 * from their end lines; the number of lines in *nlines. */
static long long pulled(long long *row_pulls, int *nlines)
{
    long long bytes = 0;
    *row_pulls = 0;
    *nlines = 0;
    const char *key = "), ";
    for (const char *p = g_r.err; (p = strstr(p, " gradient bytes pushed, "));
         p++) {
        const char *q = strstr(p, key);
        long long b = 0, rows = 0;
        if (q && sscanf(q + strlen(key), "%lld parameter bytes pulled (%lld "
                        "pulls with rows)", &b, &rows) == 2) {
            bytes += b;
            *row_pulls += rows;
            ++*nlines;
        }
    }
    return bytes;
}

/* Gradient bytes the ps tasks received, summed from their lines. */
static long long ps_bytes(long long *row_pushes)
{
    long long bytes = 0;
    *row_pushes = 0;
    for (const char *p = g_r.err; (p = strstr(p, "pushes applied (")); p++) {
        long long rows = 0, b = 0;
        if (sscanf(p, "pushes applied (%lld with rows), %lld gradient bytes",
                   &rows, &b) == 2) {
            *row_pushes += rows;
            bytes += b;
        }
    }
    return bytes;
}

static void sgd_bits(void)
{
    char dump[400];
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/dense.bin", g_dir);
    const char *dense[] = { "optimizer.name=sgd", "optimizer.lr=0.5",
                            "train.max_steps=40", dump,
                            "strategy.ps.sparse_as_dense=true", NULL };
    CHECK(ps_job(dense) == 0);
    long long rows_d, bytes_d = ps_bytes(&rows_d);
    CHECKF(strstr(g_r.err, "worker:0 ran 40 steps") &&
               strstr(g_r.err, "pushed, dense)") && rows_d == 0,
           "sparse_as_dense: the worker did not push dense:\n%s", g_r.err);
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/rows.bin", g_dir);
    const char *rows[] = { "optimizer.name=sgd", "optimizer.lr=0.5",
                           "train.max_steps=40", dump, NULL };
    CHECK(ps_job(rows) == 0);
    long long rows_r, bytes_r = ps_bytes(&rows_r);
    CHECKF(strstr(g_r.err, "pushed, embedding tables as rows)") &&
               rows_r == 2 * 40,
           "the worker did not push rows (%lld pushes with rows):\n%s",
           rows_r, g_r.err);
    printf("sgd, 40 steps: %lld gradient bytes pushed dense, %lld as rows "
           "(%.1f%%)\n", bytes_d, bytes_r, 100.0 * (double)bytes_r
           / (double)(bytes_d ? bytes_d : 1));
    CHECKF(bytes_r > 0 && bytes_r < bytes_d / 2, "rows cost %lld bytes, "
           "dense %lld", bytes_r, bytes_d);
    int nl;
    long long rp_r, pull_r = pulled(&rp_r, &nl);
    /* every step's pull asked for rows (a step run again under load, its
     * heartbeat missed, pulls once more) */
    CHECKF(nl == 1 && rp_r >= 40, "the worker pulled rows %lld times:\n%s",
           rp_r, g_r.err);
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/dense.bin", g_dir);
    snprintf(pb, sizeof pb, "%s/rows.bin", g_dir);
    dump_compare_model(pa, pb, "ps sgd: rows vs sparse_as_dense", 0.0,
                       k_counts, NVARS);
    /* the same rows pushed, every pull whole: the same bits (the forward
     * reads only the batch's rows), more bytes */
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/rows_whole.bin", g_dir);
    const char *whole[] = { "optimizer.name=sgd", "optimizer.lr=0.5",
                            "train.max_steps=40", dump,
                            "strategy.ps.pull_rows=false", NULL };
    CHECK(ps_job(whole) == 0);
    long long rp_w, pull_w = pulled(&rp_w, &nl);
    printf("sgd, 40 steps: %lld parameter bytes pulled whole, %lld as the "
           "batches' rows (%.1f%%)\n", pull_w, pull_r,
           100.0 * (double)pull_r / (double)(pull_w ? pull_w : 1));
    const long long one = 4LL * (VOCAB * 8 + 108); /* a whole pull */
    CHECKF(nl == 1 && rp_w == 0 && pull_w >= 40 * one && pull_w % one == 0,
           "pull_rows = false: %lld pulls with rows, %lld bytes", rp_w,
           pull_w);
    CHECKF(pull_r > 0 && pull_r < pull_w / 2, "rows pulled cost %lld bytes, "
           "whole %lld", pull_r, pull_w);
    snprintf(pb, sizeof pb, "%s/rows_whole.bin", g_dir);
    snprintf(pa, sizeof pa, "%s/rows.bin", g_dir);
    dump_compare_model(pa, pb, "ps sgd: rows pulled vs whole pulls", 0.0,
                       k_counts, NVARS);
}

/* 2 workers (their steps apply in any order: no bits to compare): the
 * job completes, exactly once, and the workers' pulls of rows cost well
 * under the whole table's. */
static void two_workers(void)
{
    /* slowed a little, so that both workers get steps (a worker that got
     * none has no end line) */
    const char *a[] = { "optimizer.name=adam", "optimizer.lr=0.01",
                        "train.max_steps=60", "debug.step_delay_ms=5",
                        NULL };
    CHECK(ps_job_n("2", a) == 0);
    int nl;
    long long rows, bytes = pulled(&rows, &nl);
    /* a whole pull: the table (400 x 8) and the dense layers (108) */
    double per = (double)bytes / (double)(rows ? rows : 1),
           whole = 4.0 * (VOCAB * 8 + 108);
    printf("2 workers, 60 steps: %d end lines, %lld pulls with rows, %.0f "
           "parameter bytes per pull (a whole pull: %.0f, %.1f%%)\n", nl,
           rows, per, whole, 100.0 * per / whole);
    CHECKF(nl >= 1 && rows >= 60, "2 workers: %d end lines, %lld pulls "
           "with rows:\n%s", nl, rows, g_r.err);
    CHECKF(per < 0.4 * whole, "a pull of rows costs %.0f bytes, a whole one "
           "%.0f", per, whole);
}

/* Where the rows cannot go as rows the worker densifies them and says so:
 * 2 replicas (they reduce dense buffers in process), clip_norm (the norm
 * of the whole gradient); the ps tasks then apply no push with rows. A
 * clip_norm no gradient reaches leaves every gradient as it is, so that
 * job ends on sgd_bits' bits: the rows were densified whole. */
static void densified(void)
{
    char dump[400];
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/clip.bin", g_dir);
    const char *clip[] = { "optimizer.name=sgd", "optimizer.lr=0.5",
                           "train.max_steps=40", "optimizer.clip_norm=1e9",
                           dump, NULL };
    const char *two[] = { "optimizer.name=sgd", "train.max_steps=10",
                          "train.devices=cpu:0,cpu:1", NULL };
    const char *const *runs[] = { clip, two };
    for (int k = 0; k < 2; k++) {
        CHECK(ps_job(runs[k]) == 0);
        long long rows;
        long long bytes = ps_bytes(&rows);
        CHECKF(strstr(g_r.err, "pushed, dense)") && rows == 0 && bytes > 0,
               "%s: the worker did not push dense:\n%s", runs[k][3],
               g_r.err);
    }
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/rows.bin", g_dir);
    snprintf(pb, sizeof pb, "%s/clip.bin", g_dir);
    dump_compare_model(pa, pb, "ps sgd: rows vs densified (clip_norm)", 0.0,
                       k_counts, NVARS);
}

/* A float32 tensor of a checkpoint (a ps job's: in parts, joined): its
 * n values, malloc'd; NULL when it is not there. */
static float *tensor(const char *path, const char *name, size_t n)
{
    float *v = malloc(n * 4 + 1);
    if (v && ckpt_tensor_bytes(path, name, v, n * 4) != n * 4) {
        free(v);
        v = NULL;
    }
    return v;
}

static const double k_lr = 0.01, k_b1 = 0.9, k_b2 = 0.999, k_eps = 1e-7;

/* Step `step` (0-based) between the checkpoints after step and step + 1
 * of the lazy Adam job: the rows its batch names moved, with t = step + 1;
 * every other row (value, m, v) is the same bits. */
static void check_step(int step, const int64_t *ids)
{
    enum { NT = VOCAB * 8 };
    const char *names[3] = { "emb/embeddings", "optimizer/m/emb/embeddings",
                             "optimizer/v/emb/embeddings" };
    float *t0[3], *t1[3];
    char p0[500], p1[500];
    snprintf(p0, sizeof p0, "%s/ck/ckpt-%010d.safetensors", g_dir, step);
    snprintf(p1, sizeof p1, "%s/ck/ckpt-%010d.safetensors", g_dir, step + 1);
    int have = 1;
    for (int k = 0; k < 3; k++) {
        t0[k] = tensor(p0, names[k], NT);
        t1[k] = tensor(p1, names[k], NT);
        have &= t0[k] && t1[k];
    }
    CHECKF(have, "no %s / %s with the table and its Adam slots", p0, p1);
    unsigned char touched[VOCAB] = { 0 };
    for (int i = step * BATCH; i < (step + 1) * BATCH; i++)
        for (int k = 0; k < K; k++)
            if (ids[i * K + k] >= 0)
                touched[ids[i * K + k]] = 1;
    int nt = 0, same_bits = 0, moved_untouched = 0;
    double worst = 0.0, worst_v = 0.0;
    /* PyTorch's arithmetic in float32, as the kernels do it
     * (kernels/cpu/optim.c): step = lr / (1 - b1^t), the value moves by
     * step * m / (sqrt(v) / sqrt(1 - b2^t) + eps) */
    const float b1 = (float)k_b1, b2 = (float)k_b2, eps = (float)k_eps;
    double t = step + 1;
    float step_size = (float)((double)(float)k_lr / (1.0 - pow(b1, t)));
    float rsq = (float)(1.0 / sqrt(1.0 - pow(b2, t)));
    for (int r = 0; have && r < VOCAB; r++) {
        nt += touched[r];
        for (int e = 0; e < 8; e++) {
            int i = r * 8 + e;
            int same = memcmp(&t0[0][i], &t1[0][i], 4) == 0 &&
                       memcmp(&t0[1][i], &t1[1][i], 4) == 0 &&
                       memcmp(&t0[2][i], &t1[2][i], 4) == 0;
            if (!touched[r]) {
                moved_untouched += !same;
                continue;
            }
            same_bits += same;
            /* the gradient from m's update, then v's and the value's */
            double g = ((double)t1[1][i] - (double)b1 * t0[1][i])
                       / (double)(1.0f - b1);
            double v = (double)b2 * t0[2][i] + (double)(1.0f - b2) * g * g;
            float w = t0[0][i] - step_size * t1[1][i]
                                     / (sqrtf(t1[2][i]) * rsq + eps);
            double dv = fabs(v - t1[2][i]) / fmax(fabs((double)t1[2][i]),
                                                  1e-30);
            double dw = fabs(w - t1[0][i]) / fmax(fabs((double)t1[0][i]),
                                                  1e-30);
            worst_v = fmax(worst_v, dv);
            worst = fmax(worst, dw);
        }
    }
    printf("adam step %d: %d rows touched, %d untouched; untouched elements "
           "that moved: %d; touched: value within %.2e, v within %.2e "
           "relative of the reference (t = %g)\n", step, nt, VOCAB - nt,
           moved_untouched, worst, worst_v, t);
    CHECKF(nt > 0 && nt < VOCAB, "step %d touched %d rows", step, nt);
    CHECKF(moved_untouched == 0, "step %d: %d elements of untouched rows "
           "(value, m or v) changed", step, moved_untouched);
    CHECKF(same_bits == 0, "step %d: %d elements of touched rows did not "
           "move", step, same_bits);
    CHECKF(worst <= 1e-6 && worst_v <= 1e-6, "step %d: a touched row is off "
           "the reference (value %.3e, v %.3e relative)", step, worst,
           worst_v);
    for (int k = 0; k < 3; k++) {
        free(t0[k]);
        free(t1[k]);
    }
}

/* Checkpoints after every step of 6, no shuffle: step s's batch is
 * samples [32 s, 32 s + 32). Then the job resumed from the checkpoint
 * after 3 steps (the later ones removed) ends on the same bits: the lazy
 * slots and the step count travel through the checkpoint. */
static void lazy_others(const int64_t *ids);

static void adam_lazy(void)
{
    char ck[400], dump[400];
    snprintf(ck, sizeof ck, "checkpoint.dir=%s/ck", g_dir);
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/adam.bin", g_dir);
    const char *a[] = { "optimizer.name=adam", "optimizer.lr=0.01",
                        "optimizer.beta1=0.9", "optimizer.beta2=0.999",
                        "optimizer.epsilon=1e-7", "train.max_steps=6",
                        "data.shuffle=false", "checkpoint.every_steps=1",
                        "checkpoint.keep=10", ck, dump, NULL };
    CHECK(ps_job(a) == 0);
    /* whole pulls: the same bits (a checkpoint dir of its own) */
    char ckw[400], dumpw[400];
    snprintf(ckw, sizeof ckw, "checkpoint.dir=%s/ck_whole", g_dir);
    snprintf(dumpw, sizeof dumpw, "debug.dump_vars=%s/adam_whole.bin", g_dir);
    const char *aw[] = { "optimizer.name=adam", "optimizer.lr=0.01",
                         "optimizer.beta1=0.9", "optimizer.beta2=0.999",
                         "optimizer.epsilon=1e-7", "train.max_steps=6",
                         "data.shuffle=false", ckw, dumpw,
                         "strategy.ps.pull_rows=false", NULL };
    int nl;
    long long rp;
    (void)pulled(&rp, &nl);
    CHECKF(nl == 1 && rp >= 6, "lazy adam: %lld pulls with rows", rp);
    CHECK(ps_job(aw) == 0);
    (void)pulled(&rp, &nl);
    CHECKF(nl == 1 && rp == 0, "pull_rows = false pulled rows %lld times",
           rp);
    char pw[300], pr[300];
    snprintf(pr, sizeof pr, "%s/adam.bin", g_dir);
    snprintf(pw, sizeof pw, "%s/adam_whole.bin", g_dir);
    dump_compare_model(pr, pw, "ps lazy adam: rows pulled vs whole pulls",
                       0.0, k_counts, NVARS);
    static int64_t ids[NTRAIN * K];
    char path[400];
    snprintf(path, sizeof path, "%s/ids.npy", g_dir);
    FILE *f = fopen(path, "rb");
    /* make_data's file: a 128-byte header (npy_write pads to 64) */
    CHECK(f && fseek(f, -(long)sizeof ids, SEEK_END) == 0 &&
          fread(ids, sizeof ids, 1, f) == 1);
    if (f)
        fclose(f);
    for (int step = 3; step <= 5; step++)
        check_step(step, ids);
    lazy_others(ids);
    for (int step = 4; step <= 6; step++) {
        char ckp[500];
        snprintf(ckp, sizeof ckp, "%s/ck/ckpt-%010d.safetensors", g_dir,
                 step);
        CHECK(remove(ckp) == 0);
    }
    snprintf(dump, sizeof dump, "debug.dump_vars=%s/adam_resumed.bin",
             g_dir);
    CHECK(ps_job(a) == 0);
    CHECKF(strstr(g_r.err, "state restored at step 3"),
           "the job did not resume from step 3:\n%s", g_r.err);
    char pa[300], pb[300];
    snprintf(pa, sizeof pa, "%s/adam.bin", g_dir);
    snprintf(pb, sizeof pb, "%s/adam_resumed.bin", g_dir);
    dump_compare_model(pa, pb, "ps lazy adam: resumed at step 3 vs "
                       "uninterrupted", 0.0, k_counts, NVARS);
}

/* momentum, adagrad, rmsprop (with its momentum slot): across step 2 the
 * rows its batch names move, value and every slot, and every other row
 * keeps all of them bit for bit. */
static void lazy_others(const int64_t *ids)
{
    static const struct {
        const char *name, *slots[2];
    } opts[] = { { "momentum", { "velocity", NULL } },
                 { "adagrad", { "accumulator", NULL } },
                 { "rmsprop", { "rms", "momentum" } } };
    enum { NT = VOCAB * 8, STEP = 2 };
    unsigned char touched[VOCAB] = { 0 };
    for (int i = STEP * BATCH; i < (STEP + 1) * BATCH; i++)
        for (int k = 0; k < K; k++)
            if (ids[i * K + k] >= 0)
                touched[ids[i * K + k]] = 1;
    for (size_t o = 0; o < sizeof opts / sizeof *opts; o++) {
        char ck[400], name[64];
        snprintf(ck, sizeof ck, "checkpoint.dir=%s/ck_%s", g_dir,
                 opts[o].name);
        snprintf(name, sizeof name, "optimizer.name=%s", opts[o].name);
        const char *a[] = { name, "optimizer.lr=0.05",
                            "optimizer.rmsprop_momentum=0.5",
                            "train.max_steps=3", "data.shuffle=false",
                            "checkpoint.every_steps=1", "checkpoint.keep=10",
                            ck, NULL };
        CHECK(ps_job(a) == 0);
        char p0[500], p1[500];
        snprintf(p0, sizeof p0, "%s/ck_%s/ckpt-%010d.safetensors", g_dir,
                 opts[o].name, STEP);
        snprintf(p1, sizeof p1, "%s/ck_%s/ckpt-%010d.safetensors", g_dir,
                 opts[o].name, STEP + 1);
        int moved_untouched = 0, still_touched = 0, nt = 0;
        unsigned char moved[VOCAB] = { 0 };
        for (int k = 0; k < 3; k++) {
            char tn[96];
            if (k > 0 && !opts[o].slots[k - 1])
                continue;
            if (k == 0)
                snprintf(tn, sizeof tn, "emb/embeddings");
            else
                snprintf(tn, sizeof tn, "optimizer/%s/emb/embeddings",
                         opts[o].slots[k - 1]);
            float *t0 = tensor(p0, tn, NT), *t1 = tensor(p1, tn, NT);
            CHECKF(t0 && t1, "%s: no %s in %s / %s", opts[o].name, tn, p0,
                   p1);
            for (int i = 0; t0 && t1 && i < NT; i++) {
                int same = memcmp(&t0[i], &t1[i], 4) == 0;
                moved_untouched += !touched[i / 8] && !same;
                moved[i / 8] |= !same;
                nt += touched[i / 8] && k == 0;
            }
            free(t0);
            free(t1);
        }
        /* a touched row moves (a slot may keep an element whose squared
         * gradient is below its rounding: adagrad's 0.1 + 1e-10) */
        for (int r = 0; r < VOCAB; r++)
            still_touched += touched[r] && !moved[r];
        printf("%s step %d: %d of %d table elements touched; untouched "
               "elements that moved (value or slot): %d; touched rows that "
               "did not: %d\n", opts[o].name, STEP, nt, NT, moved_untouched,
               still_touched);
        CHECKF(nt > 0 && moved_untouched == 0 && still_touched == 0,
               "%s is not lazy on the ps", opts[o].name);
    }
}

int main(void)
{
    if (!mkdtemp(g_dir) || spawn_job_keys() != 0)
        return 1;
    make_data();
    sgd_bits();
    densified();
    adam_lazy();
    two_workers();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (!check_failed_ && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", g_dir);
    return CHECK_DONE();
}
