#!/usr/bin/env python3
"""Python half of test_ckpt_interop: strata's files against Hugging Face's
own safetensors reader and writer (pip install safetensors numpy).

  interop.py check          exit 0 when safetensors + numpy import, else 3
  interop.py verify FILE    FILE (written by strata) holds EXPECTED_FROM_C
  interop.py write FILE     write PY_TENSORS + PY_METADATA with safetensors
"""
import sys


def expected_from_c(np):
    """Must match test_ckpt_interop.c's strata_tensors()."""
    return {
        "w": np.array([[-1.0, -0.5, 0.0], [0.5, 1.0, 1.5]], dtype=np.float32),
        "ids": np.array([10**12, -2 * 10**12, 3 * 10**12, -4 * 10**12], dtype=np.int64),
        "mask": np.array([0, 1, 254, 255, 7], dtype=np.uint8),
        "d": np.array([3.141592653589793, -2.718281828459045, 1e-300], dtype=np.float64),
        "h": np.array([1.0, -0.5], dtype=np.float16),
        "u": np.array(4000000000, dtype=np.uint32),
        "e": np.zeros((0, 2), dtype=np.float32),
        "i32": np.array([[-1, 2], [-3, 4]], dtype=np.int32),
    }


C_METADATA = {"epoch": "3", "unicode": "h\u00e9llo \u2713"}


def py_tensors(np):
    """Must match test_ckpt_interop.c's check_python_file()."""
    return {
        "a": (np.arange(6, dtype=np.float32) * 0.25).reshape(3, 2),
        "b": np.array([-5, 0, 2**40], dtype=np.int64),
        "c": np.array([1, 2, 3, 250], dtype=np.uint8),
        "z": np.array(2.5, dtype=np.float64),
        "f": np.array([1.0, -0.5], dtype=np.float16),
    }


PY_METADATA = {"source": "python", "step": "7"}


def main():
    try:
        import numpy as np
        from safetensors import safe_open
        from safetensors.numpy import load_file, save_file
    except ImportError as e:
        print(f"python safetensors/numpy not importable ({e}); "
              "pip install safetensors numpy")
        return 3
    if sys.argv[1] == "check":
        return 0
    path = sys.argv[2]
    if sys.argv[1] == "write":
        save_file(py_tensors(np), path, metadata=PY_METADATA)
        return 0
    got = load_file(path)
    want = expected_from_c(np)
    bad = []
    if sorted(got) != sorted(want):
        bad.append(f"names {sorted(got)} != {sorted(want)}")
    for k, v in want.items():
        g = got.get(k)
        if g is None:
            continue
        if g.dtype != v.dtype or g.shape != v.shape or not np.array_equal(g, v):
            bad.append(f"{k}: got {g.dtype} {g.shape} {g!r}, want {v.dtype} {v.shape} {v!r}")
    with safe_open(path, framework="numpy") as f:
        meta = f.metadata() or {}
    for k, v in C_METADATA.items():
        if meta.get(k) != v:
            bad.append(f"metadata {k!r}: {meta.get(k)!r} != {v!r}")
    crc = meta.get("strata.crc32c", "")
    if meta.get("strata.format") != "1" or len(crc) != 8:
        bad.append(f"strata metadata: {meta}")
    for b in bad:
        print("interop.py:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
