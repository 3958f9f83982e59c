"""The study's figures, drawn with matplotlib from the rows of :mod:`pnp_postprocess.tables`.

Every ``plot_*`` function returns a :class:`matplotlib.figure.Figure` whose size in pixels is
fixed by :data:`DPI` and the number of facets (see each function), so tests can check it.
The figures are plain :class:`matplotlib.figure.Figure` objects, made without pyplot: in a
notebook, a cell ending in one shows it.
"""
from __future__ import annotations

import textwrap

import math
from collections import defaultdict

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from . import schema
from .io import gpu_type, ridge_point
from .tables import shape_label, shape_sort_key

DPI = 100
FACET_WIDTH_IN = 7.0
HEIGHT_IN = 5.0

ARCH_COLORS = {"dncnn": "tab:blue", "drunet": "tab:orange", "unet": "tab:green"}
GPU_LINESTYLES = {"A100": "-", "H100": "--", "H200": ":"}
DIM_MARKERS = {2: "o", 3: "s"}
PHASE_COLORS = {
    "forward_projection": "#4e79a7", "allreduce": "#f28e2b", "backprojection": "#76b7b2",
    "step": "#59a14f", "halo_exchange": "#edc948", "denoise": "#e15759", "clamp": "#b07aa1",
    "region_gradient": "#a0cbe8", "region_denoise": "#ff9d9a", "other": "#bab0ac",
}
PART_LABELS = {"region_gradient": "gradient region (FP+allreduce+BP+step)",
               "region_denoise": "denoise region (halo+denoise+clamp)",
               "other": "not timed apart (fused)"}


def figure_size_px(n_facets: int) -> tuple[int, int]:
    """(width, height) in pixels of a figure with n_facets panels side by side."""
    return (round(FACET_WIDTH_IN * n_facets * DPI), round(HEIGHT_IN * DPI))


def _figure(n_facets: int):
    # A bare Figure (no pyplot): no global state, nothing to close, any backend or none.
    fig = Figure(figsize=(FACET_WIDTH_IN * n_facets, HEIGHT_IN), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, n_facets, squeeze=False)
    return fig, list(axes[0])


def _plain_log_formatter(minor: bool = False):
    """Plain numbers on a log axis; minor ticks labelled only at 2x and 5x a power of ten."""
    def fmt(v, _pos):
        if v <= 0:
            return ""
        if minor:
            mant = v / 10 ** math.floor(math.log10(v) + 1e-9)
            if not any(abs(mant - m) < 1e-6 for m in (2, 5)):
                return ""
        if v >= 1:
            return f"{v:g}"
        return f"{v:.3g}"
    return FuncFormatter(fmt)


def _units(gpu: str, n: int) -> str:
    """'1 GPU', '2 GPUs'; 'ranks' for CPU runs."""
    word = "rank" if gpu_type(gpu) == "cpu" else "GPU"
    return f"{n} {word}{'s' if n > 1 else ''}"


def _fmt_speedup(s: float) -> str:
    if not math.isfinite(s):
        return "n/a"
    if s >= 10:
        return f"{s:.1f}×"
    return f"{s:.2f}×" if s >= 0.1 else f"{s:.2g}×"


def _fmt_time(t: float) -> str:
    if not math.isfinite(t):
        return "n/a"
    return f"{t:.3g} s" if t >= 1 else f"{t * 1e3:.3g} ms"


def _gpu_facets(rows):
    facets = defaultdict(list)
    for r in rows:
        facets[r["gpu"]].append(r)
    return dict(sorted(facets.items()))


def _group_label(r) -> str:
    mode = r["compile_mode"]
    text = f"{_units(r['gpu'], r['ranks'])}\n{mode}"
    if mode != "none":
        text += f"\n{r['compile_backend']}"
    return text


# --- PnP runs ------------------------------------------------------------------------

def plot_compile_speedup(rows: list[dict]):
    """Grouped bars per (GPU count, mode): first iteration and stable iteration, mean ± std
    over repetitions, log y, each bar labelled with its speedup over the 1-GPU eager stable
    time. One panel per GPU name."""
    facets = _gpu_facets(rows)
    fig, axes = _figure(len(facets))
    w = 0.38
    for ax, (gpu, rs) in zip(axes, facets.items()):
        xs = range(len(rs))
        series = (("first_iteration", "first iteration (incl. compile)", "#9ecae1", -w / 2),
                  ("stable_iteration", f"stable (mean of last {5} iterations)", "#08519c", w / 2))
        tops = []
        for col, label, color, dx in series:
            means = [r[f"{col}_mean_s"] for r in rs]
            stds = [r[f"{col}_std_s"] for r in rs]
            speed = [r["speedup_first" if col == "first_iteration" else "speedup_stable"] for r in rs]
            ax.bar([x + dx for x in xs], means, w, yerr=stds, capsize=3, color=color,
                   edgecolor="black", linewidth=0.5, label=label, error_kw={"linewidth": 0.8})
            for x, m, s, sp in zip(xs, means, stds, speed):
                top = m + (s if math.isfinite(s) else 0)
                tops.append(top)
                ax.annotate(_fmt_speedup(sp), (x + dx, top), xytext=(0, 3),
                            textcoords="offset points", ha="center", va="bottom",
                            fontsize=7, rotation=90)
        ax.set_yscale("log")
        lows = [r[c] for r in rs for c in ("first_iteration_mean_s", "stable_iteration_mean_s")
                if r[c] > 0]
        if lows:
            ax.set_ylim(min(lows) / 2.5, max(tops) * 6)
        ax.yaxis.set_major_formatter(_plain_log_formatter())
        ax.set_xticks(list(xs), [_group_label(r) for r in rs], fontsize=8)
        for i in range(1, len(rs)):
            if rs[i]["ranks"] != rs[i - 1]["ranks"]:
                ax.axvline(i - 0.5, color="grey", linewidth=0.6, linestyle=":")
        base = rs[0]["baseline_stable_s"]
        note = (f"labels: speedup over the 1-GPU eager stable time ({base:.4g} s)"
                if math.isfinite(base) else "labels: no 1-GPU eager run for this GPU")
        ax.set_title(f"PnP iteration time — {gpu}\n{note}", fontsize=10)
        ax.set_ylabel("time per iteration (s)")
        ax.grid(axis="y", which="both", alpha=0.25)
        ax.legend(fontsize=8, loc="upper right")
    return fig


def plot_phase_breakdown(rows: list[dict]):
    """A stacked bar of the stable phase times per (GPU count, mode); the black tick is the
    device-event total. One panel per GPU name."""
    facets = _gpu_facets(rows)
    fig, axes = _figure(len(facets))
    parts = list(schema.PHASES) + list(schema.REGIONS) + ["other"]
    for ax, (gpu, rs) in zip(axes, facets.items()):
        xs = list(range(len(rs)))
        bottom = [0.0] * len(rs)
        for p in parts:
            vals = [r[f"{p}_s"] if math.isfinite(r[f"{p}_s"]) else 0.0 for r in rs]
            if not any(v > 0 for v in vals):
                continue
            ax.bar(xs, vals, 0.6, bottom=bottom, color=PHASE_COLORS[p], edgecolor="white",
                   linewidth=0.4,
                   label=PART_LABELS.get(p, p.replace("_", " ")))
            bottom = [b + v for b, v in zip(bottom, vals)]
        totals = [r["total_s"] for r in rs]
        ax.scatter(xs, totals, marker="_", s=500, color="black", zorder=3, label="total")
        for x, t in zip(xs, totals):
            if math.isfinite(t):
                ax.annotate(_fmt_time(t), (x, t), xytext=(0, 4), textcoords="offset points",
                            ha="center", va="bottom", fontsize=7)
        finite = [t for t in totals + bottom if math.isfinite(t)]
        if finite:
            ax.set_ylim(0, max(finite) * 1.15)
        ax.set_xticks(xs, [_group_label(r) for r in rs], fontsize=8)
        ax.set_ylabel("time per stable iteration (s)")
        ax.set_title(f"PnP phase breakdown — {gpu}\n(mean over ranks and the last "
                     f"{rs[0]['iterations_used']} iterations)", fontsize=10)
        ax.grid(axis="y", alpha=0.25)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def plot_psnr(rows: list[dict]):
    """PSNR (left) and relative residual (right, log y) per iteration, one line per run
    group (mean over repetitions, band = ± std). Always two panels."""
    fig, (ax_p, ax_r) = _figure(2)
    groups = defaultdict(list)
    for r in rows:
        groups[(r["gpu"], r["ranks"], r["compile_mode"], r["compile_backend"])].append(r)
    markers = "ovs^Dp*hX<>"
    any_psnr = any_res = False
    for i, (key, rs) in enumerate(groups.items()):
        gpu, ranks, mode, backend = key
        label = f"{gpu_type(gpu)}, {_units(gpu, ranks)}, {mode}"
        if mode != "none":
            label += f" ({backend})"
        style = {"marker": markers[i % len(markers)], "markersize": 4, "linewidth": 1.2,
                 "alpha": 0.85, "label": label}
        for ax, m, s in ((ax_p, "psnr_mean_db", "psnr_std_db"),
                         (ax_r, "residual_mean", "residual_std")):
            pts = [(r["iteration"], r[m], r[s]) for r in rs if math.isfinite(r[m])]
            if not pts:
                continue
            it, mean, std = zip(*pts)
            line, = ax.plot(it, mean, **style)
            lo = [a - b for a, b in zip(mean, std)]
            hi = [a + b for a, b in zip(mean, std)]
            ax.fill_between(it, lo, hi, color=line.get_color(), alpha=0.15, linewidth=0)
            if ax is ax_p:
                any_psnr = True
            else:
                any_res = True
    ax_p.set_title("PSNR against the ground truth", fontsize=10)
    ax_p.set_ylabel("PSNR (dB)")
    ax_r.set_title("relative residual ‖Ax − y‖ / ‖y‖", fontsize=10)
    ax_r.set_ylabel("residual")
    if any_res:
        ax_r.set_yscale("log")
        ax_r.yaxis.set_major_formatter(_plain_log_formatter())
        ax_r.yaxis.set_minor_formatter(_plain_log_formatter(minor=True))
        ax_r.tick_params(axis="y", which="minor", labelsize=7)
    for ax, has in ((ax_p, any_psnr), (ax_r, any_res)):
        ax.set_xlabel("iteration")
        ax.grid(alpha=0.25)
        ax.xaxis.get_major_locator().set_params(integer=True)
        if has:
            ax.legend(fontsize=7, loc="lower right" if ax is ax_p else "upper right")
        else:
            ax.text(0.5, 0.5, "not computed in these files", transform=ax.transAxes,
                    ha="center", va="center", color="grey")
    return fig


# --- the denoiser sweep --------------------------------------------------------------

def _shape_positions(rows):
    shapes = sorted({(r["dim"], r["shape"]) for r in rows}, key=lambda d: shape_sort_key(*d))
    return {s: i for i, s in enumerate(shapes)}, shapes


def _sweep_facets(rows):
    facets = defaultdict(list)
    for r in rows:
        facets[(r["backend"], r["mode"])].append(r)
    return dict(sorted(facets.items()))


def _legend_handles(rows, with_gpu=True, with_backend=False):
    archs = sorted({r["architecture"] for r in rows})
    h = [Patch(color=ARCH_COLORS.get(a, "grey"), label=a) for a in archs]
    for d in sorted({r["dim"] for r in rows}):
        h.append(Line2D([], [], color="black", marker=DIM_MARKERS.get(d, "^"), linestyle="none",
                        label=f"{d}D"))
    if with_gpu:
        for g in sorted({r["gpu_type"] for r in rows}):
            h.append(Line2D([], [], color="black", linestyle=GPU_LINESTYLES.get(g, "-."), label=g))
    if with_backend:
        for b in sorted({r["backend"] for r in rows}):
            h.append(Line2D([], [], color="black", marker="o", linestyle="none",
                            markerfacecolor="black" if b == "native" else "white", label=b))
    return h


def plot_denoiser_speedup(rows: list[dict]):
    """Speedup of the compiled denoiser over eager (log y) against the input shape, 2D then
    3D. Colour = architecture, marker = 2D or 3D, line style = GPU type. One panel per
    compiled backend."""
    facets = _sweep_facets(rows)
    fig, axes = _figure(max(len(facets), 1))
    pos, shapes = _shape_positions(rows)
    for ax, ((backend, mode), rs) in zip(axes, facets.items()):
        lines = defaultdict(list)
        for r in rs:
            lines[(r["architecture"], r["gpu"], r["dim"])].append(r)
        for (arch, gpu, dim), pts in sorted(lines.items()):
            pts.sort(key=lambda r: pos[(r["dim"], r["shape"])])
            ax.plot([pos[(r["dim"], r["shape"])] for r in pts], [r["speedup"] for r in pts],
                    color=ARCH_COLORS.get(arch, "grey"), marker=DIM_MARKERS.get(dim, "^"),
                    linestyle=GPU_LINESTYLES.get(gpu_type(gpu), "-."), markersize=6)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
        n2d = sum(1 for d, _ in shapes if d == 2)
        if 0 < n2d < len(shapes):
            ax.axvline(n2d - 0.5, color="grey", linewidth=0.6, linestyle=":")
        ax.set_xticks(range(len(shapes)), [shape_label(s) for _, s in shapes])
        ax.set_xlim(-0.5, len(shapes) - 0.5)
        ax.set_yscale("log")
        ys = [r["speedup"] for r in rs if r["speedup"] > 0]
        if ys:
            ax.set_ylim(min(min(ys), 1.0) / 1.4, max(max(ys), 1.0) * 1.4)
        ax.yaxis.set_major_formatter(_plain_log_formatter())
        ax.yaxis.set_minor_formatter(_plain_log_formatter(minor=True))
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.set_xlabel("input shape (3 channels)")
        ax.set_ylabel("speedup over eager (stable)")
        ax.set_title(f"Denoiser compile speedup: eager → {backend}"
                     + (f" ({mode})" if mode not in ("pre", "none") else ""), fontsize=10)
        ax.grid(axis="y", which="both", alpha=0.25)
        ax.legend(handles=_legend_handles(rows), fontsize=8, loc="best")
    if not facets:
        axes[0].text(0.5, 0.5, "no compiled rows with an eager baseline", ha="center",
                     transform=axes[0].transAxes)
    return fig


def plot_peer_speedup(rows: list[dict], target: float = 1.2):
    """The study's comparison: pnp native's speed-up over the better torch.compile arm (left,
    per shape and architecture, with the 1.2x target), and both compile times (right, log)."""
    fig, (ax, cx) = _figure(2)
    pos, shapes = _shape_positions(rows)
    archs = sorted({r["architecture"] for r in rows})
    width = 0.8 / max(len(archs), 1)
    for i, a in enumerate(archs):
        rs = [r for r in rows if r["architecture"] == a]
        xs = [pos[(r["dim"], r["shape"])] + (i - (len(archs) - 1) / 2) * width for r in rs]
        ax.bar(xs, [r["speedup"] for r in rs], width, color=ARCH_COLORS.get(a, "grey"), label=a)
        for x, r in zip(xs, rs):
            ax.text(x, r["speedup"], f"{r['speedup']:.2f}", ha="center", va="bottom", fontsize=7)
        cx.scatter(xs, [r["native_compile_s"] for r in rs], color=ARCH_COLORS.get(a, "grey"), marker="o")
        cx.scatter(xs, [r["peer_compile_s"] for r in rs], color=ARCH_COLORS.get(a, "grey"), marker="x")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.axhline(target, color="black", linewidth=0.8, linestyle=":", label=f"target {target:g}x")
    for a_ in (ax, cx):
        a_.set_xticks(range(len(shapes)), [shape_label(s) for _, s in shapes])
        a_.set_xlim(-0.5, len(shapes) - 0.5)
        a_.set_xlabel("input shape")
    ax.set_ylabel("stable: better torch.compile arm / pnp native")
    ax.set_title("pnp native against deepinv under torch.compile", fontsize=10)
    ax.legend(fontsize=8, loc="best")
    cx.set_yscale("log")
    cx.set_ylabel("compile [s]")
    cx.set_title("compile time: o pnp native, x torch.compile (its better arm)", fontsize=10)
    # the rows each torch.compile arm was cut off on ("every row" when on all of them)
    capped: dict[str, list[str]] = {}
    for r in rows:
        for arm in filter(None, r["peer_capped"].split(",")):
            capped.setdefault(arm, []).append(f"{r['architecture']} {shape_label(r['shape'])}")
    if capped:
        parts = [f"{arm}: " + ("every row" if len(where) == len(rows) else ", ".join(where))
                 for arm, where in sorted(capped.items())]
        note = "torch.compile arms cut off by their time cap (compared without them) - " + "; ".join(parts)
        text = textwrap.fill(note, 230)
        # room below the axes for the note (the constrained layout ignores figure texts)
        bottom = 0.035 * (text.count("\n") + 1) + 0.01
        fig.get_layout_engine().set(rect=(0, bottom, 1, 1 - bottom))
        fig.text(0.01, 0.01, text, fontsize=7, va="bottom")
    cx.yaxis.set_major_formatter(_plain_log_formatter())
    cx.yaxis.set_minor_formatter(_plain_log_formatter(minor=True))
    cx.grid(axis="y", which="both", alpha=0.25)
    if not rows:
        ax.text(0.5, 0.5, "no rows with native and a torch.compile arm", ha="center", transform=ax.transAxes)
    return fig


def plot_roofline(rows: list[dict]):
    """Speedup (log y) against arithmetic intensity (log x), one panel per GPU, with the GPU's
    ridge point as a vertical line. Filled markers: native; hollow: other backends."""
    facets = _gpu_facets(rows)
    fig, axes = _figure(max(len(facets), 1))
    for ax, (gpu, rs) in zip(axes, facets.items()):
        clusters = defaultdict(list)
        for r in rs:
            c = ARCH_COLORS.get(r["architecture"], "grey")
            ax.scatter(r["intensity"], r["speedup"], s=45, marker=DIM_MARKERS.get(r["dim"], "^"),
                       edgecolors=c, facecolors=c if r["backend"] == "native" else "white",
                       linewidths=1.3, zorder=3, alpha=0.85)
            clusters[(r["architecture"], r["dim"])].append(r)
        # One label per architecture and dimension: the intensity barely depends on the shape.
        for (arch, dim), pts in sorted(clusters.items()):
            x = max(p["intensity"] for p in pts)
            y = math.exp(sum(math.log(p["speedup"]) for p in pts) / len(pts))
            ax.annotate(f"{arch} {dim}D", (x, y), xytext=(7, 0), textcoords="offset points",
                        fontsize=8, va="center", color=ARCH_COLORS.get(arch, "grey"))
        ridge = ridge_point(gpu)
        xs = [r["intensity"] for r in rs if r["intensity"] > 0]
        lo, hi = min(xs), max(xs)
        if ridge is not None:
            lo, hi = min(lo, ridge), max(hi, ridge)
            ax.axvline(ridge, color="black", linewidth=1.2, linestyle="--")
            ax.annotate(f"ridge {ridge:g} FLOP/B", (ridge, 1), xycoords=("data", "axes fraction"),
                        xytext=(4, -12), textcoords="offset points", fontsize=8)
            ax.axvspan(lo / 3, ridge, color="tab:blue", alpha=0.05)
            ax.text(0.02, 0.02, "memory-bound", transform=ax.transAxes, fontsize=8, color="tab:blue")
            ax.text(0.98, 0.02, "compute-bound", transform=ax.transAxes, fontsize=8,
                    color="dimgrey", ha="right")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo / 3, hi * 3)
        ys = [r["speedup"] for r in rs if r["speedup"] > 0]
        ax.set_ylim(min(min(ys), 1.0) / 1.5, max(max(ys), 1.0) * 1.5)
        ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
        ax.yaxis.set_major_formatter(_plain_log_formatter())
        ax.yaxis.set_minor_formatter(_plain_log_formatter(minor=True))
        ax.tick_params(axis="y", which="minor", labelsize=7)
        ax.xaxis.set_major_formatter(_plain_log_formatter())
        ax.set_xlabel("arithmetic intensity (FLOP/B, study conventions)")
        ax.set_ylabel("compile speedup over eager (stable)")
        ax.set_title(f"Roofline position vs compile speedup — {gpu}", fontsize=10)
        ax.grid(which="both", alpha=0.2)
        ax.legend(handles=_legend_handles(rs, with_gpu=False, with_backend=True), fontsize=8,
                  loc="upper left")
    if not facets:
        axes[0].text(0.5, 0.5, "no compiled rows with an eager baseline", ha="center",
                     transform=axes[0].transAxes)
    return fig
