/* [model] init_from (a warm start), end to end through the strata binary.
 *
 *   test_init_from            (label checkpoint)
 *     - a strata checkpoint (sgd): one step from it through init_from is
 *       bitwise equal to one step resumed from it; a fresh run differs;
 *     - an adam checkpoint: its optimizer slots are ignored with one line,
 *       the variables are the checkpoint's (mirrored, central, mwms, ps);
 *     - a weights-only file without any metadata, and a strata checkpoint
 *       whose checksums no longer hold (written back by another writer with
 *       strata's metadata copied): both load, the second with one warning;
 *     - errors, each ONE error line and a non-zero exit: missing tensor,
 *       wrong shape, F64 dtype (exit 2), missing file (2), truncated file,
 *       header length past the end of the file (1).
 *   test_init_from py INIT_FROM_PY   (label interop)
 *     - a weights-only file written by Python's safetensors.numpy.save_file
 *       (a conv2d model, NHWC names and shapes as `strata inspect` prints
 *       them): the run starts from its values;
 *     - a strata checkpoint written back from Python (variables halved,
 *       strata's metadata copied): one warning, the run starts from the
 *       halved values. Skipped (77) when python3
 *       cannot import safetensors and numpy; STRATA_PYTHON overrides python3.
 *
 * "The variables a run started from": optimizer sgd with lr = 1e-12 (the
 * smallest) and one step, so the dumped final variables (debug.dump_vars)
 * are the initial ones to 1e-6 (the files' values differ by 1/64 steps). */
#include <math.h>
#include <sys/stat.h>

#include "check.h"
#include "checkpoint/checkpoint.h"
#include "ckpt_util.h"
#include "spawn.h"

static char g_out[65536], g_err[65536];

#define QUIET "--set", "train.progress=none", "--set", "train.eval=false", \
              "--set", "data.limit_train=64", "--set", "train.batch_size=32", \
              "--set", "train.devices=cpu:0"
#define DENSE "--set", "model.layers=dense 16 relu, dense 10"
#define FROZEN "--set", "optimizer.name=sgd", "--set", "optimizer.lr=1e-12", \
               "--set", "train.max_steps=1", "--set", "train.epochs=1"

/* The dense model's variables (784 inputs: Fashion-MNIST). */
static const char *const k_names[4] = { "dense_0/kernel", "dense_0/bias",
                                        "dense_1/kernel", "dense_1/bias" };
static const int64_t k_shapes[4][2] = { { 784, 16 }, { 16, 0 }, { 16, 10 },
                                        { 10, 0 } };
static const int k_ndim[4] = { 2, 1, 2, 1 };
static const size_t k_counts[4] = { 784 * 16, 16, 160, 10 };
#define NTOTAL (784 * 16 + 16 + 160 + 10)

static int run_(const char *sub, char *const *args, int timeout_s)
{
    char *argv[64] = { (char *)spawn_strata_bin(), (char *)sub };
    int n = 2;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    spawn_result_t *r = malloc(sizeof *r);
    if (!r)
        return -1;
    spawn_run(argv, timeout_s, r);
    memcpy(g_out, r->out, sizeof g_out);
    memcpy(g_err, r->err, sizeof g_err);
    int code = r->timed_out ? -2 : r->code;
    free(r);
    return code;
}
#define train(...) run_("train", (char *const[]){ __VA_ARGS__, NULL }, 180)
#define launch(...) run_("launch", (char *const[]){ __VA_ARGS__, NULL }, 240)

/* "--set" values, kept alive for the argv (rotated). */
static char *setf(const char *fmt, const char *v)
{
    static char slots[16][1024];
    static int next;
    char *p = slots[next++ % 16];
    snprintf(p, sizeof slots[0], fmt, v);
    return p;
}

static int count_error_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, ": error: ")) != NULL; p++)
        n++;
    return n;
}

static float *load_dump(const char *path, size_t n)
{
    size_t got = 0;
    float *v = read_all(path, &got);
    if (v && got != n * sizeof(float)) {
        fprintf(stderr, "%s: %zu bytes, expected %zu\n", path, got,
                n * sizeof(float));
        free(v);
        return NULL;
    }
    return v;
}

/* Largest |a - b| over n floats. */
static double max_diff(const float *a, const float *b, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++)
        d = fmax(d, fabs((double)a[i] - (double)b[i]));
    return d;
}

/* The known values of the hand-made files: exact in float32. */
static float known(int var, size_t j)
{
    return (float)((int)((j * 7 + (size_t)var * 13) % 101) - 50) / 64.0f;
}

/* The dense model's variables in a strata file (with strata's metadata).
 * skip: a variable left out (-1: none); bad_shape/bad_dtype: that variable
 * gets shape [784, 8] / dtype F64. Extra tensors: `extra` of them. */
static void write_vars(const char *path, const float *vals, int skip,
                       int bad_shape, int bad_dtype, int extra)
{
    strata__tensor_t t[8];
    static double d64[16];
    int nt = 0;
    size_t at = 0;
    for (int i = 0; i < 4; at += k_counts[i], i++) {
        if (i == skip)
            continue;
        strata__tensor_t *x = &t[nt++];
        *x = (strata__tensor_t){ .name = k_names[i], .dtype = "F32",
                                 .ndim = k_ndim[i], .data = vals + at,
                                 .nbytes = k_counts[i] * sizeof(float) };
        x->shape[0] = k_shapes[i][0];
        x->shape[1] = k_shapes[i][1];
        if (i == bad_shape) {
            x->shape[1] = 8;
            x->nbytes /= 2;
        }
        if (i == bad_dtype) {
            x->dtype = "F64";
            x->data = d64;
            x->nbytes = k_counts[i] * sizeof(double);
        }
    }
    for (int e = 0; e < extra; e++) {
        static const char *const en[2] = { "optimizer/m/dense_0/bias",
                                           "notes/epoch" };
        t[nt++] = (strata__tensor_t){ .name = en[e], .dtype = "F32",
                                      .ndim = 1, .shape = { 4 },
                                      .data = vals, .nbytes = 16 };
    }
    CHECKF(strata__ckpt_write(path, t, nt, NULL, 0) == STRATA_OK, "write %s",
           path);
}

/* (a) A strata checkpoint: init_from + one step == resume + one step. */
static void from_checkpoint(void)
{
    const char *ck = tmp_path("ck"), *b = tmp_path("b.bin"),
               *c = tmp_path("c.bin"), *e = tmp_path("e.bin");
    char ck2[600];
    snprintf(ck2, sizeof ck2, "%s/ckpt-0000000002.safetensors", ck);
#define ONE_BATCH "--set", "data.limit_train=32", "--set", "data.shuffle=false", \
                  "--set", "optimizer.name=sgd", "--set", "optimizer.lr=0.05"
    /* A: two epochs of one step each, a checkpoint after each */
    int code = train(QUIET, DENSE, ONE_BATCH, "--set", "train.epochs=2",
                     "--set", setf("checkpoint.dir=%s", ck), "--set",
                     "checkpoint.keep=0");
    CHECKF(code == 0, "run A: exit %d: %s", code, g_err);
    CHECKF(file_exists(ck2), "no %s", ck2);
    /* B: another seed, init_from the step-2 checkpoint, one step */
    code = train(QUIET, DENSE, ONE_BATCH, "--set", "train.epochs=1", "--set",
                 "train.seed=7", "--set", setf("model.init_from=%s", ck2),
                 "--set", setf("debug.dump_vars=%s", b));
    CHECKF(code == 0, "run B: exit %d: %s", code, g_err);
    CHECKF(strstr(g_out, setf("initialised 4 variables from %s\n", ck2)),
           "run B's output: %s", g_out);
    CHECKF(!strstr(g_err, "ignored"), "sgd: no slots to ignore: %s", g_err);
    /* C: A's job resumed from the step-2 checkpoint, one more step */
    code = train(QUIET, DENSE, ONE_BATCH, "--set", "train.epochs=3", "--set",
                 setf("checkpoint.dir=%s", ck), "--set", "checkpoint.keep=0",
                 "--set", setf("debug.dump_vars=%s", c));
    CHECKF(code == 0, "run C: exit %d: %s", code, g_err);
    CHECKF(strstr(g_out, "resumed from "), "run C did not resume: %s", g_out);
    /* E: B without init_from */
    code = train(QUIET, DENSE, ONE_BATCH, "--set", "train.epochs=1", "--set",
                 "train.seed=7", "--set", setf("debug.dump_vars=%s", e));
    CHECKF(code == 0, "run E: exit %d: %s", code, g_err);
    float *vb = load_dump(b, NTOTAL), *vc = load_dump(c, NTOTAL),
          *ve = load_dump(e, NTOTAL);
    CHECK(vb && vc && ve);
    if (vb && vc && ve) {
        CHECKF(memcmp(vb, vc, NTOTAL * sizeof *vb) == 0, "init_from + 1 step "
               "differs from resume + 1 step by %g", max_diff(vb, vc, NTOTAL));
        CHECKF(max_diff(vb, ve, NTOTAL) > 1e-3, "init_from made no difference");
    }
    free(vb);
    free(vc);
    free(ve);
#undef ONE_BATCH
}

/* The dumped variables of a FROZEN run equal `want` (NTOTAL floats). */
static void check_started_from(const char *dump, const float *want,
                               const char *what)
{
    float *v = load_dump(dump, NTOTAL);
    CHECKF(v != NULL, "%s: no dump", what);
    if (v) {
        double d = max_diff(v, want, NTOTAL);
        printf("%s: largest difference to the file's values %.3g\n", what, d);
        CHECKF(d <= 1e-6, "%s: the run did not start from the file (%.3g)",
               what, d);
    }
    free(v);
}

/* An adam checkpoint: slots ignored; every strategy starts from it. */
static void from_adam_checkpoint(void)
{
    const char *ck = tmp_path("ck-adam"), *d = tmp_path("d.bin");
    char f[600];
    snprintf(f, sizeof f, "%s/ckpt-0000000002.safetensors", ck);
    int code = train(QUIET, DENSE, "--set", "train.epochs=1", "--set",
                     setf("checkpoint.dir=%s", ck));
    CHECKF(code == 0, "adam run: exit %d: %s", code, g_err);
    strata__ckpt_t *c = NULL;
    CHECK(strata__ckpt_read(f, &c) == STRATA_OK);
    if (!c)
        return;
    float *want = malloc(NTOTAL * sizeof *want);
    size_t at = 0;
    for (int i = 0; i < 4; at += k_counts[i], i++) {
        const strata__tensor_t *t = strata__ckpt_find(c, k_names[i]);
        CHECK(t && t->nbytes == k_counts[i] * sizeof(float));
        if (t && t->nbytes == k_counts[i] * sizeof(float))
            memcpy(want + at, t->data, t->nbytes);
    }
    strata__ckpt_free(c);
    const char *strategies[] = { "mirrored", "central" };
    for (int s = 0; s < 2; s++) {
        remove(d);
        code = train(QUIET, DENSE, FROZEN, "--set",
                     setf("strategy.plugin=%s", strategies[s]), "--set",
                     setf("model.init_from=%s", f), "--set",
                     setf("debug.dump_vars=%s", d));
        CHECKF(code == 0, "%s: exit %d: %s", strategies[s], code, g_err);
        CHECKF(strstr(g_err, "8 tensors not in the model ignored (8 optimizer "
                             "slots"), "%s: %s", strategies[s], g_err);
        CHECKF(!strstr(g_err, "warning"), "%s: %s", strategies[s], g_err);
        check_started_from(d, want, strategies[s]);
    }
    /* Several processes: mwms (the chief broadcasts) and ps (every task
     * places its own copy of the initial values). */
    char etc_mwms[600], etc_ps[600];
    const char *src = getenv("STRATA_SRC");
    snprintf(etc_mwms, sizeof etc_mwms, "%s/etc/mwms.ini", src ? src : ".");
    snprintf(etc_ps, sizeof etc_ps, "%s/etc/ps.ini", src ? src : ".");
    if (!file_exists(etc_mwms) || !file_exists(etc_ps)) {
        printf("no etc/mwms.ini or etc/ps.ini (STRATA_SRC): mwms and ps not "
               "tried\n");
        free(want);
        return;
    }
    remove(d);
    code = launch("-n", "2", "-c", etc_mwms, QUIET, DENSE, FROZEN, "--set",
                  "train.batch_size=32", "--set", "debug.hash_vars=true",
                  "--set", setf("model.init_from=%s", f), "--set",
                  setf("debug.dump_vars=%s", d));
    CHECKF(code == 0, "mwms: exit %d: %s%s", code, g_out, g_err);
    check_started_from(d, want, "mwms");
    remove(d);
    code = launch("-n", "2", "--ps", "1", "-c", etc_ps, QUIET, DENSE, FROZEN,
                  "--set", setf("model.init_from=%s", f), "--set",
                  setf("debug.dump_vars=%s", d));
    CHECKF(code == 0, "ps: exit %d: %s%s", code, g_out, g_err);
    check_started_from(d, want, "ps");
    free(want);
}

/* Files of other writers: no metadata at all; stale strata checksums. */
static void foreign_files(void)
{
    float *vals = malloc(NTOTAL * sizeof *vals);
    size_t at = 0;
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < k_counts[i]; j++)
            vals[at++] = known(i, j);
    const char *d = tmp_path("f.bin");

    /* A weights-only file without any metadata, tensors in another order,
     * and one extra tensor: made by hand. */
    const char *plain = tmp_path("plain.safetensors");
    char hdr[1024];
    size_t o1 = 160 * 4, o2 = o1 + 10 * 4, o3 = o2 + 784 * 16 * 4,
           o4 = o3 + 16 * 4, o5 = o4 + 8;
    int hl = snprintf(hdr, sizeof hdr,
        "{\"dense_1/kernel\":{\"dtype\":\"F32\",\"shape\":[16,10],"
        "\"data_offsets\":[0,%zu]},"
        "\"dense_1/bias\":{\"dtype\":\"F32\",\"shape\":[10],"
        "\"data_offsets\":[%zu,%zu]},"
        "\"dense_0/kernel\":{\"dtype\":\"F32\",\"shape\":[784,16],"
        "\"data_offsets\":[%zu,%zu]},"
        "\"dense_0/bias\":{\"dtype\":\"F32\",\"shape\":[16],"
        "\"data_offsets\":[%zu,%zu]},"
        "\"lr\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[%zu,%zu]}}",
        o1, o1, o2, o2, o3, o3, o4, o4, o5);
    size_t n = 8 + (size_t)hl + o5;
    unsigned char *img = calloc(1, n);
    for (int i = 0; i < 8; i++)
        img[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(img + 8, hdr, (size_t)hl);
    unsigned char *data = img + 8 + hl;
    size_t k0 = 0, b0 = 784 * 16, k1 = b0 + 16, b1 = k1 + 160;
    memcpy(data, vals + k1, o1);
    memcpy(data + o1, vals + b1, o2 - o1);
    memcpy(data + o2, vals + k0, o3 - o2);
    memcpy(data + o3, vals + b0, o4 - o3);
    double lr = 0.5;
    memcpy(data + o4, &lr, 8);
    write_file(plain, img, n);
    int code = train(QUIET, DENSE, FROZEN, "--set",
                     setf("model.init_from=%s", plain), "--set",
                     setf("debug.dump_vars=%s", d));
    CHECKF(code == 0, "plain file: exit %d: %s", code, g_err);
    CHECKF(strstr(g_err, "warning: init_from ") &&
           strstr(g_err, "1 tensor not in the model ignored (0 optimizer "
                         "slots") && strstr(g_err, "'lr'"),
           "plain file: no warning naming the extra tensor: %s", g_err);
    check_started_from(d, vals, "plain file");

    /* strata's file with its data changed afterwards: a warning, used. */
    const char *stale = tmp_path("stale.safetensors");
    vals[5] = 99.0f;
    write_vars(stale, vals, -1, -1, -1, 0);
    vals[5] = known(0, 5);
    size_t sn = 0;
    unsigned char *s = read_all(stale, &sn);
    CHECK(s && sn > 100);
    if (s) {
        uint64_t h = 0;
        for (int i = 0; i < 8; i++)
            h |= (uint64_t)s[i] << (8 * i);
        float v5 = vals[5];
        memcpy(s + 8 + h + 5 * sizeof(float), &v5, sizeof v5);
        write_file(stale, s, sn);
        free(s);
    }
    remove(d);
    code = train(QUIET, DENSE, FROZEN, "--set",
                 setf("model.init_from=%s", stale), "--set",
                 setf("debug.dump_vars=%s", d));
    CHECKF(code == 0, "stale checksums: exit %d: %s", code, g_err);
    CHECKF(strstr(g_err, "checksums do not hold (crc mismatch"),
           "stale checksums: no warning: %s", g_err);
    check_started_from(d, vals, "stale checksums");
    /* ... which resume and inspect, strict, refuse */
    strata__ckpt_t *c = NULL;
    capture_begin();
    int rc = strata__ckpt_read(stale, &c);
    capture_end();
    CHECK(rc == STRATA_EDATA && c == NULL);
    free(img);
    free(vals);
}

/* One bad file: the exit code, exactly one error line, holding `want`. */
static void bad(const char *file, int want_code, const char *want)
{
    const char *d = tmp_path("never.bin");
    int code = train(QUIET, DENSE, FROZEN, "--set",
                     setf("model.init_from=%s", file), "--set",
                     setf("debug.dump_vars=%s", d));
    CHECKF(code == want_code, "%s: exit %d, expected %d: %s", want, code,
           want_code, g_err);
    CHECKF(count_error_lines(g_err) == 1, "%s: not one error line: %s", want,
           g_err);
    char line[1200];
    snprintf(line, sizeof line, "strata: model: error: init_from %s: %s", file,
             want);
    CHECKF(strstr(g_err, line), "expected \"%s\" in: %s", line, g_err);
    CHECK(!file_exists(d));
    fputs(g_err, stdout);
}

static void errors(void)
{
    float *vals = calloc(NTOTAL, sizeof *vals);
    const char *f = tmp_path("bad.safetensors");
    write_vars(f, vals, 3, -1, -1, 0);
    bad(f, 2, "tensor 'dense_1/bias' missing");
    write_vars(f, vals, -1, 0, -1, 0);
    bad(f, 2, "tensor 'dense_0/kernel' has shape (784, 8) in the file, "
              "(784, 16) in the model");
    write_vars(f, vals, -1, -1, 3, 0);
    bad(f, 2, "tensor 'dense_1/bias' is F64; the model's variables are F32");
    bad(tmp_path("absent.safetensors"), 2, "cannot open: No such file");

    /* truncated: the last tensor ends past the data section */
    write_vars(f, vals, -1, -1, -1, 0);
    size_t n = 0;
    unsigned char *img = read_all(f, &n);
    CHECK(img && n > 100);
    if (img)
        write_file(f, img, n - 6);
    bad(f, 1, "tensor 'dense_1/bias': data_offsets [");
    free(img);

    /* a header length past the end of the file */
    unsigned char buf[64];
    size_t len = st_image(buf, "{}", 1000, 4);
    write_file(f, buf, len);
    bad(f, 1, "header length 1000 exceeds the file (14 bytes): truncated?");
    free(vals);
}

/* ---- Python ------------------------------------------------------------- */

/* Must match init_from.py: conv2d 4 3 relu, flatten, dense 10 on 28x28x1. */
#define PY_LAYERS "model.layers=conv2d 4 3 relu, flatten, dense 10"
static const size_t k_py_counts[4] = { 3 * 3 * 1 * 4, 4, 26 * 26 * 4 * 10, 10 };
#define PY_TOTAL (36 + 4 + 27040 + 10)

static int python_file(const char *script)
{
    char py[1024];
    if (find_python(py, sizeof py) != 0)
        CHECK_SKIP("no python3 (set STRATA_PYTHON): the Python half of the "
                   "init_from test needs `pip install safetensors numpy`");
    char *check[] = { py, (char *)script, "check", NULL };
    spawn_result_t *r = malloc(sizeof *r);
    spawn_run(check, 60, r);
    if (r->code != 0) {
        printf("%s%s", r->out, r->err);
        free(r);
        CHECK_SKIP("python3 cannot import safetensors and numpy (pip install "
                   "safetensors numpy)");
    }
    const char *file = tmp_path("py.safetensors"), *d = tmp_path("py.bin");
    char *write[] = { py, (char *)script, "write", (char *)file, NULL };
    spawn_run(write, 60, r);
    int code;
    CHECKF(r->code == 0, "init_from.py write: %d: %s%s", r->code, r->out,
           r->err);
    free(r);
    code = train(QUIET, "--set", PY_LAYERS, FROZEN, "--set",
                     setf("model.init_from=%s", file), "--set",
                     setf("debug.dump_vars=%s", d));
    CHECKF(code == 0, "python file: exit %d: %s", code, g_err);
    CHECKF(strstr(g_out, setf("initialised 4 variables from %s\n", file)),
           "%s", g_out);
    CHECKF(strstr(g_err, "1 tensor not in the model ignored") &&
           strstr(g_err, "'notes/step'"), "%s", g_err);
    float *v = load_dump(d, PY_TOTAL), *want = malloc(PY_TOTAL * sizeof *want);
    size_t at = 0;
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < k_py_counts[i]; j++)
            want[at++] = known(i, j);
    CHECKF(v != NULL, "no dump of the python run");
    if (v) {
        double diff = max_diff(v, want, PY_TOTAL);
        printf("python file: largest difference %.3g\n", diff);
        CHECKF(diff <= 1e-6, "the run did not start from the python file "
               "(%.3g)", diff);
    }
    free(v);
    free(want);
    /* A strata checkpoint written back by Python, metadata copied */
    const char *ck = tmp_path("ck-py"), *half = tmp_path("half.safetensors");
    char src[600];
    snprintf(src, sizeof src, "%s/ckpt-0000000002.safetensors", ck);
    code = train(QUIET, DENSE, "--set", "train.epochs=1", "--set",
                 setf("checkpoint.dir=%s", ck));
    CHECKF(code == 0, "adam run: exit %d: %s", code, g_err);
    char *halve[] = { py, (char *)script, "halve", src, (char *)half, NULL };
    r = malloc(sizeof *r);
    spawn_run(halve, 60, r);
    CHECKF(r->code == 0, "init_from.py halve: %d: %s%s", r->code, r->out,
           r->err);
    free(r);
    float *hw = malloc(NTOTAL * sizeof *hw);
    strata__ckpt_t *c = NULL;
    CHECK(strata__ckpt_read(src, &c) == STRATA_OK);
    at = 0;
    for (int i = 0; c && i < 4; at += k_counts[i], i++) {
        const strata__tensor_t *t = strata__ckpt_find(c, k_names[i]);
        CHECK(t && t->nbytes == k_counts[i] * sizeof(float));
        for (size_t j = 0; t && j < k_counts[i]; j++)
            hw[at + j] = ((const float *)t->data)[j] * 0.5f;
    }
    strata__ckpt_free(c);
    remove(d);
    code = train(QUIET, DENSE, FROZEN, "--set",
                 setf("model.init_from=%s", half), "--set",
                 setf("debug.dump_vars=%s", d));
    CHECKF(code == 0, "written back: exit %d: %s", code, g_err);
    CHECKF(strstr(g_err, "checksums do not hold") &&
           strstr(g_err, "8 tensors not in the model ignored (8 optimizer"),
           "written back: %s", g_err);
    check_started_from(d, hw, "written back from python");
    free(hw);

    /* A shape that does not fit: the conv kernel of 8 filters */
    code = train(QUIET, "--set",
                 "model.layers=conv2d 8 3 relu, flatten, dense 10", FROZEN,
                 "--set", setf("model.init_from=%s", file));
    CHECKF(code == 2 && strstr(g_err, "tensor 'conv2d_0/kernel' has shape "
                               "(3, 3, 1, 4) in the file, (3, 3, 1, 8) in the "
                               "model"), "exit %d: %s", code, g_err);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    tmp_make("init-from");
    if (argc >= 3 && strcmp(argv[1], "py") == 0) {
        python_file(argv[2]);
    } else {
        from_checkpoint();
        from_adam_checkpoint();
        foreign_files();
        errors();
    }
    tmp_cleanup();
    return CHECK_DONE();
}
