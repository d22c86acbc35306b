"""The checks of the Python end-to-end tests (tests/*/*.py): one line per
check, "ok: WHAT" or "FAILED: WHAT" with the detail after it, and the
count of failures for the exit status."""

failures = 0


def check(cond, what, detail=""):
    global failures
    if cond:
        print("ok: " + what)
    else:
        failures += 1
        print("FAILED: %s%s" % (what, ("\n" + detail) if detail else ""))
    return bool(cond)
