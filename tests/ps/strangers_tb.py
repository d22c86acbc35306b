"""Reads the strangers/* scalars a run wrote to TensorBoard (the train run)
with TensorBoard's own reader and checks them.

usage: strangers_tb.py DIR EPOCHS REFUSED_KEY CLOSED_EARLY NOT_PROTOCOL BAD_MESSAGE

Every tag has one point per epoch (steps 0 .. EPOCHS-1, as Keras numbers
epochs); the last point of each holds the given count (the counts so far at
the last epoch's end). A count written "<=N" is a bound instead: the last
point is at most N (a job whose strangers may still be counted after its
last epoch's end). Exit 0: passed; 1: a check failed (each printed);
77: the tensorboard package is not installed."""
import os
import sys

try:
    from tensorboard.backend.event_processing import event_accumulator
except ImportError as e:
    print("SKIPPED: the tensorboard package is not installed (%s)" % e)
    sys.exit(77)

tbdir, epochs = sys.argv[1], int(sys.argv[2])
want = dict(zip(("refused_key", "closed_early", "not_protocol", "bad_message"),
                sys.argv[3:7]))
acc = event_accumulator.EventAccumulator(
    os.path.join(tbdir, "train"),
    size_guidance={event_accumulator.SCALARS: 0})
acc.Reload()
tags = acc.Tags()["scalars"]
failed = 0
for kind, n in want.items():
    tag = "strangers/" + kind
    if tag not in tags:
        print("CHECK failed: no %s among %s" % (tag, sorted(tags)))
        failed += 1
        continue
    pts = acc.Scalars(tag)
    steps = [p.step for p in pts]
    vals = [p.value for p in pts]
    print("%s: %s" % (tag, " ".join("%d:%g" % sv for sv in zip(steps, vals))))
    if steps != list(range(epochs)):
        print("CHECK failed: %s at steps %s, want 0..%d" % (tag, steps,
                                                            epochs - 1))
        failed += 1
    at_most = n.startswith("<=")
    bound = float(n[2:] if at_most else n)
    if not vals or (vals[-1] > bound if at_most else vals[-1] != bound):
        print("CHECK failed: %s ends at %s, want %s" % (tag, vals[-1:], n))
        failed += 1
sys.exit(1 if failed else 0)
