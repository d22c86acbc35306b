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
    The metadata ("__metadata__") is left out: read it with metadata().
    A checkpoint written in parts (a ps job: each ps task writes its
    shards beside the file, strata.part_count says how many) comes back
    joined: whole variables, whatever placement wrote them."""
    out = _load_file(path)
    md = metadata(path)
    if "strata.part_count" in md and "strata.part_index" not in md:
        out.update(_join_parts(path, md))
    return out


def _part_path(path: str, step: int, j: int, n: int) -> str:
    return os.path.join(os.path.dirname(path),
                        "ckpt-%010d.part-%d-of-%d.safetensors" % (step, j, n))


def _join_parts(path: str, md: Mapping[str, str]) -> Dict[str, np.ndarray]:
    """The tensors "NAME[ROW0:ROW1]" of every part, joined along
    dimension 0; each part must carry the main file's tag and step, and
    the rows of each tensor must tile it without gap or overlap."""
    n, step, tag = int(md["strata.part_count"]), int(md["strata.step"]), \
        md["strata.part_tag"]
    pieces: Dict[str, list] = {}
    for j in range(n):
        pp = _part_path(path, step, j, n)
        pm = metadata(pp)
        want = {"strata.part_tag": tag, "strata.step": str(step),
                "strata.part_index": str(j), "strata.part_count": str(n)}
        for k, v in want.items():
            if pm.get(k) != v:
                raise ValueError("%s: written for another checkpoint (%s is "
                                 "%r, %r expected)" % (pp, k, pm.get(k), v))
        for name, a in _load_file(pp).items():
            base, _, rows = name.rpartition("[")
            r0, _, r1 = rows.rstrip("]").partition(":")
            if not base or not rows.endswith("]") or not r0.isdigit() \
                    or not r1.isdigit():
                raise ValueError("%s: tensor %r is not named NAME[ROW0:ROW1]"
                                 % (pp, name))
            pieces.setdefault(base, []).append((int(r0), int(r1), a))
    out = {}
    for base, ps in pieces.items():
        ps.sort(key=lambda p: p[0])
        at = 0
        for r0, r1, a in ps:
            if r0 != at or r1 - r0 != (a.shape[0] if a.ndim else 1):
                raise ValueError("%s: rows %d to %d of %s are in no part or "
                                 "in two" % (path, min(at, r0), max(at, r0),
                                             base))
            at = r1
        out[base] = ps[0][2].copy() if ps[0][2].ndim == 0 else \
            np.concatenate([p[2] for p in ps], axis=0)
    return out


def _load_file(path: str) -> Dict[str, np.ndarray]:
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
