"""The `strata` command installed with the package: the wheel's own
binary (strata/bin/strata), which finds its library and plugins beside it."""

import os
import sys


def main() -> None:
    exe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin",
                       "strata")
    if not os.access(exe, os.X_OK):
        sys.exit("strata: %s is missing (a package built without it)" % exe)
    os.execv(exe, [exe] + sys.argv[1:])
