/* strata -- the command line. Uses the public API (strata.h) only. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Exit codes (documented in README.md and `strata --help`). */
enum {
    EXIT_OK = 0,
    EXIT_FAILED = 1,   /* the run failed: I/O, data, peer, device, internal */
    EXIT_USAGE = 2,    /* bad command line or configuration                 */
    EXIT_PLUGIN = 3,   /* a plugin could not be found, loaded or used       */
    EXIT_RESTART = 75, /* stopped by SIGTERM/SIGINT at a step boundary after
                          a last checkpoint: run the same command again to
                          resume (EX_TEMPFAIL); without [checkpoint] dir
                          such a stop exits 128 + the signal's number      */
};

static const char *const k_usage =
    "usage: strata [--version] [--help] COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  train     train a model as configured (default: Fashion-MNIST, the\n"
    "            seeds' MLP, MirroredStrategy on one replica per core)\n"
    "  launch    start a job of several tasks (workers, ps) on this machine,\n"
    "            or with --nnodes one launch per machine\n"
    "  compare   run one job under several strategies and compare them\n"
    "  keygen    make the CURVE keys of a job's tasks ([security] keys)\n"
    "  config    print every key of a job, its value and where it came from\n"
    "  plugins   list the strategy and transport plugins on the search path\n"
    "  eval      evaluate a checkpoint on the test set, or on .npy data\n"
    "  predict   a checkpoint's outputs for every sample of a data file\n"
    "  inspect   print a checkpoint's tensors, shapes and metadata\n"
    "\n"
    "`strata COMMAND --help` describes each command.\n"
    "\n"
    "exit codes: 0 success; 1 the run failed (I/O, data, peer, device);\n"
    "            2 bad command line or configuration; 3 plugin error;\n"
    "            75 stopped by SIGTERM/SIGINT after a last checkpoint: run\n"
    "            the same command again to resume (without [checkpoint] dir\n"
    "            such a stop exits 128 + the signal's number: 143, 130)\n";

static const char *const k_train_usage =
    "usage: strata train [-c FILE] [--set SECTION.KEY=VALUE]... [--task T:I]\n"
    "\n"
    "Train as described by FILE (an INI file; without one, the compiled-in\n"
    "defaults run the main job). Values resolve as: --set over environment\n"
    "(STRATA_SECTION_KEY=VALUE) over FILE over defaults.\n"
    "\n"
    "  -c, --config FILE        the INI file (see share/strata/etc/strata.ini)\n"
    "  -s, --set SECTION.KEY=V  override one key, e.g. --set train.epochs=3\n"
    "  -t, --task TYPE:INDEX    which task of the cluster this process is\n"
    "                           (over [cluster] task, TF_CONFIG, SLURM, torchrun)\n"
    "  -h, --help               this text\n";

static const char *const k_plugins_usage =
    "usage: strata plugins [-c FILE] [--set plugins.path=DIRS]\n"
    "\n"
    "List every plugin found along the search path ([plugins] path,\n"
    "$STRATA_PLUGIN_PATH, <bin>/../lib/strata/plugins, the install dir):\n"
    "name, kind, ABI, version, description and file. A plugin that would not\n"
    "load is listed with the reason.\n";

static int exit_code(int rc)
{
    switch (rc) {
    case STRATA_OK: return EXIT_OK;
    case STRATA_ESTOPPED: return EXIT_RESTART;
    case STRATA_ECONFIG:
    case STRATA_EINVAL: return EXIT_USAGE;
    case STRATA_EABI:
    case STRATA_EUNTRUSTED:
    case STRATA_ENOPLUGIN:
    case STRATA_EDECLINE: return EXIT_PLUGIN;
    default: return EXIT_FAILED;
    }
}

typedef struct args {
    const char *config;
    const char *task;
    const char **sets;
    int nsets;
} args_t;

/* Parse -c/--set/-h for a subcommand; returns -1 after printing help, a
 * usage exit code on error, 0 when fine. */
static int parse_args(int argc, char **argv, const char *usage, args_t *a)
{
    a->sets = calloc((size_t)argc + 1, sizeof *a->sets);
    if (!a->sets)
        return EXIT_FAILED;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const char *val = NULL;
        if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
            fputs(usage, stdout);
            return -1;
        }
        if (!strcmp(arg, "-c") || !strcmp(arg, "--config") ||
            !strcmp(arg, "-s") || !strcmp(arg, "--set") ||
            !strcmp(arg, "-t") || !strcmp(arg, "--task")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "strata: %s needs a value\n%s", arg, usage);
                return EXIT_USAGE;
            }
            val = argv[++i];
        } else if (!strncmp(arg, "--config=", 9)) {
            val = arg + 9, arg = "--config";
        } else if (!strncmp(arg, "--set=", 6)) {
            val = arg + 6, arg = "--set";
        } else if (!strncmp(arg, "--task=", 7)) {
            val = arg + 7, arg = "--task";
        } else {
            fprintf(stderr, "strata: unknown argument '%s'\n%s", arg, usage);
            return EXIT_USAGE;
        }
        if (arg[1] == 't' || !strcmp(arg, "--task")) {
            a->task = val;
        } else if (arg[1] == 'c' || !strcmp(arg, "--config")) {
            if (a->config) {
                fprintf(stderr, "strata: -c given twice ('%s', '%s')\n",
                        a->config, val);
                return EXIT_USAGE;
            }
            a->config = val;
        } else {
            a->sets[a->nsets++] = val;
        }
    }
    return 0;
}

/* libstrata prints nothing: the command shows what a run reports on stdout,
 * at once (a pipe -- launch, a log collector -- sees each line as it comes). */
void cli_print_text(void *user, const char *text)
{
    (void)user;
    fputs(text, stdout);
    fflush(stdout);
}

static int make_ctx(const args_t *a, strata_ctx_t **ctx)
{
    const strata_callbacks_t cb = { .struct_size = sizeof cb,
                                    .text = cli_print_text };
    int rc = strata_ctx_create(a->config, ctx);
    if (rc == STRATA_OK)
        rc = strata_ctx_set_callbacks(*ctx, &cb);
    for (int i = 0; rc == STRATA_OK && i < a->nsets; i++)
        rc = strata_ctx_set(*ctx, a->sets[i]);
    if (rc == STRATA_OK && a->task)
        rc = strata_ctx_set_task(*ctx, a->task);
    if (rc != STRATA_OK) {
        strata_ctx_destroy(*ctx);
        *ctx = NULL;
        /* A missing config file is a usage error, not a failed run. */
        return rc == STRATA_ENOENT ? EXIT_USAGE : exit_code(rc);
    }
    return EXIT_OK;
}

/* SIGTERM/SIGINT: stop at the next step boundary with a last checkpoint
 * (preemption); a second signal ends the process at once. */
static strata_ctx_t *volatile g_training;
static volatile sig_atomic_t g_stop_signal;

static void on_stop_signal(int sig)
{
    strata_ctx_t *ctx = g_training;
    g_stop_signal = sig;
    if (ctx)
        strata_request_stop(ctx);
    signal(sig, SIG_DFL);
}

static int cmd_train(int argc, char **argv)
{
    args_t a = { 0 };
    int code = parse_args(argc, argv, k_train_usage, &a);
    strata_ctx_t *ctx = NULL;
    if (code == 0)
        code = make_ctx(&a, &ctx);
    if (code == 0) {
        g_training = ctx;
        struct sigaction sa = { .sa_handler = on_stop_signal };
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        int rc = strata_train(ctx);
        g_training = NULL;
        const char *ck = strata_ctx_get(ctx, "checkpoint", "dir");
        int resumable = ck && ck[0];
        if (rc == STRATA_ESTOPPED && resumable)
            fprintf(stderr, "strata: train stopped on request; run the same "
                    "command again to resume (exit %d)\n", EXIT_RESTART);
        else if (rc == STRATA_ESTOPPED)
            /* Nothing to resume from: not 75, but what the signal that
             * stopped it would have given. */
            fprintf(stderr, "strata: train stopped on request; no "
                    "[checkpoint] dir, so nothing to resume from (exit %d)\n",
                    128 + (g_stop_signal ? (int)g_stop_signal : SIGTERM));
        else if (rc != STRATA_OK)
            fprintf(stderr, "strata: train failed: %s (%s)\n",
                    strata_strerror(rc), strata_err_name(rc));
        code = rc == STRATA_ESTOPPED && !resumable
                   ? 128 + (g_stop_signal ? (int)g_stop_signal : SIGTERM)
                   : exit_code(rc);
    }
    strata_ctx_destroy(ctx);
    free(a.sets);
    return code < 0 ? EXIT_OK : code;
}

static const char *const k_eval_usage =
    "usage: strata eval [-c FILE] [--set SECTION.KEY=VALUE]... --checkpoint PATH\n"
    "                   [--data IMAGES --labels LABELS [--ids IDS]]\n"
    "\n"
    "Evaluate the checkpoint PATH on the test set of the configuration (its\n"
    "[model] layers must match the checkpoint's): test loss and the\n"
    "[model] metric (accuracy, mae, ...).\n"
    "\n"
    "  --data IMAGES     score these samples instead of the test set: .npy\n"
    "  --labels LABELS   (or IDX) images, uint8 (scaled by 1/255) or float32,\n"
    "                    and their labels as [model] loss reads them (class\n"
    "                    ids, or float32 rows); every sample of the files\n"
    "  --ids IDS         their id features, for a model that reads 'ids'\n"
    "                    (an embedding): int32 or int64, one row per sample\n";

static const char *const k_predict_usage =
    "usage: strata predict [-c FILE] [--set SECTION.KEY=VALUE]... --checkpoint PATH\n"
    "                      --data X.npy [--ids IDS.npy] --out Y.npy\n"
    "                      [--batch-size N] [--logits]\n"
    "\n"
    "The outputs of the configured model ([model] layers or [graph]) with the\n"
    "variables of the checkpoint PATH for every sample of X.npy, as Keras'\n"
    "predict:\n"
    "a float32 .npy of shape (samples, units of the last layer) holding the\n"
    "softmax probabilities. Y.npy is replaced atomically; a symbolic link or\n"
    "a directory there is refused, and on any error nothing is written.\n"
    "\n"
    "  --checkpoint PATH  a checkpoint of any strategy (strata eval's)\n"
    "  --data X.npy       .npy (or IDX) images as the training data: uint8\n"
    "                     (scaled by 1/255) or float32, shaped as the\n"
    "                     training samples\n"
    "  --ids IDS.npy      their id features, for a model that reads 'ids'\n"
    "                     (an embedding): int32 or int64, one row per sample\n"
    "  --out Y.npy        the output file\n"
    "  --batch-size N     samples per forward pass (default [train] batch_size)\n"
    "  --logits           the last layer's raw outputs (the logits), not\n"
    "                     softmax probabilities\n";

static const char *const k_inspect_usage =
    "usage: strata inspect PATH\n"
    "\n"
    "Print the tensors (name, dtype, shape, bytes, min/max/mean) and the\n"
    "metadata of a checkpoint; the file is fully validated first.\n";

static int cmd_eval(int argc, char **argv)
{
    const char *path = NULL, *data = NULL, *labels = NULL, *ids = NULL;
    const cli_flag_t f[] = { { "--checkpoint", &path, NULL },
                             { "--data", &data, NULL },
                             { "--labels", &labels, NULL },
                             { "--ids", &ids, NULL } };
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int n = 0;
    int code = rest ? cli_take_flags(argc, argv, f, 4, k_eval_usage, rest, &n)
                    : EXIT_FAILED;
    args_t a = { 0 };
    if (code == 0)
        code = parse_args(n, rest, k_eval_usage, &a);
    if (code == 0 && (!path || !data != !labels || (ids && !data))) {
        fprintf(stderr, "strata: eval needs %s\n%s", !path ? "--checkpoint "
                "PATH" : !data != !labels ? "--data and --labels together"
                : "--data and --labels with --ids", k_eval_usage);
        code = EXIT_USAGE;
    }
    strata_ctx_t *ctx = NULL;
    if (code == 0)
        code = make_ctx(&a, &ctx);
    if (code == 0) {
        int rc = strata_eval_data_ids(ctx, path, data, labels, ids);
        if (rc != STRATA_OK)
            fprintf(stderr, "strata: eval failed: %s (%s)\n",
                    strata_strerror(rc), strata_err_name(rc));
        code = exit_code(rc);
    }
    strata_ctx_destroy(ctx);
    free(a.sets);
    free(rest);
    return code < 0 ? EXIT_OK : code;
}

static int cmd_predict(int argc, char **argv)
{
    cli_predict_t p = { 0 };
    const cli_flag_t f[] = { { "--checkpoint", &p.checkpoint, NULL },
                             { "--data", &p.data, NULL },
                             { "--ids", &p.ids, NULL },
                             { "--out", &p.out, NULL },
                             { "--batch-size", &p.batch, NULL },
                             { "--logits", NULL, &p.logits } };
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int n = 0;
    int code = rest ? cli_take_flags(argc, argv, f, 6, k_predict_usage, rest,
                                     &n)
                    : EXIT_FAILED;
    args_t a = { 0 };
    if (code == 0)
        code = parse_args(n, rest, k_predict_usage, &a);
    if (code == 0)
        code = cli_predict_check(&p, k_predict_usage);
    strata_ctx_t *ctx = NULL;
    if (code == 0)
        code = make_ctx(&a, &ctx);
    if (code == 0)
        code = exit_code(cli_predict(ctx, &p));
    strata_ctx_destroy(ctx);
    free(a.sets);
    free(rest);
    return code < 0 ? EXIT_OK : code;
}

static int cmd_inspect(int argc, char **argv)
{
    if (argc == 1 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
        fputs(k_inspect_usage, stdout);
        return EXIT_OK;
    }
    if (argc != 1) {
        fprintf(stderr, "strata: inspect needs one PATH\n%s", k_inspect_usage);
        return EXIT_USAGE;
    }
    int rc = strata_inspect(argv[0]);
    if (rc != STRATA_OK)
        fprintf(stderr, "strata: inspect failed: %s (%s)\n",
                strata_strerror(rc), strata_err_name(rc));
    return exit_code(rc);
}

typedef struct listing {
    int count, broken;
    strata_ctx_t *ctx;   /* to ask each plugin's capabilities */
} listing_t;

static void print_plugin(void *user, const char *name, const char *kind,
                         int abi_major, int abi_minor, const char *version,
                         const char *description, const char *path, int status)
{
    listing_t *l = user;
    l->count++;
    if (status != STRATA_OK) {
        l->broken++;
        printf("%-10s %-9s %-7s %-7s BROKEN: %s  %s\n", name,
               kind ? kind : "?", "-", "-", strata_strerror(status), path);
        return;
    }
    char abi[16], caps[160] = "?";
    snprintf(abi, sizeof abi, "%d.%d", abi_major, abi_minor);
    uint32_t word;
    if (strata_plugin_caps(l->ctx, name, &word, caps, sizeof caps) != STRATA_OK)
        snprintf(caps, sizeof caps, "?");
    printf("%-10s %-9s %-7s %-7s %s  [caps: %s]  %s\n", name, kind, abi,
           version ? version : "-", description ? description : "", caps,
           path);
}

static int cmd_plugins(int argc, char **argv)
{
    args_t a = { 0 };
    int code = parse_args(argc, argv, k_plugins_usage, &a);
    strata_ctx_t *ctx = NULL;
    if (code == 0)
        code = make_ctx(&a, &ctx);
    if (code == 0) {
        listing_t l = { 0, 0, ctx };
        printf("%-10s %-9s %-7s %-7s %s  %s\n", "NAME", "KIND", "ABI",
               "VERSION", "DESCRIPTION", "PATH");
        int rc = strata_plugins_list(ctx, print_plugin, &l);
        code = exit_code(rc);
        if (rc == STRATA_OK && l.count == 0) {
            fprintf(stderr, "strata: no plugins found on the search path\n");
            code = EXIT_PLUGIN;
        }
    }
    strata_ctx_destroy(ctx);
    free(a.sets);
    return code < 0 ? EXIT_OK : code;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(k_usage, stderr);
        return EXIT_USAGE;
    }
    cli_blas_reexec(argv);
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        char gemm[256];
        strata_gemm_kernels(gemm, sizeof gemm);
        printf("strata %s (plugin ABI %d.%d)\ngemm: %s\nconv: %s\n",
               strata_version(), STRATA_ABI_MAJOR, STRATA_ABI_MINOR, gemm,
               strata_conv_kernels());
        return EXIT_OK;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(k_usage, stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "train"))
        return cmd_train(argc - 2, argv + 2);
    if (!strcmp(cmd, "launch"))
        return cli_launch(argc - 2, argv + 2);
    if (!strcmp(cmd, "compare"))
        return cli_compare(argc - 2, argv + 2);
    if (!strcmp(cmd, "keygen"))
        return cli_keygen(argc - 2, argv + 2);
    if (!strcmp(cmd, "config"))
        return exit_code(cli_config(argc - 2, argv + 2));
    if (!strcmp(cmd, "plugins"))
        return cmd_plugins(argc - 2, argv + 2);
    if (!strcmp(cmd, "eval"))
        return cmd_eval(argc - 2, argv + 2);
    if (!strcmp(cmd, "predict"))
        return cmd_predict(argc - 2, argv + 2);
    if (!strcmp(cmd, "inspect"))
        return cmd_inspect(argc - 2, argv + 2);
    fprintf(stderr, "strata: unknown command '%s'\n%s", cmd, k_usage);
    return EXIT_USAGE;
}
