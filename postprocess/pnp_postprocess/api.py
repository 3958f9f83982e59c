"""One call per figure: read result files, compute the table, write PNG + PDF + CSV."""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import figures, images, memory, scaling, tables, volume
from .io import read_benches, read_recons

STYLE_DPI = figures.DPI


@dataclass(frozen=True)
class FigureSpec:
    name: str
    program: str              # which pnp program writes its input files
    table: Callable           # list of runs or bench files -> rows
    plot: Callable            # rows -> Figure
    help: str
    reader: Callable | None = None   # files -> what `table` takes; default: read_recons / read_benches


# What each figure shows (the command line's list of figures).
_HELP = {
    "compile-speedup": "PnP first/stable iteration per (GPU count, mode), speedup over 1-GPU eager",
    "phases": "PnP phase breakdown: stacked stable phase times per (GPU count, mode)",
    "psnr": "PSNR and residual per iteration",
    "reconstruction": "reconstruction, ground truth and error map with zoomed insets, one row per file",
    "denoiser-speedup": "denoiser compile speedup per shape, architecture and GPU (pnp_bench)",
    "peer-speedup": "pnp native against the better torch.compile arm (deepinv), speed-up and compile time",
    "roofline": "arithmetic intensity vs compile speedup with the GPU ridge point (pnp_bench)",
    "scaling": "predicted efficiency and iteration time per rank count (pnp_bench --scaling)",
    "volume": "orthogonal slices (axial, coronal, sagittal) of a volume, its ground truth and error, per file",
    "memory-budget": "a memory matrix's runs (a results table, CSV): estimate and peak as shares of the budget",
}

# name, program, table, plot[, reader]
FIGURES = {
    row[0]: FigureSpec(*row[:4], _HELP[row[0]], *row[4:]) for row in (
        ("compile-speedup", "pnp_recon", tables.compile_speedup, figures.plot_compile_speedup),
        ("phases", "pnp_recon", tables.phase_breakdown, figures.plot_phase_breakdown),
        ("psnr", "pnp_recon", tables.psnr_per_iteration, figures.plot_psnr),
        ("reconstruction", "pnp_recon", images.reconstruction_table, images.plot_reconstruction, images.read_images),
        ("denoiser-speedup", "pnp_bench", tables.denoiser_speedup, figures.plot_denoiser_speedup),
        ("peer-speedup", "pnp_bench", tables.peer_speedup, figures.plot_peer_speedup),
        ("roofline", "pnp_bench", tables.roofline, figures.plot_roofline),
        ("scaling", "pnp_bench --scaling", scaling.scaling_table, scaling.plot_scaling, scaling.read_scalings),
        ("volume", "pnp_recon volume", volume.orthogonal_table, volume.plot_orthogonal, volume.read_volumes),
        ("memory-budget", "results table", memory.budget_table, memory.plot_budget, memory.read_budget_tables),
    )
}


def _csv_value(v):
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)  # repr round-trips exactly
    return v


def write_csv(rows: list[dict], path) -> Path:
    path = Path(path)
    fields = list(rows[0].keys()) if rows else []
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: _csv_value(v) for k, v in r.items()})
    return path


def read_csv(path) -> list[dict]:
    """Rows of a CSV written by :func:`write_csv`, values as strings."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def load(name: str, files) -> list:
    spec = FIGURES[name]
    if spec.reader is not None:
        return spec.reader(files)
    return read_recons(files) if spec.program == "pnp_recon" else read_benches(files)


def plot(name: str, rows: list[dict]):
    """The matplotlib Figure of figure `name` for rows from :func:`table`."""
    return FIGURES[name].plot(rows)


def table(name: str, files) -> list[dict]:
    """The rows behind figure `name` for these result files (what the CSV holds)."""
    return FIGURES[name].table(load(name, files))


@dataclass
class Outputs:
    png: Path
    pdf: Path
    csv: Path
    rows: list
    figure: object = None   # the matplotlib Figure (shows itself in a notebook)


def make_figure(name: str, files, out_dir, stem: str | None = None) -> Outputs:
    """Draw figure `name` from result files into out_dir/<stem>.{png,pdf,csv}."""
    if name not in FIGURES:
        raise KeyError(f"unknown figure '{name}'; choose one of {', '.join(FIGURES)}")
    spec = FIGURES[name]
    rows = table(name, files)
    if not rows:
        raise ValueError(f"{name}: the given files hold no data for this figure")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = stem or name
    fig = spec.plot(rows)
    png, pdf = out / f"{stem}.png", out / f"{stem}.pdf"
    fig.savefig(png, dpi=STYLE_DPI)
    fig.savefig(pdf)
    return Outputs(png=png, pdf=pdf, csv=write_csv(rows, out / f"{stem}.csv"), rows=rows,
                   figure=fig)
