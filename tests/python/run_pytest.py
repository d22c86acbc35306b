#!/usr/bin/env python3
"""One file of python/tests under pytest, as CTest runs it (tests/python/
CMakeLists.txt): run_pytest.py FILE [--needs MODULE]; exit 77 (skipped)
with the reason when it cannot run."""

import os
import sys

if os.environ.get("STRATA_SANITIZE"):
    print("SKIPPED: the Python tests do not run against a sanitized "
          "libstrata (%s): python would need the sanitizer's runtime in "
          "LD_PRELOAD" % os.environ["STRATA_SANITIZE"])
    sys.exit(77)
try:
    import numpy  # noqa: F401
    import pytest
except ImportError as e:
    print("SKIPPED: python3 cannot import %s (python3 -m pip install "
          "pytest numpy)" % e.name)
    sys.exit(77)
# FILE --needs MODULE: skipped as a whole without that module (torch)
if sys.argv[2:3] == ["--needs"]:
    try:
        __import__(sys.argv[3])
    except ImportError:
        print("SKIPPED: %s cannot import %s (optional: the test of strata's "
              "use from it)" % (sys.executable, sys.argv[3]))
        sys.exit(77)
sys.exit(pytest.main(["-q", "-rs", "-p", "no:cacheprovider", sys.argv[1]]))
