/* The core's own config sections: option tables, defaults, help texts.
 *
 * The defaults reproduce the seeds' main job with no file at all: an MLP
 * (dense 128 relu, dense 10) on Fashion-MNIST, Adam, 5 epochs, global batch
 * 32, mirrored over one CPU replica per core. etc/strata.ini lists the same
 * keys with the same values; tests/config checks that they agree. */
#include <assert.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "model/loss.h"
#include "run/monitor.h"
#include "run/schedule.h"

/* Magnitudes past 1e18 read as "no bound" in messages (see config.c). */
#define UNBOUNDED 1e300
#define UNIT_OPEN 0.999999 /* [0, 1) for decay rates */

/* OPT: no bounds (min > max); NUM: inclusive bounds, no choices. */
#define OPT(k, t, def, st, m, ch, help) \
    { (k), (t), 0, (def), offsetof(st, m), 1, 0, (ch), (help) }
#define NUM(k, t, def, st, m, lo, hi, help) \
    { (k), (t), 0, (def), offsetof(st, m), (lo), (hi), NULL, (help) }

#define T strata__train_cfg_t
static const strata_option_t k_train[] = {
    NUM("epochs", STRATA_OPT_INT, "5", T, epochs, 1, 1000000,
        "passes over the training set"),
    NUM("batch_size", STRATA_OPT_INT, "32", T, batch_size, 1, 1000000,
        "global batch size, split evenly across all replicas"),
    OPT("seed", STRATA_OPT_INT, "42", T, seed, NULL,
        "seed of weight init and shuffling (same seed, same run)"),
    OPT("lr_scaling", STRATA_OPT_ENUM, "none", T, lr_scaling, "none|linear",
        "linear: multiply lr by the number of replicas"),
    NUM("warmup_epochs", STRATA_OPT_FLOAT, "0", T, warmup_epochs, 0,
        1000000, "ramp lr up linearly over this many epochs"),
    NUM("max_steps", STRATA_OPT_INT, "0", T, max_steps, 0, UNBOUNDED,
        "stop after this many steps; 0 = whole epochs"),
    OPT("devices", STRATA_OPT_STRING, "", T, devices, NULL,
        "replica devices, e.g. cpu:0, cpu:1 or gpu:0, gpu:1; "
        "empty = one cpu replica per core"),
    OPT("metrics_csv", STRATA_OPT_STRING, "", T, metrics_csv, NULL,
        "write per-epoch loss and accuracy to this CSV file (all of it again "
        "after every epoch); empty = none. A regular file is replaced "
        "atomically (temp file, fsync, rename); a FIFO, character device or "
        "socket is written in place (a FIFO needs a reader already); a "
        "symbolic link or a directory is refused"),
    OPT("progress", STRATA_OPT_ENUM, "auto", T, progress,
        "auto|bar|line|none", "progress display (auto: bar on a terminal)"),
    OPT("eval", STRATA_OPT_BOOL, "true", T, eval, NULL,
        "evaluate on the test set after every epoch"),
    NUM("early_stopping_patience", STRATA_OPT_INT, "0", T, es_patience, 0,
        UNBOUNDED, "stop training after this many epochs in a row without an "
        "improvement of the monitored metric (Keras EarlyStopping); 0 = "
        "never"),
    NUM("early_stopping_min_delta", STRATA_OPT_FLOAT, "0", T, es_min_delta, 0,
        UNBOUNDED, "early stopping: a change of the monitored metric smaller "
        "than this is no improvement"),
    OPT("monitor", STRATA_OPT_ENUM, "val_loss", T, monitor,
        "val_loss|val_accuracy|val_sparse_top_k_categorical_accuracy|"
        "val_top_k_categorical_accuracy|val_mae|val_mse|val_auc",
        "metric of early "
        "stopping, reduce_lr_patience and [checkpoint] keep_best: val_loss "
        "or val_ and [model] metric's name (lower is better for losses and "
        "errors, higher for accuracies); needs eval = true"),
    OPT("on_nan", STRATA_OPT_ENUM, "stop", T, on_nan, "stop|ignore",
        "a non-finite training loss: stop ends the run at the next step "
        "boundary (at most 32 steps on) with one line and a non-zero exit "
        "(Keras TerminateOnNaN); ignore trains on"),
    OPT("restore_best_weights", STRATA_OPT_BOOL, "false", T, restore_best,
        NULL, "the run ends with the variables of its best epoch by [train] "
        "monitor (Keras EarlyStopping's restore_best_weights; also when the "
        "last epoch ends it); needs eval = true; not in an elastic job nor "
        "with a strategy that drives the job (ps)"),
    NUM("reduce_lr_patience", STRATA_OPT_INT, "0", T, rlr_patience, 0,
        UNBOUNDED, "multiply the learning rate by reduce_lr_factor after this "
        "many epochs in a row without an improvement of the monitored metric "
        "(Keras ReduceLROnPlateau), from the next epoch on; needs eval = "
        "true; not in an elastic job nor with a strategy that drives the job "
        "(ps); 0 = never"),
    NUM("reduce_lr_factor", STRATA_OPT_FLOAT, "0.1", T, rlr_factor, 1e-12,
        UNIT_OPEN, "reduce_lr_patience: the factor of each reduction, "
        "applied to the rate the schedule gives"),
    NUM("reduce_lr_min_delta", STRATA_OPT_FLOAT, "1e-4", T, rlr_min_delta, 0,
        UNBOUNDED, "reduce_lr_patience: a change of the monitored metric "
        "smaller than this is no improvement"),
    NUM("reduce_lr_cooldown", STRATA_OPT_INT, "0", T, rlr_cooldown, 0,
        UNBOUNDED, "reduce_lr_patience: epochs after a reduction before the "
        "epochs without improvement count again"),
    NUM("reduce_lr_min_lr", STRATA_OPT_FLOAT, "0", T, rlr_min_lr, 0,
        UNBOUNDED, "reduce_lr_patience: the reductions never take the "
        "learning rate below this (nor raise it above the schedule's)"),
    OPT("elastic_batch", STRATA_OPT_ENUM, "global", T, elastic_batch,
        "global|per_worker",
        "an elastic job whose workers change: global keeps the global batch "
        "(the same batches re-split, the same learning rate); per_worker "
        "keeps each worker's share, so the global batch, the steps per epoch "
        "and (with lr_scaling = linear) the learning rate follow the workers"),
    OPT("tensorboard", STRATA_OPT_STRING, "", T, tensorboard, NULL,
        "write TensorBoard event files under this directory (DIR/train, "
        "DIR/validation; the chief writes them, flushed every epoch); "
        "empty = none"),
    NUM("log_every_steps", STRATA_OPT_INT, "100", T, log_every_steps, 0,
        UNBOUNDED, "TensorBoard: the per-step scalars (loss, learning rate, "
        "step time) every this many steps; 0 = per-epoch scalars only"),
    OPT("trace", STRATA_OPT_STRING, "", T, trace, NULL,
        "write a step timeline to this JSON file (Chrome trace-event format:"
        " Perfetto, chrome://tracing), a track per replica and per worker; "
        "empty = none"),
    NUM("trace_steps", STRATA_OPT_INT, "100", T, trace_steps, 1, 10000,
        "the trace covers the run's first this many steps (and the evals "
        "and checkpoints among them)"),
    OPT("precision", STRATA_OPT_ENUM, "float32", T, precision,
        "float32|mixed_bfloat16",
        "the arithmetic of conv2d and dense (Keras's policy names): "
        "mixed_bfloat16 rounds their inputs to bf16 and sums the products "
        "in float32 (AMX tiles where the CPU has them, else VDPBF16PS; "
        "cuBLAS on GPUs), on CPUs with AVX512_BF16 and GPUs of compute "
        "capability 8.0 or newer (refused elsewhere); variables, gradients, "
        "optimizer state and checkpoints stay float32"),
    { 0 }
};
#undef T

static const strata_option_t k_model[] = {
    OPT("layers", STRATA_OPT_STRING, "dense 128 relu, dense 10",
        strata__model_cfg_t, layers, NULL,
        "comma-separated layers (NHWC): dense UNITS [ACT], conv2d FILTERS "
        "KERNEL [stride=S] [padding=valid|same] [ACT], maxpool2d POOL "
        "[stride=S], avgpool2d POOL [stride=S], global_avgpool2d, flatten, "
        "dropout RATE, batchnorm [momentum=M] [epsilon=E] "
        "[sync=true|false], layernorm [epsilon=E], and the activation "
        "layers relu, leaky_relu "
        "[alpha=A], gelu, tanh, sigmoid, softmax (not last); ACT = "
        "relu|tanh|sigmoid|none; the last gives the logits. A model that "
        "is not a chain is a [graph] section instead (docs/models.md)"),
    OPT("init_from", STRATA_OPT_STRING, "", strata__model_cfg_t, init_from,
        NULL, "start from the variables of this safetensors file (a strata "
        "checkpoint or any file with the model's tensor names, F32); "
        "empty = seeded init"),
    OPT("loss", STRATA_OPT_ENUM, "sparse_categorical_crossentropy",
        strata__model_cfg_t, loss, "sparse_categorical_crossentropy|"
        "categorical_crossentropy|binary_crossentropy|mse|mae",
        "the loss, Keras's names: sparse_categorical_crossentropy (integer "
        "class ids), categorical_crossentropy (one-hot or soft float32 "
        "label rows), binary_crossentropy (float32 or 0/1 rows, one "
        "sigmoid per unit: multi-label), mse and mae (float32 targets of "
        "any shape, one per unit of the last layer); the cross-entropies "
        "apply softmax or sigmoid themselves (the last layer gives logits)"),
    OPT("metric", STRATA_OPT_ENUM, "auto", strata__model_cfg_t, metric,
        "auto|accuracy|sparse_top_k_categorical_accuracy|"
        "top_k_categorical_accuracy|mae|mse|auc",
        "the metric reported beside the loss, under this name (progress, "
        "metrics CSV, TensorBoard, val_NAME for [train] monitor): accuracy "
        "(binary_crossentropy: per unit, sigmoid > 0.5), the top-k "
        "accuracies (of their cross-entropy), mae, mse (of mse and mae), "
        "auc (binary_crossentropy's ROC area, Keras's AUC: 200 thresholds; "
        "synchronous strategies); auto: accuracy for the cross-entropies, "
        "mae for mse and mae"),
    NUM("top_k", STRATA_OPT_INT, "5", strata__model_cfg_t, top_k, 1, 100000,
        "k of the top-k accuracies (Keras's default 5)"),
    { 0 }
};

#define T strata__data_cfg_t
static const strata_option_t k_data[] = {
    OPT("dir", STRATA_OPT_STRING, "/usr/share/datasets/fashion-mnist", T, dir,
        NULL, "directory of the data files"),
    OPT("train_images", STRATA_OPT_STRING, "train-images-idx3-ubyte.gz", T,
        train_images, NULL,
        "training images: IDX (may be gzipped) or NumPy .npy (uint8 or "
        "float32; float32 is used unscaled), by extension; relative to dir"),
    OPT("train_labels", STRATA_OPT_STRING, "train-labels-idx1-ubyte.gz", T,
        train_labels, NULL,
        "training labels: IDX or .npy (class ids of any integer dtype; "
        "float32 rows for the other [model] losses); relative to dir"),
    OPT("test_images", STRATA_OPT_STRING, "t10k-images-idx3-ubyte.gz", T,
        test_images, NULL, "test images; relative to dir"),
    OPT("test_labels", STRATA_OPT_STRING, "t10k-labels-idx1-ubyte.gz", T,
        test_labels, NULL, "test labels; relative to dir"),
    NUM("limit_train", STRATA_OPT_INT, "0", T, limit_train, 0, UNBOUNDED,
        "use only the first N training samples; 0 = all"),
    NUM("limit_test", STRATA_OPT_INT, "0", T, limit_test, 0, UNBOUNDED,
        "use only the first N test samples; 0 = all"),
    OPT("validation_split", STRATA_OPT_STRING, "", T, validation_split_text,
        NULL, "hold out this fraction of the training samples (after "
        "limit_train) as the validation set: a seeded choice ([train] "
        "seed), the same on every task; 0 < f < 1; empty = none"),
    OPT("validation_images", STRATA_OPT_STRING, "", T, validation_images,
        NULL, "validation images (as train_images), with validation_labels; "
        "relative to dir; empty = none"),
    OPT("validation_labels", STRATA_OPT_STRING, "", T, validation_labels,
        NULL, "validation labels (as train_labels); relative to dir"),
    OPT("train_ids", STRATA_OPT_STRING, "", T, train_ids, NULL,
        "id features of the training samples, beside train_images: .npy of "
        "int32 or int64, shape (n,) or (n, k) (k ids per sample; -1: "
        "padding, no id), read in [graph] as 'ids' by embedding layers; "
        "relative to dir; empty = none"),
    OPT("test_ids", STRATA_OPT_STRING, "", T, test_ids, NULL,
        "id features of the test samples (as train_ids); relative to dir"),
    OPT("validation_ids", STRATA_OPT_STRING, "", T, validation_ids, NULL,
        "id features of the validation samples of validation_images (as "
        "train_ids; a validation_split takes its ids from train_ids); "
        "relative to dir"),
    OPT("shuffle", STRATA_OPT_BOOL, "true", T, shuffle, NULL,
        "reshuffle the training set every epoch (seeded)"),
    OPT("augment_flip", STRATA_OPT_BOOL, "false", T, augment_flip, NULL,
        "flip each training image horizontally with probability 0.5, drawn "
        "from ([train] seed, epoch, sample); images only, never validation "
        "or test samples"),
    NUM("augment_crop_padding", STRATA_OPT_INT, "0", T, augment_crop_padding,
        0, 1000000, "pad each training image with this many zero pixels on "
        "every side, then crop a random window of its size (the CIFAR "
        "recipe: 4); less than the image's height and width; 0 = none"),
    { 0 }
};
#undef T

#define T strata__optimizer_cfg_t
static const strata_option_t k_optimizer[] = {
    OPT("name", STRATA_OPT_ENUM, "adam", T, name,
        "sgd|momentum|adam|rmsprop|adagrad", "optimizer"),
    NUM("lr", STRATA_OPT_FLOAT, "0.001", T, lr, 1e-12, UNBOUNDED,
        "learning rate"),
    NUM("momentum", STRATA_OPT_FLOAT, "0.9", T, momentum, 0, UNIT_OPEN,
        "momentum: decay of the velocity (rmsprop has rmsprop_momentum)"),
    NUM("beta1", STRATA_OPT_FLOAT, "0.9", T, beta1, 0, UNIT_OPEN,
        "adam: decay of the first-moment estimate"),
    NUM("beta2", STRATA_OPT_FLOAT, "0.999", T, beta2, 0, UNIT_OPEN,
        "adam: decay of the second-moment estimate"),
    NUM("epsilon", STRATA_OPT_FLOAT, "1e-7", T, epsilon, 1e-12, 1,
        "adam, rmsprop, adagrad: for stability, added to the denominator "
        "(adam) or, as Keras does, to the squared-gradient average "
        "(rmsprop) or sum (adagrad) under the square root"),
    NUM("rho", STRATA_OPT_FLOAT, "0.9", T, rho, 0, UNIT_OPEN,
        "rmsprop: decay of the moving average of the squared gradient"),
    NUM("rmsprop_momentum", STRATA_OPT_FLOAT, "0", T, rmsprop_momentum, 0,
        UNIT_OPEN, "rmsprop: momentum (Keras RMSprop momentum): each step "
        "adds the update to a velocity that decays by this, and applies "
        "the velocity; 0 = none"),
    NUM("initial_accumulator_value", STRATA_OPT_FLOAT, "0.1", T,
        initial_accumulator_value, 0, UNBOUNDED,
        "adagrad: the starting value of the sum of squared gradients, for "
        "every element"),
    OPT("schedule", STRATA_OPT_ENUM, "constant", T, schedule,
        "constant|step|exponential|cosine",
        "learning-rate schedule over the global step, as Keras': constant; "
        "step (boundaries, then values or factor); exponential (decay_rate "
        "every decay_steps); cosine (down to alpha x lr over decay_steps); "
        "times the warm-up and [train] lr_scaling"),
    NUM("decay_steps", STRATA_OPT_INT, "0", T, decay_steps, 0, UNBOUNDED,
        "exponential: steps per factor decay_rate; cosine: steps to reach "
        "alpha x lr (then it stays there)"),
    NUM("decay_rate", STRATA_OPT_FLOAT, "0.96", T, decay_rate, 1e-12, 1,
        "exponential: lr x decay_rate ^ (step / decay_steps)"),
    OPT("staircase", STRATA_OPT_BOOL, "false", T, staircase, NULL,
        "exponential: decay in whole periods only (step / decay_steps "
        "rounded down)"),
    OPT("boundaries", STRATA_OPT_STRING, "", T, boundaries, NULL,
        "step: increasing global steps, e.g. 1000, 2000; the lr changes "
        "after each (Keras PiecewiseConstantDecay)"),
    OPT("values", STRATA_OPT_STRING, "", T, values, NULL,
        "step: the learning rates, one more than boundaries (they replace "
        "lr); empty = lr times factor at each boundary"),
    NUM("factor", STRATA_OPT_FLOAT, "0.1", T, factor, 1e-12, 1,
        "step without values: the lr is multiplied by this at each "
        "boundary"),
    NUM("alpha", STRATA_OPT_FLOAT, "0", T, alpha, 0, 1,
        "cosine: the final learning rate, as a fraction of lr"),
    NUM("weight_decay", STRATA_OPT_FLOAT, "0", T, weight_decay, 0, UNBOUNDED,
        "decoupled weight decay (Keras weight_decay: AdamW, SGDW): each step "
        "first takes lr x weight_decay x the variable off every variable, "
        "with the step's lr; 0 = none"),
    NUM("clip_norm", STRATA_OPT_FLOAT, "0", T, clip_norm, 0, UNBOUNDED,
        "clip each step's gradient to this global L2 norm over all variables "
        "after the reduce (tf.clip_by_global_norm; every replica alike; ps: "
        "each worker's push); 0 = none"),
    { 0 }
};
#undef T

static const strata_option_t k_plugins[] = {
    OPT("path", STRATA_OPT_STRING, "", strata__plugins_cfg_t, path, NULL,
        "extra plugin directories, ':'-separated, searched first"),
    OPT("trust_path", STRATA_OPT_BOOL, "false", strata__plugins_cfg_t,
        trust_path, NULL,
        "load plugins from files or directories that are group- or "
        "world-writable or owned by another user than root or you "
        "(refused by default)"),
    { 0 }
};

#define T strata__security_cfg_t
static const strata_option_t k_security[] = {
    OPT("mode", STRATA_OPT_ENUM, "auto", T, mode, "auto|curve|off",
        "auto: a job of several processes authenticates and encrypts every "
        "connection (CURVE) and refuses to start without keys; curve: the "
        "same, named; off: plaintext, trusting the network (a warning at "
        "start)"),
    OPT("keys", STRATA_OPT_STRING, "", T, keys, NULL,
        "directory of the job's CURVE keys (strata keygen DIR); "
        "strata launch makes its own when empty"),
    OPT("token", STRATA_OPT_STRING, "", T, token, NULL,
        "mode = off: a secret of 16 to 256 printable characters, the same "
        "for every task, that authenticates the rendezvous (--nnodes, "
        "torchrun, Open MPI); better given as STRATA_SECURITY_TOKEN than "
        "written in a file"),
    { 0 }
};
#undef T

/* The ENUM order is the STRATA_LOG_* values (tests/config checks it). */
static const strata_option_t k_log[] = {
    OPT("level", STRATA_OPT_ENUM, "info", strata__log_cfg_t, level,
        "error|warn|info|debug", "least severe messages shown"),
    { 0 }
};

#define T strata__debug_cfg_t
static const strata_option_t k_debug[] = {
    OPT("check_sync", STRATA_OPT_BOOL, "false", T, check_sync, NULL,
        "check after every step that all replicas hold bitwise-equal "
        "variables"),
    OPT("dump_vars", STRATA_OPT_STRING, "", T, dump_vars, NULL,
        "write the final variables (raw float32 LE) to this file; empty = "
        "none. A regular file is replaced atomically (temp file, fsync, "
        "rename); a FIFO, character device or socket is written in place (a "
        "FIFO needs a reader already); a symbolic link or a directory is "
        "refused"),
    OPT("hash_vars", STRATA_OPT_BOOL, "false", T, hash_vars, NULL,
        "every worker prints a hash of its final variables"),
    NUM("step_delay_ms", STRATA_OPT_INT, "0", T, step_delay_ms, 0, 600000,
        "sleep this long in every step: a straggler, for benchmarks"),
    OPT("delay_task", STRATA_OPT_STRING, "", T, delay_task, NULL,
        "the task step_delay_ms applies to, e.g. worker:2; empty = every "
        "task"),
    OPT("dump_lr", STRATA_OPT_STRING, "", T, dump_lr, NULL,
        "write the learning rate of every step this task ran, a 'STEP LR' "
        "line each, to this file when the run ends; a job of several "
        "processes writes FILE.TASK per task (lr.txt.worker-1); empty = "
        "none"),
    OPT("step_log", STRATA_OPT_STRING, "", T, step_log, NULL,
        "append to this file, from every task, a line per replica and step "
        "with the samples it trains and one per step applied with the time "
        "(tests of exactly-once data, recovery benchmarks); empty = none"),
    { 0 }
};
#undef T

#define T strata__checkpoint_cfg_t
static const strata_option_t k_checkpoint[] = {
    OPT("dir", STRATA_OPT_STRING, "", T, dir, NULL,
        "directory of checkpoints (safetensors); empty = no checkpoints"),
    NUM("every_steps", STRATA_OPT_INT, "0", T, every_steps, 0, UNBOUNDED,
        "also write one every this many steps; 0 = not by steps"),
    NUM("every_epochs", STRATA_OPT_INT, "1", T, every_epochs, 0, UNBOUNDED,
        "write one after every this many epochs; 0 = not by epochs (the "
        "last step of training is always checkpointed)"),
    NUM("keep", STRATA_OPT_INT, "3", T, keep, 0, UNBOUNDED,
        "keep the newest this many checkpoints; 0 = keep all"),
    OPT("restore", STRATA_OPT_ENUM, "auto", T, restore,
        "auto|never|fresh_if_invalid",
        "auto: resume from the newest valid checkpoint in dir, if any; "
        "refuse to start when dir holds checkpoints and none is valid "
        "(fresh_if_invalid: start from scratch then, after a warning)"),
    OPT("keep_best", STRATA_OPT_BOOL, "false", T, keep_best, NULL,
        "also keep DIR/best.safetensors, the checkpoint of the epoch with the "
        "best [train] monitor so far: replaced atomically, never rotated "
        "away, never resumed from; needs [train] eval"),
    { 0 }
};
#undef T

#define T strata__eval_cfg_t
static const strata_option_t k_evaluator[] = {
    NUM("timeout_s", STRATA_OPT_INT, "600", T, timeout_s, 1, UNBOUNDED,
        "an evaluator task stops with an error when no newer checkpoint "
        "appears for this long"),
    NUM("poll_ms", STRATA_OPT_INT, "500", T, poll_ms, 10, 60000,
        "how often an evaluator task looks for a new checkpoint"),
    OPT("metrics_csv", STRATA_OPT_STRING, "", T, metrics_csv, NULL,
        "an evaluator task writes one row per checkpoint it scores (step, "
        "epoch, test loss, test accuracy) here, safely as [train] "
        "metrics_csv; empty = none"),
    { 0 }
};
#undef T

/* [strategy] and [transport] hold one core key, and the plugin's keys. The
 * struct of "plugin" is the settings member itself (offset 0). */
static const strata_option_t k_strategy[] = {
    { "plugin", STRATA_OPT_STRING, 0, "mirrored", 0, 1, 0, NULL,
      "strategy plugin: mirrored, mwms, ps or central" },
    { 0 }
};
#define T strata__transport_cfg_t
static const strata_option_t k_transport[] = {
    OPT("local", STRATA_OPT_STRING, "local, nccl", T, local, NULL,
        "transports for a process's replica threads, in order of preference:"
        " the first installed one that accepts the group wins"),
    OPT("world", STRATA_OPT_STRING, "nccl, zmq", T, world, NULL,
        "transports between processes (workers, ps tasks), in order of "
        "preference"),
    OPT("plugin", STRATA_OPT_STRING, "", T, plugin, NULL,
        "tried first for both scopes when set (one list, as before the "
        "per-scope ones); empty = none"),
    { 0 }
};
#undef T

const char *const strata__strategy_core_keys[] = { "plugin", NULL };
const char *const strata__transport_core_keys[] = { "plugin", "local",
                                                    "world", NULL };

#define SEC(n, opts, member) { (n), (opts), offsetof(strata__settings_t, member) }
/* opts == NULL: a reserved section, applied by the module that owns it
 * (cluster resolution); it is known to the environment loader
 * and is not an "unknown section". */
const strata__section_t strata__sections[] = {
    SEC("train", k_train, train),
    SEC("model", k_model, model),
    { "graph", NULL, 0 },
    SEC("data", k_data, data),
    SEC("optimizer", k_optimizer, optimizer),
    SEC("plugins", k_plugins, plugins),
    SEC("log", k_log, log),
    SEC("debug", k_debug, debug),
    SEC("strategy", k_strategy, strategy),
    SEC("transport", k_transport, transport),
    { "cluster", NULL, 0 },
    SEC("checkpoint", k_checkpoint, checkpoint),
    SEC("security", k_security, security),
    SEC("evaluator", k_evaluator, evaluator),
    { NULL, NULL, 0 }
};

/* Sections whose other keys belong to the selected plugin: accept them now
 * ("*"), the plugin's own table checks them once it is loaded. */
static int plugin_owned(const char *name)
{
    return strcmp(name, "strategy") == 0 || strcmp(name, "transport") == 0;
}

static int unknown_section(const strata__cfg_t *c, const char *name)
{
    /* "transprot.zmq": the part before the dot is what may be misspelt. */
    const char *dot = strchr(name, '.');
    char head[64];
    snprintf(head, sizeof head, "%.*s",
             (int)(dot ? (size_t)(dot - name) : strlen(name)), name);
    size_t len = strlen(head);
    int limit = len / 3 > 2 ? (int)(len / 3) : 2;
    const char *best = NULL;
    int bestd = limit + 1;
    char all[320];
    size_t n = 0;
    all[0] = '\0';
    for (const strata__section_t *s = strata__sections; s->name; s++) {
        int d = strata__edit_distance(head, s->name);
        if (dot && !plugin_owned(s->name))
            continue;
        if (d < bestd) {
            best = s->name;
            bestd = d;
        }
        if (n < sizeof all) {
            int w = snprintf(all + n, sizeof all - n, "%s%s", n ? ", " : "",
                             s->name);
            n = w < 0 ? sizeof all : n + (size_t)w;
        }
    }
    if (n < sizeof all)
        snprintf(all + n, sizeof all - n, ", strategy.NAME, transport.NAME");
    /* key NULL: where the section's first value came from. */
    const char *origin = strata__cfg_origin(c, name, NULL);
    if (!origin)
        origin = "config";
    if (best)
        strata__log(STRATA_LOG_ERROR, "config",
                    "%s: unknown section [%s]; did you mean [%s%s]?", origin,
                    name, best, dot ? dot : "");
    else if (dot)
        strata__log(STRATA_LOG_ERROR, "config",
                    "%s: unknown section [%s]; only [strategy.NAME] and "
                    "[transport.NAME] name a plugin", origin, name);
    else
        strata__log(STRATA_LOG_ERROR, "config",
                    "%s: unknown section [%s]; sections: %s", origin, name,
                    all);
    return STRATA_ECONFIG;
}

/* One validation set: a split strictly between 0 and 1, or both files. */
static int validation_check(const strata__cfg_t *c, strata__data_cfg_t *d)
{
    const char *split = strata__cfg_origin(c, "data", "validation_split");
    const char *img = strata__cfg_origin(c, "data", "validation_images");
    const char *lab = strata__cfg_origin(c, "data", "validation_labels");
    const char *text = d->validation_split_text;
    int files = d->validation_images[0] || d->validation_labels[0];
    d->validation_split = 0.0;
    if (text[0]) {
        char *end;
        errno = 0;
        double f = strtod(text, &end);
        if (end == text || *end || errno || !(f > 0.0 && f < 1.0)) {
            strata__log(STRATA_LOG_ERROR, "config", "%s: [data] "
                        "validation_split = '%s': expected a fraction "
                        "strictly between 0 and 1 (empty: no split)",
                        split ? split : "config", text);
            return STRATA_ECONFIG;
        }
        d->validation_split = f;
    }
    if (files && !(d->validation_images[0] && d->validation_labels[0])) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: [data] %s without %s: "
                    "a validation set needs both files",
                    d->validation_images[0] ? img : lab,
                    d->validation_images[0] ? "validation_images"
                                            : "validation_labels",
                    d->validation_images[0] ? "validation_labels"
                                            : "validation_images");
        return STRATA_ECONFIG;
    }
    if (d->validation_ids[0] && !d->validation_images[0]) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: [data] validation_ids "
                    "without validation_images: %s",
                    strata__cfg_origin(c, "data", "validation_ids"),
                    d->validation_split > 0.0
                        ? "the samples validation_split holds out take "
                          "their ids from train_ids"
                        : "ids go with a validation set's files");
        return STRATA_ECONFIG;
    }
    if (files && d->validation_split > 0.0) {
        strata__log(STRATA_LOG_ERROR, "config", "%s: [data] validation_split "
                    "and %s: [data] validation_images name two validation "
                    "sets; keep one", split, img);
        return STRATA_ECONFIG;
    }
    return STRATA_OK;
}

int strata__settings_load(const strata__cfg_t *c, strata__settings_t *s)
{
    static const char *const k_any[] = { "*", NULL };
    memset(s, 0, sizeof *s);
    for (const strata__section_t *sec = strata__sections; sec->name; sec++) {
        if (!sec->opts)
            continue;
        int rc = strata__cfg_apply(c, sec->name, sec->opts,
                                   (char *)s + sec->offset,
                                   plugin_owned(sec->name) ? k_any : NULL);
        if (rc != 0)
            return rc;
    }
    for (const char *const *name = strata__cfg_sections(c); *name; name++) {
        const strata__section_t *sec = strata__sections;
        while (sec->name && strcmp(sec->name, *name) != 0)
            sec++;
        /* [strategy.NAME] / [transport.NAME]: plugin NAME's own keys, checked
         * against its table when it is loaded. */
        const char *dot = strchr(*name, '.');
        if (!sec->name && dot && strata__cfg_section_name(*name)) {
            size_t n = (size_t)(dot - *name);
            if ((n == 8 && !strncmp(*name, "strategy", 8)) ||
                (n == 9 && !strncmp(*name, "transport", 9)))
                continue;
        }
        if (!sec->name)
            return unknown_section(c, *name);
    }
    /* Plugin keys in the shared section still work, for one release. */
    strata__cfg_deprecated(c, "strategy", strata__strategy_core_keys,
                           "[strategy.NAME]");
    strata__cfg_deprecated(c, "transport", strata__transport_core_keys,
                           "[transport.NAME] of the transport that takes it");
    /* An empty name would only fail later, as "'' not found". */
    static const char *const k_sec[] = { "strategy", "transport", "transport" };
    static const char *const k_key[] = { "plugin", "local", "world" };
    const char *const val[] = { s->strategy, s->transport.local,
                                s->transport.world };
    for (int i = 0; i < 3; i++)
        assert(val[i] != NULL); /* STRING options with defaults are set */
    for (int i = 0; i < 3; i++)
        if (!val[i][strspn(val[i], " ,")]) {
            const char *origin = strata__cfg_origin(c, k_sec[i], k_key[i]);
            strata__log(STRATA_LOG_ERROR, "config",
                        "%s: [%s] %s = '%s': expected %s",
                        origin ? origin : "config", k_sec[i], k_key[i], val[i],
                        i ? "a list of transport plugins"
                          : "a plugin name");
            return STRATA_ECONFIG;
        }
    /* Keys that must make sense together. */
    int rc = strata__schedule_check(c, &s->optimizer);
    if (rc == STRATA_OK)
        rc = validation_check(c, &s->data);
    if (rc == STRATA_OK)
        rc = strata__loss_check(c, &s->model);
    s->data.labels_as = strata__loss_labels(s->model.loss);
    return rc == STRATA_OK ? strata__monitor_check(c, s) : rc;
}

int strata__cfg_load_env(strata__cfg_t *c, char *const *envp)
{
    return strata__cfg_load_env_in(c, envp, strata__sections);
}
