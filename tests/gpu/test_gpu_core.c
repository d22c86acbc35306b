/* The core's GPU path without a GPU: cuda_load.c, device.c, model.c and
 * optimizer.c built for CUDA, on strata_cuda_fake.so: the CUDA module's
 * code (core/device/cuda/kops_cuda.c) linked against tests/gpu/fake_kg.c, which
 * runs kernels/cuda's API on the CPU and checks every pointer it is given
 * (device memory of the calling thread's device, the right side of each
 * copy, big enough). So every build (ASan too) checks that:
 *   - the core finds the module relative to the binary, dlopen()s it and
 *     takes its table (this test's build names the fake one, and says an
 *     NVIDIA driver is there);
 *   - gpu:N devices parse against the device count; empty = every GPU;
 *   - training on "gpu:1" (variables, gradients, Adam slots and work on the
 *     device, batches staged through page-locked memory as uint8 and
 *     scaled on the device, loss read back once per step) gives the same
 *     bits as on cpu:0, from a thread that never selected the device: an
 *     MLP, and a CNN that goes through every kernel of the GPU table
 *     (conv2d, maxpool2d, dropout, tanh, sigmoid), one with avgpool2d,
 *     and two with the activation layers (relu, leaky_relu, gelu, tanh,
 *     sigmoid, softmax over channels and over features) and
 *     global_avgpool2d, two with batchnorm and layernorm (on an image's
 *     channels and on features, layernorm first); the MLP with RMSprop
 *     (with momentum) and Adagrad too, whose accumulator opt_create fills
 *     on the device;
 *   - mixed_bfloat16 on GPUs: [train] precision's check (compute
 *     capability 8.0 and up) and a CNN trained on gpu:1 through the
 *     module's bf16 ops, with the workspace the layers size for a GPU,
 *     close to float32 and not its bits;
 *   - copies and comparisons between CPU and GPUs and GPU to GPU work;
 *   - nothing is left allocated, and no pointer was misused. */
#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "check.h"
#include "run/precision.h"
#include "runtime.h"
#include "../model/graph_lines.h"

#define STEPS 3
#define BATCH 32
#define N     (STEPS * BATCH)
#define DIM   20

static const strata__optimizer_cfg_t k_adam = {
    .name = STRATA__OPT_ADAM, .lr = 0.01, .momentum = 0.9, .beta1 = 0.9,
    .beta2 = 0.999, .epsilon = 1e-7, .weight_decay = 0.004,
};
static const strata__optimizer_cfg_t k_rmsprop = {
    .name = STRATA__OPT_RMSPROP, .lr = 0.01, .rho = 0.9, .epsilon = 1e-7,
    .rmsprop_momentum = 0.5, .weight_decay = 0.004,
};
static const strata__optimizer_cfg_t k_adagrad = {
    .name = STRATA__OPT_ADAGRAD, .lr = 0.01, .epsilon = 1e-7,
    .initial_accumulator_value = 0.1, .weight_decay = 0.004,
};
static const int32_t CPU0 = STRATA_DEVICE(STRATA_DEV_CPU, 0);

/* The models trained: an MLP on flat samples, and a small CNN on 4 x 5
 * images that uses every layer kernel of the table. */
typedef struct model_case {
    const char         *spec;   /* a chain, or what `graph` is            */
    strata__shape_t     in;
    const char *const  *graph;  /* "name = text" lines, NULL-terminated  */
} model_case_t;
static const model_case_t k_mlp = { "dense 16 relu, dense 10",
                                    { 1, 1, DIM, 0 }, NULL };
static const model_case_t k_cnn = {
    "conv2d 4 3 padding=same tanh, maxpool2d 2, dropout 0.25, "
    "conv2d 6 2 stride=1 sigmoid, flatten, dense 10",
    { 4, 5, 1, 1 }, NULL };
static const model_case_t k_cnn_avg = {
    "conv2d 4 3 padding=same relu, avgpool2d 2 stride=1, conv2d 3 2 tanh, "
    "flatten, dense 10",
    { 4, 5, 1, 1 }, NULL };
static const model_case_t k_cnn_act = {
    "conv2d 4 3 padding=same, leaky_relu alpha=0.2, conv2d 6 2, gelu, "
    "softmax, global_avgpool2d, dense 12, softmax, relu, dense 10",
    { 4, 5, 1, 1 }, NULL };
static const model_case_t k_cnn_bn = {
    "conv2d 4 3 padding=same, batchnorm, relu, global_avgpool2d, dense 10",
    { 4, 5, 1, 1 }, NULL };
static const model_case_t k_norm = {
    "layernorm, conv2d 4 3 padding=same, layernorm epsilon=0.01, tanh, "
    "batchnorm momentum=0.9, conv2d 3 2, flatten, dense 12, batchnorm, "
    "layernorm, relu, dense 10",
    { 4, 5, 1, 1 }, NULL };
/* A graph: a residual add, an add of one layer with itself, concats of
 * images and of features (channel_copy), a flatten read twice. */
static const char *const k_graph_lines[] = {
    "a = conv2d 4 3 padding=same tanh", "b = conv2d 4 3 padding=same",
    "s = add <- b, a", "d = add <- s, s", "e = concat <- d, input",
    "f = flatten", "g = dense 6 relu <- f", "h = dense 5 tanh <- f",
    "k = concat <- g, h", "out = dense 10", NULL };
static const model_case_t k_graph = { "graph: residual add, concat",
                                      { 4, 5, 1, 1 }, k_graph_lines };
/* Embeddings of the id features (padding, duplicates, a mean bag and
 * rows side by side) beside the flattened images: the ids cross through
 * page-locked staging, the backward sorts them on the device. */
static const char *const k_emb_lines[] = {
    "e = embedding vocab=11 dim=4 combiner=mean <- ids",
    "v = embedding vocab=11 dim=2 <- ids", "f = flatten <- input",
    "c = concat <- e, v, f", "h = dense 8 tanh", "out = dense 10", NULL };
static const model_case_t k_emb = { "graph: embeddings", { 4, 5, 1, 1 },
                                    k_emb_lines };
static const model_case_t k_mlp_act = {
    "dense 16, gelu, dense 16, sigmoid, tanh, leaky_relu, dense 10",
    { 1, 1, DIM, 0 }, NULL };

typedef struct result {
    const model_case_t *mc;
    const strata__optimizer_cfg_t *opt;
    int32_t  dev;
    int      rc;
    size_t   count;
    float   *vars;              /* host copy of the final variables  */
    double   loss[STEPS], eval_loss;
    double   correct, eval_correct; /* the accuracy metric: counts */
    int      x_dev;             /* fake device of work.x             */
    int      bf16;              /* conv2d and dense: STRATA__BF16_*   */
} result_t;

static strata__dataset_t g_data;

/* fake_kg.h's exports, from the module the core loaded. */
static int    *fk_violations;
static size_t (*fk_live_blocks)(void);
static int    (*fk_device_of)(const void *p);

/* The core has loaded strata_cuda_fake.so (RTLD_NOLOAD: this finds it,
 * never loads it); take the fake's counters from it. */
static int fake_bind(void)
{
    void *h = dlopen(STRATA_FAKE_MODULE, RTLD_NOW | RTLD_NOLOAD);
    CHECKF(h != NULL, "the core has not loaded %s", STRATA_FAKE_MODULE);
    if (!h)
        return -1;
    fk_violations = (int *)dlsym(h, "fake_kg_violations");
    *(void **)&fk_live_blocks = dlsym(h, "fake_kg_live_blocks");
    *(void **)&fk_device_of = dlsym(h, "fake_kg_device_of");
    dlclose(h);               /* drops this reference only */
    CHECK(fk_violations && fk_live_blocks && fk_device_of);
    return fk_violations && fk_live_blocks && fk_device_of ? 0 : -1;
}

static void make_data(void)
{
    static uint8_t images[N * DIM];
    static int32_t labels[N], ids[N * 3];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof images; i++) {
        x = x * 1103515245u + 12345u;
        images[i] = (uint8_t)(x >> 24);
    }
    for (int i = 0; i < N; i++)
        labels[i] = i * 7 % 10;
    for (int i = 0; i < N * 3; i++) {
        x = x * 1103515245u + 12345u;
        ids[i] = (int32_t)((x >> 24) % 12) - 1;    /* -1 (padding) .. 10 */
    }
    g_data = (strata__dataset_t){ .n = N, .dim = DIM, .rows = 4, .cols = 5,
                                  .nclasses = 10, .images = images,
                                  .labels = labels, .ids = ids,
                                  .ids_k = 3 };
}

static void *train_on(void *arg)
{
    result_t *res = arg;
    static _Thread_local strata__model_t m;
    int32_t dev = res->dev;
    static _Thread_local graph_lines_t gl;
    int rc;
    if (res->mc->graph) {
        graph_lines(res->mc->graph, &gl);
        rc = strata__model_build_graph_ids(gl.line, gl.n, &res->mc->in,
                                           (int)g_data.ids_k, 10,
                                           STRATA__LOSS_SPARSE, &m);
    } else {
        rc = strata__model_build(res->mc->spec, NULL, &res->mc->in, 10, &m);
    }
    for (int i = 0; rc == STRATA_OK && i < m.nlayers; i++)
        if (m.layers[i].kind == &strata__layer_conv2d ||
            m.layers[i].kind == &strata__layer_dense)
            m.layers[i].bf16 = res->bf16;
    void *values[STRATA__MAX_VARS];
    float *init = malloc(m.count * sizeof(float));
    float *slab = strata__dev_alloc(dev, m.count * sizeof(float));
    float *grads = strata__dev_alloc(dev, m.count * sizeof(float));
    strata__work_t w;
    strata_opt_t *opt = NULL;
    uint32_t perm[N];
    memset(&w, 0, sizeof w);
    if (rc == STRATA_OK && (!init || !slab || !grads))
        rc = STRATA_ENOMEM;
    if (rc == STRATA_OK) {
        strata__model_init(&m, 7, init);
        rc = strata__dev_copy(dev, slab, CPU0, init, m.count * sizeof(float));
    }
    for (int i = 0; i < m.nvars; i++) {
        values[i] = slab + m.vars[i].offset;
        m.vars[i].value = &values[i];
    }
    if (rc == STRATA_OK)
        rc = strata__work_alloc_on(&m, dev, BATCH, &w);
    if (rc == STRATA_OK)
        rc = strata__opt_create(res->opt, dev, m.count, &opt);
    strata__epoch_order(perm, N, 1, 0, 1);
    res->x_dev = fk_device_of(w.x);
    for (int s = 0; rc == STRATA_OK && s < STEPS; s++) {
        w.noise_seed = strata__model_step_seed(99, s);
        w.row0 = 0;
        rc = strata__model_load_batch(&w, &g_data, perm, (size_t)s * BATCH,
                                      BATCH);
        if (rc == STRATA_OK)
            rc = strata__model_step(&m, 0, &w, BATCH, grads, 1.0f / BATCH,
                                    &res->loss[s], &res->correct);
        if (rc == STRATA_OK)
            rc = strata__opt_step(opt, slab, grads, m.count, 0.01f);
    }
    /* Two loads in a row: the second waits for the first's copies. */
    if (rc == STRATA_OK)
        rc = strata__model_load_batch(&w, &g_data, NULL, 0, 30);
    if (rc == STRATA_OK)
        rc = strata__model_load_batch(&w, &g_data, NULL, 1, 30);
    if (rc == STRATA_OK)
        rc = strata__model_evaluate(&m, 0, &w, 30, &res->eval_loss,
                                    &res->eval_correct);
    res->count = m.count;
    res->vars = malloc(m.count * sizeof(float));
    if (rc == STRATA_OK)
        rc = res->vars ? strata__dev_copy(CPU0, res->vars, dev, slab,
                                          m.count * sizeof(float))
                       : STRATA_ENOMEM;
    /* A batch bigger than the work is refused, not overrun. */
    if (rc == STRATA_OK &&
        strata__model_load_batch(&w, &g_data, NULL, 0, BATCH + 1) !=
            STRATA_EINVAL)
        rc = STRATA_EINTERNAL;
    strata__opt_destroy(opt);
    strata__work_free(&w);
    strata__dev_free(dev, grads);
    strata__dev_free(dev, slab);
    free(init);
    res->rc = rc;
    return NULL;
}

static void devices(void)
{
    int32_t d[8];
    int n = -1;
    CHECK(strata__devices_parse("gpu:0, gpu:1", d, 8, &n) == STRATA_OK &&
          n == 2 && d[1] == STRATA_DEVICE(STRATA_DEV_GPU, 1));
    CHECK(strata__devices_parse("", d, 8, &n) == STRATA_OK && n == 2 &&
          d[0] == STRATA_DEVICE(STRATA_DEV_GPU, 0));
    CHECK(strata__devices_parse("gpu:2", d, 8, &n) == STRATA_ECONFIG);
    CHECK(strata__devices_parse("gpu:1, cpu:0", d, 8, &n) == STRATA_ECONFIG);
    CHECK(strata__devices_parse("gpu:0, gpu:0", d, 8, &n) == STRATA_ECONFIG);
    strata__kdev_t *k = NULL;
    CHECK(strata__kdev_get(STRATA_DEVICE(STRATA_DEV_GPU, 5), &k) ==
              STRATA_EDEVICE && k == NULL);
    CHECK(strata__dev_alloc(STRATA_DEVICE(STRATA_DEV_GPU, 5), 64) == NULL);
}

static void copies(void)
{
    const int32_t g0 = STRATA_DEVICE(STRATA_DEV_GPU, 0);
    const int32_t g1 = STRATA_DEVICE(STRATA_DEV_GPU, 1);
    size_t n = (5u << 20) / sizeof(float) + 3; /* more than one 4 MiB slice */
    float *h = malloc(n * sizeof *h), *back = malloc(n * sizeof *back);
    float *a = strata__dev_alloc(g0, n * sizeof *a);
    float *b = strata__dev_alloc(g1, n * sizeof *b);
    CHECK(h && back && a && b);
    if (!h || !back || !a || !b)
        goto out;
    CHECK(fk_device_of(a) == 0 && fk_device_of(b) == 1);
    CHECK(a[0] == 0.0f && b[n - 1] == 0.0f); /* dev_alloc zeroes */
    for (size_t i = 0; i < n; i++)
        h[i] = (float)i * 0.5f;
    CHECK(strata__dev_copy(g0, a, CPU0, h, n * sizeof *h) == STRATA_OK);
    CHECK(strata__dev_copy(g1, b, g0, a, n * sizeof *a) == STRATA_OK);
    CHECK(strata__dev_copy(CPU0, back, g1, b, n * sizeof *b) == STRATA_OK);
    CHECK(memcmp(h, back, n * sizeof *h) == 0);
    CHECK(strata__dev_equal(g0, a, g1, b, n * sizeof *a) == 1);
    CHECK(strata__dev_equal(CPU0, h, g1, b, n * sizeof *a) == 1);
    h[n - 1] = -1.0f;
    CHECK(strata__dev_copy(g0, a + n - 1, CPU0, h + n - 1, sizeof *h) ==
          STRATA_OK);
    CHECK(strata__dev_equal(g0, a, g1, b, n * sizeof *a) == 0);
    /* Same device: on the device. */
    CHECK(strata__dev_copy(g0, a, g0, a + 1, 16 * sizeof *a) == STRATA_OK);
    /* Optimizer slots to and from the host (checkpoints). */
    strata_opt_t *o = NULL;
    CHECK(strata__opt_create(&k_adam, g1, 8, &o) == STRATA_OK && o);
    if (o) {
        float s0[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, s1[8] = { 9 }, r0[8], r1[8];
        float *in[2] = { s0, s1 }, *outp[2] = { r0, r1 };
        int64_t t = 5, t2 = 0;
        CHECK(strata__opt_io(o, 1, in, 2, &t) == STRATA_OK);
        CHECK(strata__opt_io(o, 0, outp, 2, &t2) == STRATA_OK && t2 == 5);
        CHECK(memcmp(s0, r0, sizeof s0) == 0 && memcmp(s1, r1, sizeof s1) == 0);
        CHECK(strata__opt_io(o, 0, outp, 1, &t2) == STRATA_EINVAL);
        strata__opt_destroy(o);
    }
    /* Adagrad's accumulator starts at initial_accumulator_value, filled on
     * the device; RMSprop with momentum has two slots, without one. */
    o = NULL;
    CHECK(strata__opt_create(&k_adagrad, g1, 8, &o) == STRATA_OK && o);
    if (o) {
        float acc[8] = { 0 }, *outp[1] = { acc };
        int64_t t = -1;
        CHECK(strata__opt_nslots(&k_adagrad) == 1 && o->nslots == 1);
        CHECK(strata__opt_io(o, 0, outp, 1, &t) == STRATA_OK && t == 0);
        for (int i = 0; i < 8; i++)
            CHECKF(acc[i] == 0.1f, "accumulator[%d] = %g", i, acc[i]);
        strata__opt_destroy(o);
    }
    strata__optimizer_cfg_t plain = k_rmsprop;
    plain.rmsprop_momentum = 0;
    CHECK(strata__opt_nslots(&k_rmsprop) == 2 &&
          strata__opt_nslots(&plain) == 1);
    o = NULL;
    CHECK(strata__opt_create(&plain, g1, 8, &o) == STRATA_OK && o &&
          o->nslots == 1 && o->slot[1] == NULL);
    strata__opt_destroy(o);
out:
    strata__dev_free(g0, a);
    strata__dev_free(g1, b);
    free(h);
    free(back);
}

/* [optimizer] clip_norm on a GPU: the sum of squares read back from the
 * device, and the clip, as on the CPU. */
static void clipping(void)
{
    const int32_t g1 = STRATA_DEVICE(STRATA_DEV_GPU, 1);
    const strata__optimizer_cfg_t on = { .clip_norm = 1.0 }, off = { 0 };
    enum { n = 1000 };
    float h[n], back[n];
    for (int i = 0; i < n; i++)
        h[i] = (float)((i % 7) - 3) * 0.25f;
    float *d = strata__dev_alloc(g1, sizeof h);
    CHECK(d && strata__dev_copy(g1, d, CPU0, h, sizeof h) == STRATA_OK);
    double sg = -1, sc = -1;
    CHECK(strata__grad_sumsq(&off, g1, n, d, &sg) == 0 && sg == 0.0);
    CHECK(strata__grad_sumsq(&on, g1, n, d, &sg) == 1);
    CHECK(strata__grad_sumsq(&on, CPU0, n, h, &sc) == 1);
    CHECKF(sg == sc && sg > 1.0, "sumsq %.17g (gpu) vs %.17g (cpu)", sg, sc);
    CHECK(strata__grad_clip(&on, g1, n, d, sg) == STRATA_OK);
    CHECK(strata__grad_clip(&on, CPU0, n, h, sc) == STRATA_OK);
    CHECK(strata__dev_copy(CPU0, back, g1, d, sizeof back) == STRATA_OK);
    CHECK(memcmp(h, back, sizeof h) == 0);
    double after = -1;
    CHECK(strata__grad_sumsq(&on, g1, n, d, &after) == 1);
    CHECKF(fabs(sqrt(after) - 1.0) < 1e-6, "norm after the clip %.9g",
           sqrt(after));
    strata__dev_free(g1, d);
}

/* Train `mc` on cpu:0 and on gpu:1 (from a thread whose current device is
 * still 0): the same bits. */
static void compare(const model_case_t *mc, const strata__optimizer_cfg_t *opt)
{
    result_t cpu = { .mc = mc, .opt = opt, .dev = CPU0 };
    result_t gpu = { .mc = mc, .opt = opt,
                     .dev = STRATA_DEVICE(STRATA_DEV_GPU, 1) };
    train_on(&cpu);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, train_on, &gpu) == 0);
    pthread_join(th, NULL);
    CHECKF(cpu.rc == STRATA_OK && gpu.rc == STRATA_OK, "%s: cpu %d, gpu %d",
           mc->spec, cpu.rc, gpu.rc);
    CHECK(cpu.x_dev == -2 && gpu.x_dev == 1);
    CHECK(cpu.count == gpu.count && cpu.vars && gpu.vars &&
          memcmp(cpu.vars, gpu.vars, cpu.count * sizeof(float)) == 0);
    for (int s = 0; s < STEPS; s++)
        CHECKF(cpu.loss[s] == gpu.loss[s] && cpu.loss[s] > 0,
               "%s, step %d: loss %g (cpu) vs %g (gpu)", mc->spec, s,
               cpu.loss[s], gpu.loss[s]);
    CHECK(cpu.correct == gpu.correct);
    CHECK(cpu.eval_loss == gpu.eval_loss && cpu.eval_loss > 0);
    CHECK(cpu.eval_correct == gpu.eval_correct);
    printf("%s, %s: losses %.6f %.6f %.6f; eval %.6f, %lld correct\n",
           mc->spec, strata__opt_name(opt->name), gpu.loss[0], gpu.loss[1],
           gpu.loss[2], gpu.eval_loss, (long long)llround(gpu.eval_correct));
    free(cpu.vars);
    free(gpu.vars);
}

/* [train] precision = mixed_bfloat16 on GPUs: allowed on compute
 * capability 8.0 and up (the fake says 9.0, or $FAKE_KG_ARCH), refused
 * below with the GPU named. */
static void precision_check(void)
{
    strata__settings_t st;
    memset(&st, 0, sizeof st);
    st.train.precision = STRATA__PREC_MIXED_BFLOAT16;
    st.train.devices = "gpu:0, gpu:1";
    CHECK(strata__precision_check(NULL, &st) == STRATA_OK);
    CHECK(strcmp(strata__precision_name(&st),
                 "mixed_bfloat16 (cuBLAS bf16 GEMMs, fp32 sums)") == 0);
    setenv("FAKE_KG_ARCH", "7.5", 1);
    CHECK(strata__precision_check(NULL, &st) == STRATA_ECONFIG);
    setenv("FAKE_KG_ARCH", "8.0", 1);
    CHECK(strata__precision_check(NULL, &st) == STRATA_OK);
    unsetenv("FAKE_KG_ARCH");
}

/* `mc` on gpu:1 in mixed_bfloat16 against float32 on cpu:0: trained
 * through the bf16 ops (not float32's bits), losses within 2 %. */
static void compare_bf16(const model_case_t *mc)
{
    result_t cpu = { .mc = mc, .opt = &k_adam, .dev = CPU0 };
    result_t gpu = { .mc = mc, .opt = &k_adam,
                     .dev = STRATA_DEVICE(STRATA_DEV_GPU, 1),
                     .bf16 = STRATA__BF16_GPU };
    train_on(&cpu);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, train_on, &gpu) == 0);
    pthread_join(th, NULL);
    CHECKF(cpu.rc == STRATA_OK && gpu.rc == STRATA_OK,
           "%s bf16: cpu %d, gpu %d", mc->spec, cpu.rc, gpu.rc);
    CHECK(cpu.count == gpu.count && cpu.vars && gpu.vars &&
          memcmp(cpu.vars, gpu.vars, cpu.count * sizeof(float)) != 0);
    for (int s = 0; s < STEPS; s++)
        CHECKF(fabs(gpu.loss[s] - cpu.loss[s]) <= 0.02 * cpu.loss[s],
               "%s bf16, step %d: loss %g against float32's %g", mc->spec,
               s, gpu.loss[s], cpu.loss[s]);
    CHECK(fabs(gpu.eval_loss - cpu.eval_loss) <= 0.02 * cpu.eval_loss);
    printf("%s, mixed_bfloat16 on gpu:1: losses %.6f %.6f %.6f (float32 "
           "%.6f %.6f %.6f)\n", mc->spec, gpu.loss[0], gpu.loss[1],
           gpu.loss[2], cpu.loss[0], cpu.loss[1], cpu.loss[2]);
    free(cpu.vars);
    free(gpu.vars);
}

int main(void)
{
    make_data();
    devices();
    if (fake_bind() != 0)
        return CHECK_DONE();
    size_t live0 = fk_live_blocks();
    copies();
    CHECKF(fk_live_blocks() == live0, "%zu blocks left by copies()",
           fk_live_blocks() - live0);

    clipping();
    compare(&k_mlp, &k_adam);
    compare(&k_cnn, &k_adam);
    compare(&k_cnn_avg, &k_adam);
    compare(&k_cnn_act, &k_adam);
    compare(&k_mlp_act, &k_adam);
    compare(&k_graph, &k_adam);
    compare(&k_emb, &k_adam);
    compare(&k_cnn_bn, &k_adam);
    compare(&k_norm, &k_adam);
    compare(&k_mlp, &k_rmsprop);
    compare(&k_mlp, &k_adagrad);
    precision_check();
    compare_bf16(&k_cnn_avg);
    compare_bf16(&k_mlp);
    CHECKF(fk_live_blocks() == live0, "%zu device/page-locked blocks "
           "leaked", fk_live_blocks() - live0);
    CHECKF(*fk_violations == 0, "%d pointer misuses (see above)",
           *fk_violations);
    return CHECK_DONE();
}
