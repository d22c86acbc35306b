"""A strata checkpoint (safetensors) as a dict of NumPy arrays."""

import json
import os
import struct
import tempfile
from typing import Dict, Mapping, Optional

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


def save(path: str, tensors: Mapping[str, np.ndarray],
         metadata: Optional[Mapping[str, str]] = None) -> None:
    """Write `tensors` (name -> array of a dtype above) as a safetensors
    file that strata reads as a checkpoint ([model] init_from, strata eval,
    predict: by the variables' names, F32). Replaced atomically, as strata
    writes its own: a temporary file beside it, flushed, renamed; a
    symbolic link or a directory at `path` is refused."""
    back = {np.dtype(v): k for k, v in _DTYPES.items()}
    header: Dict[str, object] = {}
    blobs = []
    at = 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        dt = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
        if dt not in back:
            raise ValueError("%s: tensor %s of dtype %s; expected one of %s"
                             % (path, name, a.dtype, ", ".join(_DTYPES)))
        b = a.astype(dt, copy=False).tobytes()
        header[name] = {"dtype": back[dt], "shape": list(a.shape),
                        "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)   # the data 8-byte aligned
    if os.path.islink(path) or os.path.isdir(path):
        raise ValueError("%s: a symbolic link or a directory; not replaced"
                         % path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".strata-ckpt-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(text)))
            f.write(text)
            for b in blobs:
                f.write(b)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def metadata(path: str) -> Dict[str, str]:
    """The file's "__metadata__" (strata.model, strata.step, ...)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n)).get("__metadata__", {})
