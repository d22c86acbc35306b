"""Prints the sidecar evaluator's TensorBoard scalars (DIR/evaluation), read
with TensorBoard's own reader: one line "STEP LOSS ACCURACY" per event.

usage: eval_tb.py DIR     exit 77 when the tensorboard package is missing."""
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:
    print("SKIPPED: the tensorboard package is not installed (%s)" % e)
    sys.exit(77)

acc = event_accumulator.EventAccumulator(sys.argv[1] + "/evaluation")
acc.Reload()
loss = {e.step: e.value for e in acc.Scalars("epoch_loss")}
accuracy = {e.step: e.value for e in acc.Scalars("epoch_accuracy")}
for step in sorted(loss):
    print("%d %.6f %.6f" % (step, loss[step], accuracy[step]))
