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
#ifdef FAKE_V1
#define FAKE_ABI_MAJOR 1
#else
#define FAKE_ABI_MAJOR STRATA_ABI_MAJOR
#endif
#endif
#ifdef FAKE_ABI_MINOR
/* given */
#elif defined(FAKE_V1)
#define FAKE_ABI_MINOR 4
#else
#define FAKE_ABI_MINOR STRATA_ABI_MINOR
#endif
#ifndef FAKE_BUILD_SIG
#define FAKE_BUILD_SIG STRATA_BUILD_SIG
#endif
/* FAKE_V1: built as a plugin of ABI major 1 (its table, its init). */
#ifdef FAKE_V1
#define FAKE_TABLE strata_plugin_v1_t
#define FAKE_HOST  strata_host_v1
#else
#define FAKE_TABLE strata_plugin_v2_t
#define FAKE_HOST  strata_host_v2
#endif
#ifdef FAKE_SMALL
#define FAKE_STRUCT_SIZE ((uint32_t)offsetof(FAKE_TABLE, update))
#elif defined(FAKE_SIZE_BEFORE)      /* built before that member existed */
#define FAKE_STRUCT_SIZE ((uint32_t)offsetof(FAKE_TABLE, FAKE_SIZE_BEFORE))
#else
#define FAKE_STRUCT_SIZE ((uint32_t)sizeof(FAKE_TABLE))
#endif
#if defined(FAKE_SYMBOL_V3)           /* a plugin of an ABI major to come */
#define FAKE_SYMBOL strata_plugin_v3
#elif defined(FAKE_V1)
#define FAKE_SYMBOL strata_plugin_v1
#else
#define FAKE_SYMBOL strata_plugin_v2
#endif

#ifdef FAKE_UNDEF
/* Defined nowhere: linked with -z undefs, so dlopen(RTLD_NOW) must fail. */
extern void strata_no_such_function(void);
#endif

#ifndef FAKE_NO_INIT
#ifdef FAKE_V1
static int fake_init(const struct FAKE_HOST *host, const strata_env_t *env,
                     void **pctx)
#else
static int fake_init(const struct FAKE_HOST *host, strata_hctx_t *hc,
                     const strata_env_t *env, void **pctx)
#endif
{
    (void)host;
    (void)env;
#ifndef FAKE_V1
    (void)hc;
#endif
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

/* hdr.caps (reserved before 2.5); FAKE_NEXT_STEP and FAKE_CTL set those
 * entries, to check the loader's word against them. */
#ifndef FAKE_CAPS
#define FAKE_CAPS 0u
#endif
#ifdef FAKE_NEXT_STEP
static int fake_next_step(void *pctx, strata_step_t *st)
{
    (void)pctx;
    st->done = 1;
    return STRATA_OK;
}
#endif
#ifdef FAKE_CTL
static int fake_ctl(void *pctx, int op, void *arg)
{
    (void)pctx, (void)op, (void)arg;
    return STRATA_ENOTSUP;
}
#endif

/* FAKE_STRANGERS: a transport that counts strangers (ABI 2.7): 1 of each
 * kind. With FAKE_SIZE_BEFORE=strangers its table ends before the entry,
 * as a plugin built for 2.6 ends: the core must not see it. */
#ifdef FAKE_STRANGERS
static int fake_strangers(void *pctx, strata_strangers_t *out, int last)
{
    (void)pctx, (void)last;
    out->refused_key = out->closed_early = out->not_protocol =
        out->bad_message = 1;
    return STRATA_OK;
}
#endif

#ifdef FAKE_NO_REDUCE
#define FAKE_REDUCE NULL
#else
#define FAKE_REDUCE fake_op
#endif

STRATA_EXPORT const FAKE_TABLE FAKE_SYMBOL = {
    .hdr = { FAKE_ABI_MAJOR, FAKE_ABI_MINOR, FAKE_STRUCT_SIZE, FAKE_KIND,
             FAKE_CAPS,
             FAKE_NAME, FAKE_VERSION, "fake plugin for the loader tests",
             FAKE_BUILD_SIG },
    .init = FAKE_INIT,
    .fini = fake_fini,
    .create_var = fake_create_var,
    .reduce = FAKE_REDUCE,
    .update = fake_op,
#ifdef FAKE_NEXT_STEP
    .next_step = fake_next_step,
#endif
#ifdef FAKE_CTL
    .ctl = fake_ctl,
#endif
#ifdef FAKE_STRANGERS
    .strangers = fake_strangers,
#endif
};
