#!/usr/bin/python3
"""The scaling study's report: the alpha-beta ring model fitted to the
2-rank all-reduce runs, measured against it at every n; ps against mwms
training throughput with the crossover; CPU time per process; SVG plots.

    model.py [--svg-dir DIR] raw.txt

raw.txt is what run.sh collects:

  RESULT <cond> <n> <bytes> <s per call> <iters> <cpu/call mean> <max> <sum>
  RANKCPU <cond> <n> <rank> <user s> <sys s> <wall s>
  TRAIN <cond> <model> <strategy> <workers> <ps> <samples/s> <s> <steps> <wall>
  TASKCPU <cond> <model> <strategy> <workers> <ps> <task> <user> <sys> <wall>
  LINK <cond> <Mbit/s of a bulk transfer through the shaped link>
  FAILED ...

strategy: mwms, ps, or mwms-dense (mwms with sparse_as_dense = true: an
embedding table's gradient as the dense all-reduce of the whole table;
its own column "mwms dense", shown when the raw lines have it; ps is then
set against the better of the two mwms forms).

The model: a ring all-reduce of S bytes over n ranks takes 2(n-1) steps,
each moving S/n bytes over every link at once, so

    T(n, S) = 2(n-1) alpha + 2(n-1)/n * S / beta

alpha (seconds per step) and beta (bytes/s) are fitted per condition by
least squares on the relative error (weights 1/T^2: every size counts
alike) to the n = 2 medians, T = 2 alpha + S / beta. Target: at n = 4 and 8,
S >= 1 MiB, on loopback, measured / model within [1/1.3, 1.3].
Stdlib only.
"""
import argparse
import math
import os
import statistics
import sys

TARGET = 1.3
COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
           "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"]


def fmt_t(t):
    if t is None:
        return "-"
    if t < 1e-3:
        return "%.1f us" % (t * 1e6)
    if t < 1:
        return "%.2f ms" % (t * 1e3)
    return "%.3f s" % t


def fmt_size(b):
    if b >= 1 << 20:
        return "%d MiB" % (b >> 20)
    return "%d KiB" % (b >> 10)


def cond_key(c):
    """loopback first, then the links fastest first"""
    if c == "loopback":
        return (0, 0)
    if c == "netns":
        return (0, 1)
    num = "".join(ch for ch in c if ch.isdigit()) or "0"
    mult = {"k": 1e3, "m": 1e6, "g": 1e9}.get(c[len(num):len(num) + 1], 1)
    return (1, -int(num) * mult)


def model_t(n, size, alpha, beta):
    return 2 * (n - 1) * alpha + 2 * (n - 1) / n * size / beta


def fit(points):
    """(size, t) pairs of n = 2 -> alpha, beta: weighted least squares of
    t = a + b S with weights 1/t^2; alpha = a / 2, beta = 1 / b."""
    w = [1 / (t * t) for _, t in points]
    sw = sum(w)
    sx = sum(wi * s for wi, (s, _) in zip(w, points))
    sy = sum(wi * t for wi, (_, t) in zip(w, points))
    sxx = sum(wi * s * s for wi, (s, _) in zip(w, points))
    sxy = sum(wi * s * t for wi, (s, t) in zip(w, points))
    det = sw * sxx - sx * sx
    if len(points) < 2 or det <= 0:
        return None
    b = (sw * sxy - sx * sy) / det
    a = (sy - b * sx) / sw
    if b <= 0:
        return None
    return a / 2, 1 / b


# ---- parsing ----------------------------------------------------------------

def parse(path):
    d = {"ar": {}, "arcpu": {}, "rank": {}, "train": {}, "task": {},
         "link": {}, "failed": [], "cores": os.cpu_count() or 1}
    for line in open(path):
        f = line.split()
        if not f:
            continue
        try:
            if f[0] == "RESULT" and len(f) >= 9:
                k = (f[1], int(f[2]), int(f[3]))
                d["ar"].setdefault(k, []).append(float(f[4]))
                d["arcpu"].setdefault(k, []).append(
                    (float(f[6]), float(f[7]), float(f[8]), float(f[4])))
            elif f[0] == "RANKCPU" and len(f) >= 7:
                d["rank"].setdefault((f[1], int(f[2])), []).append(
                    (float(f[4]) + float(f[5]), float(f[6])))
            elif f[0] == "TRAIN" and len(f) >= 10:
                k = (f[1], f[2], f[3], int(f[4]), int(f[5]))
                d["train"].setdefault(k, []).append(float(f[6]))
            elif f[0] == "TASKCPU" and len(f) >= 10:
                k = (f[1], f[2], f[3], int(f[4]), int(f[5]))
                d["task"].setdefault(k, []).append(
                    (f[6], float(f[7]) + float(f[8]), float(f[9])))
            elif f[0] == "HOST" and len(f) >= 3 and f[1] == "cores":
                d["cores"] = int(f[2])
            elif f[0] == "LINK" and len(f) >= 3:
                d["link"][f[1]] = float(f[2])
            elif f[0] == "FAILED":
                d["failed"].append(" ".join(f[1:]))
        except ValueError:
            print("model.py: skipped a bad line: %s" % line.strip(),
                  file=sys.stderr)
    return d


# ---- SVG, in the look of core/cli/svg.c ----------------------------------

PANEL_W, PANEL_H, TOP = 480, 380, 56
M_LEFT, M_RIGHT, M_TOP, M_BOTTOM = 70, 18, 30, 50


def esc(s):
    return (str(s).replace("&", "&amp;").replace("<", "&lt;")
            .replace(">", "&gt;").replace('"', "&quot;"))


def nice_linear(lo, hi, max_ticks=7):
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / (max_ticks - 1)
    e = math.floor(math.log10(raw))
    for ee in range(e - 1, e + 3):
        for m in (1, 2, 5):
            step = m * 10 ** ee
            a, b = math.floor(lo / step + 1e-9), math.ceil(hi / step - 1e-9)
            if b - a + 1 <= max_ticks:
                return [(a + i) * step for i in range(int(b - a) + 1)]
    return [lo, hi]


class Axis:
    def __init__(self, lo, hi, log, base=10, fmt=None, integer_ticks=None):
        self.log = log
        if integer_ticks:
            self.ticks = integer_ticks
            self.lo, self.hi = min(integer_ticks), max(integer_ticks)
            if log:
                self.lo, self.hi = math.log(self.lo), math.log(self.hi)
        elif log:
            a = math.floor(math.log(lo, base) + 1e-9)
            b = math.ceil(math.log(hi, base) - 1e-9)
            if a == b:
                b += 1
            step = 1 if b - a <= 8 else 2
            a -= (a % step)
            self.ticks = [base ** k for k in range(a, b + 1, step)]
            self.lo, self.hi = math.log(base ** a), math.log(base ** b)
        else:
            self.ticks = nice_linear(lo, hi)
            self.lo, self.hi = self.ticks[0], self.ticks[-1]
        self.fmt = fmt or (lambda v: "%g" % v)

    def frac(self, v):
        v = math.log(v) if self.log else v
        if self.hi == self.lo:  # one point: the middle
            return 0.5
        return (v - self.lo) / (self.hi - self.lo)


def panel_svg(out, left, top, title, xa, ya, xlabel, ylabel, series):
    """series: dicts name, colour, dash, points [(x, y)], line (bool),
    marks (bool)"""
    fl, ft = left + M_LEFT, top + M_TOP
    w, h = PANEL_W - M_LEFT - M_RIGHT, PANEL_H - M_TOP - M_BOTTOM

    def px(x):
        return fl + xa.frac(x) * w

    def py(y):
        return ft + h - ya.frac(y) * h

    out.append('<g class="panel">')
    out.append('<text class="title" x="%.1f" y="%.1f" text-anchor="middle" '
               'font-size="14" font-weight="bold">%s</text>'
               % (fl + w / 2, top + 18, esc(title)))
    out.append('<g class="grid" stroke="#e4e4e4" stroke-width="1">')
    for t in xa.ticks:
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>'
                   % (px(t), ft, px(t), ft + h))
    for t in ya.ticks:
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>'
                   % (fl, py(t), fl + w, py(t)))
    out.append('</g>')
    out.append('<rect class="frame" x="%.1f" y="%.1f" width="%.1f" '
               'height="%.1f" fill="none" stroke="#444"/>' % (fl, ft, w, h))
    out.append('<g class="xticks" text-anchor="middle">')
    for t in xa.ticks:
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" '
                   'stroke="#444"/><text x="%.1f" y="%.1f">%s</text>'
                   % (px(t), ft + h, px(t), ft + h + 5, px(t), ft + h + 19,
                      esc(xa.fmt(t))))
    out.append('</g><g class="yticks" text-anchor="end">')
    for t in ya.ticks:
        out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" '
                   'stroke="#444"/><text x="%.1f" y="%.1f">%s</text>'
                   % (fl - 5, py(t), fl, py(t), fl - 8, py(t) + 4,
                      esc(ya.fmt(t))))
    out.append('</g>')
    out.append('<text class="xlabel" x="%.1f" y="%.1f" text-anchor="middle">'
               '%s</text>' % (fl + w / 2, ft + h + 40, esc(xlabel)))
    out.append('<text class="ylabel" transform="translate(%.1f %.1f) '
               'rotate(-90)" text-anchor="middle">%s</text>'
               % (fl - 56, ft + h / 2, esc(ylabel)))
    for s in series:
        pts = [(x, y) for x, y in s["points"] if y and y > 0]
        if not pts:
            continue
        if s.get("line"):
            out.append('<polyline class="series" data-name="%s" fill="none" '
                       'stroke-width="2" stroke="%s"%s points="%s"/>'
                       % (esc(s["name"]), s["colour"],
                          ' stroke-dasharray="%s"' % s["dash"]
                          if s.get("dash") else "",
                          " ".join("%.1f,%.1f" % (px(x), py(y))
                                   for x, y in pts)))
        if s.get("marks"):
            for x, y in pts:
                out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s">'
                           '<title>%s: %.4g, %.4g</title></circle>'
                           % (px(x), py(y), s["colour"], esc(s["name"]), x, y))
    out.append('</g>')


def legend_svg(out, entries, width, top):
    x, y = 20, top
    for e in entries:
        w = 40 + 7.0 * len(e["name"]) + 24
        if x + w > width - 10 and x > 20:
            x, y = 20, y + 22
        out.append('<g class="entry">')
        if e.get("line"):
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" '
                       'stroke-width="3" stroke="%s"%s/>'
                       % (x, y - 4, x + 30, y - 4, e["colour"],
                          ' stroke-dasharray="%s"' % e["dash"]
                          if e.get("dash") else ""))
        if e.get("marks"):
            out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>'
                       % (x + 15, y - 4, e["colour"]))
        out.append('<text x="%.1f" y="%.1f">%s</text></g>'
                   % (x + 38, y, esc(e["name"])))
        x += w
    return y


def write_svg(path, title, subtitle, panels, legend, cols):
    rows = (len(panels) + cols - 1) // cols
    width = 10 + cols * (PANEL_W + 10)
    body = []
    for i, p in enumerate(panels):
        left = 10 + (i % cols) * (PANEL_W + 10)
        top = TOP + (i // cols) * (PANEL_H + 10)
        panel_svg(body, left, top, *p)
    legend_top = TOP + rows * (PANEL_H + 10) + 8
    leg = []
    last = legend_svg(leg, legend, width, legend_top)
    height = int(last + 14)
    with open(path, "w") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n'
                '<svg xmlns="http://www.w3.org/2000/svg" width="%d" '
                'height="%d" viewBox="0 0 %d %d" font-family="Helvetica, '
                'Arial, sans-serif" font-size="12">\n<title>%s</title>\n'
                '<rect width="%d" height="%d" fill="white"/>\n'
                '<text x="20" y="24" font-size="16" font-weight="bold">%s'
                '</text>\n<text x="20" y="43" fill="#555">%s</text>\n'
                % (width, height, width, height, esc(title), width, height,
                   esc(title), esc(subtitle)))
        f.write("\n".join(body) + "\n")
        f.write('<g id="legend">\n' + "\n".join(leg) + "\n</g>\n</svg>\n")


def size_label(b):
    return fmt_size(int(round(b))) if b >= 1024 else "%d B" % b


def time_label(t):
    for unit, mult in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if t >= mult * 0.999:
            return "%g %s" % (round(t / mult, 6), unit)
    return "%g s" % t


# ---- the report -----------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("--svg-dir", help="write allreduce.svg, training.svg")
    a = ap.parse_args()
    d = parse(a.raw)
    med = {k: statistics.median(v) for k, v in d["ar"].items()}
    conds = sorted({k[0] for k in med} | {k[0] for k in d["train"]},
                   key=cond_key)
    fits = {}
    checks = []
    ar_panels = []
    for c in conds:
        ns = sorted({k[1] for k in med if k[0] == c})
        sizes = sorted({k[2] for k in med if k[0] == c})
        if not ns:
            continue
        pts = [(s, med[(c, 2, s)]) for s in sizes if (c, 2, s) in med]
        f = fit(pts)
        fits[c] = f
        # the CPU the n = 2 ranks spent per call, fitted the same way:
        # per rank 2(n-1) gamma + 2(n-1)/n kappa S; n ranks sharing the
        # host's cores cannot take less than n x that / cores
        cpts = [(s, statistics.median(x[0] for x in d["arcpu"][(c, 2, s)]))
                for s in sizes if (c, 2, s) in d["arcpu"]]
        cf = fit([(s_, t_) for s_, t_ in cpts if t_ > 0])
        cores = d["cores"]
        link = d["link"].get(c)
        print("== all-reduce, %s%s" % (
            c, " (bulk transfer through the shaped link: %.0f Mbit/s)" % link
            if link else ""))
        if f is None:
            print("   no fit (need n = 2 at two sizes or more)")
        else:
            print("   fit from n = 2: alpha = %s per step, beta = %.1f MB/s "
                  "(%.0f Mbit/s)" % (fmt_t(f[0]), f[1] / 1e6, f[1] * 8e-6))
        if cf:
            print("   CPU per rank at n = 2: gamma = %s per step, %.2f ns per "
                  "byte (%.0f MB/s of CPU); cpu-bound: n x that / %d cores"
                  % (fmt_t(cf[0]), 1e9 / cf[1], cf[1] / 1e6, cores))
        print("   %2s %8s %11s %11s %6s %11s %6s %8s %8s %6s %s" % (
            "n", "size", "measured", "model", "ratio", "cpu-bound", "ratio",
            "MB/s bus", "cpu/rank", "cores", "target"))
        for n in ns:
            for s in sizes:
                t = med.get((c, n, s))
                if t is None:
                    continue
                m = model_t(n, s, *f) if f else None
                ratio = t / m if m else None
                cpu = d["arcpu"].get((c, n, s), [])
                # per launch: cpu per call per rank, cores = sum cpu / time
                cpr = statistics.median(x[0] for x in cpu) if cpu else None
                busy = (statistics.median(x[2] / x[3] for x in cpu)
                        if cpu else None)
                tgt = ""
                if ratio and n >= 4 and s >= 1 << 20:
                    ok = 1 / TARGET <= ratio <= TARGET
                    tgt = "PASS" if ok else "MISS"
                    if c == "loopback":
                        checks.append((c, n, s, ratio, ok))
                    else:
                        tgt = "(%s)" % tgt
                busbw = 2 * (n - 1) / n * s / t / 1e6
                # max(alpha-beta, the n ranks' CPU over the cores)
                m2 = (max(m, n * model_t(n, s, *cf) / cores)
                      if m and cf else None)
                print("   %2d %8s %11s %11s %6s %11s %6s %8.1f %8s %6s %s" % (
                    n, fmt_size(s), fmt_t(t), fmt_t(m),
                    "%.2f" % ratio if ratio else "-", fmt_t(m2),
                    "%.2f" % (t / m2) if m2 else "-", busbw, fmt_t(cpr),
                    "%.2f" % busy if busy is not None else "-", tgt))
        print()
        # the panel: measured points, model lines, one colour per n
        series = []
        for i, n in enumerate(ns):
            col = COLOURS[i % len(COLOURS)]
            series.append({"name": "n=%d measured" % n, "colour": col,
                           "marks": True,
                           "points": [(s, med.get((c, n, s))) for s in sizes]})
            if f:
                series.append({"name": "n=%d model" % n, "colour": col,
                               "line": True, "dash": "6 4",
                               "points": [(s, model_t(n, s, *f))
                                          for s in sizes]})
            if f and cf and n > 2:
                series.append({"name": "n=%d cpu-bound" % n, "colour": col,
                               "line": True, "dash": "1 3",
                               "points": [(s, max(model_t(n, s, *f),
                                                  n * model_t(n, s, *cf)
                                                  / cores))
                                          for s in sizes]})
        ys = [y for s_ in series for _, y in s_["points"] if y]
        xa = Axis(min(sizes), max(sizes), True, base=4, fmt=size_label)
        ya = Axis(min(ys), max(ys), True, base=10, fmt=time_label)
        sub = ("alpha %s, beta %.0f Mbit/s" % (fmt_t(f[0]), f[1] * 8e-6)
               if f else "no fit")
        ar_panels.append(("%s: %s" % (c, sub), xa, ya, "bytes per rank",
                          "time per all-reduce", series))

    if checks:
        print("== target: measured all-reduce within %.1fx of the model, "
              "n = 4 and 8, >= 1 MiB, loopback" % TARGET)
        for c, n, s, r, ok in checks:
            print("   %s  n=%d %-7s ratio %.2f" % ("PASS" if ok else "MISS",
                                                   n, fmt_size(s), r))
        print("   %d of %d PASS" % (sum(x[4] for x in checks), len(checks)))
        print()

    # per-process CPU of the all-reduce launches
    if d["rank"]:
        print("== all-reduce: CPU time per rank process (whole launch, all "
              "sizes; median over launches of the mean over ranks)")
        print("   %-9s %2s %10s %10s %9s" % ("link", "n", "cpu s", "wall s",
                                              "cores"))
        for c in conds:
            for n in sorted({k[1] for k in d["rank"] if k[0] == c}):
                v = d["rank"][(c, n)]
                per = statistics.mean(x[0] for x in v)
                wall = statistics.mean(x[1] for x in v)
                print("   %-9s %2d %10.2f %10.2f %9.2f" % (
                    c, n, per, wall, per * n / wall if wall else 0))
        print("   (cores: the n ranks' CPU seconds over the wall time; the "
              "host has %d)" % d["cores"])
        print()

    # ---- training ---------------------------------------------------------
    tr = {k: statistics.median(v) for k, v in d["train"].items()}
    tr_panels = []
    legend_tr = []
    crossover_lines = []
    if tr:
        # mwms's dense form: a column of its own where the raw lines have it
        dense = any(k[2] == "mwms-dense" for k in tr)
        print("== training throughput, samples/s (global batch 64, recsys "
              "512; ps: P ps tasks + a chief%s)"
              % ("; mwms dense: sparse_as_dense = true" if dense else ""))
        pss = sorted({k[4] for k in tr if k[2] == "ps"})
        for c in conds:
            for model in sorted({k[1] for k in tr if k[0] == c}):
                ws = sorted({k[3] for k in tr if k[0] == c and k[1] == model})
                print("   %s, %s" % (c, model))
                print("   %2s %9s " % ("W", "mwms")
                      + ("%10s " % "mwms dense" if dense else "")
                      + " ".join("%9s" % ("ps P=%d" % p) for p in pss)
                      + "  %-14s %s" % ("winner", "ps best / best mwms"
                                        if dense else "ps best / mwms"))
                winners = []
                for w in ws:
                    mw = tr.get((c, model, "mwms", w, 0))
                    md = tr.get((c, model, "mwms-dense", w, 0))
                    # the better mwms form: rows (the default) or dense
                    mwv = [(v, name) for v, name in ((mw, "mwms"),
                                                     (md, "mwms dense")) if v]
                    best_m = max(mwv) if mwv else (None, None)
                    pv = {p: tr.get((c, model, "ps", w, p)) for p in pss}
                    best_p = max((p for p in pss if pv[p]),
                                 key=lambda p: pv[p], default=None)
                    win, rat = "-", None
                    if best_m[0] and best_p:
                        rat = pv[best_p] / best_m[0]
                        win = ("ps (P=%d)" % best_p if rat > 1
                               else best_m[1])
                    winners.append((w, win, rat))
                    print("   %2d %9s " % (w, "%.0f" % mw if mw else "-")
                          + ("%10s " % ("%.0f" % md if md else "-")
                             if dense else "")
                          + " ".join("%9s" % ("%.0f" % pv[p] if pv[p] else "-")
                                     for p in pss)
                          + "  %-14s %s" % (win, "%.2f" % rat if rat else "-"))
                # crossover: where the winner changes between worker counts
                cross = []
                for (w0, a0, r0), (w1, a1, r1) in zip(winners, winners[1:]):
                    if r0 and r1 and (r0 > 1) != (r1 > 1):
                        # log-linear interpolation of the ratio through 1
                        x = math.log(w0) + (math.log(w1) - math.log(w0)) * \
                            (0 - math.log(r0)) / (math.log(r1) - math.log(r0))
                        cross.append("between W=%d and W=%d (ratio 1 at W "
                                     "~%.1f): %s -> %s" % (
                                         w0, w1, math.exp(x),
                                         "mwms" if r0 < 1 else "ps",
                                         "ps" if r1 > 1 else "mwms"))
                if cross:
                    line = "%s, %s: crossover %s" % (c, model,
                                                     "; ".join(cross))
                elif winners and all(r for _, _, r in winners):
                    allw = "ps" if winners[0][2] > 1 else "mwms"
                    line = "%s, %s: no crossover in W = %s: %s wins at every" \
                        " count" % (c, model, ",".join(str(w) for w in ws),
                                    allw)
                else:
                    line = "%s, %s: incomplete" % (c, model)
                crossover_lines.append(line)
                print("   " + line)
                print()
                series = [{"name": "mwms", "colour": COLOURS[0],
                           "line": True, "marks": True,
                           "points": [(w, tr.get((c, model, "mwms", w, 0)))
                                      for w in ws]}]
                if dense:
                    series.append({"name": "mwms dense",
                                   "colour": COLOURS[6], "line": True,
                                   "marks": True, "dash": "2 3",
                                   "points": [(w, tr.get((c, model,
                                                          "mwms-dense", w,
                                                          0)))
                                              for w in ws]})
                for i, p in enumerate(pss):
                    series.append({"name": "ps P=%d" % p,
                                   "colour": COLOURS[1 + i], "line": True,
                                   "marks": True, "dash": "6 3",
                                   "points": [(w, tr.get((c, model, "ps", w,
                                                          p))) for w in ws]})
                ys = [y for s_ in series for _, y in s_["points"] if y]
                if ys:
                    xa = Axis(None, None, True, fmt=lambda v: "%d" % v,
                              integer_ticks=ws)
                    ya = Axis(0, max(ys) * 1.05, False,
                              fmt=lambda v: "%g" % v)
                    tr_panels.append(((model, cond_key(c)), (
                        "%s, %s" % (model, c), xa, ya, "workers W",
                        "samples/s", series)))
                    legend_tr = series
        print("== crossovers")
        for line in crossover_lines:
            print("   " + line)
        print()
        print("== training: CPU time per process (user + sys over the whole "
              "run, start-up included)")
        # strat: mwms-dense is wider than the column's 5
        sw = max([5] + [len(k[2]) for k in d["task"]])
        print("   %-9s %-4s %-*s %2s %2s %6s %8s %8s %8s %6s" % (
            "link", "model", sw, "strat", "W", "P", "procs", "mean s",
            "max s", "wall s", "cores"))
        for k in sorted(d["task"], key=lambda k: (cond_key(k[0]), k[1:])):
            v = d["task"][k]
            cpu = [x[1] for x in v]
            wall = max(x[2] for x in v)
            print("   %-9s %-4s %-*s %2d %2d %6d %8.2f %8.2f %8.2f %6.2f" % (
                k[0], k[1], sw, k[2], k[3], k[4], len(v), statistics.mean(cpu),
                max(cpu), wall, sum(cpu) / wall if wall else 0))
        print()
    if d["failed"]:
        print("== failed runs")
        for f in d["failed"]:
            print("   " + f)
        print()

    if a.svg_dir:
        os.makedirs(a.svg_dir, exist_ok=True)
        if ar_panels:
            legend = []
            for i, n in enumerate(sorted({k[1] for k in med})):
                col = COLOURS[i % len(COLOURS)]
                legend.append({"name": "n=%d measured" % n, "colour": col,
                               "marks": True})
                legend.append({"name": "n=%d model" % n, "colour": col,
                               "line": True, "dash": "6 4"})
                if n > 2:
                    legend.append({"name": "n=%d cpu-bound" % n,
                                   "colour": col, "line": True,
                                   "dash": "1 3"})
            write_svg(os.path.join(a.svg_dir, "allreduce.svg"),
                      "Ring all-reduce (zmq.so, tcp) vs the alpha-beta model",
                      "points: measured (median of launches); dashed: "
                      "2(n-1) alpha + 2(n-1)/n S/beta fitted to n = 2; "
                      "dotted: max(that, n ranks' CPU time / cores)",
                      ar_panels, legend, min(3, len(ar_panels)))
        if tr_panels:
            ncond = len({k[1] for k, _ in tr_panels})
            tr_panels = [p for _, p in sorted(tr_panels, key=lambda x: x[0])]
            write_svg(os.path.join(a.svg_dir, "training.svg"),
                      "Training throughput: mwms vs ps (P ps tasks)",
                      "samples/s (global batch 64, recsys 512), W workers, "
                      "each a "
                      "process; ps runs a chief too", tr_panels, legend_tr,
                      ncond)


if __name__ == "__main__":
    main()
