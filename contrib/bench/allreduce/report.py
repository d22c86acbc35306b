#!/usr/bin/python3
"""The all-reduce benchmark's table: medians of the launches, bus bandwidth
(nccl-tests: 2(n-1)/n x bytes / time), ratios and the targets.

    report.py results.txt

Input lines: "RESULT <impl> <n> <bytes> <seconds per call> <iterations>",
impl one of strata_tcp, strata_zmq, strata_aes, strata_curve, strata_shm,
mpi_tcp, mpi_shm, gloo, strata_tcp_fp16, strata_shm_fp16 (strata_zmq:
plaintext through zmq, no direct sockets; strata_aes: secured as a job is
by default, the data as AES-256-GCM records on the direct sockets
(bulk_cipher = aes256gcm); strata_curve: secured with every byte on
CurveZMQ (bulk_cipher = curve); *_fp16: compression = fp16, gradients in
16 bits, their bus bandwidth counted in float32 bytes as the others').
Columns without results are left out.

Ratio columns: tcp/mpi, shm/mpi, tcp/gloo, fp16/tcp, fp16/shm are speeds
(>1: the first is faster); aes/tcp, curve/tcp, curve/zmq are times (>1:
slower).

Targets (each checked for every n):
  tcp-64K+  strata tcp at least as fast as MPI over tcp, every size >= 64 KiB
  gloo-1M   strata tcp at least 2x as fast as gloo at 1 MiB
  lat-4K    strata tcp 4 KiB time at most 2x MPI over tcp's
  shm-1M/16M  strata shm bus bandwidth >= 70 % of MPI shared memory's
  aes-1M+   secured (aes256gcm, the default) time at most 1.5x the
            plaintext time (strata_tcp, what a job without security runs),
            every size >= 1 MiB (issue 27)
  aes-64M   secured (aes256gcm) at 64 MiB at least as fast as MPI's
            plaintext tcp (issue 27)
  curve-1M+ the same for bulk_cipher = curve
"""
import statistics
import sys

IMPLS = ["strata_tcp", "strata_zmq", "strata_aes", "strata_curve", "mpi_tcp",
         "strata_shm", "mpi_shm", "gloo", "strata_tcp_fp16",
         "strata_shm_fp16"]


def fmt_t(t):
    if t is None:
        return "-"
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    return f"{t * 1e3:.2f} ms"


def fmt_bw(n, b, t):
    if t is None:
        return "-"
    return f"{2 * (n - 1) / n * b / t / 1e9:.2f}"


def fmt_size(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"


def main():
    runs = {}
    for line in open(sys.argv[1]):
        f = line.split()
        if len(f) >= 5 and f[0] == "RESULT":
            runs.setdefault((f[1], int(f[2]), int(f[3])), []).append(float(f[4]))
    med = {k: statistics.median(v) for k, v in runs.items()}
    ns = sorted({k[1] for k in med})
    sizes = sorted({k[2] for k in med})

    def t(impl, n, b):
        return med.get((impl, n, b))

    impls = [i for i in IMPLS if any(k[0] == i for k in med)]
    print("time per call (median of launches) and bus bandwidth GB/s")
    head = f"{'n':>2} {'size':>7} |" + "|".join(f"{i:>19} " for i in impls)
    print(head + "| tcp/mpi  shm/mpi  tcp/gloo  aes/tcp  curve/tcp curve/zmq"
          "  fp16/tcp fp16/shm")
    print("-" * len(head) + "+" + "-" * 75)
    for n in ns:
        for b in sizes:
            cells = []
            for i in impls:
                x = t(i, n, b)
                cells.append(f"{fmt_t(x):>10} {fmt_bw(n, b, x):>7} ")
            def ratio(a, c):  # speed of a relative to c (>1: a faster)
                x, y = t(a, n, b), t(c, n, b)
                return f"{y / x:6.2f}x" if x and y else "     - "

            def slower(a, c):  # time of a relative to c (>1: a slower)
                x, y = t(a, n, b), t(c, n, b)
                return f"{x / y:6.2f}x" if x and y else "     - "
            print(f"{n:>2} {fmt_size(b):>7} |" + "|".join(cells) + "| "
                  + ratio("strata_tcp", "mpi_tcp") + "  "
                  + ratio("strata_shm", "mpi_shm") + "  "
                  + ratio("strata_tcp", "gloo") + "   "
                  + slower("strata_aes", "strata_tcp") + "  "
                  + slower("strata_curve", "strata_tcp") + "   "
                  + slower("strata_curve", "strata_zmq") + "   "
                  + ratio("strata_tcp_fp16", "strata_tcp") + "  "
                  + ratio("strata_shm_fp16", "strata_shm"))
    print()
    print("targets (speed ratios: >1 means strata is faster)")
    checks = []
    for n in ns:
        for b in sizes:
            st, mt = t("strata_tcp", n, b), t("mpi_tcp", n, b)
            if b >= 65536 and st and mt:
                checks.append((f"n={n} tcp {fmt_size(b)} >= MPI tcp",
                               mt / st, 1.0))
        st, gl = t("strata_tcp", n, 1 << 20), t("gloo", n, 1 << 20)
        if st and gl:
            checks.append((f"n={n} tcp 1 MiB >= 2x gloo", gl / st, 2.0))
        st, mt = t("strata_tcp", n, 4096), t("mpi_tcp", n, 4096)
        if st and mt:
            checks.append((f"n={n} tcp 4 KiB <= 2x MPI tcp time", 2 * mt / st,
                           1.0))
        for b in (1 << 20, 16 << 20):
            ss, ms = t("strata_shm", n, b), t("mpi_shm", n, b)
            if ss and ms:
                checks.append((f"n={n} shm {fmt_size(b)} >= 70% MPI shm busbw",
                               ms / ss, 0.7))
        for impl, name in (("strata_aes", "aes256gcm"), ("strata_curve",
                                                         "CURVE")):
            for b in sizes:
                cu, pl = t(impl, n, b), t("strata_tcp", n, b)
                if b >= 1 << 20 and cu and pl:
                    checks.append((f"n={n} {name} {fmt_size(b)} <= 1.5x "
                                   "plaintext", 1.5 * pl / cu, 1.0))
        sa, mt = t("strata_aes", n, 64 << 20), t("mpi_tcp", n, 64 << 20)
        if sa and mt:
            checks.append((f"n={n} aes256gcm 64 MiB >= MPI tcp plaintext",
                           mt / sa, 1.0))
    passed = 0
    for what, ratio, need in checks:
        ok = ratio >= need
        passed += ok
        print(f"  {'PASS' if ok else 'MISS'}  {what:<40} {ratio:6.2f} "
              f"(need {need:.2f})")
    print(f"{passed} of {len(checks)} targets met")


if __name__ == "__main__":
    main()
