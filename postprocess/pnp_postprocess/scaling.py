"""The scaling figure: predicted parallel efficiency and iteration time against the rank count
(`pnp_bench --scaling` files), one line per (device, halo mode, layout), with deepinv's
measured efficiency at 64 GPUs (the study's) as the reference point."""
from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from . import schema
from .io import read_scaling

STYLES = {("input", "slabs"): ("tab:red", "-"), ("input", "grid"): ("tab:red", "--"),
          ("layer", "slabs"): ("tab:blue", "-"), ("layer", "grid"): ("tab:blue", "--")}


def read_scalings(files) -> list[dict]:
    rows = []
    for f in files:
        rows += read_scaling(f)
    return rows


def scaling_table(rows: list[dict]) -> list[dict]:
    """The rows the figure draws: the modelled ones (status ok), sorted by line then ranks."""
    keep = ("gpu", "halo_mode", "layout", "ranks", "iteration_s", "efficiency", "gradient_s", "denoise_s",
            "allreduce_s", "halo_s", "redundancy", "halo_bytes", "halo_messages", "denoiser_bytes", "file")
    ok = [{k: r[k] for k in keep} for r in rows if r["status"] == "ok"]
    # the 1-rank row belongs to every layout's line
    out = []
    for r in ok:
        if r["ranks"] == 1:
            out += [r | {"layout": lay} for lay in sorted({x["layout"] for x in ok})]
        else:
            out.append(r)
    return sorted(out, key=lambda r: (r["gpu"], r["halo_mode"], r["layout"], r["ranks"]))


def plot_scaling(rows: list[dict]) -> Figure:
    # a third panel, the denoiser's measured device memory per rank, where the files have it (GPU)
    memory = any(r["denoiser_bytes"] > 0 for r in rows)
    fig = Figure(figsize=(16 if memory else 11, 4.2), layout="constrained")
    axes = fig.subplots(1, 3 if memory else 2)
    eff, tim = axes[0], axes[1]
    lines = {}
    for r in rows:
        lines.setdefault((r["gpu"], r["halo_mode"], r["layout"]), []).append(r)
    for (gpu, mode, layout), pts in lines.items():
        pts = sorted(pts, key=lambda r: r["ranks"])
        color, ls = STYLES.get((mode, layout), ("k", ":"))
        label = f"{mode} halo, {layout}" + (f" ({gpu})" if len({k[0] for k in lines}) > 1 else "")
        x = [p["ranks"] for p in pts]
        eff.plot(x, [100 * p["efficiency"] for p in pts], ls, color=color, marker="o", label=label)
        tim.plot(x, [1e3 * p["iteration_s"] for p in pts], ls, color=color, marker="o", label=label)
        if memory:
            axes[2].plot(x, [p["denoiser_bytes"] / 2**30 for p in pts], ls, color=color, marker="o", label=label)
    one = [r for r in rows if r["ranks"] == 1]
    if one:
        t1 = min(r["iteration_s"] for r in one)
        xs = sorted({r["ranks"] for r in rows})
        tim.plot(xs, [1e3 * t1 / x for x in xs], ":", color="grey", label="ideal 1/R")
    eff.plot([64], [100 * schema.DEEPINV_64_GPU_EFFICIENCY], "*", color="k", markersize=12,
             label="deepinv, measured by the study (64 GPUs)")
    if memory:
        one_mem = [r["denoiser_bytes"] for r in rows if r["ranks"] == 1 and r["denoiser_bytes"] > 0]
        if one_mem:
            xs = sorted({r["ranks"] for r in rows})
            axes[2].plot(xs, [max(one_mem) / 2**30 / x for x in xs], ":", color="grey", label="1/R of 1 rank")
        axes[2].set_yscale("log")
        axes[2].set_ylabel("denoiser device memory per rank, measured [GiB]")
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("ranks (GPUs)")
        ax.grid(True, alpha=0.3)
    eff.set_ylabel("parallel efficiency T(1) / (R T(R)) [%]")
    eff.set_ylim(0, 110)
    tim.set_yscale("log")
    tim.set_ylabel("predicted iteration [ms]")
    eff.legend(fontsize=8)
    gpus = ", ".join(sorted({r["gpu"] for r in rows}))
    fig.suptitle(f"Scaling model (pnp_bench --scaling), compute measured on {gpus}")
    return fig
