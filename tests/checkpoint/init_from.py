#!/usr/bin/env python3
"""Python half of test_init_from (py): a weights-only safetensors file written
with Hugging Face's safetensors package (pip install safetensors numpy), the
way a user would hand strata weights for [model] init_from.

  init_from.py check        exit 0 when safetensors + numpy import, else 3
  init_from.py write FILE   the variables of "conv2d 4 3 relu, flatten,
                            dense 10" on 28x28x1 images, names and NHWC
                            shapes as `strata inspect` prints them, plus
                            one tensor that is not a variable
  init_from.py halve IN OUT a strata checkpoint written back: every variable
                            (not the optimizer slots) halved, strata's
                            metadata copied as it was (so its checksums no
                            longer hold)
"""
import sys


def known(np, var, shape):
    """Must match test_init_from.c's known(): element j of variable var."""
    j = np.arange(int(np.prod(shape)), dtype=np.int64)
    return (((j * 7 + var * 13) % 101 - 50) / 64.0).astype(np.float32).reshape(shape)


def tensors(np):
    return {
        "conv2d_0/kernel": known(np, 0, (3, 3, 1, 4)),   # kh, kw, in_c, filters
        "conv2d_0/bias": known(np, 1, (4,)),
        "dense_2/kernel": known(np, 2, (26 * 26 * 4, 10)),  # in, units
        "dense_2/bias": known(np, 3, (10,)),
        "notes/step": np.array(7, dtype=np.int64),
    }


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
    if sys.argv[1] == "halve":
        with safe_open(sys.argv[2], framework="numpy") as f:
            meta = f.metadata()
        t = load_file(sys.argv[2])
        out = {k: (v if k.startswith("optimizer/") else v * np.float32(0.5))
               for k, v in t.items()}
        save_file(out, sys.argv[3], metadata=meta)
        return 0
    save_file(tensors(np), sys.argv[2], metadata={"source": "python"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
