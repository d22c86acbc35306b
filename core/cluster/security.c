/* [security] of a job of several processes: the keys the core hands to
 * every WORLD group (the transports authenticate and encrypt with them).
 * One place for strata_train()'s run and strata_comm_open() alike. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "base/keybundle.h"
#include "cluster/cluster.h"

int strata__job_keys(const strata__security_cfg_t *sec,
                     const strata_cluster_t *c, strata__keys_t **out)
{
    *out = NULL;
    int talking = 0; /* an evaluator reads checkpoint files, nothing else */
    for (int i = 0; i < c->ntasks; i++)
        talking += strcmp(c->tasks[i].type, "evaluator") != 0;
    if (talking < 2)
        return STRATA_OK;
    if (sec->mode == STRATA__SEC_OFF) {
        strata__log(STRATA_LOG_WARN, "security", "[security] mode = off: "
                    "this job's %d processes talk in plaintext, without "
                    "authentication; whoever reaches their ports can read "
                    "and forge its messages", talking);
        return STRATA_OK;
    }
    /* strata launch makes keys for its job when the user gave none, and
     * hands them over in a memfd (base/keybundle.h). */
    const char *dir = sec->keys, *fds = getenv(STRATA__KEYS_FD_ENV);
    char *end = NULL;
    long fd = !dir[0] && fds && *fds ? strtol(fds, &end, 10) : -1;
    if (fd >= 0 && (*end || fd > INT_MAX)) {
        strata__log(STRATA_LOG_ERROR, "security", "%s = '%s': not a file "
                    "descriptor", STRATA__KEYS_FD_ENV, fds);
        return STRATA_ECONFIG;
    }
    if (!dir[0] && fd < 0) {
        strata__log(STRATA_LOG_ERROR, "security", "this job has %d processes "
                    "and no keys: make them with `strata keygen DIR TASK...` "
                    "and set [security] keys = DIR (strata launch makes its "
                    "own), or set [security] mode = off to run it "
                    "unauthenticated and unencrypted", talking);
        return STRATA_ECONFIG;
    }
    char self[48];
    strata__task_name(&c->tasks[c->self], self, sizeof self);
    strata__keys_t *k = malloc(sizeof *k);
    int rc = !k       ? STRATA_ENOMEM
             : dir[0] ? strata__keys_load(dir, self, k)
                      : strata__keys_load_fd((int)fd, self, k);
    if (rc != STRATA_OK) {
        free(k);
        return rc == STRATA_EIO || rc == STRATA_ENOMEM ? rc : STRATA_ECONFIG;
    }
    *out = k;
    return STRATA_OK;
}
