"""A strata checkpoint (safetensors) as a dict of NumPy arrays."""

import json
import struct
from typing import Dict

import numpy as np

_DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8", "I32": "<i4",
           "U8": "u1", "F16": "<f2"}


def load(path: str) -> Dict[str, np.ndarray]:
    """Every tensor of the file by name (copies; the file is closed).
    The metadata ("__metadata__") is left out: read it with metadata()."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = memoryview(raw)[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        if t["dtype"] not in _DTYPES:
            raise ValueError("%s: tensor %s of dtype %s" %
                             (path, name, t["dtype"]))
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtype=_DTYPES[t["dtype"]]) \
            .reshape(t["shape"]).copy()
    return out


def metadata(path: str) -> Dict[str, str]:
    """The file's "__metadata__" (strata.model, strata.step, ...)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {})
