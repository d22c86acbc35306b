/* [model] loss and metric end to end through the strata binary, on data
 * made here (.npy written by the test): a regression (mse, the mae metric)
 * that learns, whose 2 replicas follow 1 and whose mwms (2 workers, strata
 * launch) and ps runs report the same metric; binary_crossentropy on
 * multi-label rows with a fused 'sigmoid'; categorical_crossentropy on
 * one-hot rows equal to sparse_categorical_crossentropy on the class ids;
 * the top-k accuracy under its Keras name in the progress line, the
 * metrics CSV header and the done line; and the refusals -- float64
 * labels, a label out of [0, 1] for a cross-entropy, a metric that does not
 * go with the loss, a last layer of the wrong width, softmax before a
 * sigmoid loss, a monitor of another metric: one line each, exit != 0. */
#include <dirent.h>
#include <math.h>

#include "check.h"
#include "spawn.h"
#include "testutil.h"
#include "npy_write.h"

#define N 640
#define D 8

static spawn_result_t g_r;
static const char *g_dir;   /* tmp_make's */

static void save_npy(const char *name, const char *descr, const char *shape,
                     const void *data, size_t bytes)
{
    npy_write(tmp_path(name), descr, shape, data, bytes);
}

static uint64_t g_rng = 88172645463325252ULL;
static double uniform(void)   /* xorshift64 in [0, 1) */
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}

static float g_reg[N][2], g_bin[N][3];

static void make_data(void)
{
    static float x[N][D], onehot[N][4];
    float (*reg)[2] = g_reg, (*bin)[3] = g_bin;
    static int64_t ids[N];
    static double reg64[N][2];
    for (int i = 0; i < N; i++) {
        for (int j = 0; j < D; j++)
            x[i][j] = (float)(uniform() * 2 - 1);
        for (int k = 0; k < 2; k++) {
            reg[i][k] = 0.0f;
            for (int j = 0; j < D; j++)
                reg[i][k] += x[i][j] * (float)((j + k) % 3 - 1);
            reg64[i][k] = reg[i][k];
        }
        for (int k = 0; k < 3; k++)
            bin[i][k] = x[i][k] > 0.0f;
        int best = 0;
        for (int k = 1; k < 4; k++)
            best = x[i][k] > x[i][best] ? k : best;
        ids[i] = best;
        for (int k = 0; k < 4; k++)
            onehot[i][k] = k == best;
    }
    save_npy("x.npy", "<f4", "(640, 8)", x, sizeof x);
    save_npy("reg.npy", "<f4", "(640, 2)", reg, sizeof g_reg);
    save_npy("reg64.npy", "<f8", "(640, 2)", reg64, sizeof reg64);
    save_npy("bin.npy", "<f4", "(640, 3)", bin, sizeof g_bin);
    save_npy("ids.npy", "<i8", "(640,)", ids, sizeof ids);
    save_npy("onehot.npy", "<f4", "(640, 4)", onehot, sizeof onehot);
    static float bad[N][3];
    memcpy(bad, g_bin, sizeof bad);
    bad[7][2] = 1.5f;
    save_npy("bin_bad.npy", "<f4", "(640, 3)", bad, sizeof bad);
}

/* `strata CMD` on the test's data: labels `labels`, then `more` settings
 * (NULL-terminated); the exit code. */
static int run(const char *cmd, const char *labels, const char *const *more)
{
    const char *common[] = {
        set_value("data.dir", g_dir), "data.train_images=x.npy",
        "data.test_images=x.npy", set_value("data.train_labels", labels),
        set_value("data.test_labels", labels), "data.validation_split=0.2",
        "train.epochs=3", "train.batch_size=32", "train.progress=line",
        "optimizer.lr=0.01", "train.devices=cpu:0", NULL };
    char job[700];
    snprintf(job, sizeof job, "%s/job.ini", g_dir);
    FILE *f = fopen(job, "w");
    if (f)
        fclose(f);
    return spawn_strata_job(cmd, job, common, more, 300, &g_r);
}

/* The relative L2 distance of two float32 files of the same size <= tol. */
static int close_files(const char *a, const char *b, double tol)
{
    static char x[1 << 16], y[1 << 16];
    FILE *f = fopen(a, "rb"), *g = fopen(b, "rb");
    size_t n = f ? fread(x, 1, sizeof x, f) : 0;
    size_t m = g ? fread(y, 1, sizeof y, g) : 0;
    if (f)
        fclose(f);
    if (g)
        fclose(g);
    if (n == 0 || n != m)
        return 0;
    double d = 0, r = 0;
    for (size_t i = 0; i + 4 <= n; i += 4) {
        float u, v;
        memcpy(&u, x + i, 4);
        memcpy(&v, y + i, 4);
        d += ((double)u - v) * ((double)u - v);
        r += (double)u * u;
    }
    return sqrt(d) <= tol * sqrt(r);
}

/* The last ckpt-*.safetensors of `dir` (names sort by step). */
static const char *last_ckpt(const char *dir)
{
    static char best[800];
    char name[256] = "";
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, "ckpt-", 5) && strlen(e->d_name) < 256 &&
            strcmp(e->d_name, name) > 0)
            snprintf(name, sizeof name, "%s", e->d_name);
    if (d)
        closedir(d);
    snprintf(best, sizeof best, "%s/%s", dir, name);
    return name[0] ? best : NULL;
}

/* `strata predict` of the job's last checkpoint on x.npy into `out`: the
 * rows x cols floats (NULL on failure; the caller frees). */
static float *predict(const char *labels, const char *const *more,
                      const char *ckdir, const char *out, size_t floats)
{
    const char *ck = last_ckpt(ckdir);
    CHECKF(ck != NULL, "no checkpoint in %s", ckdir);
    if (!ck)
        return NULL;
    char job[700];
    snprintf(job, sizeof job, "%s/job.ini", g_dir);
    char *args[40] = { "-c", job, "--checkpoint", (char *)ck, "--data",
                       (char *)tmp_path("x.npy"), "--out", (char *)out };
    int a = 8;
    const char *common[] = { set_value("data.dir", g_dir),
                             set_value("data.train_labels", labels),
                             set_value("data.test_labels", labels), NULL };
    for (const char *const *l = common; l; l = l == common ? more : NULL)
        for (int i = 0; l[i] && a < 36; i++) {
            args[a++] = "--set";
            args[a++] = (char *)l[i];
        }
    args[a] = NULL;
    if (spawn_strata("predict", args, 120, &g_r) != 0)
        return NULL;
    FILE *f = fopen(out, "rb");
    float *v = malloc(floats * sizeof *v);
    char head[128];
    int ok = f && v && fread(head, 1, 128, f) == 128 &&
             fread(v, sizeof *v, floats, f) == floats && fgetc(f) == EOF;
    if (f)
        fclose(f);
    CHECKF(ok, "%s: not %zu floats after a 128-byte header", out, floats);
    if (!ok) {
        free(v);
        return NULL;
    }
    return v;
}

/* Keras's AUC (200 thresholds, trapezoids) of probabilities p, labels y. */
static double keras_auc(const float *p, const float *y, int n)
{
    double tpr[200], fpr[200], auc = 0;
    for (int i = 0; i < 200; i++) {
        float t = i == 0 ? -1e-7f : i == 199 ? 1.0f + 1e-7f
                                             : (float)(i / 199.0);
        double tp = 0, fp = 0, pos = 0, neg = 0;
        for (int j = 0; j < n; j++) {
            pos += y[j];
            neg += 1 - y[j];
            tp += p[j] > t ? y[j] : 0;
            fp += p[j] > t ? 1 - y[j] : 0;
        }
        tpr[i] = tp / pos;
        fpr[i] = fp / neg;
    }
    for (int i = 0; i + 1 < 200; i++)
        auc += (fpr[i] - fpr[i + 1]) * (tpr[i] + tpr[i + 1]) / 2;
    return auc;
}

/* The figure after `label` in the last line that has it; -1 none. */
static double figure(const char *text, const char *label)
{
    const char *p = NULL;
    for (const char *q = text; (q = strstr(q, label)); q++)
        p = q;
    return p ? atof(p + strlen(label)) : -1.0;
}

static void regression(void)
{
    const char *mse[] = { "model.layers=dense 16 tanh, dense 2",
                          "model.loss=mse",
                          set_path("train.metrics_csv", "reg.csv"),
                          set_path("checkpoint.dir", "reg-ck"),
                          set_path("debug.dump_vars", "reg1.bin"), NULL };
    CHECK(run("train", "reg.npy", mse) == 0);
    double reported = figure(g_r.out, "test mae ");
    CHECKF(strstr(g_r.out, " - mae: ") && strstr(g_r.out, " - val_mae: ") &&
           strstr(g_r.out, "done: 3 epochs, test mae "),
           "mse: the mae metric is not reported:\n%s", g_r.out);
    char csv[4096] = "";
    spawn_read_file_(tmp_path("reg.csv"), csv, sizeof csv);
    CHECKF(!strncmp(csv, "epoch,steps,loss,mae,val_loss,val_mae,", 38),
           "metrics CSV header: %.80s", csv);
    /* it learns: the last epoch's loss is a fraction of the first's */
    const char *row1 = strchr(csv, '\n'), *row3 = NULL;
    for (const char *q = csv; (q = strchr(q, '\n')) && q[1]; q++)
        row3 = q;
    double l1 = -1, l3 = -1;
    if (row1 && row3) {
        sscanf(row1 + 1, "%*d,%*d,%lf", &l1);
        sscanf(row3 + 1, "%*d,%*d,%lf", &l3);
    }
    CHECKF(l1 > 0 && l3 > 0 && l3 < 0.5 * l1, "mse: loss %g -> %g", l1, l3);
    CHECKF(reported > 0 && reported < 1.0, "test mae %g", reported);

    /* predict gives the outputs themselves: their mae on the test set (x
     * itself) is the one reported */
    float *p = predict("reg.npy", mse, tmp_path("reg-ck"),
                       tmp_path("reg-p.npy"), N * 2);
    double mae = 0.0;
    for (int i = 0; p && i < N; i++)
        for (int k = 0; k < 2; k++)
            mae += fabs((double)p[i * 2 + k] - g_reg[i][k]) / 2 / N;
    CHECKF(p && fabs(mae - reported) < 1e-4, "predict's mae %.6f, the run "
           "reported %.6f", mae, reported);
    free(p);

    /* 2 replicas follow 1; mwms 2 workers are mirrored 2 */
    const char *two[] = { "model.layers=dense 16 tanh, dense 2",
                          "model.loss=mse", "train.devices=cpu:0, cpu:1",
                          set_path("debug.dump_vars", "reg2.bin"), NULL };
    CHECK(run("train", "reg.npy", two) == 0);
    double mae2 = figure(g_r.out, "test mae ");
    const char *mw[] = { "model.layers=dense 16 tanh, dense 2",
                         "model.loss=mse", "strategy.plugin=mwms",
                         "transport.plugin=zmq",
                         set_path("debug.dump_vars", "mwms.bin"), NULL };
    CHECK(run("launch", "reg.npy", mw) == 0);
    CHECKF(figure(g_r.out, "test mae ") == mae2,
           "mwms 2 workers: test mae %g, mirrored 2 replicas %g",
           figure(g_r.out, "test mae "), mae2);
    CHECKF(same_file(tmp_path("reg2.bin"), tmp_path("mwms.bin")),
           "mwms 2 workers and mirrored 2 replicas differ");
    CHECKF(close_files(tmp_path("reg1.bin"), tmp_path("reg2.bin"), 1e-5),
           "2 replicas do not follow 1 within 1e-5");

    /* ps: the workers' summed metric crosses its wire */
    char job[700];
    snprintf(job, sizeof job, "%s/job.ini", g_dir);
    char *ps[] = { "--chief", "-n", "2", "--ps", "1", "-c", job,
                   "--set", set_value("data.dir", g_dir),
                   "--set", "data.train_images=x.npy",
                   "--set", "data.test_images=x.npy",
                   "--set", "data.train_labels=reg.npy",
                   "--set", "data.test_labels=reg.npy",
                   "--set", "data.validation_split=0.2",
                   "--set", "train.epochs=2", "--set", "train.progress=line",
                   "--set", "model.layers=dense 16 tanh, dense 2",
                   "--set", "model.loss=mae", "--set", "strategy.plugin=ps",
                   NULL };
    CHECK(spawn_strata("launch", ps, 300, &g_r) == 0);
    double val_mae = figure(g_r.out, "val_mae ");
    CHECKF(val_mae > 0 && val_mae < 2.0 && strstr(g_r.out, " - mae: "),
           "ps: val_mae %g:\n%s", val_mae, g_r.out);
    /* its per-step sums give no AUC: refused by name */
    char *ps_auc[] = { "--chief", "-n", "2", "--ps", "1", "-c", job,
                       "--set", set_value("data.dir", g_dir),
                       "--set", "data.train_images=x.npy",
                       "--set", "data.test_images=x.npy",
                       "--set", "data.train_labels=bin.npy",
                       "--set", "data.test_labels=bin.npy",
                       "--set", "model.layers=dense 16 tanh, dense 3",
                       "--set", "model.loss=binary_crossentropy",
                       "--set", "model.metric=auc",
                       "--set", "strategy.plugin=ps", NULL };
    int code = spawn_strata("launch", ps_auc, 120, &g_r);
    CHECKF(code != 0 && strstr(g_r.err, "metric = auc needs a strategy whose "
                               "replicas the core steps"),
           "ps with auc: exit %d\n%s", code, g_r.err);
}

static void classes(void)
{
    const char *bin[] = { "model.layers=dense 16 relu, dense 3 sigmoid",
                          "model.loss=binary_crossentropy",
                          set_path("checkpoint.dir", "bin-ck"), NULL };
    CHECK(run("train", "bin.npy", bin) == 0);
    double acc = figure(g_r.out, "test accuracy ");
    CHECKF(acc > 0.8, "binary_crossentropy: test accuracy %g", acc);
    /* predict gives a sigmoid per unit: probabilities whose binary accuracy
     * is the one reported */
    float *p = predict("bin.npy", bin, tmp_path("bin-ck"),
                       tmp_path("bin-p.npy"),
                       N * 3);
    double hits = 0.0;
    int in01 = 1;
    for (int i = 0; p && i < N * 3; i++) {
        in01 &= p[i] > 0.0f && p[i] < 1.0f;
        hits += (p[i] > 0.5f) == (g_bin[i / 3][i % 3] >= 0.5f);
    }
    CHECKF(p && in01 && fabs(hits / (N * 3) - acc) < 1e-4,
           "predict: binary accuracy %.6f, the run reported %.6f",
           hits / (N * 3), acc);
    free(p);

    /* the AUC: what the run reports is Keras's AUC of predict's output on
     * the test set (x); mwms's summed bins are mirrored's */
    const char *auc[] = { "model.layers=dense 16 relu, dense 3 sigmoid",
                          "model.loss=binary_crossentropy", "model.metric=auc",
                          "train.devices=cpu:0, cpu:1",
                          set_path("checkpoint.dir", "auc-ck"), NULL };
    CHECK(run("train", "bin.npy", auc) == 0);
    double test_auc = figure(g_r.out, "test auc ");
    CHECKF(test_auc > 0.9 && strstr(g_r.out, " - auc: ") &&
           strstr(g_r.out, " - val_auc: "), "auc %g:\n%s", test_auc, g_r.out);
    p = predict("bin.npy", auc, tmp_path("auc-ck"), tmp_path("auc-p.npy"),
                N * 3);
    double keras = p ? keras_auc(p, &g_bin[0][0], N * 3) : -1;
    CHECKF(fabs(keras - test_auc) < 1e-3, "Keras's AUC of predict's output "
           "%.6f, the run reported %.6f", keras, test_auc);
    free(p);
    const char *auc_mw[] = { "model.layers=dense 16 relu, dense 3 sigmoid",
                             "model.loss=binary_crossentropy",
                             "model.metric=auc", "strategy.plugin=mwms",
                             "transport.plugin=zmq", NULL };
    CHECK(run("launch", "bin.npy", auc_mw) == 0);
    CHECKF(figure(g_r.out, "test auc ") == test_auc, "mwms: test auc %g, "
           "mirrored %g", figure(g_r.out, "test auc "), test_auc);

    /* one-hot rows are the class ids */
    const char *cat[] = { "model.layers=dense 16 relu, dense 4",
                          "model.loss=categorical_crossentropy",
                          set_path("debug.dump_vars", "cat.bin"), NULL };
    CHECK(run("train", "onehot.npy", cat) == 0);
    double cat_loss = figure(g_r.out, "test loss ");
    const char *sp[] = { "model.layers=dense 16 relu, dense 4",
                         set_path("debug.dump_vars", "sparse.bin"), NULL };
    CHECK(run("train", "ids.npy", sp) == 0);
    double sp_loss = figure(g_r.out, "test loss ");
    CHECKF(fabs(cat_loss - sp_loss) <= 1e-4 && cat_loss > 0,
           "categorical on one-hot: test loss %g, sparse on ids %g",
           cat_loss, sp_loss);
    CHECKF(close_files(tmp_path("cat.bin"), tmp_path("sparse.bin"), 1e-5),
           "categorical on one-hot and sparse on ids differ");

    const char *topk[] = { "model.layers=dense 16 relu, dense 4",
                           "model.metric=sparse_top_k_categorical_accuracy",
                           "model.top_k=2",
                           "train.monitor=val_sparse_top_k_categorical_accuracy",
                           "train.early_stopping_patience=5", NULL };
    CHECK(run("train", "ids.npy", topk) == 0);
    double k2 = figure(g_r.out, "test sparse_top_k_categorical_accuracy ");
    CHECKF(k2 >= figure(g_r.out, "val_sparse_top_k_categorical_accuracy ")
           - 1 && k2 > 0.9 && strstr(g_r.out, " - sparse_top_k_categorical_"
                                     "accuracy: "),
           "top-2 accuracy %g:\n%s", k2, g_r.out);
}

/* exit != 0 and `want` in stderr */
static void refused(const char *what, const char *labels,
                    const char *const *more, const char *want)
{
    int code = run("train", labels, more);
    CHECKF(code != 0 && strstr(g_r.err, want), "%s: exit %d, want '%s' in\n%s",
           what, code, want, g_r.err);
}

static void refusals(void)
{
    const char *reg[] = { "model.layers=dense 2", "model.loss=mse", NULL };
    refused("float64 labels", "reg64.npy", reg, "float64: save it as float32");
    const char *bin[] = { "model.layers=dense 3",
                          "model.loss=binary_crossentropy", NULL };
    refused("label 1.5", "bin_bad.npy", bin, "label 1.5 of sample 7 (value 2 "
            "of its 3) is out of range");
    const char *acc[] = { "model.layers=dense 2", "model.loss=mse",
                          "model.metric=accuracy", NULL };
    refused("accuracy of mse", "reg.npy", acc, "metric = accuracy does not go "
            "with loss = mse");
    const char *topk[] = { "model.layers=dense 4",
                           "model.metric=top_k_categorical_accuracy", NULL };
    refused("top-k of sparse", "ids.npy", topk, "sparse_categorical_"
            "crossentropy's is sparse_top_k_categorical_accuracy");
    const char *wide[] = { "model.layers=dense 3", "model.loss=mse", NULL };
    refused("3 units for 2 values", "reg.npy", wide, "the last layer has 3 "
            "units but the labels have 2 values per sample");
    const char *smax[] = { "model.layers=dense 3 softmax",
                           "model.loss=binary_crossentropy", NULL };
    refused("softmax before sigmoid", "bin.npy", smax, "'softmax' on the last "
            "layer: binary_crossentropy applies a sigmoid per unit");
    const char *auc[] = { "model.layers=dense 2", "model.loss=mse",
                          "model.metric=auc", NULL };
    refused("auc of mse", "reg.npy", auc, "auc is binary_crossentropy's");
    const char *mon[] = { "model.layers=dense 2", "model.loss=mse",
                          "train.monitor=val_accuracy",
                          "train.early_stopping_patience=2", NULL };
    refused("monitor", "reg.npy", mon, "monitor = val_accuracy, but the job's "
            "metric is mae");
}

int main(void)
{
    g_dir = tmp_make("losses");
    make_data();
    regression();
    classes();
    refusals();
    rm_tree(g_dir);
    return CHECK_DONE();
}
