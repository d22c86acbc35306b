/* test_localsgd -- localsgd.so under the plugin kit's host (strata::kit,
 * <strata/kit.h>), without a strata run: how a third party tests its
 * plugin. The kit poses as every minor of ABI 2 this SDK knows (2.0 ..),
 * opens strata's own local.so for the replicas' transport, and gives
 * real memory and SGD; localsgd must then keep its replicas apart between
 * syncs and make them bitwise equal on every sync_every-th step.
 *
 *   test_localsgd PATH/localsgd.so PATH/local.so
 *
 * Exit 0 when every check holds, 1 otherwise. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <strata/kit.h>

#define NREP  2
#define COUNT 10

static int g_failed;

#define EXPECT(cond, ...)                                                    \
    do {                                                                     \
        if (!(cond)) {                                                       \
            g_failed++;                                                      \
            fprintf(stderr, "test_localsgd:%d: ", __LINE__);                 \
            fprintf(stderr, __VA_ARGS__);                                    \
            fputc('\n', stderr);                                             \
        }                                                                    \
    } while (0)

static const strata_plugin_v2_t *load(const char *path)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    const strata_plugin_v2_t *vt = dl ? dlsym(dl, STRATA_PLUGIN_SYMBOL) : NULL;
    if (!vt)
        fprintf(stderr, "test_localsgd: %s: %s\n", path,
                dl ? "no strata_plugin_v2" : dlerror());
    return vt;
}

typedef struct replica {
    const strata_plugin_v2_t *vt;
    void   *pctx;
    int     slot, rc;
    int64_t step;
    float   grad[COUNT];
} replica_t;

static float grad_of(int slot, int i)
{
    return (float)((slot + 1) * (i + 1)) * 0.25f;
}

/* One training step of one replica: reduce, then update (the core's
 * order); the replicas run it concurrently, as the core's threads do. */
static void *replica_step(void *arg)
{
    replica_t *r = arg;
    for (int i = 0; i < COUNT; i++)
        r->grad[i] = grad_of(r->slot, i);
    strata_op_t op = { .struct_size = sizeof op, .slot = r->slot,
                       .buf = r->grad, .count = COUNT,
                       .device = STRATA_DEVICE(STRATA_DEV_CPU, 0),
                       .lr = 0.5f, .step = r->step,
                       .flags = STRATA_OP_GRADIENT };
    r->rc = r->vt->reduce(r->pctx, &op);
    if (r->rc == STRATA_OK)
        r->rc = r->vt->update(r->pctx, &op);
    return NULL;
}

static void run(const strata_plugin_v2_t *sgd, const strata_plugin_v2_t *local,
                int minor)
{
    strata_kit_config_t kc = STRATA_KIT_CONFIG_INIT;
    kc.abi_minor = minor;
    kc.transport = local;
    strata_kit_t *kit = NULL;
    void *cfg = NULL, *pctx = NULL;
    const char *const over[] = { "sync_every=2" };
    int rc = strata_kit_host(&kc, &kit);
    if (rc == STRATA_OK)
        rc = strata_kit_cfg(sgd, over, 1, &cfg);
    const int32_t cpu = STRATA_DEVICE(STRATA_DEV_CPU, 0);
    const int32_t devs[NREP] = { cpu, cpu };
    strata_env_t env = { .struct_size = sizeof env,
                         .kind = STRATA_KIND_STRATEGY, .cfg = cfg,
                         .section = "strategy", .nreplicas = NREP,
                         .nvars = 1, .devices = devs, .model_count = COUNT };
    if (rc == STRATA_OK)
        rc = sgd->init(strata_kit_table(kit), strata_kit_hctx(kit), &env,
                       &pctx);
    EXPECT(rc == STRATA_OK, "2.%d: init: %d", minor, rc);
    if (rc != STRATA_OK) {
        free(cfg);
        strata_kit_free(kit);
        return;
    }
    EXPECT(strata_kit_placed(kit) == NREP * COUNT * sizeof(float),
           "2.%d: placed %zu bytes", minor, strata_kit_placed(kit));
    float init[COUNT];
    void *value[NREP];
    for (int i = 0; i < COUNT; i++)
        init[i] = (float)i - 4.0f;
    strata_var_t var = { .struct_size = sizeof var, .name = "w",
                         .dtype = STRATA_DTYPE_F32, .ndim = 1,
                         .shape = { COUNT }, .count = COUNT, .init = init,
                         .value = value };
    EXPECT(sgd->create_var(pctx, &var) == STRATA_OK, "2.%d: create_var",
           minor);
    for (int64_t step = 0; step < 2; step++) {
        replica_t r[NREP];
        pthread_t th[NREP];
        for (int k = 0; k < NREP; k++) {
            r[k] = (replica_t){ .vt = sgd, .pctx = pctx, .slot = k,
                                .step = step };
            pthread_create(&th[k], NULL, replica_step, &r[k]);
        }
        for (int k = 0; k < NREP; k++) {
            pthread_join(th[k], NULL);
            EXPECT(r[k].rc == STRATA_OK, "2.%d step %lld replica %d: %d",
                   minor, (long long)step, k, r[k].rc);
        }
        const float *a = value[0], *b = value[1];
        if (step == 0) {   /* local: each replica its own gradient */
            for (int i = 0; i < COUNT; i++)
                EXPECT(a[i] == init[i] - 0.5f * grad_of(0, i) &&
                       b[i] == init[i] - 0.5f * grad_of(1, i),
                       "2.%d step 0 element %d: %g %g", minor, i, a[i], b[i]);
        } else {           /* the sync: the variables' mean, bitwise alike */
            EXPECT(memcmp(a, b, COUNT * sizeof(float)) == 0,
                   "2.%d: replicas differ after the sync", minor);
            for (int i = 0; i < COUNT; i++) {
                float g0 = 0.5f * grad_of(0, i), g1 = 0.5f * grad_of(1, i);
                float v0 = init[i] - g0 - g0, v1 = init[i] - g1 - g1;
                EXPECT(a[i] == (v0 + v1) * 0.5f, "2.%d element %d: %g, not "
                       "%g", minor, i, a[i], (v0 + v1) * 0.5f);
            }
        }
    }
    sgd->fini(pctx);
    free(cfg);
    strata_kit_free(kit);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: test_localsgd localsgd.so local.so\n");
        return 2;
    }
    const strata_plugin_v2_t *sgd = load(argv[1]), *local = load(argv[2]);
    if (!sgd || !local)
        return 1;
    /* a bad option is refused as the core would refuse it */
    void *cfg = NULL;
    const char *const zero[] = { "sync_every=0" };
    EXPECT(strata_kit_cfg(sgd, zero, 1, &cfg) == STRATA_ECONFIG && !cfg,
           "sync_every=0 accepted");
    for (int minor = 0; minor <= STRATA_ABI_MINOR; minor++)
        run(sgd, local, minor);
    printf("test_localsgd: %s\n", g_failed ? "FAILED" : "ok");
    return g_failed ? 1 : 0;
}
