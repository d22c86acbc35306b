/* One fake plugin, compiled once per loader test case with -D flags that
 * break exactly one thing (see CMakeLists.txt). Uses only the public SDK. */
#include <strata/plugin.h>

#ifndef FAKE_STEM
#error "FAKE_STEM: the file stem"
#endif
#ifndef FAKE_NAME
#define FAKE_NAME FAKE_STEM
#endif
#ifndef FAKE_KIND
#define FAKE_KIND STRATA_KIND_STRATEGY
#endif
#ifndef FAKE_VERSION
#define FAKE_VERSION "1.0.0"
#endif
#ifndef FAKE_ABI_MAJOR
#define FAKE_ABI_MAJOR STRATA_ABI_MAJOR
#endif
#ifndef FAKE_BUILD_SIG
#define FAKE_BUILD_SIG STRATA_BUILD_SIG
#endif
#ifdef FAKE_SMALL
#define FAKE_STRUCT_SIZE ((uint32_t)offsetof(strata_plugin_v1_t, update))
#else
#define FAKE_STRUCT_SIZE ((uint32_t)sizeof(strata_plugin_v1_t))
#endif
#ifdef FAKE_SYMBOL_V2                 /* a plugin of another ABI major */
#define FAKE_SYMBOL strata_plugin_v2
#else
#define FAKE_SYMBOL strata_plugin_v1
#endif

#ifdef FAKE_UNDEF
/* Defined nowhere: linked with -z undefs, so dlopen(RTLD_NOW) must fail. */
extern void strata_no_such_function(void);
#endif

#ifndef FAKE_NO_INIT
static int fake_init(const struct strata_host_v1 *host, const strata_env_t *env,
                     void **pctx)
{
#ifdef FAKE_UNDEF
    strata_no_such_function();
#endif
    *pctx = NULL;
    return STRATA_OK;
}
#define FAKE_INIT fake_init
#else
#define FAKE_INIT NULL
#endif

static void fake_fini(void *pctx) { (void)pctx; }

static int fake_create_var(void *pctx, strata_var_t *var)
{
    (void)pctx;
    (void)var;
    return STRATA_OK;
}

static int fake_op(void *pctx, strata_op_t *op)
{
    (void)pctx;
    (void)op;
    return STRATA_OK;
}

#ifdef FAKE_NO_REDUCE
#define FAKE_REDUCE NULL
#else
#define FAKE_REDUCE fake_op
#endif

STRATA_EXPORT const strata_plugin_v1_t FAKE_SYMBOL = {
    .hdr = { FAKE_ABI_MAJOR, STRATA_ABI_MINOR, FAKE_STRUCT_SIZE, FAKE_KIND, 0u,
             FAKE_NAME, FAKE_VERSION, "fake plugin for the loader tests",
             FAKE_BUILD_SIG },
    .init = FAKE_INIT,
    .fini = fake_fini,
    .create_var = fake_create_var,
    .reduce = FAKE_REDUCE,
    .update = fake_op,
};
