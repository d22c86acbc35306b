/* [train] tensorboard through the strata binary: a mirrored run of 2
 * replicas writes DIR/train and DIR/validation, and tboard_read.py reads
 * them back with TensorBoard's own readers (pip install tensorboard; the
 * test is skipped without it) and checks tags, steps and values against the
 * metrics CSV and the progress lines of the same run. Then the errors: a
 * DIR that cannot be one, and a trace file in a missing directory, are one
 * error line each before any training. argv[1]: tboard_read.py.
 * STRATA_PYTHON overrides the interpreter (default: python3 on PATH). */
#include "check.h"
#include "spawn.h"
#include "testutil.h"

/* Lines of `s` that say "error:". */
static int errors(const char *s)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, "error:")) != NULL; p++)
        n++;
    return n;
}

static spawn_result_t R;

static int train(const char *const *sets)
{
    char *argv[40] = { (char *)spawn_strata_bin(), "train" };
    int n = 2;
    for (int i = 0; sets[i] && n < 38; i++) {
        argv[n++] = "--set";
        argv[n++] = (char *)sets[i];
    }
    spawn_run(argv, 300, &R);
    return R.code;
}

int main(int argc, char **argv)
{
    if (access("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz",
               R_OK) != 0)
        CHECK_SKIP("Fashion-MNIST not installed");
    if (argc < 2) {
        fprintf(stderr, "usage: %s tboard_read.py\n", argv[0]);
        return 2;
    }
    tmp_make("tboard");
    char tb[600], csv[600], out[600], setd[700], setc[700];
    snprintf(tb, sizeof tb, "%s/tb", tmpdir_);
    snprintf(csv, sizeof csv, "%s/metrics.csv", tmpdir_);
    snprintf(out, sizeof out, "%s/stdout.txt", tmpdir_);
    snprintf(setd, sizeof setd, "train.tensorboard=%s", tb);
    snprintf(setc, sizeof setc, "train.metrics_csv=%s", csv);
    /* 6400 samples, batch 32: 200 steps an epoch; a point every 50. */
    const char *run[] = {
        "train.devices=cpu:0,cpu:1", "data.limit_train=6400",
        "data.limit_test=1000", "train.epochs=2", "train.log_every_steps=50",
        "train.progress=line", setd, setc, NULL,
    };
    CHECKF(train(run) == 0, "exit %d: %s", R.code, R.err);
    write_file(out, R.out, strlen(R.out));

    const char *py = getenv("STRATA_PYTHON");
    char *pargv[] = { "/usr/bin/env", py && *py ? (char *)py : "python3",
                      argv[1], tb, csv, out, "50", "200", "0.001", NULL };
    spawn_result_t *P = malloc(sizeof *P);
    CHECK(P && spawn_run(pargv, 120, P) == 0);
    if (P->code == 77) {
        tmp_cleanup();
        CHECK_SKIP("python3 has no tensorboard package (pip install "
                   "tensorboard)");
    }
    printf("%s%s", P->out, P->err);
    CHECKF(P->code == 0, "tboard_read.py exit %d", P->code);
    free(P);

    /* DIR is a file: one error line naming it, no training. */
    char file[600], bad[700];
    snprintf(file, sizeof file, "%s/plain", tmpdir_);
    write_file(file, "x", 1);
    snprintf(bad, sizeof bad, "train.tensorboard=%s", file);
    const char *bad_tb[] = { "train.devices=cpu:0", "data.limit_train=640",
                             bad, NULL };
    CHECK(train(bad_tb) == 1);
    CHECKF(errors(R.err) == 1 && strstr(R.err, "not a directory") &&
           strstr(R.err, file) && !strstr(R.out, "Epoch"), "%s", R.err);

    /* A trace file in a directory that does not exist: said at the start. */
    snprintf(bad, sizeof bad, "train.trace=%s/none/trace.json", tmpdir_);
    const char *bad_trace[] = { "train.devices=cpu:0", "data.limit_train=640",
                                bad, NULL };
    CHECK(train(bad_trace) == 2);
    CHECKF(errors(R.err) == 1 && strstr(R.err, "[train] trace") &&
           strstr(R.err, "none") && !strstr(R.out, "Epoch"), "%s", R.err);
    tmp_cleanup();
    return CHECK_DONE();
}
