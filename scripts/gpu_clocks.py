#!/usr/bin/env python3
"""The GPU's SM clock and power over a run, from nvidia-smi's samples: each stretch above a power
threshold with its median clock and power, and optionally a picture of the trace.

  scripts/gpu_clocks.py CSV [--png OUT.png] [--label NAME ...] [--threshold 550] [--until S] [--title T]

CSV is what scripts/device_call.sh's clocks_start records:
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu
             --format=csv,noheader -lms 20
Prints one line per stretch: its name (--label, in order), start and end (s from the first
sample), median SM clock (MHz) and power (W). nvidia-smi refreshes its readings about every
100 ms, so repeated samples are dropped. Lines that are not samples are skipped; no samples at
all is an error (exit 2). Why: under a long forward an H200 runs at its power limit and its clock
falls (docs/design.md, "Decisions": the rivals' margin), which a timing alone does not show.
"""
from __future__ import annotations

import argparse
import datetime as dt
import statistics as st
import sys


def read(path: str) -> list[tuple[float, int, float]]:
    """(seconds from the first sample, SM clock MHz, power W), repeated readings dropped."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            fields = [x.strip() for x in line.split(",")]
            try:
                t = dt.datetime.strptime(fields[0], "%Y/%m/%d %H:%M:%S.%f")
                out.append((t, int(fields[1].split()[0]), float(fields[3].split()[0])))
            except (ValueError, IndexError):
                continue
    if not out:
        return []
    t0 = out[0][0]
    s = [((t - t0).total_seconds(), c, p) for t, c, p in out]
    return [x for i, x in enumerate(s) if i == 0 or x[1:] != s[i - 1][1:]]


def stretches(samples, threshold: float, gap: float = 0.5, shortest: float = 0.3):
    """Runs of samples at or above `threshold` W, split where they pause for more than `gap` s,
    kept when they last at least `shortest` s."""
    segs: list[list[tuple[float, int, float]]] = []
    for t, c, p in samples:
        if p < threshold:
            continue
        if segs and t - segs[-1][-1][0] <= gap:
            segs[-1].append((t, c, p))
        else:
            segs.append([(t, c, p)])
    return [s for s in segs if s[-1][0] - s[0][0] >= shortest]


def summary(segs, labels) -> list[str]:
    lines = []
    for i, seg in enumerate(segs):
        name = labels[i] if i < len(labels) else f"stretch {i + 1}"
        clk, pw = st.median(x[1] for x in seg), st.median(x[2] for x in seg)
        lines.append(f"{name}: {seg[0][0]:.1f}-{seg[-1][0]:.1f} s, median SM clock {clk:.0f} MHz, "
                     f"median power {pw:.0f} W")
    return lines


def draw(samples, segs, labels, png: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(10, 5.5))
    ax1.plot([x[0] for x in samples], [x[1] for x in samples], lw=1, color="tab:blue")
    ax2.plot([x[0] for x in samples], [x[2] for x in samples], lw=1, color="tab:red")
    for i, seg in enumerate(segs):
        name = labels[i] if i < len(labels) else f"stretch {i + 1}"
        t0, t1 = seg[0][0], seg[-1][0]
        for ax in (ax1, ax2):
            ax.axvspan(t0, t1, color="0.9", zorder=0)
        ax1.text((t0 + t1) / 2, 1320, name, ha="center", va="bottom", fontsize=7, rotation=90,
                 bbox=dict(facecolor="white", alpha=0.8, lw=0, pad=1))
    ax1.set_ylabel("SM clock (MHz)")
    ax1.set_ylim(1300, 2050)
    ax2.set_ylabel("power (W)")
    ax2.set_xlabel("time (s)")
    ax2.axhline(700, ls="--", lw=0.8, color="k")
    ax2.text(samples[0][0], 705, "H200 power limit 700 W", fontsize=7, va="bottom")
    if title:
        ax1.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--png", help="draw the trace into this file")
    ap.add_argument("--label", nargs="*", default=[], help="names of the stretches, in order")
    ap.add_argument("--threshold", type=float, default=550.0, help="power (W) that marks a stretch (550)")
    ap.add_argument("--until", type=float, default=None, help="last second drawn and summed")
    ap.add_argument("--title", default="")
    a = ap.parse_args(argv)
    samples = read(a.csv)
    if a.until is not None:
        samples = [x for x in samples if x[0] <= a.until]
    if not samples:
        print(f"error: {a.csv}: no nvidia-smi samples (timestamp, clocks.sm, clocks.mem, power.draw, ...)",
              file=sys.stderr)
        return 2
    segs = stretches(samples, a.threshold)
    for line in summary(segs, a.label):
        print(line)
    if a.png:
        draw(samples, segs, a.label, a.png, a.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
