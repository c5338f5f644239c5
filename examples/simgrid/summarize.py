#!/usr/bin/env python3
"""Tables for advisor/results/2026-11-27-simgrid-collectives.md from run.sh's compare.csv.

    python3 examples/simgrid/summarize.py examples/simgrid/out/compare.csv

Prints markdown:
  1. every main row: SimGrid's time, the advisor's price, their ratio, and for
     all-gathers on contiguous ranks the published NCCL time where there is one;
  2. the median SimGrid/advisor ratio per span;
  3. per collective and span, the ring form t = a*(g-1) + b*(g-1)/g*bytes
     fitted to the simulated times by relative least squares (a: the latency
     per ring step SMPI exhibits; 1/b: its bus bandwidth), and the bus
     bandwidth nccl-tests would report at 1 GiB, (g-1)/g*bytes/t;
  4. the side runs against the main run's time for the same row.
"""
import csv
import math
import statistics
import sys
from collections import defaultdict

# NCCL 2.21.5 flat all-gather on Perlmutter, 4 A100s a node, ranks contiguous,
# ms: the PCCL authors' logs (github.com/axonn-ai/sc2025-pccl-reproducer,
# data/perlmutter/pm_all_gather; Singh and Bhatele, arXiv 2504.18658), as typed
# into tests/test_rings_at_scale.cpp (kPerlmutter). {gpus: {MiB: ms}}
NCCL_AG_MS = {
    16: {1: 0.22, 16: 0.47, 64: 1.14, 256: 4.45, 1024: 16.25},
    64: {1: 0.53, 16: 1.26, 64: 1.63, 256: 4.62, 1024: 17.36},
    256: {1: 1.67, 16: 2.98, 64: 4.82, 256: 6.74, 1024: 19.13},
    1024: {1: 6.37, 16: 7.98, 64: 10.84, 256: 18.55, 1024: 26.56},
}


def size_label(b):
    b = int(b)
    return f"{b >> 20} MiB" if b < (1 << 30) else f"{b >> 30} GiB"


def fit(points, g):
    s11 = s12 = s22 = r1 = r2 = 0.0
    for bytes_, t in points:
        x1, x2 = (g - 1) / t, (g - 1) / g * bytes_ / t
        s11 += x1 * x1
        s12 += x1 * x2
        s22 += x2 * x2
        r1 += x1
        r2 += x2
    det = s11 * s22 - s12 * s12
    a = (r1 * s22 - r2 * s12) / det
    b = (s11 * r2 - s12 * r1) / det
    res = [((a * (g - 1) + b * (g - 1) / g * by) - t) / t for by, t in points]
    return a, b, math.sqrt(sum(r * r for r in res) / len(res))


def geometry(r):
    g, nodes, c, groups, active = (int(r[k]) for k in ("ranks", "nodes", "c", "groups", "active"))
    if groups == 1:
        return "contiguous"
    return f"{groups} groups, 1 a node, {active} running"


def main(path):
    rows = list(csv.DictReader(open(path)))
    main_rows = [r for r in rows if r["variant"] == "main"]
    print("| collective | ranks | nodes | placement | c | bytes | SimGrid ms | advisor ms (protocol) | SimGrid / advisor | NCCL ms (published) | SimGrid / NCCL | advisor / NCCL |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    by_span = defaultdict(list)
    for r in main_rows:
        g, nodes = int(r["ranks"]), int(r["nodes"])
        sim, adv = float(r["sim_s"]), float(r["advisor_s"])
        mib = int(r["bytes"]) >> 20
        nccl = NCCL_AG_MS.get(g, {}).get(mib) if (r["coll"] == "all-gather" and r["groups"] == "1") else None
        ncol = f"{nccl:.2f} | {sim * 1e3 / nccl:.2f} | {adv * 1e3 / nccl:.2f}" if nccl else "– | – | –"
        print(f"| {r['coll']} | {g} | {nodes} | {geometry(r)} | {r['c']} | {size_label(r['bytes'])} | {sim * 1e3:.3f} | "
              f"{adv * 1e3:.3f} ({r['protocol']}) | {sim / adv:.2f} | {ncol} |")
        by_span[(g, nodes, geometry(r))].append(sim / adv)
    print()
    print("| ranks | nodes | placement | rows | median SimGrid / advisor | min | max |")
    print("|---|---|---|---|---|---|---|")
    for (g, nodes, geo), v in sorted(by_span.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2])):
        print(f"| {g} | {nodes} | {geo} | {len(v)} | {statistics.median(v):.2f} | {min(v):.2f} | {max(v):.2f} |")
    print()
    print("| collective | ranks | nodes | placement | a: latency a ring step (µs) | 1/b: bus bandwidth (GB/s) | rel. rms of the form | busbw at 1 GiB (GB/s) | time at 1 MiB / (g−1) (µs) |")
    print("|---|---|---|---|---|---|---|---|---|")
    pts = defaultdict(list)
    for r in main_rows:
        pts[(r["coll"], int(r["ranks"]), int(r["nodes"]), geometry(r))].append((float(r["bytes"]), float(r["sim_s"])))
    for (coll, g, nodes, geo), p in sorted(pts.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1], kv[0][3])):
        a, b, rms = fit(p, g)
        big = max(p)
        small = min(p)
        busbw = (g - 1) / g * big[0] / big[1] / 1e9
        print(f"| {coll} | {g} | {nodes} | {geo} | {a * 1e6:.2f} | {1 / b / 1e9:.1f} | {rms * 100:.1f}% | "
              f"{busbw:.1f} | {small[1] / (g - 1) * 1e6:.2f} |")
    side = [r for r in rows if r["variant"] != "main"]
    if side:
        ref = {(r["coll"], r["ranks"], r["nodes"], r["groups"], r["active"], r["bytes"]): float(r["sim_s"])
               for r in main_rows}
        print()
        print("| side run | collective | ranks | nodes | bytes | side ms | main ms | side / main | side / advisor |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in side:
            m = ref.get((r["coll"], r["ranks"], r["nodes"], r["groups"], r["active"], r["bytes"]))
            sim = float(r["sim_s"])
            mcol = f"{m * 1e3:.3f} | {sim / m:.2f}" if m else "– | –"
            print(f"| {r['variant']} | {r['coll']} | {r['ranks']} | {r['nodes']} | {size_label(r['bytes'])} | "
                  f"{sim * 1e3:.3f} | {mcol} | {sim / float(r['advisor_s']):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "examples/simgrid/out/compare.csv")
