/* The job's model from its config: a [graph] section, or [model] layers.
 * Apart from build.c, which knows no config store. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "model/loss.h"

static int build_cfg(const strata__cfg_t *cfg, const char *layers, int loss,
                     const strata__shape_t *input, int ids_k, int nclasses,
                     strata__model_t *m)
{
    const char *key, *value, *origin;
    int n = 0;
    while (strata__cfg_entry(cfg, "graph", (size_t)n, &key, &value, &origin))
        n++;
    const char *lo = strata__cfg_origin(cfg, "model", "layers");
    if (n == 0)
        return strata__model_build_for(layers, lo, input, nclasses, loss, m);
    memset(m, 0, sizeof *m);
    (void)strata__cfg_entry(cfg, "graph", 0, &key, &value, &origin);
    if (lo) {
        strata__log(STRATA_LOG_ERROR, "model", "%s: [model] layers and "
                    "[graph] (%s) both describe the model; keep one", lo,
                    origin);
        return STRATA_ECONFIG;
    }
    if (n > STRATA_MAX_LAYERS) {
        strata__log(STRATA_LOG_ERROR, "model", "%s: [graph] has %d layers; "
                    "at most %d", origin, n, STRATA_MAX_LAYERS);
        return STRATA_ECONFIG;
    }
    strata__layer_line_t *lines = calloc((size_t)n, sizeof *lines);
    if (!lines) {
        strata__log(STRATA_LOG_ERROR, "model", "out of memory");
        return STRATA_ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        (void)strata__cfg_entry(cfg, "graph", (size_t)i, &key, &value,
                                &origin);
        lines[i] = (strata__layer_line_t){ key, value, origin };
    }
    int rc = strata__model_build_graph_ids(lines, n, input, ids_k, nclasses,
                                           loss, m);
    free(lines);
    return rc;
}

int strata__model_build_cfg(const strata__cfg_t *cfg,
                            const strata__model_cfg_t *mc,
                            const strata__shape_t *input, int ids_k,
                            int nclasses, strata__model_t *m)
{
    int rc = build_cfg(cfg, mc->layers, mc->loss, input, ids_k, nclasses, m);
    if (rc == STRATA_OK)
        m->loss = strata__lossfn(mc);
    return rc;
}
