"""Reads a run's TensorBoard event files with TensorBoard's own readers and
checks them against the metrics CSV and the progress output of the same run.

usage: tboard_read.py DIR METRICS_CSV STDOUT_FILE LOG_EVERY STEPS_PER_EPOCH LR

Exit 0: all checks passed; 1: a check failed (each printed); 77: the
tensorboard package is not installed (pip install tensorboard)."""
import csv
import glob
import math
import os
import re
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
    from tensorboard.backend.event_processing import event_file_loader
except ImportError as e:
    print("SKIPPED: the tensorboard package is not installed (%s)" % e)
    sys.exit(77)

failed = 0


def check(cond, what):
    global failed
    if not cond:
        failed += 1
        print("CHECK failed: " + what)


def close(a, b, rel=1e-4, abs_=2e-6):
    return abs(a - b) <= max(abs_, rel * abs(b))


tbdir, csv_path, out_path = sys.argv[1:4]
log_every, steps_per_epoch = int(sys.argv[4]), int(sys.argv[5])
lr = float(sys.argv[6])
rows = list(csv.DictReader(open(csv_path)))
epochs = len(rows)
check(epochs >= 2, "the CSV has %d epochs" % epochs)

# Each run: one event file, whose first event is the file version.
for run in ("train", "validation"):
    files = glob.glob(os.path.join(tbdir, run, "events.out.tfevents.*"))
    check(len(files) == 1, "%s: %d event files" % (run, len(files)))
    if files:
        loader = event_file_loader.EventFileLoader(files[0])
        events = list(loader.Load())
        check(events and events[0].file_version == "brain.Event:2",
              "%s: first event %r" % (run, events[:1]))
        walls = [e.wall_time for e in events]
        check(walls == sorted(walls) and walls[0] > 1e9,
              "%s: wall times %s" % (run, walls[:5]))


def scalars(run):
    acc = event_accumulator.EventAccumulator(
        os.path.join(tbdir, run), size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    return {t: [(s.step, s.value) for s in acc.Scalars(t)]
            for t in acc.Tags()["scalars"]}


train, val = scalars("train"), scalars("validation")
batch = ["batch_loss", "batch_accuracy", "batch_learning_rate",
         "batch_step_time_ms"]
epoch = ["epoch_loss", "epoch_accuracy", "epoch_samples_per_second",
         "epoch_learning_rate", "epoch_compute_seconds", "epoch_wait_seconds",
         "epoch_reduce_seconds", "epoch_comm_share"]
check(sorted(train) == sorted(batch + epoch), "train tags %s" % sorted(train))
check(sorted(val) == ["epoch_accuracy", "epoch_loss"],
      "validation tags %s" % sorted(val))

# Per step: every log_every steps (the steps done), plausible values.
want = list(range(log_every, epochs * steps_per_epoch + 1, log_every))
for t in batch:
    check([s for s, _ in train.get(t, [])] == want,
          "%s at steps %s, want %s" % (t, train.get(t), want))
for s, v in train.get("batch_loss", []):
    check(math.isfinite(v) and 0 < v < 10, "batch_loss %g at %d" % (v, s))
for s, v in train.get("batch_accuracy", []):
    check(0 <= v <= 1, "batch_accuracy %g at %d" % (v, s))
for s, v in train.get("batch_learning_rate", []):
    check(close(v, lr), "batch_learning_rate %g at %d, want %g" % (v, s, lr))
for s, v in train.get("batch_step_time_ms", []):
    check(0 < v < 10000, "batch_step_time_ms %g at %d" % (v, s))

# Per epoch (Keras: step = the epoch's index): the CSV's figures.
pairs = [("epoch_loss", train, "loss"),
         ("epoch_accuracy", train, "accuracy"),
         ("epoch_samples_per_second", train, "samples_per_s"),
         ("epoch_loss", val, "val_loss"),
         ("epoch_accuracy", val, "val_accuracy")]
for tag, run, col in pairs:
    got = run.get(tag, [])
    check([s for s, _ in got] == list(range(epochs)),
          "%s steps %s" % (tag, got))
    for (s, v), row in zip(got, rows):
        check(close(v, float(row[col]), rel=2e-4, abs_=1e-6),
              "%s at epoch %d: %r, CSV %s %s" % (tag, s, v, col, row[col]))

# Phase times: per replica, within the epoch's seconds; the share is theirs,
# and the progress line shows the same share.
lines = [l for l in open(out_path) if l.startswith("Epoch ")]
check(len(lines) == epochs, "%d epoch lines" % len(lines))
for e in range(epochs):
    def at(tag):
        got = dict(train.get(tag, []))
        return got.get(e, float("nan"))
    comp, wait, red = (at("epoch_compute_seconds"), at("epoch_wait_seconds"),
                       at("epoch_reduce_seconds"))
    secs = float(rows[e]["seconds"])
    check(comp > 0 and wait >= 0 and red > 0 and
          comp + wait + red <= secs * 1.05 + 1e-3,
          "epoch %d: compute %g + wait %g + reduce %g vs %g s" %
          (e, comp, wait, red, secs))
    share = at("epoch_comm_share")
    check(close(share, (wait + red) / (comp + wait + red), rel=1e-3),
          "epoch %d: comm share %g" % (e, share))
    check(close(at("epoch_learning_rate"), lr), "epoch %d: lr" % e)
    m = re.search(r" - comm: (\d+)%$", lines[e].rstrip()) if e < len(lines) \
        else None
    check(m and abs(int(m.group(1)) - share * 100) <= 0.5 + 1e-6,
          "epoch %d: line %r, share %g" % (e, lines[e] if m else lines, share))

print("%s: %d train tags, %d validation tags; %s" %
      (tbdir, len(train), len(val), "ok" if not failed else "FAILED"))
sys.exit(1 if failed else 0)
