/* Before the model's values take memory: a task whose model cannot fit the
 * memory limit it runs under is refused with one line that says both
 * figures, instead of being killed by the kernel half-way (a cgroup's
 * limit) or failing an allocation somewhere in the setup (ulimit -v).
 *
 * The figure is a lower bound that every strategy commits: the model's
 * initial values (the core's copy) and the strategy's copy of them (a
 * variable's storage, copied from var->init). A strategy that reads the
 * initial values in part (STRATA_CAP_LAZY_INIT: ps, whose worker holds a
 * batch's rows of an embedding table, and each ps task its shards) has no
 * such bound; it is not checked.
 *
 * The limit: the smallest of RLIMIT_AS, RLIMIT_DATA and the memory limit
 * of this process's cgroup or of a cgroup above it (v2 memory.max, v1
 * memory.limit_in_bytes). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "run/run.h"

static void take(uint64_t v, const char *what, uint64_t *lim, char *src,
                 size_t len)
{
    if (v < *lim) {
        *lim = v;
        snprintf(src, len, "%s", what);
    }
}

/* The limits of the cgroup at `dir` (a path under the mount) and above. */
static void cgroup_limits(const char *mount, const char *rel, const char *file,
                          uint64_t *lim, char *src, size_t len)
{
    char path[8300], sub[4096];
    snprintf(sub, sizeof sub, "%s", rel);
    for (;;) {
        snprintf(path, sizeof path, "%s%s%s/%s", mount, sub[0] == '/' ? "" : "/",
                 sub, file);
        FILE *f = fopen(path, "r");
        if (f) {
            char word[64] = "";
            if (fscanf(f, "%63s", word) == 1 && strcmp(word, "max") != 0) {
                char *end;
                unsigned long long v = strtoull(word, &end, 10);
                if (!*end && v > 0) {
                    take(v, path, lim, src, len);
                }
            }
            fclose(f);
        }
        char *slash = strrchr(sub, '/');
        if (!slash || (slash == sub && !sub[1]))
            break;
        if (slash == sub)
            sub[1] = '\0';
        else
            *slash = '\0';
    }
}

/* The smallest memory limit of this process, UINT64_MAX when none; src
 * says where it is set. */
static uint64_t memory_limit(char *src, size_t len)
{
    uint64_t lim = UINT64_MAX;
    struct rlimit r;
    if (getrlimit(RLIMIT_AS, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
        take((uint64_t)r.rlim_cur, "RLIMIT_AS, ulimit -v", &lim, src, len);
    if (getrlimit(RLIMIT_DATA, &r) == 0 && r.rlim_cur != RLIM_INFINITY)
        take((uint64_t)r.rlim_cur, "RLIMIT_DATA, ulimit -d", &lim, src, len);
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return lim;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *a = strchr(line, ':'), *b = a ? strchr(a + 1, ':') : NULL;
        if (!b)
            continue;
        *b = '\0';
        const char *ctrl = a + 1, *rel = b + 1;
        if (!strcmp(line, "0") && !ctrl[0])
            cgroup_limits("/sys/fs/cgroup", rel, "memory.max", &lim, src, len);
        else if (strstr(ctrl, "memory"))
            cgroup_limits("/sys/fs/cgroup/memory", rel,
                          "memory.limit_in_bytes", &lim, src, len);
    }
    fclose(f);
    return lim;
}

int strata__run_memory_check(strata__run_t *run)
{
    if (run->strategy->caps & STRATA_CAP_LAZY_INIT)
        return STRATA_OK;
    uint64_t model = (uint64_t)run->model.count * sizeof(float);
    uint64_t need = 2 * model;
    char src[8300] = "";
    uint64_t lim = memory_limit(src, sizeof src);
    if (need <= lim)
        return STRATA_OK;
    strata__log(STRATA_LOG_ERROR, "train", "the model does not fit this "
                "task's memory: its %zu values (%.2f GiB) as initial values "
                "and as strategy %s's copy need at least %.2f GiB, over the "
                "limit of %.2f GiB (%s). A strategy that keeps the model in "
                "part fits (ps: the ps tasks hold the embedding tables, a "
                "worker a batch's rows)", run->model.count,
                (double)model / (1u << 30), run->strategy->name,
                (double)need / (1u << 30), (double)lim / (1u << 30), src);
    return STRATA_ENOMEM;
}
