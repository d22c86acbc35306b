#!/bin/sh
# usage: memcheck.sh COMPUTE_SANITIZER TEST_BINARY [ARGS...]
# Runs a GPU test under compute-sanitizer memcheck (leak check included).
# No device: the binary's own --probe exits 77 (ctest: Skipped). Otherwise
# the result fails on a memcheck finding (exit 99), on a non-zero status, and
# also when the test's "N passed, 0 failed" line is missing, so a failing test
# cannot pass even if the sanitizer did not hand its child's status on.
san=$1
shift
"$1" --probe || exit $?
out=$("$san" --tool memcheck --leak-check full --error-exitcode 99 "$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -eq 0 ] || exit "$rc"
printf '%s\n' "$out" | grep -q ' passed, 0 failed$' || exit 1
exit 0
