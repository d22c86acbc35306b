/* The data sets [data] names: training, validation, test. The validation
 * set is [data] validation_images/labels, or the samples [data]
 * validation_split holds out of the training set (split.c), or none: then
 * whoever validates reads the test set, and says so. */
#include <stdio.h>
#include <string.h>

#include "data.h"

/* A file of [data]: absolute, or relative to [data] dir; an in-memory
 * array ("mem:NAME") as it is. */
static int path_of(const strata__data_cfg_t *d, const char *name, char *buf,
                   size_t len)
{
    int abs = name[0] == '/' || !d->dir[0] || strata__mem_is(name);
    int n = snprintf(buf, len, "%s%s%s", abs ? "" : d->dir, abs ? "" : "/",
                     name);
    if (n < 0 || (size_t)n >= len) {
        strata__log(STRATA_LOG_ERROR, "data", "[data] path too long: %s", name);
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

/* A set's images and labels, and its id features when `ids` is not "". */
static int load(const strata__data_cfg_t *d, const char *images,
                const char *labels, const char *ids, int64_t limit,
                strata__dataset_t *out)
{
    char ip[4096], lp[4096], dp[4096];
    int rc = path_of(d, images, ip, sizeof ip);
    if (rc == STRATA_OK)
        rc = path_of(d, labels, lp, sizeof lp);
    if (rc == STRATA_OK && ids[0])
        rc = path_of(d, ids, dp, sizeof dp);
    if (rc == STRATA_OK)
        rc = strata__dataset_load_as(ip, lp, (size_t)limit, d->labels_as,
                                     out);
    if (rc == STRATA_OK && ids[0] &&
        (rc = strata__ids_load(dp, out)) != STRATA_OK)
        strata__dataset_free(out);
    return rc;
}

int strata__datasets_has_val(const strata__data_cfg_t *d)
{
    return d->validation_split > 0.0 || d->validation_images[0];
}

int strata__datasets_load(const strata__data_cfg_t *d, uint64_t seed,
                          unsigned want, strata__datasets_t *out)
{
    memset(out, 0, sizeof *out);
    int split = d->validation_split > 0.0;
    int rc = STRATA_OK;
    /* The split needs the training set, even for a caller that only
     * validates (the sidecar evaluator). */
    if ((want & STRATA__SET_TRAIN) || ((want & STRATA__SET_VAL) && split))
        rc = load(d, d->train_images, d->train_labels, d->train_ids,
                  d->limit_train, &out->train);
    if (rc == STRATA_OK && split && (want & (STRATA__SET_TRAIN | STRATA__SET_VAL)))
        rc = strata__dataset_split(&out->train, d->validation_split, seed,
                                   &out->val);
    if (rc == STRATA_OK && (want & STRATA__SET_VAL) && d->validation_images[0])
        rc = load(d, d->validation_images, d->validation_labels,
                  d->validation_ids, 0, &out->val);
    if (rc == STRATA_OK && !(want & STRATA__SET_VAL))
        strata__dataset_free(&out->val);
    if (rc == STRATA_OK && !(want & STRATA__SET_TRAIN))
        strata__dataset_free(&out->train);
    if (rc == STRATA_OK && (want & STRATA__SET_TEST))
        rc = load(d, d->test_images, d->test_labels, d->test_ids,
                  d->limit_test, &out->test);
    /* Every set the model sees has one sample shape and type. */
    const strata__dataset_t *first = out->train.n ? &out->train : NULL;
    const strata__dataset_t *rest[] = { &out->val, &out->test };
    for (int i = 0; rc == STRATA_OK && i < 2; i++) {
        if (!rest[i]->n)
            continue;
        if (first)
            rc = strata__dataset_check_pair(first, rest[i]);
        else
            first = rest[i];
    }
    if (rc != STRATA_OK)
        strata__datasets_free(out);
    return rc;
}

void strata__datasets_free(strata__datasets_t *s)
{
    strata__dataset_free(&s->train);
    strata__dataset_free(&s->val);
    strata__dataset_free(&s->test);
}

int strata__sets_label_width(const strata__dataset_t *train,
                             const strata__dataset_t *val,
                             const strata__dataset_t *test)
{
    const strata__dataset_t *set[] = { train, val, test };
    static const char *const name[] = { "training", "validation", "test" };
    int width = 0, first = -1;
    for (int i = 0; i < 3; i++) {
        if (!set[i]->n)
            continue;
        int w = set[i]->target_dim ? (int)set[i]->target_dim
                                   : set[i]->nclasses;
        if (first >= 0 && set[i]->target_dim && w != width) {
            strata__log(STRATA_LOG_ERROR, "data", "the %s labels have %d "
                        "values per sample, the %s labels %d", name[first],
                        width, name[i], w);
            return -1;
        }
        if (first < 0 || w > width)
            width = w;
        if (first < 0)
            first = i;
    }
    return width;
}
