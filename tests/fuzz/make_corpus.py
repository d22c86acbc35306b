#!/usr/bin/env python3
"""Write the fuzz harnesses' seed corpora: tests/fuzz/corpus/<harness>/.

Small valid and near-valid inputs built from the real formats (each file
<= 8 KiB): INI files, IDX files cut from Fashion-MNIST, .npy files from
numpy, safetensors files written by hand (as strata writes them, checksums
included, and as other writers do), zmq, ps and membership wire messages
packed from the layouts in wire.h, ps_wire.h and core/member/wire.h. Deterministic: running it again rewrites
the same bytes. Files it does not write (regress-*: reproducers of fixed
bugs, added by hand) are left alone.

    python3 tests/fuzz/make_corpus.py [OUTDIR]   (default tests/fuzz/corpus)

Needs numpy, and /usr/share/datasets/fashion-mnist for the IDX seeds (the
IDX seeds are skipped without it; the committed ones stay).
"""
import gzip
import io
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FASHION = "/usr/share/datasets/fashion-mnist"
MAX_SEED = 8 << 10

out_root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")


def put(harness, name, data):
    if isinstance(data, str):
        data = data.encode()
    assert len(data) <= MAX_SEED, (harness, name, len(data))
    d = os.path.join(out_root, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, compresslevel=9, mtime=0)


# ---- INI (core/config/config.c + core/config/settings.c) -------------------------------

def ini_seeds():
    with open(os.path.join(ROOT, "etc", "strata.ini"), "rb") as f:
        put("ini", "valid-etc-strata.ini", f.read())
    with open(os.path.join(ROOT, "etc", "ps.ini"), "rb") as f:
        put("ini", "valid-etc-ps.ini", f.read())
    put("ini", "valid-minimal.ini", "[train]\nepochs = 3\n")
    put("ini", "valid-every-type.ini",
        "; every option type of the core\n"
        "[train]\nepochs = 2\nbatch_size = 64\nseed = -7\nlr_scaling = linear\n"
        "warmup_epochs = 0.5\nmax_steps = 100\ndevices = cpu:0, cpu:1\n"
        "progress = none\neval = off\n"
        "[optimizer]\nname = momentum\nlr = 1e-2\nmomentum = 0.95\n"
        "epsilon = 1e-8\n"
        "[checkpoint]\ndir = /tmp/ck\nevery_steps = 10\nkeep = 0\n"
        "restore = never\n"
        "[log]\nlevel = debug\n"
        "[debug]\nstep_delay_ms = 5\ndelay_task = worker:1\n"
        "[security]\nmode = off\n"
        "[strategy]\nplugin = ps\n"
        "[strategy.ps]\nnum_ps = 2\n"
        "[transport]\nworld = zmq\n"
        "[transport.zmq]\ntimeout_s = 30\n"
        "[cluster]\nworker = a:1, b:2\n")
    put("ini", "valid-bom-crlf.ini",
        b"\xef\xbb\xbf[train]\r\nepochs = 4 ; four\r\n# comment\r\n"
        b"  batch_size = 8\r\n")
    put("ini", "bad-duplicate.ini", "[train]\nepochs = 1\nepochs = 2\n")
    put("ini", "bad-outside.ini", "epochs = 1\n[train]\n")
    put("ini", "bad-section.ini", "[train\nepochs = 1\n")
    put("ini", "bad-no-equals.ini", "[train]\nepochs\n")
    put("ini", "bad-long-line.ini",
        "[model]\nlayers = " + "dense 8 relu, " * 30 + "dense 10\n")
    put("ini", "bad-unknown-key.ini", "[train]\nepohcs = 1\n")
    put("ini", "bad-unknown-section.ini", "[trian]\nepochs = 1\n")
    put("ini", "bad-plugin-section.ini", "[strategi.ps]\nx = 1\n")
    put("ini", "bad-values.ini",
        "[train]\nepochs = 0\neval = maybe\nwarmup_epochs = nan\n")
    put("ini", "bad-enum.ini", "[optimizer]\nname = adagrad\n")
    put("ini", "bad-empty-plugin.ini", "[strategy]\nplugin = ,\n")
    # the harness is built with a limit of 128 keys (CMakeLists.txt)
    put("ini", "bad-too-many-keys.ini",
        "[strategy.ps]\n" + "".join("k%d=%d\n" % (i, i) for i in range(129)))
    put("ini", "bad-int-range.ini",
        "[train]\nbatch_size = 99999999999999999999\n")


# ---- IDX (core/data/idx.c) -------------------------------------------------

def idx_header(ndim, dims):
    return bytes([0, 0, 0x08, ndim]) + b"".join(struct.pack(">I", d)
                                                 for d in dims)


def idx_seeds():
    src_img = os.path.join(FASHION, "t10k-images-idx3-ubyte.gz")
    src_lab = os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz")
    if not (os.path.exists(src_img) and os.path.exists(src_lab)):
        print("make_corpus: no Fashion-MNIST in %s: IDX seeds kept as they are"
              % FASHION, file=sys.stderr)
        return
    with gzip.open(src_img, "rb") as f:
        img = f.read(16 + 3 * 784)
    with gzip.open(src_lab, "rb") as f:
        lab = f.read(8 + 10)
    assert struct.unpack(">I", img[:4])[0] == 0x803
    pix = img[16:]
    images = idx_header(3, [3, 28, 28]) + pix
    labels = idx_header(1, [10]) + lab[8:]
    put("idx", "valid-images-3x28x28", images)
    put("idx", "valid-images-3x28x28.gz", gz(images))
    put("idx", "valid-labels-10", labels)
    put("idx", "valid-labels-10.gz", gz(labels))
    put("idx", "valid-flat-2x784", idx_header(2, [2, 784]) + pix[:2 * 784])
    put("idx", "valid-nhwc-2x28x28x1",
        idx_header(4, [2, 28, 28, 1]) + pix[:2 * 784])
    put("idx", "bad-truncated", images[:-1])
    put("idx", "bad-trailing", labels + b"\x00")
    put("idx", "bad-type-float32", bytes([0, 0, 0x0D, 1]) +
        struct.pack(">I", 2) + b"\0" * 8)
    put("idx", "bad-ndim-5", bytes([0, 0, 8, 5]) + b"\0\0\0\1" * 5 + b"\1")
    put("idx", "bad-zero-dim", idx_header(2, [3, 0]))
    put("idx", "bad-huge-dims", idx_header(4, [0xFFFFFFFF] * 4))
    put("idx", "bad-magic", b"\x00\x01\x08\x01\x00\x00\x00\x01\x07")
    put("idx", "bad-header-short", idx_header(3, [3, 28, 28])[:9])
    z = gz(labels)
    put("idx", "bad-gz-no-trailer", z[:-8])
    put("idx", "bad-gz-crc", z[:-8] + bytes([z[-8] ^ 1]) + z[-7:])
    put("idx", "bad-gz-declares-more", gz(idx_header(1, [1 << 20]) + b"\1" * 64))


# ---- NumPy .npy (core/data/npy.c) -----------------------------------------

def npy_seeds():
    import numpy as np
    from numpy.lib import format as npf

    def save(arr, version=None):
        b = io.BytesIO()
        if version is None:
            np.save(b, arr, allow_pickle=False)
        else:
            npf.write_array(b, arr, version=version, allow_pickle=False)
        return b.getvalue()

    rng = np.random.default_rng(7)
    imgs = rng.integers(0, 256, size=(3, 28, 28), dtype=np.uint8)
    put("npy", "valid-images-u1-3x28x28.npy", save(imgs))
    put("npy", "valid-images-u1-nhwc.npy",
        save(imgs[:2, :8, :8].reshape(2, 8, 8, 1)))
    put("npy", "valid-images-f4-flat.npy",
        save(rng.standard_normal((4, 16)).astype("<f4")))
    put("npy", "valid-labels-i8.npy", save(np.arange(10, dtype="<i8") % 10))
    put("npy", "valid-labels-i1.npy", save(np.arange(6, dtype="i1")))
    put("npy", "valid-labels-u2.npy", save(np.arange(5, dtype="<u2")))
    put("npy", "valid-labels-u4-v2.npy",
        save(np.arange(4, dtype="<u4"), version=(2, 0)))
    put("npy", "valid-labels-i4-v3.npy",
        save(np.arange(4, dtype="<i4"), version=(3, 0)))
    put("npy", "valid-any-u8-4d.npy", save(np.ones((1, 2, 2, 2), dtype="<u8")))
    put("npy", "bad-fortran.npy",
        save(np.asfortranarray(np.ones((3, 2), dtype="u1"))))
    put("npy", "bad-big-endian.npy", save(np.arange(3, dtype=">i4")))
    put("npy", "bad-nan.npy",
        save(np.array([[1.0, np.nan]], dtype="<f4")))
    put("npy", "bad-scalar.npy", save(np.array(3, dtype="<i4")))
    put("npy", "bad-zero-dim.npy", save(np.zeros((0, 3), dtype="u1")))
    put("npy", "bad-5d.npy", save(np.zeros((1, 1, 1, 1, 2), dtype="u1")))
    put("npy", "bad-structured.npy",
        save(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")])))
    put("npy", "bad-f8.npy", save(np.zeros(2, dtype="<f8")))
    ok = save(np.arange(6, dtype="<i2"))
    put("npy", "bad-truncated.npy", ok[:-1])
    put("npy", "bad-trailing.npy", ok + b"\0")
    put("npy", "bad-version.npy", ok[:6] + b"\x04\x00" + ok[8:])
    # Hand-made headers: extra key, Python 2 longs, no trailing comma.
    def raw(header, payload, major=1):
        h = header.encode() + b"\n"
        pre = b"\x93NUMPY" + bytes([major, 0])
        ln = struct.pack("<H", len(h)) if major == 1 else struct.pack("<I", len(h))
        return pre + ln + h + payload
    put("npy", "valid-long-shape.npy",
        raw("{'descr': '|u1', 'fortran_order': False, 'shape': (2L, 3L)}",
            bytes(6)))
    put("npy", "bad-extra-key.npy",
        raw("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), "
            "'x': 1}", bytes(2)))
    put("npy", "bad-header-past-end.npy",
        b"\x93NUMPY\x01\x00\xff\x00{'descr'")
    put("npy", "bad-shape-overflow.npy",
        raw("{'descr': '<u8', 'fortran_order': False, "
            "'shape': (4294967296, 4294967296, 4294967296)}", b""))


# ---- safetensors (core/checkpoint/checkpoint.c) -----------------------------------

def _crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t


CRC_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283

DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
              "U16": 2, "I16": 2, "F16": 2, "BF16": 2,
              "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8}


def safetensors(tensors, meta=None, strata=True, pad=True):
    """tensors: [(name, dtype, shape, bytes)] in file order. strata=True
    adds strata.format and both checksums, as core/checkpoint/checkpoint.c writes."""
    meta = dict(meta or {})
    entries, off = [], 0
    for name, dtype, shape, data in tensors:
        entries.append((name, dtype, shape, off, off + len(data)))
        off += len(data)
    body = b"".join(t[3] for t in tensors)
    if strata:
        meta = {"strata.format": "1", **meta}
        # header crc: metadata by key (not the two checksums), then tensors
        # by name: "dtype|begin|end|" and "d," per dimension (checkpoint.c)
        h = 0
        for k in sorted(meta, key=lambda s: s.encode()):
            h = crc32c(k.encode() + b"\0", h)
            h = crc32c(meta[k].encode() + b"\0", h)
        for name, dtype, shape, b, e in sorted(entries,
                                               key=lambda t: t[0].encode()):
            rec = "%s|%d|%d|" % (dtype, b, e) + "".join("%d," % d
                                                        for d in shape)
            h = crc32c(name.encode() + b"\0", h)
            h = crc32c(rec.encode(), h)
        meta["strata.crc32c"] = "%08x" % crc32c(body)
        meta["strata.header_crc32c"] = "%08x" % h
    hdr = {}
    if meta:
        hdr["__metadata__"] = meta
    for name, dtype, shape, b, e in entries:
        hdr[name] = {"dtype": dtype, "shape": list(shape),
                     "data_offsets": [b, e]}
    text = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + body


def raw_st(header_text, body=b""):
    h = header_text.encode() if isinstance(header_text, str) else header_text
    return struct.pack("<Q", len(h)) + h + body


def safetensors_seeds():
    import numpy as np
    w = np.arange(12, dtype="<f4").reshape(3, 4) / 7
    b = np.array([0.5, -1.25, 3.0, 0.0], dtype="<f4")
    model = [("dense_0/kernel", "F32", (3, 4), w.tobytes()),
             ("dense_0/bias", "F32", (4,), b.tobytes())]
    meta = {"epoch": "2", "step": "40", "rng": "0123456789abcdef"}
    put("safetensors", "valid-strata-ckpt.safetensors",
        safetensors(model, meta))
    put("safetensors", "valid-foreign-weights.safetensors",
        safetensors(model, strata=False))
    put("safetensors", "valid-foreign-unpadded.safetensors",
        safetensors(model[::-1], {"format": "pt"}, strata=False, pad=False))
    mixed = [("f64", "F64", (2,), np.array([1.5, -2.0]).tobytes()),
             ("i64", "I64", (1, 2), np.array([1, -1], "<i8").tobytes()),
             ("f16", "F16", (3,), np.array([1, 2, 65504], "<f2").tobytes()),
             ("bf16", "BF16", (2,), bytes([0x80, 0x3f, 0xc0, 0x7f])),
             ("u8", "U8", (2, 2), bytes([1, 2, 3, 4])),
             ("flag", "BOOL", (), bytes([1])),
             ("empty", "F32", (0, 5), b""),
             ("naïve", "F8_E4M3", (1,), bytes([0x38]))]
    put("safetensors", "valid-every-dtype.safetensors",
        safetensors(mixed, {"note": "ünïcode"}))
    put("safetensors", "valid-empty.safetensors", safetensors([], strata=False))
    ok = safetensors(model, meta)
    put("safetensors", "bad-data-crc.safetensors", ok[:-1] + bytes([ok[-1] ^ 1]))
    put("safetensors", "bad-header-crc.safetensors",
        ok.replace(b'"epoch":"2"', b'"epoch":"3"'))
    put("safetensors", "bad-format-2.safetensors",
        ok.replace(b'"strata.format":"1"', b'"strata.format":"2"'))
    put("safetensors", "bad-crc-not-hex.safetensors",
        safetensors(model, {"strata.crc32c": "xyz"}, strata=False))
    put("safetensors", "bad-truncated.safetensors", ok[:-3])
    put("safetensors", "bad-header-len.safetensors",
        struct.pack("<Q", 1 << 40) + ok[8:])
    put("safetensors", "bad-short.safetensors", b"\x02\x00\x00")
    put("safetensors", "bad-gap.safetensors", raw_st(
        '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
        '"b":{"dtype":"U8","shape":[1],"data_offsets":[3,4]}}', bytes(4)))
    put("safetensors", "bad-overlap.safetensors", raw_st(
        '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
        '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}', bytes(3)))
    put("safetensors", "bad-duplicate.safetensors", raw_st(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', bytes(2)))
    put("safetensors", "bad-dtype.safetensors", raw_st(
        '{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}', bytes(16)))
    put("safetensors", "bad-rank-5.safetensors", raw_st(
        '{"a":{"dtype":"U8","shape":[1,1,1,1,1],"data_offsets":[0,1]}}',
        bytes(1)))
    put("safetensors", "bad-shape-values.safetensors", raw_st(
        '{"a":{"dtype":"U8","shape":[-1,1.5],"data_offsets":[0,1]}}', bytes(1)))
    put("safetensors", "bad-shape-overflow.safetensors", raw_st(
        '{"a":{"dtype":"F64","shape":[4294967296,4294967296,4294967296],'
        '"data_offsets":[0,8]}}', bytes(8)))
    put("safetensors", "bad-offsets.safetensors", raw_st(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[2,1]}}', bytes(2)))
    put("safetensors", "bad-extra-key.safetensors", raw_st(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":0}}',
        bytes(1)))
    put("safetensors", "bad-meta-value.safetensors", raw_st(
        '{"__metadata__":{"k":1}}'))
    put("safetensors", "bad-utf8.safetensors", raw_st(b'{"\xc3\x28":1}'))
    put("safetensors", "bad-trailing-json.safetensors", raw_st('{} {}'))
    put("safetensors", "bad-escape.safetensors", raw_st('{"\\ud800":{}}'))
    put("safetensors", "bad-not-object.safetensors", raw_st('[1,2]   '))


# ---- zmq wire header (plugins/transport/zmq/wire.h) -------------------------

def strz(type_, flags=0, sender=0, step=0, seq=0, offset=0, length=0, aux=0,
         total=0, magic=b"STRZ", version=2):
    return struct.pack("<4sHBBiiQQIiQ", magic, version, type_, flags, sender,
                       step, seq, offset, length, aux, total)


def zmq_seeds():
    HELLO, ACK, DATA, BCAST, BARRIER, ABORT, PROBE, PACK, SHM = range(1, 10)
    tag = b"job-4f2a"
    put("zmq_wire", "valid-hello",
        strz(HELLO, flags=1, sender=3, length=len(tag), aux=4) + tag)
    put("zmq_wire", "valid-hello-ack", strz(ACK, offset=40123, total=0xfeed))
    floats = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
    put("zmq_wire", "valid-data",
        strz(DATA, flags=1, sender=1, step=2, seq=7, offset=8, length=16,
             total=64) + floats)
    put("zmq_wire", "valid-bcast",
        strz(BCAST, sender=0, seq=3, length=8, aux=0, total=2) + floats[:8])
    put("zmq_wire", "valid-barrier", strz(BARRIER, seq=1, length=4, total=1)
        + floats[:4])
    put("zmq_wire", "valid-abort", strz(ABORT, step=11, seq=9, aux=-1))
    put("zmq_wire", "valid-probe", strz(PROBE, offset=5))
    put("zmq_wire", "valid-probe-ack", strz(PACK, offset=5))
    name = b"/strata-shm-1234"
    put("zmq_wire", "valid-shm",
        strz(SHM, step=1, offset=4096, length=len(name), aux=1, total=99)
        + name)
    put("zmq_wire", "bad-magic", strz(DATA, magic=b"STRX"))
    put("zmq_wire", "bad-version", strz(DATA, version=1))
    put("zmq_wire", "bad-type-0", strz(0))
    put("zmq_wire", "bad-type-10", strz(10))
    put("zmq_wire", "bad-length", strz(DATA, length=16) + floats[:12])
    put("zmq_wire", "bad-short", strz(DATA)[:47])
    put("zmq_wire", "bad-empty", b"")


# ---- ps wire message (plugins/strategy/ps/ps_wire.h) --------------------------

def ps(type_, status=0, sender=0, attempt=0, step=-1, req=0, inc=0, a=0, b=0,
       c=0, f=0.0, count=0, epoch=0, magic=b"STPS", version=9, payload=None,
       at=0, total=None, reserved=0):
    if total is None:
        total = count
    h = struct.pack("<4sHBBiiqQQqqqdIiIIQ", magic, version, type_, status,
                    sender, attempt, step, req, inc, a, b, c, f, count, epoch,
                    at, total, reserved)
    if payload is None:
        payload = struct.pack("<%df" % count, *[0.25 * i for i in range(count)])
    return h + payload


ROWS_BLOCK = struct.pack("<IIqff", 0, 1, 3, 0.25, 0.5)
PULL_BLOCK = struct.pack("<IIqq", 0, 2, 3, 5)


def ps_seeds():
    (STEP_REQ, STEP, WAIT, DONE, HEARTBEAT, PULL, PARAMS, PUSH, PUSH_ACK,
     PING, PONG, FINISH, FIN_ACK, ABORT, STATE_REQ, STATE, STATE_PUT,
     STATE_ACK) = range(1, 19)
    inc = 0x1234abcd5678ef00
    seeds = {
        "step-req": ps(STEP_REQ, status=2, sender=2, attempt=1, step=9,
                       inc=inc, a=32, b=30, c=1, f=12.5),
        "step": ps(STEP, attempt=1, step=10, req=5, a=4, epoch=1),
        # version 5: the layer states (batchnorm) with a result and a STEP
        "step-req-states": ps(STEP_REQ, sender=2, attempt=1, step=9, inc=inc,
                              a=32, b=30, c=1, f=12.5, count=4),
        "step-states": ps(STEP, attempt=1, step=10, req=5, a=4, epoch=1,
                          count=4),
        "wait": ps(WAIT, a=250),
        "done": ps(DONE, a=1),
        "heartbeat": ps(HEARTBEAT, sender=3, inc=inc),
        "pull": ps(PULL, req=77),
        "params": ps(PARAMS, req=77, a=12, count=5),
        "push": ps(PUSH, attempt=2, step=10, a=11, f=0.01, count=3),
        "push-ack": ps(PUSH_ACK, status=1, step=10, a=12),
        "ping": ps(PING),
        "pong": ps(PONG, a=10, b=1, c=0),
        "finish": ps(FINISH, a=0),
        "fin-ack": ps(FIN_ACK, a=10, b=0, c=2),
        "abort": ps(ABORT, a=-11),
        "state-req": ps(STATE_REQ, a=1, b=2),
        "state": ps(STATE, a=1, b=40, count=4),
        "state-failed": ps(STATE, status=3, a=0),
        "state-put": ps(STATE_PUT, step=40, a=2, b=2, c=40, count=2),
        "state-ack": ps(STATE_ACK, a=2),
        # version 6: a PUSH with a row block (shard 0, row 3) before the
        # dense values
        "push-rows": ps(PUSH, attempt=2, step=10, a=11, b=1, f=0.01,
                        count=6, payload=ROWS_BLOCK),
        # version 7: a PULL asking for rows 3 and 5 of shard 0, and the
        # PARAMS answering it (the 2 rows of 2, then a dense shard of 1)
        "pull-rows": ps(PULL, req=78, b=1, count=6, payload=PULL_BLOCK),
        "params-rows": ps(PARAMS, req=78, a=12, b=1, count=5),
        # version 9: pieces of a whole pull's answer and of a state part
        "params-piece": ps(PARAMS, req=79, a=12, count=4, at=8, total=16),
        "state-put-piece": ps(STATE_PUT, step=40, a=0, b=2, c=40, count=2,
                              at=2, total=4),
    }
    for k, v in seeds.items():
        put("ps_wire", "valid-" + k, v)
    put("ps_wire", "bad-magic", ps(PING, magic=b"STPX"))
    put("ps_wire", "bad-version", ps(PING, version=3))
    put("ps_wire", "bad-version-4", ps(PING, version=4))
    put("ps_wire", "bad-nan-state",
        ps(STEP_REQ, attempt=1, step=9, a=32, c=1, f=1.0, count=2,
           payload=struct.pack("<2f", 1.0, float("nan"))))
    put("ps_wire", "bad-inf-state-step",
        ps(STEP, attempt=1, step=9, a=1, count=1,
           payload=struct.pack("<f", float("inf"))))
    put("ps_wire", "bad-states-without-result",
        ps(STEP_REQ, c=0, count=2))
    put("ps_wire", "bad-type", ps(19))
    put("ps_wire", "bad-status", ps(PING, status=1))
    put("ps_wire", "bad-count", ps(PARAMS, count=3)[:-4])
    put("ps_wire", "bad-payload-on-ping", ps(PING, count=1))
    put("ps_wire", "bad-nan-lr",
        ps(PUSH, attempt=1, step=0, f=float("nan"), count=1))
    put("ps_wire", "bad-step-negative", ps(STEP, attempt=1, step=-1))
    put("ps_wire", "bad-wait-range", ps(WAIT, a=60001))
    put("ps_wire", "bad-state-part", ps(STATE_REQ, a=3, b=2))
    put("ps_wire", "bad-short", ps(PING)[:95])
    put("ps_wire", "bad-version-8", ps(PING, version=8))
    put("ps_wire", "bad-piece-beyond", ps(PARAMS, a=1, count=4, at=13,
                                          total=16))
    put("ps_wire", "bad-piece-push", ps(PUSH, attempt=1, step=0, count=2,
                                        total=4))
    put("ps_wire", "bad-piece-empty", ps(STATE, a=0, count=0, at=0, total=5))
    put("ps_wire", "bad-reserved", ps(PING, reserved=1))
    put("ps_wire", "bad-version-5", ps(PUSH, attempt=2, step=10, a=11, b=1,
                                       f=0.01, count=6, payload=ROWS_BLOCK,
                                       version=5))
    put("ps_wire", "bad-version-6", ps(PULL, req=78, b=1, count=6,
                                       payload=PULL_BLOCK, version=6))
    put("ps_wire", "bad-push-row-blocks",
        ps(PUSH, attempt=2, step=10, a=11, b=4, f=0.01, count=6,
           payload=ROWS_BLOCK))
    put("ps_wire", "bad-pull-row-blocks",
        ps(PULL, req=78, b=4, count=6, payload=PULL_BLOCK))
    put("ps_wire", "bad-pull-ids-without-blocks",
        ps(PULL, req=78, b=0, count=6, payload=PULL_BLOCK))
    put("ps_wire", "bad-params-row-blocks", ps(PARAMS, req=78, a=12, b=-1,
                                               count=5))



# ---- membership wire message (core/member/wire.h) -----------------------------

def mframe(kind, body, magic=b"SRDV", version=3, length=None):
    n = len(body) if length is None else length
    return struct.pack(">4sBBHI", magic, version, kind, 0, n) + body


def mstr(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack(">H", len(s)) + s


def member_seeds():
    (REGISTER, TABLE, REFUSED, CHALLENGE) = (1, 2, 3, 4)
    (JOIN, GEN, RESIZE, STOP, END, DONE) = range(16, 22)
    tok = "0123456789abcdef0123456789abcdef"
    addrs = ["127.0.0.1:2001", "10.0.0.2:2002", "[fd00::3]:2003"]
    table = struct.pack(">I", 3) + b"".join(mstr(a) for a in addrs)
    join = mstr(tok) + mstr("worker:1") + mstr("127.0.0.1:41234") + \
        struct.pack(">qI", 40, 60000)
    members = [("worker:2", "127.0.0.1:3002", 41), ("worker:0", "[::1]:3000", 41),
               ("worker:1", "127.0.0.1:3001", -1)]
    gen = struct.pack(">IIIq", 7, 3, 2, 41) + b"".join(
        mstr(n) + mstr(a) + struct.pack(">q", c) for n, a, c in members)
    seeds = {
        "register": mframe(REGISTER, struct.pack(">II", 3, 2) +
                           mstr("127.0.0.1:2003")),
        "table": mframe(TABLE, table),
        "refused": mframe(REFUSED, b"\x02ranks 1, 2 did not arrive"),
        "refused-tagged": mframe(REFUSED, b"\x01rank 1 is claimed twice" +
                                 bytes(32)),
        "challenge": mframe(CHALLENGE, b"\x01" + bytes(range(24))),
        "register-tagged": mframe(REGISTER, struct.pack(">II", 3, 2) +
                                  mstr("127.0.0.1:2003") + bytes(32)),
        "join": mframe(JOIN, join),
        "join-v3": mframe(JOIN, mstr("") + join[2 + 32:]),
        "gen": mframe(GEN, gen),
        "resize": mframe(RESIZE, struct.pack(">I", 8)),
        "stop": mframe(STOP, b"1 of min_workers = 2 workers for 60 s"),
        "end": mframe(END, b""),
        "done": mframe(DONE, struct.pack(">q", 1200)),
    }
    for k, v in seeds.items():
        put("member_wire", "valid-" + k, v)
    put("member_wire", "bad-magic", mframe(END, b"", magic=b"JOIN"))
    put("member_wire", "bad-version", mframe(END, b"", version=2))
    put("member_wire", "bad-kind", mframe(5, b""))
    put("member_wire", "bad-challenge", mframe(CHALLENGE, b"\x03" + bytes(24)))
    put("member_wire", "bad-length", mframe(JOIN, b"", length=501))
    put("member_wire", "bad-short", mframe(GEN, gen)[:-1])
    put("member_wire", "bad-trailing", mframe(DONE, struct.pack(">q", 1) + b"x"))
    put("member_wire", "bad-dup-table",
        mframe(TABLE, struct.pack(">I", 2) + mstr(addrs[0]) * 2))
    put("member_wire", "bad-rank", mframe(GEN, struct.pack(">IIIq", 7, 3, 3, 41)
                                         + gen[20:]))
    put("member_wire", "bad-token-blank",
        mframe(JOIN, mstr(tok[:15] + " ") + join[2 + 32:]))
    put("member_wire", "bad-committed",
        mframe(DONE, struct.pack(">q", -2)))


ini_seeds()
idx_seeds()
npy_seeds()
safetensors_seeds()
zmq_seeds()
ps_seeds()
member_seeds()
print("make_corpus: seeds written under %s" % out_root)
