/* Config layer: value store, precedence, typed options, the core's sections,
 * and golden error messages (NAME.ini in, NAME.expected = exact stderr).
 *
 * usage: config_test <dir of this file> <etc dir>. Runs in <dir of this
 * file>, so origins read "syntax.ini:4". */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cluster/cluster.h"
#include "internal.h"
#include "testutil.h"

static char g_etc[PATH_MAX];

/* A plugin-like table covering every option type, for section [test]. */
typedef struct tcfg {
    int64_t     count;
    double      ratio;
    int         flag;
    const char *label;
    int         mode;
    int64_t     buf;
    int64_t     need;
} tcfg_t;

static const strata_option_t k_test[] = {
    { "count", STRATA_OPT_INT, 0, "3", offsetof(tcfg_t, count), 0, 10, NULL,
      "a count" },
    { "ratio", STRATA_OPT_FLOAT, 0, "0.5", offsetof(tcfg_t, ratio), 0, 1,
      NULL, "a ratio" },
    { "flag", STRATA_OPT_BOOL, 0, "false", offsetof(tcfg_t, flag), 1, 0, NULL,
      "a flag" },
    { "label", STRATA_OPT_STRING, 0, "x", offsetof(tcfg_t, label), 1, 0, NULL,
      "a label" },
    { "mode", STRATA_OPT_ENUM, 0, "fast", offsetof(tcfg_t, mode), 1, 0,
      "fast|slow|auto", "a mode" },
    { "buf", STRATA_OPT_SIZE, 0, "4K", offsetof(tcfg_t, buf), 1024,
      1073741824.0, NULL, "a buffer size" },
    { "need", STRATA_OPT_INT, 0, NULL, offsetof(tcfg_t, need), 1, 0, NULL,
      "a required key" },
    { 0 }
};

/* ---- golden error messages ----------------------------------------------- */

typedef struct golden {
    const char *name;   /* NAME.expected holds the exact stderr            */
    const char *file;   /* loaded first when not NULL                      */
    const char *env[3]; /* then these environment entries                  */
    const char *set;    /* then this --set                                 */
    int         custom; /* then apply k_test to [test], else settings_load */
    int         rc;
} golden_t;

static const golden_t k_golden[] = {
    { "syntax", "syntax.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "syntax_section", "syntax_section.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "multiline", "multiline.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "duplicate", "duplicate.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "duplicate_key", "duplicate_key.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "duplicate_section", "duplicate_section.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "nul", "nul.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "outside", "outside.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "long_line", "long_line.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "missing", "missing.ini", { 0 }, NULL, 0, STRATA_ENOENT },
    { "unknown_suggest", "unknown_suggest.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "unknown_nomatch", "unknown_nomatch.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "unknown_section", "unknown_section.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "unknown_section_far", "unknown_section_far.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "bad_int", "bad_int.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "bad_range", "bad_range.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "bad_lr", "bad_lr.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "bad_enum", "bad_enum.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "bad_bool", "bad_bool.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "bad_schedule", "bad_schedule.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "bad_decay", "bad_decay.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "bad_rho", "bad_rho.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "bad_rmsprop_momentum", "bad_rmsprop_momentum.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "bad_accumulator", "bad_accumulator.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "bad_weight_decay", "bad_weight_decay.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "bad_boundaries", "bad_boundaries.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "bad_values", "bad_values.ini", { 0 }, NULL, 0, STRATA_ECONFIG },
    { "step_no_boundaries", "step_no_boundaries.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "cosine_no_steps", "cosine_no_steps.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "monitor_no_eval", "monitor_no_eval.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "keep_best_no_dir", "keep_best_no_dir.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "restore_best_no_eval", "restore_best_no_eval.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "reduce_lr_no_eval", "reduce_lr_no_eval.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "bad_reduce_lr_factor", "bad_reduce_lr_factor.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "bad_crop_padding", "bad_crop_padding.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "validation_zero", "validation_zero.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "validation_one", "validation_one.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "validation_half", "validation_half.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "validation_two", "validation_two.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "validation_ids", "validation_ids.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "validation_ok", "validation_ok.ini", { 0 }, NULL, 0, 0 },
    { "set_boundaries", NULL, { 0 }, "optimizer.boundaries=10, x", 0,
      STRATA_ECONFIG },
    { "callbacks_ok", "callbacks_ok.ini", { 0 }, NULL, 0, 0 },
    { "env_bad", NULL, { "STRATA_TRAIN_EPOCHS=five", NULL }, NULL, 0,
      STRATA_ECONFIG },
    { "env_unknown", NULL, { "STRATA_DATA_LIMIT=5", NULL }, NULL, 0,
      STRATA_ECONFIG },
    { "set_bad", NULL, { 0 }, "train.batch_size=0", 0, STRATA_ECONFIG },
    { "set_warmup", NULL, { 0 }, "train.warmup_epochs=1e300", 0,
      STRATA_ECONFIG },
    { "set_on_nan", NULL, { 0 }, "train.on_nan=skip", 0, STRATA_ECONFIG },
    { "set_invalid", NULL, { 0 }, "train.Epochs=5", 0, STRATA_ECONFIG },
    { "set_nodot", NULL, { 0 }, "epochs=5", 0, STRATA_ECONFIG },
    { "empty_plugin", NULL, { 0 }, "strategy.plugin=", 0, STRATA_ECONFIG },
    { "indented", "indented.ini", { 0 }, NULL, 0, 0 },
    { "strategy_extra", "strategy_extra.ini", { 0 }, NULL, 0, 0 },
    { "plugin_sections", "plugin_sections.ini", { 0 }, NULL, 0, 0 },
    { "plugin_section_bad", "plugin_section_bad.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "plugin_section_typo", "plugin_section_typo.ini", { 0 }, NULL, 0,
      STRATA_ECONFIG },
    { "set_plugin_key", NULL, { 0 }, "transport.zmq.timeout_s=30", 0, 0 },
    { "set_plugin_bad", NULL, { 0 }, "transport.zmq.x.timeout_s=30", 0,
      STRATA_ECONFIG },
    { "custom_ok", "custom_ok.ini", { 0 }, NULL, 1, 0 },
    { "custom_int", "custom_int.ini", { 0 }, NULL, 1, STRATA_ECONFIG },
    { "custom_float", "custom_float.ini", { 0 }, NULL, 1, STRATA_ECONFIG },
    { "custom_nan", "custom_nan.ini", { 0 }, NULL, 1, STRATA_ECONFIG },
    { "custom_bool", "custom_bool.ini", { 0 }, NULL, 1, STRATA_ECONFIG },
    { "custom_enum", "custom_enum.ini", { 0 }, NULL, 1, STRATA_ECONFIG },
    { "custom_size", "custom_size.ini", { 0 }, NULL, 1, STRATA_ECONFIG },
    { "custom_size_range", "custom_size_range.ini", { 0 }, NULL, 1,
      STRATA_ECONFIG },
    { "custom_required", "custom_required.ini", { 0 }, NULL, 1,
      STRATA_ECONFIG },
    { "custom_unknown", "custom_unknown.ini", { 0 }, NULL, 1, STRATA_ECONFIG },
};

static void run_golden(const golden_t *g)
{
    char exp_path[256];
    snprintf(exp_path, sizeof exp_path, "%s.expected", g->name);
    char *expected = read_all(exp_path, NULL);
    CHECKF(expected != NULL, "%s: cannot read", exp_path);
    CHECKF(!g->file || strcmp(g->name, "missing") == 0
               || file_exists(g->file),
           "%s: input missing", g->file);

    strata__cfg_t *c = NULL;
    CHECK(strata__cfg_new(&c) == 0);
    if (!c || !expected) {
        free(expected);
        return;
    }
    strata__settings_t s;
    tcfg_t t;
    capture_begin();
    int rc = 0;
    if (g->file)
        rc = strata__cfg_load_file(c, g->file);
    if (rc == 0 && g->env[0])
        rc = strata__cfg_load_env(c, (char *const *)g->env);
    if (rc == 0 && g->set)
        rc = strata__cfg_set(c, g->set, STRATA__CFG_CLI, "--set");
    if (rc == 0)
        rc = g->custom ? strata__cfg_apply(c, "test", k_test, &t, NULL)
                       : strata__settings_load(c, &s);
    const char *got = capture_end();
    CHECKF(rc == g->rc, "%s: rc %d (%s), expected %d", g->name, rc,
           strata_err_name(rc), g->rc);
    CHECKF(got && strcmp(got, expected) == 0,
           "%s: stderr differs\n--- got:\n%s--- expected:\n%s", g->name,
           got ? got : "(null)", expected);
    free(expected);
    strata__cfg_free(c);
}

/* ---- behaviour ------------------------------------------------------------ */

static void test_defaults(void)
{
    strata__cfg_t *c;
    strata__settings_t s;
    CHECK(strata__cfg_new(&c) == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.train.epochs == 5);
    CHECK(s.train.batch_size == 32);
    CHECK(s.train.seed == 42);
    CHECK(s.train.lr_scaling == 0);
    CHECK(s.train.warmup_epochs == 0.0);
    CHECK(s.train.max_steps == 0);
    CHECK(strcmp(s.train.devices, "") == 0);
    CHECK(strcmp(s.train.metrics_csv, "") == 0);
    CHECK(s.train.progress == 0);
    CHECK(s.train.eval == 1);
    CHECK(strcmp(s.model.layers, "dense 128 relu, dense 10") == 0);
    CHECK(strcmp(s.data.dir, "/usr/share/datasets/fashion-mnist") == 0);
    CHECK(strcmp(s.data.train_images, "train-images-idx3-ubyte.gz") == 0);
    CHECK(strcmp(s.data.train_labels, "train-labels-idx1-ubyte.gz") == 0);
    CHECK(strcmp(s.data.test_images, "t10k-images-idx3-ubyte.gz") == 0);
    CHECK(strcmp(s.data.test_labels, "t10k-labels-idx1-ubyte.gz") == 0);
    CHECK(s.data.limit_train == 0 && s.data.limit_test == 0);
    CHECK(s.data.shuffle == 1);
    CHECK(s.optimizer.name == STRATA__OPT_ADAM);
    CHECK(s.optimizer.lr == 0.001);
    CHECK(s.optimizer.momentum == 0.9);
    CHECK(s.optimizer.beta1 == 0.9 && s.optimizer.beta2 == 0.999);
    CHECK(s.optimizer.epsilon == 1e-7);
    CHECK(s.optimizer.rho == 0.9 && s.optimizer.rmsprop_momentum == 0.0 &&
          s.optimizer.initial_accumulator_value == 0.1);
    CHECK(s.optimizer.schedule == STRATA__SCHED_CONSTANT &&
          s.optimizer.weight_decay == 0.0 && s.optimizer.clip_norm == 0.0);
    CHECK(s.train.es_patience == 0 && s.train.es_min_delta == 0.0 &&
          s.train.monitor == STRATA__MONITOR_VAL_LOSS);
    CHECK(s.checkpoint.keep_best == 0 && strcmp(s.debug.dump_lr, "") == 0);
    CHECK(strcmp(s.plugins.path, "") == 0);
    CHECK(s.log.level == STRATA_LOG_INFO);
    CHECK(s.debug.check_sync == 0);
    CHECK(strcmp(s.debug.dump_vars, "") == 0);
    CHECK(strcmp(s.strategy, "mirrored") == 0);
    CHECK(strcmp(s.transport.local, "local, nccl") == 0 &&
          strcmp(s.transport.world, "nccl, zmq") == 0 &&
          strcmp(s.transport.plugin, "") == 0);
    CHECK(strata__cfg_sections(c)[0] == NULL);
    /* a directory opens but cannot be read */
    capture_begin();
    int rc = strata__cfg_load_file(c, ".");
    const char *got = capture_end();
    CHECK(rc == STRATA_EIO);
    CHECKF(got && strcmp(got, "strata: config: error: .: cannot read: Is a "
                              "directory\n") == 0, "%s", got ? got : "-");
    CHECK(strata__cfg_get(c, "train", "epochs") == NULL);
    CHECK(strata__cfg_origin(c, "train", "epochs") == NULL);
    strata__cfg_free(c);
    strata__cfg_free(NULL);
}

static void test_file_values(void)
{
    strata__cfg_t *c;
    strata__settings_t s;
    CHECK(strata__cfg_new(&c) == 0);
    CHECK(strata__cfg_load_file(c, "values.ini") == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.train.epochs == 7);
    CHECK(s.train.batch_size == 64);
    CHECK(s.train.lr_scaling == 1);
    CHECK(s.train.warmup_epochs == 0.5);
    CHECK(strcmp(s.train.devices, "cpu:0, cpu:1") == 0);
    CHECK(s.train.progress == 3);
    CHECK(s.train.eval == 0);
    CHECK(strcmp(s.model.layers, "dense 64 relu, dense 10") == 0);
    CHECK(s.data.limit_train == 1000);
    CHECK(s.data.shuffle == 0);
    CHECK(s.optimizer.name == STRATA__OPT_MOMENTUM);
    CHECK(s.optimizer.lr == 0.05);
    CHECK(s.log.level == STRATA_LOG_DEBUG);
    CHECK(strcmp(s.strategy, "central") == 0);
    CHECK(strcmp(s.transport.plugin, "zmq, local") == 0);
    /* inline comment stripped, value trimmed, empty value kept */
    const char *v = strata__cfg_get(c, "data", "dir");
    CHECK(v && strcmp(v, "/tmp/my data") == 0);
    v = strata__cfg_get(c, "debug", "dump_vars");
    CHECK(v && strcmp(v, "") == 0);
    /* a ';' not preceded by a blank is part of the value */
    v = strata__cfg_get(c, "train", "metrics_csv");
    CHECK(v && strcmp(v, "a;b.csv") == 0);
    const char *o = strata__cfg_origin(c, "train", "epochs");
    CHECKF(o && strcmp(o, "values.ini:3") == 0, "origin %s", o ? o : "-");
    o = strata__cfg_origin(c, "transport", "plugin");
    CHECKF(o && strcmp(o, "values.ini:29") == 0, "origin %s", o ? o : "-");
    o = strata__cfg_origin(c, "train", NULL);
    CHECK(o && strcmp(o, "values.ini:3") == 0);
    CHECK(strata__cfg_get(c, "train", "nope") == NULL);
    CHECK(strata__cfg_get(c, "nope", "epochs") == NULL);
    /* sections in order of first appearance, NULL-terminated */
    static const char *const k_secs[] = { "train", "model", "data",
                                          "optimizer", "log", "debug",
                                          "strategy", "transport", NULL };
    const char *const *secs = strata__cfg_sections(c);
    int i = 0;
    for (; k_secs[i] && secs[i]; i++)
        CHECKF(strcmp(secs[i], k_secs[i]) == 0, "section %d: %s", i, secs[i]);
    CHECK(k_secs[i] == NULL && secs[i] == NULL);
    strata__cfg_free(c);
}

/* The keys of schedules and callbacks, read from a file. */
static void test_callbacks_values(void)
{
    strata__cfg_t *c;
    strata__settings_t s;
    CHECK(strata__cfg_new(&c) == 0);
    CHECK(strata__cfg_load_file(c, "callbacks_ok.ini") == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.train.es_patience == 2);
    CHECK(s.train.monitor == STRATA__MONITOR_VAL_ACCURACY);
    CHECK(s.optimizer.schedule == STRATA__SCHED_STEP);
    CHECK(strcmp(s.optimizer.boundaries, "100 200") == 0);
    CHECK(s.optimizer.weight_decay == 0.004 && s.optimizer.clip_norm == 1.0);
    strata__cfg_free(c);
}

/* Indented keys are keys (not continuations); BOM and CRLF are accepted. */
static void test_layout(void)
{
    strata__cfg_t *c;
    strata__settings_t s;
    CHECK(strata__cfg_new(&c) == 0);
    CHECK(strata__cfg_load_file(c, "indented.ini") == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.train.epochs == 6 && s.train.batch_size == 16);
    CHECK(strcmp(s.model.layers, "dense 10") == 0);
    const char *o = strata__cfg_origin(c, "train", "batch_size");
    CHECK(o && strcmp(o, "indented.ini:4") == 0);
    CHECK(strata__cfg_load_file(c, "bom.ini") == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.train.epochs == 4);
    o = strata__cfg_get(c, "train", "epochs");
    CHECK(o && strcmp(o, "4") == 0);
    /* a file with an error changes nothing (syntax.ini sets epochs first) */
    capture_begin();
    int rc = strata__cfg_load_file(c, "syntax.ini");
    capture_end();
    CHECK(rc == STRATA_ECONFIG);
    o = strata__cfg_get(c, "train", "epochs");
    CHECK(o && strcmp(o, "4") == 0);
    strata__cfg_free(c);
}

static void test_precedence(void)
{
    strata__cfg_t *c;
    strata__settings_t s;
    char *env[] = { "STRATA_TRAIN_EPOCHS= 8 ", "STRATA_OPTIMIZER_LR=0.25",
                    NULL };
    CHECK(strata__cfg_new(&c) == 0);
    CHECK(strata__cfg_load_file(c, "values.ini") == 0);
    const char *file_value = strata__cfg_get(c, "train", "epochs");
    CHECK(strata__cfg_load_env(c, env) == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.train.epochs == 8);           /* env over file          */
    CHECK(s.optimizer.lr == 0.25);
    CHECK(s.train.batch_size == 64);      /* file where env is silent */
    const char *o = strata__cfg_origin(c, "train", "epochs");
    CHECKF(o && strcmp(o, "env STRATA_TRAIN_EPOCHS") == 0, "origin %s",
           o ? o : "-");
    CHECK(strata__cfg_set(c, "train.epochs = 9", STRATA__CFG_CLI, "--set")
          == 0);
    CHECK(strata__cfg_set(c, "train.seed=7", STRATA__CFG_CLI, NULL) == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.train.epochs == 9);           /* CLI over env           */
    CHECK(s.train.seed == 7);
    o = strata__cfg_origin(c, "train", "seed");
    CHECK(o && strcmp(o, "--set") == 0);
    /* lower precedence loaded later does not win */
    CHECK(strata__cfg_load_env(c, env) == 0);
    CHECK(strata__cfg_load_file(c, "values.ini") == 0);
    CHECK(strata__cfg_set(c, "train.epochs=3", STRATA__CFG_DEFAULT, "default")
          == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.train.epochs == 9);
    /* equal precedence replaces */
    CHECK(strata__cfg_set(c, "train.epochs=10", STRATA__CFG_CLI, "--set") == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.train.epochs == 10);
    /* replaced strings stay readable until cfg_free */
    CHECK(file_value && strcmp(file_value, "7") == 0);
    /* an empty value is a value */
    CHECK(strata__cfg_set(c, "train.devices=", STRATA__CFG_CLI, "--set") == 0);
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(strcmp(s.train.devices, "") == 0);
    strata__cfg_free(c);
}

static void test_env_filter(void)
{
    strata__cfg_t *c;
    char *env[] = { "STRATA_PLUGIN_PATH=/x",   "STRATA_SRC=/src",
                    "STRATA_BIN=/bin/strata",  "HOME=/root",
                    "STRATA_LOG_LEVEL=debug",  "STRATA_CLUSTER_WORKER_HOSTS=a:1",
                    "STRATA_optimizer_LR=0.1", "STRATA_TRAIN=3",
                    "STRATA_TRAIN_=3",         "STRATA_=1",
                    "STRATA_PLUGINS_PATH=/p",  NULL };
    CHECK(strata__cfg_new(&c) == 0);
    CHECK(strata__cfg_load_env(c, env) == 0);
    const char *v = strata__cfg_get(c, "log", "level");
    CHECK(v && strcmp(v, "debug") == 0);
    v = strata__cfg_get(c, "cluster", "worker_hosts");
    CHECK(v && strcmp(v, "a:1") == 0);
    v = strata__cfg_get(c, "optimizer", "lr");
    CHECK(v && strcmp(v, "0.1") == 0);
    v = strata__cfg_get(c, "plugins", "path");
    CHECK(v && strcmp(v, "/p") == 0);
    const char *const *secs = strata__cfg_sections(c);
    int n = 0;
    while (secs[n])
        n++;
    CHECKF(n == 4, "%d sections", n);
    v = strata__cfg_origin(c, "optimizer", "lr");
    CHECK(v && strcmp(v, "env STRATA_optimizer_LR") == 0);
    /* reserved sections are not "unknown" */
    strata__settings_t s;
    CHECK(strata__settings_load(c, &s) == 0);
    CHECK(s.log.level == STRATA_LOG_DEBUG);
    CHECK(strata__cfg_load_env(c, NULL) == 0);
    strata__cfg_free(c);
}

static void test_opt_parse(void)
{
    char why[256];
    int64_t i64 = -5;
    double f = -5;
    int b = -5;
    const char *str = NULL;

    /* INT */
    const strata_option_t oi = { "n", STRATA_OPT_INT, 0, "1", 0, -3, 1000,
                                 NULL, "h" };
    CHECK(strata__opt_parse(&oi, "42", &i64, why, sizeof why) == 0
          && i64 == 42);
    CHECK(strata__opt_parse(&oi, "+7", &i64, why, sizeof why) == 0
          && i64 == 7);
    CHECK(strata__opt_parse(&oi, "-3", &i64, why, sizeof why) == 0
          && i64 == -3);
    CHECK(strata__opt_parse(&oi, "-4", &i64, why, sizeof why)
          == STRATA_ECONFIG && i64 == -3);
    CHECK(strcmp(why, "expected an integer in [-3, 1000]") == 0);
    CHECK(strata__opt_parse(&oi, "1001", &i64, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&oi, "12x", &i64, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&oi, "0x10", &i64, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&oi, " 5", &i64, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&oi, "", &i64, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&oi, "1.5", &i64, why, sizeof why) != 0);
    const strata_option_t oiu = { "n", STRATA_OPT_INT, 0, "1", 0, 1, 0, NULL,
                                  "h" };
    CHECK(strata__opt_parse(&oiu, "-9223372036854775808", &i64, why,
                            sizeof why) == 0 && i64 == INT64_MIN);
    CHECK(strata__opt_parse(&oiu, "9223372036854775808", &i64, why,
                            sizeof why) != 0);
    CHECK(strcmp(why, "expected an integer") == 0);
    const strata_option_t oilo = { "n", STRATA_OPT_INT, 0, "1", 0, 0, 1e300,
                                   NULL, "h" };
    CHECK(strata__opt_parse(&oilo, "-1", &i64, why, sizeof why) != 0);
    CHECK(strcmp(why, "expected an integer >= 0") == 0);

    /* FLOAT */
    const strata_option_t of = { "x", STRATA_OPT_FLOAT, 0, "1", 0, 1e-12, 2.5,
                                 NULL, "h" };
    CHECK(strata__opt_parse(&of, "0.125", &f, why, sizeof why) == 0
          && f == 0.125);
    CHECK(strata__opt_parse(&of, "1e-3", &f, why, sizeof why) == 0
          && f == 1e-3);
    CHECK(strata__opt_parse(&of, "2.5", &f, why, sizeof why) == 0);
    CHECK(strata__opt_parse(&of, "2.5000001", &f, why, sizeof why) != 0);
    CHECK(strcmp(why, "expected a number in [1e-12, 2.5]") == 0);
    CHECK(strata__opt_parse(&of, "0", &f, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&of, "nan", &f, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&of, "inf", &f, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&of, "1e999", &f, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&of, "", &f, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&of, "1.0x", &f, why, sizeof why) != 0);
    CHECK(f == 2.5);

    /* BOOL */
    const strata_option_t ob = { "b", STRATA_OPT_BOOL, 0, "true", 0, 1, 0,
                                 NULL, "h" };
    static const char *const k_t[] = { "true", "yes", "on", "1", "TRUE",
                                       "Yes" };
    static const char *const k_f[] = { "false", "no", "off", "0", "False",
                                       "OFF" };
    for (int i = 0; i < 6; i++) {
        b = -1;
        CHECKF(strata__opt_parse(&ob, k_t[i], &b, why, sizeof why) == 0
                   && b == 1, "%s", k_t[i]);
        CHECKF(strata__opt_parse(&ob, k_f[i], &b, why, sizeof why) == 0
                   && b == 0, "%s", k_f[i]);
    }
    CHECK(strata__opt_parse(&ob, "2", &b, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&ob, "", &b, why, sizeof why) != 0);

    /* STRING: stores the text pointer, empty allowed */
    const strata_option_t os = { "s", STRATA_OPT_STRING, 0, "", 0, 1, 0,
                                 NULL, "h" };
    const char *text = "";
    CHECK(strata__opt_parse(&os, text, &str, why, sizeof why) == 0
          && str == text);

    /* ENUM */
    const strata_option_t oe = { "e", STRATA_OPT_ENUM, 0, "a", 0, 1, 0,
                                 "sgd|momentum|adam", "h" };
    CHECK(strata__opt_parse(&oe, "sgd", &b, why, sizeof why) == 0 && b == 0);
    CHECK(strata__opt_parse(&oe, "adam", &b, why, sizeof why) == 0 && b == 2);
    CHECK(strata__opt_parse(&oe, "momentum", &b, why, sizeof why) == 0
          && b == 1);
    CHECK(strata__opt_parse(&oe, "Adam", &b, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&oe, "ada", &b, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&oe, "", &b, why, sizeof why) != 0);
    CHECK(strata__opt_parse(&oe, "sgd|momentum", &b, why, sizeof why) != 0);
    CHECK(strcmp(why, "expected one of: sgd, momentum, adam") == 0);
    CHECK(b == 1);

    /* SIZE */
    const strata_option_t oz = { "z", STRATA_OPT_SIZE, 0, "1", 0, 1, 0, NULL,
                                 "h" };
    static const struct { const char *s; int64_t v; } k_sz[] = {
        { "0", 0 },          { "4096", 4096 },      { "100B", 100 },
        { "64K", 65536 },    { "64KiB", 65536 },    { "64kb", 65536 },
        { "4M", 4194304 },   { "4 MiB", 4194304 },  { "1G", 1073741824 },
        { "3GB", 3221225472LL }, { "8589934591G", 8589934591LL << 30 },
    };
    for (size_t i = 0; i < sizeof k_sz / sizeof *k_sz; i++) {
        i64 = -1;
        CHECKF(strata__opt_parse(&oz, k_sz[i].s, &i64, why, sizeof why) == 0
                   && i64 == k_sz[i].v, "%s -> %lld", k_sz[i].s,
               (long long)i64);
    }
    static const char *const k_bad_sz[] = { "", "-1", "1.5M", "4X", "K",
                                            "4MM", "4 M B", "8589934592T",
                                            "8589934592G",
                                            "99999999999999999999" };
    for (size_t i = 0; i < sizeof k_bad_sz / sizeof *k_bad_sz; i++)
        CHECKF(strata__opt_parse(&oz, k_bad_sz[i], &i64, why, sizeof why)
                   == STRATA_ECONFIG, "%s accepted", k_bad_sz[i]);
    CHECK(strcmp(why, "expected a size, in bytes or with a K, M or G suffix")
          == 0);

    /* unknown type */
    const strata_option_t ox = { "x", 99, 0, "1", 0, 1, 0, NULL, "h" };
    CHECK(strata__opt_parse(&ox, "1", &i64, why, sizeof why) == STRATA_EINVAL);

    /* a short why buffer is never overrun */
    char tiny[8];
    CHECK(strata__opt_parse(&oe, "x", &b, tiny, sizeof tiny) != 0);
    CHECK(strlen(tiny) < sizeof tiny);
}

static void test_apply(void)
{
    strata__cfg_t *c;
    tcfg_t t;
    memset(&t, 0xab, sizeof t);
    CHECK(strata__cfg_new(&c) == 0);
    CHECK(strata__cfg_load_file(c, "custom_ok.ini") == 0);
    CHECK(strata__cfg_apply(c, "test", k_test, &t, NULL) == 0);
    CHECK(t.count == 10 && t.ratio == 0.25 && t.flag == 1);
    CHECK(strcmp(t.label, "") == 0);
    CHECK(t.mode == 2 && t.buf == 2 * 1048576 && t.need == 1);
    /* defaults come first: a key not set keeps its default */
    CHECK(strata__cfg_set(c, "other.need=5", STRATA__CFG_CLI, NULL) == 0);
    tcfg_t u;
    memset(&u, 0, sizeof u);
    CHECK(strata__cfg_set(c, "other2.need=5", STRATA__CFG_CLI, NULL) == 0);
    CHECK(strata__cfg_apply(c, "other2", k_test, &u, NULL) == 0);
    CHECK(u.count == 3 && u.ratio == 0.5 && u.flag == 0);
    CHECK(strcmp(u.label, "x") == 0 && u.mode == 0 && u.buf == 4096);
    CHECK(u.need == 5);
    /* also_valid: listed keys pass, "*" passes everything */
    static const char *const k_extra[] = { "plugin", NULL };
    static const char *const k_any[] = { "*", NULL };
    CHECK(strata__cfg_set(c, "other2.plugin=x", STRATA__CFG_CLI, NULL) == 0);
    CHECK(strata__cfg_apply(c, "other2", k_test, &u, k_extra) == 0);
    CHECK(strata__cfg_set(c, "other2.zzz=1", STRATA__CFG_CLI, NULL) == 0);
    capture_begin();
    int rc = strata__cfg_apply(c, "other2", k_test, &u, k_extra);
    const char *got = capture_end();
    CHECK(rc == STRATA_ECONFIG);
    CHECKF(got && strcmp(got, "strata: config: error: --set: [other2] unknown "
                              "key 'zzz'; valid keys: count, ratio, flag, "
                              "label, mode, buf, need, plugin\n") == 0,
           "%s", got ? got : "-");
    CHECK(strata__cfg_apply(c, "other2", k_test, &u, k_any) == 0);
    /* a section without options, and a bad built-in default */
    CHECK(strata__cfg_apply(c, "nosuch", NULL, NULL, NULL) == 0);
    static const strata_option_t k_baddef[] = {
        { "n", STRATA_OPT_INT, 0, "many", 0, 1, 0, NULL, "h" }, { 0 }
    };
    capture_begin();
    rc = strata__cfg_apply(c, "nosuch", k_baddef, &u, NULL);
    got = capture_end();
    CHECK(rc == STRATA_EINTERNAL);
    CHECKF(got && strstr(got, "invalid built-in default 'many'"), "%s",
           got ? got : "-");
    capture_begin();
    rc = strata__cfg_apply(c, "other", NULL, NULL, NULL);
    got = capture_end();
    CHECK(rc == STRATA_ECONFIG);
    CHECKF(got && strcmp(got, "strata: config: error: --set: [other] unknown "
                              "key 'need'; this section takes no keys\n") == 0,
           "%s", got ? got : "-");
    strata__cfg_free(c);
}

static void test_edit_distance(void)
{
    CHECK(strata__edit_distance("", "") == 0);
    CHECK(strata__edit_distance("abc", "") == 3);
    CHECK(strata__edit_distance("", "abc") == 3);
    CHECK(strata__edit_distance("epoch", "epochs") == 1);
    CHECK(strata__edit_distance("kitten", "sitting") == 3);
    CHECK(strata__edit_distance("batchsize", "batch_size") == 1);
    CHECK(strata__edit_distance("flaw", "lawn") == 2);
    CHECK(strata__edit_distance("same", "same") == 0);
}

static const strata__section_t *section(const char *name)
{
    for (const strata__section_t *s = strata__sections; s->name; s++)
        if (strcmp(s->name, name) == 0)
            return s;
    return NULL;
}

/* A section's option table: its own, or for a reserved section the table
 * of the module that applies it (cluster.c). */
static const strata_option_t *opts_of(const strata__section_t *s)
{
    if (s && !s->opts && strcmp(s->name, "cluster") == 0)
        return strata__cluster_options;
    return s ? s->opts : NULL;
}

static void test_tables(void)
{
    /* the log level ENUM is STRATA_LOG_* and what log.c parses */
    const strata__section_t *log = section("log");
    CHECK(log && log->opts && strcmp(log->opts[0].key, "level") == 0);
    if (log && log->opts) {
        char choices[128];
        snprintf(choices, sizeof choices, "%s", log->opts[0].choices);
        int i = 0;
        for (char *tok = strtok(choices, "|"); tok; tok = strtok(NULL, "|"))
            CHECKF(strata__log_level_parse(tok) == i++, "%s", tok);
        CHECK(i == 4);
        CHECK(STRATA_LOG_ERROR == 0 && STRATA_LOG_WARN == 1
              && STRATA_LOG_INFO == 2 && STRATA_LOG_DEBUG == 3);
    }
    /* the optimizer ENUM is STRATA__OPT_* (optimizer.c's names) */
    const strata__section_t *opt = section("optimizer");
    CHECK(opt && opt->opts && strcmp(opt->opts[0].key, "name") == 0);
    if (opt && opt->opts) {
        static const struct { const char *name; int kind; } k_kinds[] = {
            { "sgd", STRATA__OPT_SGD }, { "momentum", STRATA__OPT_MOMENTUM },
            { "adam", STRATA__OPT_ADAM }, { "rmsprop", STRATA__OPT_RMSPROP },
            { "adagrad", STRATA__OPT_ADAGRAD } };
        char why[128];
        for (size_t i = 0; i < sizeof k_kinds / sizeof *k_kinds; i++) {
            int kind = -1;
            CHECKF(strata__opt_parse(&opt->opts[0], k_kinds[i].name, &kind,
                                     why, sizeof why) == 0 &&
                       kind == k_kinds[i].kind,
                   "[optimizer] name = %s: %d", k_kinds[i].name, kind);
        }
        CHECK(STRATA__OPT_COUNT == 5);
    }
    static const char *const k_names[] = { "train", "model", "graph", "data",
                                           "optimizer", "plugins", "log",
                                           "debug", "strategy", "transport",
                                           "cluster", "checkpoint", "security",
                                           "evaluator", NULL };
    for (int i = 0; k_names[i]; i++)
        CHECKF(strata__sections[i].name
                   && strcmp(strata__sections[i].name, k_names[i]) == 0,
               "section %d", i);
    CHECK(strata__sections[14].name == NULL);
    /* every core option has a default and a help line */
    for (const strata__section_t *s = strata__sections; s->name; s++)
        for (const strata_option_t *o = opts_of(s); o && o->key; o++) {
            CHECKF(o->def != NULL, "[%s] %s has no default", s->name, o->key);
            CHECKF(o->help && *o->help && !strchr(o->help, '\n'),
                   "[%s] %s help", s->name, o->key);
            CHECKF(o->flags == 0, "[%s] %s flags", s->name, o->key);
        }
}

/* etc/strata.ini: exactly the keys of the tables, set to the defaults, each
 * right below a comment that starts with its help text. */
static void test_strata_ini(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/strata.ini", g_etc);
    strata__cfg_t *c, *empty;
    CHECK(strata__cfg_new(&c) == 0 && strata__cfg_new(&empty) == 0);
    CHECKF(strata__cfg_load_file(c, path) == 0, "%s", path);
    for (const char *const *sec = strata__cfg_sections(c); *sec; sec++) {
        const strata__section_t *s = section(*sec);
        CHECKF(opts_of(s), "[%s] is not a core section", *sec);
    }
    for (const strata__section_t *s = strata__sections; s->name; s++) {
        const strata_option_t *opts = opts_of(s);
        if (!opts)
            continue;
        char a[512], b[512];
        memset(a, 0, sizeof a);
        memset(b, 0, sizeof b);
        /* strictly: no key beyond the table, not even in [strategy] */
        CHECKF(strata__cfg_apply(c, s->name, opts, a, NULL) == 0, "[%s]",
               s->name);
        CHECK(strata__cfg_apply(empty, s->name, opts, b, NULL) == 0);
        for (const strata_option_t *o = opts; o->key; o++) {
            CHECKF(strata__cfg_get(c, s->name, o->key) != NULL,
                   "strata.ini lacks [%s] %s", s->name, o->key);
            const char *pa, *pb;
            switch (o->type) {
            case STRATA_OPT_STRING:
                memcpy(&pa, a + o->offset, sizeof pa);
                memcpy(&pb, b + o->offset, sizeof pb);
                CHECKF(strcmp(pa, pb) == 0, "[%s] %s = '%s', default '%s'",
                       s->name, o->key, pa, pb);
                break;
            case STRATA_OPT_BOOL:
            case STRATA_OPT_ENUM:
                CHECKF(memcmp(a + o->offset, b + o->offset, sizeof(int)) == 0,
                       "[%s] %s differs from its default", s->name, o->key);
                break;
            default:
                CHECKF(memcmp(a + o->offset, b + o->offset, 8) == 0,
                       "[%s] %s differs from its default", s->name, o->key);
            }
        }
    }
    strata__cfg_free(c);
    strata__cfg_free(empty);

    /* the help comments */
    char *text = read_all(path, NULL);
    CHECK(text != NULL);
    char comment[1024] = "", sec[64] = "";
    int nkeys = 0;
    for (char *line = text ? strtok(text, "\n") : NULL; line;
         line = strtok(NULL, "\n")) {
        if (line[0] == ';') {
            const char *t = line[1] == ' ' ? line + 2 : line + 1;
            size_t n = strlen(comment);
            snprintf(comment + n, sizeof comment - n, "%s%s", n ? " " : "", t);
        } else if (line[0] == '[') {
            snprintf(sec, sizeof sec, "%.*s", (int)strcspn(line + 1, "]"),
                     line + 1);
            comment[0] = '\0';
        } else if (strchr(line, '=')) {
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)strcspn(line, " ="), line);
            const strata__section_t *s = section(sec);
            const strata_option_t *o = opts_of(s);
            while (o && o->key && strcmp(o->key, key) != 0)
                o++;
            CHECKF(o && o->key, "strata.ini: [%s] %s unknown", sec, key);
            if (o && o->key)
                CHECKF(strncmp(comment, o->help, strlen(o->help)) == 0,
                       "strata.ini: [%s] %s: comment '%s' should start with "
                       "'%s'", sec, key, comment, o->help);
            comment[0] = '\0';
            nkeys++;
        }
    }
    int want = 0;
    for (const strata__section_t *s = strata__sections; s->name; s++)
        for (const strata_option_t *o = opts_of(s); o && o->key; o++)
            want++;
    CHECKF(nkeys == want, "strata.ini has %d keys, the tables %d", nkeys,
           want);
    free(text);
}

static void test_mirrored_ini(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/mirrored.ini", g_etc);
    strata__cfg_t *c;
    strata__settings_t s;
    CHECK(strata__cfg_new(&c) == 0);
    capture_begin();
    int rc = strata__cfg_load_file(c, path);
    if (rc == 0)
        rc = strata__settings_load(c, &s);
    const char *got = capture_end();
    CHECKF(rc == 0 && got && !*got, "%s: %s", path, got ? got : "");
    if (rc == 0) {
        CHECK(strcmp(s.strategy, "mirrored") == 0);
        CHECK(strcmp(s.transport.local, "local") == 0);
        CHECK(strcmp(s.train.devices, "cpu:0, cpu:1") == 0);
        CHECK(s.train.epochs == 5 && s.train.batch_size == 32);
        CHECK(s.optimizer.name == STRATA__OPT_ADAM);
        CHECK(s.optimizer.lr == 0.001);
        CHECK(strcmp(s.model.layers, "dense 128 relu, dense 10") == 0);
    }
    strata__cfg_free(c);
}

int main(int argc, char **argv)
{
    enter_test_dir(argc, argv, "config", g_etc);
    strata__log_set_level(STRATA_LOG_INFO);
    test_defaults();
    test_file_values();
    test_callbacks_values();
    test_layout();
    test_precedence();
    test_env_filter();
    test_opt_parse();
    test_apply();
    test_edit_distance();
    test_tables();
    test_strata_ini();
    test_mirrored_ini();
    for (size_t i = 0; i < sizeof k_golden / sizeof *k_golden; i++)
        run_golden(&k_golden[i]);
    return CHECK_DONE();
}
