"""The GPU's SM clock and power over a device call, from nvidia-smi's CSV samples
(--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu
--format=csv,noheader -lms 20), with the stretches above a power threshold named in order.

  python3 plot_clocks.py CSV OUT.png [--label NAME ...] [--threshold 550] [--until SECONDS]

Prints one line per stretch: its name, start and end (s), median SM clock (MHz) and power (W).
nvidia-smi refreshes its readings about every 100 ms: repeated samples are dropped."""
import argparse
import datetime as dt
import statistics as st

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    out = []
    for line in open(path):
        f = [x.strip() for x in line.split(",")]
        try:
            t = dt.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f")
            out.append((t, int(f[1].split()[0]), float(f[3].split()[0])))
        except (ValueError, IndexError):
            continue
    t0 = out[0][0]
    s = [((t - t0).total_seconds(), c, p) for t, c, p in out]
    return [x for i, x in enumerate(s) if i == 0 or x[1:] != s[i - 1][1:]]


def stretches(samples, threshold):
    segs = []
    for t, c, p in samples:
        if p < threshold:
            continue
        if segs and t - segs[-1][-1][0] <= 0.5:
            segs[-1].append((t, c, p))
        else:
            segs.append([(t, c, p)])
    return [s for s in segs if s[-1][0] - s[0][0] >= 0.3]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--label", nargs="*", default=[], help="names of the stretches, in order")
    ap.add_argument("--threshold", type=float, default=550.0, help="power (W) that marks a stretch")
    ap.add_argument("--until", type=float, default=None, help="last second drawn")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    s = read(a.csv)
    if a.until is not None:
        s = [x for x in s if x[0] <= a.until]
    segs = stretches(s, a.threshold)
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(10, 5.5))
    ax1.plot([x[0] for x in s], [x[1] for x in s], lw=1, color="tab:blue")
    ax2.plot([x[0] for x in s], [x[2] for x in s], lw=1, color="tab:red")
    for i, seg in enumerate(segs):
        name = a.label[i] if i < len(a.label) else f"stretch {i + 1}"
        t0, t1 = seg[0][0], seg[-1][0]
        clk, pw = st.median(x[1] for x in seg), st.median(x[2] for x in seg)
        print(f"{name}: {t0:.1f}-{t1:.1f} s, median SM clock {clk:.0f} MHz, median power {pw:.0f} W")
        for ax in (ax1, ax2):
            ax.axvspan(t0, t1, color="0.9", zorder=0)
        ax1.text((t0 + t1) / 2, 1320, name, ha="center", va="bottom", fontsize=7, rotation=90,
                 bbox=dict(facecolor="white", alpha=0.8, lw=0, pad=1))
    ax1.set_ylabel("SM clock (MHz)")
    ax1.set_ylim(1300, 2050)
    ax2.set_ylabel("power (W)")
    ax2.set_xlabel("time in the call (s)")
    ax2.axhline(700, ls="--", lw=0.8, color="k")
    ax2.text(s[0][0], 705, "power limit 700 W", fontsize=7, va="bottom")
    if a.title:
        ax1.set_title(a.title, fontsize=9)
    fig.tight_layout()
    fig.savefig(a.png, dpi=120)


if __name__ == "__main__":
    main()
