/* The strata command line: help, version, exit codes, and one clear error
 * line for each kind of bad input. */
#include "check.h"
#include "spawn.h"

static spawn_result_t R;

/* run(args...): strata with those arguments. */
static int run_(char *const *args)
{
    char *argv[16] = { (char *)spawn_strata_bin() };
    for (int i = 0; args[i] && i < 14; i++)
        argv[i + 1] = args[i];
    spawn_run(argv, 60, &R);
    return R.code;
}
#define run(...) run_((char *const[]){ __VA_ARGS__, NULL })

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

int main(void)
{
    char dir[] = "/tmp/strata-cliXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char ini[600], bad[600], setc[700];
    snprintf(ini, sizeof ini, "%s/ok.ini", dir);
    snprintf(bad, sizeof bad, "%s/bad.ini", dir);

    CHECK(run("--version") == 0);
    CHECK(strstr(R.out, "strata 0.") && strstr(R.out, "plugin ABI 2."));
    CHECK(run("--help") == 0);
    CHECK(strstr(R.out, "exit codes") != NULL);
    CHECK(run("train", "--help") == 0);
    CHECK(strstr(R.out, "--set") != NULL);
    CHECK(run("plugins", "--help") == 0);
    CHECK(run_((char *const[]){ NULL }) == 2);
    CHECK(run("frobnicate") == 2);
    CHECK(strstr(R.err, "unknown command 'frobnicate'") != NULL);
    CHECK(run("train", "--bogus") == 2);
    CHECK(strstr(R.err, "unknown argument '--bogus'") != NULL);
    CHECK(run("train", "-c") == 2);

    /* launch --max-restarts: a count, and never a restart of a job whose
     * configuration is wrong (it would fail the same way each time). */
    CHECK(run("launch", "--max-restarts", "x") == 2);
    CHECK(strstr(R.err, "--max-restarts needs a count") != NULL);
    CHECK(run("launch", "-n", "1", "--max-restarts", "3", "--set",
              "train.epochs=zero") == 2);
    CHECKF(strstr(R.err, "[train] epochs") && !strstr(R.err, "restart 1/"),
           "%s", R.err);

    /* `strata plugins` lists ours with kind, ABI and path. */
    CHECK(run("plugins") == 0);
    CHECK(strstr(R.out, "mirrored") && strstr(R.out, "strategy"));
    CHECK(strstr(R.out, "local") && strstr(R.out, "transport"));
    CHECK(strstr(R.out, "mirrored.so") != NULL);

    /* A missing config file names it. */
    CHECK(run("train", "-c", "/nonexistent/x.ini") == 2);
    CHECKF(strstr(R.err, "/nonexistent/x.ini") != NULL, "%s", R.err);

    /* An unknown key: file:line, section, key and the nearest valid key. */
    write_file(bad, "[train]\nepochs = 1\nbatch_sise = 32\n");
    CHECK(run("train", "-c", bad) == 2);
    CHECKF(strstr(R.err, "bad.ini:3") && strstr(R.err, "batch_sise") &&
           strstr(R.err, "batch_size"), "%s", R.err);

    /* A bad value says what was expected. */
    CHECK(run("train", "--set", "train.epochs=five") == 2);
    CHECKF(strstr(R.err, "epochs") && strstr(R.err, "five"), "%s", R.err);

    /* A bad --set assignment. */
    CHECK(run("train", "--set", "epochs") == 2);

    /* A plugin's own section: its keys reach it ([transport.local] while
     * the list also names nccl and zmq), a key it does not know is an error
     * with file:line and the nearest key, and so is a bad value; the
     * shared sections' plugin keys still work, with a warning. */
    char own[600];
    snprintf(own, sizeof own, "%s/own.ini", dir);
    write_file(own, "[train]\nmax_steps = 5\nprogress = none\neval = false\n"
                    "[data]\nlimit_train = 640\n"
                    "[strategy.mirrored]\nreduce_op = sum\n"
                    "[transport.local]\nspin_us = 7\n");
    CHECKF(run("train", "-c", own) == 0 && !strstr(R.err, "warning"), "%s",
           R.err);
    write_file(bad, "[transport.local]\nspin_u = 7\n");
    CHECK(run("train", "-c", bad, "--set", "train.max_steps=1") == 2);
    CHECKF(strstr(R.err, "bad.ini:2: [transport.local] unknown key 'spin_u'; "
                  "did you mean 'spin_us'?"), "%s", R.err);
    CHECK(run("train", "--set", "strategy.mirrored.reduce_op=max", "--set",
              "train.max_steps=1") == 2);
    CHECKF(strstr(R.err, "[strategy.mirrored] reduce_op = 'max'"), "%s",
           R.err);
    CHECK(run("train", "--set", "strategy.reduce_op=sum", "--set",
              "train.max_steps=1", "--set", "train.progress=none",
              "--set", "data.limit_train=640", "--set", "train.eval=false")
          == 0);
    CHECKF(strstr(R.err, "[strategy] reduce_op: plugin keys in [strategy] "
                  "are deprecated; write them in [strategy.NAME]"), "%s",
           R.err);

    /* A strategy that does not exist: the dirs looked in. */
    CHECK(run("train", "--set", "strategy.plugin=mirroed") == 3);
    CHECKF(strstr(R.err, "mirroed") && strstr(R.err, "looked in"), "%s", R.err);

    /* A plugin's own key is checked against its option table. */
    CHECK(run("train", "--set", "strategy.reduce_opp=sum") == 2);
    CHECKF(strstr(R.err, "reduce_opp") && strstr(R.err, "reduce_op"), "%s", R.err);
    CHECK(run("train", "--set", "strategy.reduce_op=median") == 2);
    CHECKF(strstr(R.err, "mean") && strstr(R.err, "sum"), "%s", R.err);

    /* The global batch must split evenly across replicas. */
    CHECK(run("train", "--set", "train.devices=cpu:0,cpu:1,cpu:2", "--set",
              "train.batch_size=32") == 2);
    CHECKF(strstr(R.err, "batch_size") && strstr(R.err, "3 replicas"), "%s", R.err);
    CHECK(run("train", "--set", "train.devices=cpu:0,cpu:0") == 2);
    CHECK(run("train", "--set", "train.devices=tpu:0") == 2);

    /* A missing data file names it; the run fails with 1. */
    CHECK(run("train", "--set", "data.dir=/nonexistent") == 1);
    CHECKF(strstr(R.err, "/nonexistent/") != NULL, "%s", R.err);

    /* Precedence: --set over environment over file. A tiny run prints the
     * resolved global batch in its banner. */
    write_file(ini, "[train]\nepochs = 1\nmax_steps = 2\nbatch_size = 8\n"
                    "eval = false\ndevices = cpu:0\n[data]\nlimit_train = 64\n");
    CHECK(run("train", "-c", ini) == 0);
    CHECKF(strstr(R.out, "global batch 8 ") != NULL, "%s", R.out);
    setenv("STRATA_TRAIN_BATCH_SIZE", "16", 1);
    CHECK(run("train", "-c", ini) == 0);
    CHECKF(strstr(R.out, "global batch 16 ") != NULL, "%s", R.out);
    snprintf(setc, sizeof setc, "train.batch_size=4");
    CHECK(run("train", "-c", ini, "--set", setc) == 0);
    CHECKF(strstr(R.out, "global batch 4 ") != NULL, "%s", R.out);
    unsetenv("STRATA_TRAIN_BATCH_SIZE");

    /* The Keras-like bar (forced: stdout is not a terminal here) and the
     * one-line-per-epoch form. */
    CHECK(run("train", "-c", ini, "--set", "train.progress=bar", "--set",
              "train.max_steps=40", "--set", "data.limit_train=640") == 0);
    CHECKF(strstr(R.out, "Epoch 1/1\n") != NULL, "%s", R.out);
    CHECKF(strstr(R.out, "[==============================]") &&
           strstr(R.out, "ms/step - loss: ") && strstr(R.out, "accuracy: "),
           "%s", R.out);
    /* On a real terminal (a pty from util-linux's script) the bar is the
     * default and redraws in place with step counter, ETA and running
     * metrics while the epoch runs (steps slowed so that it redraws). */
    if (access("/usr/bin/script", X_OK) == 0) {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "'%s' train -c '%s' --set train.max_steps=60 "
                 "--set data.limit_train=640 --set debug.step_delay_ms=10",
                 spawn_strata_bin(), ini);
        char *sargv[] = { "/usr/bin/script", "-qec", cmd, "/dev/null", NULL };
        spawn_run(sargv, 60, &R);
        CHECKF(R.code == 0, "under script: exit %d: %s", R.code, R.out);
        CHECKF(strstr(R.out, "Epoch 1/1") && strstr(R.out, " - ETA: ") &&
               strstr(R.out, "\r60/60 [====") && strstr(R.out, ">....."),
               "no live bar on a terminal: %s", R.out);
    } else {
        printf("note: /usr/bin/script missing: the terminal bar is not "
               "checked\n");
    }
    CHECK(run("train", "-c", ini, "--set", "train.progress=line") == 0);
    CHECKF(strstr(R.out, "Epoch 1/1 - 2 steps - ") != NULL, "%s", R.out);
    CHECK(run("train", "-c", ini, "--set", "train.progress=none") == 0);
    CHECK(strstr(R.out, "Epoch") == NULL);

    /* Every INI file shipped in etc/ is valid (a 2-step run of each
     * single-process one; mwms needs workers and is run by tests/mwms). */
    const char *src = getenv("STRATA_SRC");
    static const char *const inis[] = { "strata.ini", "mirrored.ini",
                                        "central.ini", NULL };
    for (int i = 0; src && inis[i]; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/etc/%s", src, inis[i]);
        CHECKF(run("train", "-c", p, "--set", "train.max_steps=2", "--set",
                   "train.eval=false", "--set", "data.limit_train=640") == 0,
               "%s: %s", inis[i], R.err);
    }

    unlink(ini);
    unlink(bad);
    rmdir(dir);
    return CHECK_DONE();
}
