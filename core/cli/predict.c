/* strata predict: its flags, and the call, whose errors libstrata logs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int cli_predict_check(cli_predict_t *p, const char *usage)
{
    const char *missing = !p->checkpoint ? "--checkpoint PATH"
                          : !p->data     ? "--data FILE"
                          : !p->out      ? "--out FILE"
                                         : NULL;
    if (missing) {
        fprintf(stderr, "strata: predict needs %s\n%s", missing, usage);
        return 2;
    }
    if (p->batch) {
        char *end;
        errno = 0;
        long v = strtol(p->batch, &end, 10);
        if (errno || *end || end == p->batch || v < 1 || v > 1000000) {
            fprintf(stderr, "strata: --batch-size '%s': expected an integer "
                    "in [1, 1000000]\n%s", p->batch, usage);
            return 2;
        }
        p->batch_size = (int)v;
    }
    return 0;
}

typedef struct logged {
    int errors;
} logged_t;

/* Every line to stderr, as without a callback; errors counted. */
static void on_log(void *user, int level, const char *line)
{
    logged_t *l = user;
    l->errors += level == 0;
    fprintf(stderr, "%s\n", line);
}

int cli_predict(strata_ctx_t *ctx, const cli_predict_t *p)
{
    logged_t l = { 0 };
    const strata_callbacks_t cb = { .struct_size = sizeof cb, .user = &l,
                                    .text = cli_print_text, .log = on_log };
    int rc = strata_ctx_set_callbacks(ctx, &cb);
    if (rc == STRATA_OK)
        rc = strata_predict_ids(ctx, p->checkpoint, p->data, p->ids, p->out,
                                p->batch_size,
                                p->logits ? STRATA_PREDICT_LOGITS : 0);
    /* One error line: libstrata's, or this one where it said nothing. */
    if (rc != STRATA_OK && !l.errors)
        fprintf(stderr, "strata: predict failed: %s (%s)\n",
                strata_strerror(rc), strata_err_name(rc));
    return rc;
}
