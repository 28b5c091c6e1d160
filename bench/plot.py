#!/usr/bin/env python3
"""Plots a bench/run.sh run: throughput and p99 latency against connections.

    bench/plot.py RESULTS OUTDIR

RESULTS holds run.sh's "RESULT mode=... label=... connections=..." lines (one
per system, mode and connection count). Writes OUTDIR/throughput.png and
OUTDIR/p99.png: one panel per mode (durable, relaxed), one line per system,
log-scaled axes. Needs matplotlib (Debian python3-matplotlib); run.sh --plot
installs it.
"""
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

SYSTEMS = [  # label in the RESULT lines, legend, style, colour (the same in every panel)
    ("intentd", "intentd (RocksDB)", "o-", "tab:blue"),
    ("intentd-pg", "intentd on PostgreSQL", "s--", "tab:green"),
    ("postgres", "PostgreSQL, raw statements", "^-", "tab:orange"),
    ("redis", "Redis", "d:", "tab:red"),
]
MODES = [("durable", "durable (every reply after fsync)"),
         ("relaxed", "relaxed (no fsync before the reply)")]


def load(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.startswith("RESULT "):
                continue
            rows.append(dict(kv.split("=", 1) for kv in line.split()[1:]))
    if not rows:
        sys.exit(f"plot.py: no RESULT lines in {path}")
    return rows


def series(rows, mode, label, key, scale=1.0):
    points = sorted((int(r["connections"]), float(r[key]) * scale)
                    for r in rows if r["mode"] == mode and r["label"] == label)
    return [c for c, _ in points], [v for _, v in points]


def plot(rows, key, scale, ylabel, title, path):
    modes = [(m, t) for m, t in MODES if any(r["mode"] == m for r in rows)]
    fig, axes = plt.subplots(1, len(modes), figsize=(6 * len(modes), 4.5), squeeze=False)
    for ax, (mode, mode_title) in zip(axes[0], modes):
        for label, legend, style, colour in SYSTEMS:
            xs, ys = series(rows, mode, label, key, scale)
            if xs:
                ax.plot(xs, ys, style, color=colour, label=legend)
        conns = sorted({int(r["connections"]) for r in rows})
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(conns)
        ax.set_xticklabels([str(c) for c in conns])
        ax.set_xlabel("connections (one request in flight each)")
        ax.set_ylabel(ylabel)
        ax.set_title(mode_title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot.py: wrote {path}", file=sys.stderr)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    rows = load(sys.argv[1])
    out = sys.argv[2]
    plot(rows, "actions_per_s", 1.0, "logical actions/s (begin + complete)",
         "Throughput against connections (bench/run.sh)", f"{out}/throughput.png")
    plot(rows, "p99_us", 1e-3, "p99 latency of one request, ms",
         "p99 latency against connections (bench/run.sh)", f"{out}/p99.png")


if __name__ == "__main__":
    main()
