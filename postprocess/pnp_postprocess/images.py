"""The reconstruction figure: the image of a pnp_recon file, its ground truth and the error.

One row per file: the reconstruction, the ground truth and the error map (reconstruction −
ground truth, diverging colours, symmetric limits), each with a zoomed inset and a colour bar;
a file without ``/ground_truth`` gives the reconstruction alone. All rows share one grey scale
(the range of the ground truths, or of the reconstructions when no file has one) and one
error scale, so compile modes and precisions compare side by side.

Large images are shown block-averaged to at most :data:`MAX_DISPLAY_PX` pixels per side; the
inset always shows the full-resolution pixels of its box (:data:`ZOOM`, the central 1/8 of
each side by default, at most :data:`MAX_ZOOM_PX`). The images are never read whole: the block means are accumulated over
row strips of at most :data:`STRIP_BYTES`, and the inset box is an h5py slice.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import h5py
import numpy as np
from matplotlib.figure import Figure

from . import schema
from .io import RunLabels, SchemaError, _open_checked, gpu_type

try:                     # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - older Pythons read the one key with a regex
    tomllib = None

DPI = 100
PANEL_WIDTH_IN = 4.6
PANEL_HEIGHT_IN = 4.4
MAX_DISPLAY_PX = 1024
"""Main panels show at most this many pixels per side (block means of the full image)."""
ZOOM = 1 / 8
"""Side of the inset box as a fraction of the image side (the box is centred)."""
MAX_ZOOM_PX = 512
"""... but at most this many pixels: the inset shows them all, and memory stays bounded."""
STRIP_BYTES = 32 * 2 ** 20
"""Largest row strip of one dataset read at a time (float64 bytes) while averaging."""
PANELS = ("reconstruction", "ground truth", "error")
"""Labels (Axes.get_label()) of the main panels of a row, in order; insets are 'zoom'."""
GREY, ERROR_CMAP = "gray", "RdBu_r"
ERROR_PERCENTILE = 99.5
"""The error scale is ± this percentile of |error| over the shown pixels (all rows)."""


def figure_size_px(n_rows: int, n_cols: int) -> tuple[int, int]:
    """(width, height) in pixels of a reconstruction figure of n_rows files, n_cols panels."""
    return (round(PANEL_WIDTH_IN * n_cols * DPI), round(PANEL_HEIGHT_IN * n_rows * DPI))


@dataclass
class ReconImage(RunLabels):
    """What the figure needs of one pnp_recon file (the images stay in the file)."""
    path: Path
    attrs: dict
    shape: tuple             # (rows, cols) of /reconstruction
    has_ground_truth: bool
    psnr: np.ndarray | None  # [iterations], NaN where not computed; None when absent
    ssim: np.ndarray | None
    precision: str | None    # [denoiser] precision of the config, None when not given

    @property
    def run_key(self) -> tuple:
        """Files with the same key are repetitions of one run (same image up to noise)."""
        return (self.gpu, int(self.attrs["ranks"]), self.mode, self.backend,
                self.attrs.get("architecture"), self.precision, self.shape)

    def label(self) -> str:
        """'dncnn · none (eager) · fp32 · cpu, 2 ranks'."""
        ranks = int(self.attrs["ranks"])
        unit = "rank" if gpu_type(self.gpu) == "cpu" else "GPU"
        parts = [str(self.attrs.get("architecture") or "?"), f"{self.mode} ({self.backend})"]
        if self.precision:
            parts.append(self.precision)
        parts.append(f"{gpu_type(self.gpu)}, {ranks} {unit}{'s' if ranks > 1 else ''}")
        return " · ".join(parts)


def last_finite(values) -> tuple[float, int]:
    """(last finite value, its 1-based iteration); (nan, 0) when there is none."""
    if values is None:
        return math.nan, 0
    v = np.asarray(values, dtype=np.float64).ravel()
    idx = np.flatnonzero(np.isfinite(v))
    return (float(v[idx[-1]]), int(idx[-1]) + 1) if idx.size else (math.nan, 0)


def config_precision(config) -> str | None:
    """The denoiser precision ([denoiser] precision) of a config TOML text, or None."""
    if not config:
        return None
    if tomllib is not None:
        try:
            value = tomllib.loads(str(config)).get("denoiser", {}).get("precision")
            return str(value) if value is not None else None
        except tomllib.TOMLDecodeError:
            pass
    section = re.search(r"^\[denoiser\]\s*$(.*?)(?=^\[|\Z)", str(config), re.M | re.S)
    m = section and re.search(r"^\s*precision\s*=\s*['\"]([^'\"]*)['\"]", section.group(1), re.M)
    return m.group(1) if m else None


def _image_dataset(f: h5py.File, name: str, path, ndim: int = 2) -> h5py.Dataset:
    d = f[name]
    if not isinstance(d, h5py.Dataset):
        raise SchemaError(f"{path}: '{name}' is not a dataset")
    if d.ndim != ndim or d.dtype.kind not in "fiu":
        want = "[N, N] image" if ndim == 2 else "[slices, N, N] volume (the reconstruction figure draws 2D images)"
        raise SchemaError(f"{path}: {name} is {d.dtype} {list(d.shape)}, expected a numeric {want}")
    return d


def _metric(f: h5py.File, name: str):
    if name not in f or not isinstance(f[name], h5py.Dataset):
        return None
    return np.atleast_1d(np.asarray(f[name][()], dtype=np.float64))


def read_image(path, ndim: int = 2) -> ReconImage:
    """Checks a pnp_recon file and reads what the reconstruction figure needs but the images:
    a file of another program, or without a numeric /reconstruction of `ndim` dimensions (2:
    an image, 3: a volume), is a SchemaError."""
    path = Path(path)
    f, attrs = _open_checked(path, "pnp_recon", schema.RECON_ROOT_ATTRS)
    with f:
        if "reconstruction" not in f:
            raise SchemaError(f"{path}: missing dataset '/reconstruction' (see docs/output_schema.md)")
        rec = _image_dataset(f, "reconstruction", path, ndim)
        has_gt = "ground_truth" in f
        if has_gt:
            gt = _image_dataset(f, "ground_truth", path, ndim)
            if gt.shape != rec.shape:
                raise SchemaError(f"{path}: /ground_truth is {list(gt.shape)} but /reconstruction "
                                  f"is {list(rec.shape)}")
        return ReconImage(path=path, attrs=attrs, shape=tuple(int(s) for s in rec.shape),
                          has_ground_truth=has_gt, psnr=_metric(f, "/metrics/psnr"),
                          ssim=_metric(f, "/metrics/ssim"),
                          precision=config_precision(attrs.get("config")))


def read_images(paths: Iterable, ndim: int = 2) -> list[ReconImage]:
    images = [read_image(p, ndim) for p in paths]
    if not images:
        raise SchemaError("no pnp_recon " + ("files" if ndim == 2 else "volume files") + " given")
    return images


def one_per_run(paths: Iterable) -> list:
    """The first of each group of repetitions (same GPU, ranks, mode, backend, architecture,
    precision and image size), in the given order: what `all` draws."""
    seen, out = set(), []
    for p in paths:
        key = read_image(p).run_key
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


# --- reading the images, bounded -----------------------------------------------------

def display_factor(shape, max_px: int = MAX_DISPLAY_PX) -> int:
    """The block size that brings the longer side to at most max_px pixels (1 = full size)."""
    return max(1, math.ceil(max(shape) / max_px))


def zoom_box(shape, zoom: float = ZOOM, max_px: int = MAX_ZOOM_PX) -> tuple[int, int, int, int]:
    """(r0, r1, c0, c1), half-open: the centred square whose side is `zoom` of the shorter
    side, at most max_px."""
    n0, n1 = shape
    s = max(1, min(n0, n1, max_px, round(min(n0, n1) * zoom)))
    r0, c0 = (n0 - s) // 2, (n1 - s) // 2
    return r0, r0 + s, c0, c0 + s


def block_mean(a: np.ndarray, factor: int) -> np.ndarray:
    """Means of factor x factor blocks (the last row / column of blocks may be partial)."""
    a = np.asarray(a, dtype=np.float64)
    if factor == 1:
        return a.copy()
    r, c = np.arange(0, a.shape[0], factor), np.arange(0, a.shape[1], factor)
    sums = np.add.reduceat(np.add.reduceat(a, r, axis=0), c, axis=1)
    counts = np.outer(np.diff(np.append(r, a.shape[0])), np.diff(np.append(c, a.shape[1])))
    return sums / counts


@dataclass
class Scan:
    """One file's images as shown, and full-resolution statistics."""
    factor: int
    box: tuple
    shown: dict      # panel label -> block-mean image (float32)
    zoom: dict       # panel label -> full-resolution box (float32)
    stats: dict      # rmse, max_abs_error, min/max of reconstruction and truth


def scan(image: ReconImage, max_px: int = MAX_DISPLAY_PX, zoom: float = ZOOM,
         box=None) -> Scan:
    """Reads one file's images in row strips: their block means (factor from max_px), the
    inset box at full resolution, and min/max/RMSE over every pixel. The error is computed in
    float64 from the float32 images, strip by strip."""
    factor = display_factor(image.shape, max_px)
    box = tuple(int(b) for b in (box or zoom_box(image.shape, zoom)))
    r0, r1, c0, c1 = box
    n0, n1 = image.shape
    if not (0 <= r0 < r1 <= n0 and 0 <= c0 < c1 <= n1):
        raise ValueError(f"{image.path}: zoom box {list(box)} is outside the {n0}x{n1} image")
    names = PANELS if image.has_ground_truth else PANELS[:1]
    out_shape = (math.ceil(n0 / factor), math.ceil(n1 / factor))
    shown = {k: np.empty(out_shape, dtype=np.float32) for k in names}
    step = factor * max(1, STRIP_BYTES // (8 * n1 * factor))
    stats = {"recon_min": math.inf, "recon_max": -math.inf, "truth_min": math.nan,
             "truth_max": math.nan, "sum_sq_error": 0.0, "max_abs_error": math.nan}
    if image.has_ground_truth:
        stats.update(truth_min=math.inf, truth_max=-math.inf, max_abs_error=0.0)
    with h5py.File(image.path, "r") as f:
        rec_d = f["reconstruction"]
        gt_d = f["ground_truth"] if image.has_ground_truth else None
        for s0 in range(0, n0, step):
            s1 = min(s0 + step, n0)
            rows = slice(s0 // factor, math.ceil(s1 / factor))
            rec = np.asarray(rec_d[s0:s1], dtype=np.float64)
            shown["reconstruction"][rows] = block_mean(rec, factor)
            stats["recon_min"] = min(stats["recon_min"], float(rec.min()))
            stats["recon_max"] = max(stats["recon_max"], float(rec.max()))
            if gt_d is None:
                continue
            gt = np.asarray(gt_d[s0:s1], dtype=np.float64)
            shown["ground truth"][rows] = block_mean(gt, factor)
            stats["truth_min"] = min(stats["truth_min"], float(gt.min()))
            stats["truth_max"] = max(stats["truth_max"], float(gt.max()))
            rec -= gt                                   # now the error, in place
            shown["error"][rows] = block_mean(rec, factor)
            stats["sum_sq_error"] += float(np.sum(rec * rec))
            stats["max_abs_error"] = max(stats["max_abs_error"], float(np.max(np.abs(rec))))
            del rec, gt
        zoomed = {"reconstruction": np.asarray(rec_d[r0:r1, c0:c1], dtype=np.float32)}
        if gt_d is not None:
            zoomed["ground truth"] = np.asarray(gt_d[r0:r1, c0:c1], dtype=np.float32)
            zoomed["error"] = (zoomed["reconstruction"].astype(np.float64)
                               - zoomed["ground truth"]).astype(np.float32)
    sse = stats.pop("sum_sq_error")
    stats["rmse"] = math.sqrt(sse / (n0 * n1)) if image.has_ground_truth else math.nan
    return Scan(factor=factor, box=box, shown=shown, zoom=zoomed, stats=stats)


# --- the table and the figure --------------------------------------------------------

def reconstruction_table(images: list[ReconImage], max_px: int = MAX_DISPLAY_PX,
                         zoom: float = ZOOM) -> list[dict]:
    """One row per file: its label, the final PSNR and SSIM (last finite values, NaN when
    absent), full-resolution error statistics, and how the figure shows it."""
    rows = []
    for im in images:
        s = scan(im, max_px, zoom)
        psnr, psnr_it = last_finite(im.psnr)
        ssim, ssim_it = last_finite(im.ssim)
        r0, r1, c0, c1 = s.box
        rows.append({
            "file": str(im.path), "label": im.label(), "gpu": im.gpu,
            "ranks": int(im.attrs["ranks"]), "compile_mode": im.mode,
            "compile_backend": im.backend, "architecture": im.attrs.get("architecture") or "",
            "precision": im.precision or "", "rows": im.shape[0], "cols": im.shape[1],
            "ground_truth": im.has_ground_truth,
            "final_psnr_db": psnr, "psnr_iteration": psnr_it,
            "final_ssim": ssim, "ssim_iteration": ssim_it,
            "rmse": s.stats["rmse"], "max_abs_error": s.stats["max_abs_error"],
            "recon_min": s.stats["recon_min"], "recon_max": s.stats["recon_max"],
            "truth_min": s.stats["truth_min"], "truth_max": s.stats["truth_max"],
            "display_factor": s.factor, "zoom_r0": r0, "zoom_r1": r1, "zoom_c0": c0, "zoom_c1": c1,
        })
    return rows


def metrics_text(psnr: float, psnr_it: int, ssim: float, ssim_it: int, iterations: int) -> str:
    """'PSNR 31.62 dB · SSIM 0.9123', naming the iteration of a value that is not the last."""
    parts = []
    for name, v, it, fmt in (("PSNR", psnr, psnr_it, "{:.2f} dB"), ("SSIM", ssim, ssim_it, "{:.4f}")):
        if math.isfinite(v):
            parts.append(f"{name} {fmt.format(v)}" + (f" (it. {it})" if it and it != iterations else ""))
    return " · ".join(parts) if parts else "no PSNR / SSIM in the file"


def _panel(ax, shown, zoomed, box, n_shape, factor, cmap, vmin, vmax, edge, title, label):
    """The block-mean image in full-resolution pixel coordinates, the full-resolution box in
    an inset (upper right corner) and the box outlined on the panel."""
    n0, n1 = n_shape
    h, w = shown.shape
    ax.set_label(label)
    im = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest",
                   extent=(-0.5, w * factor - 0.5, h * factor - 0.5, -0.5))
    ax.set_xlim(-0.5, n1 - 0.5)
    ax.set_ylim(n0 - 0.5, -0.5)
    ax.set_xticks([])
    ax.set_yticks([])
    r0, r1, c0, c1 = box
    ins = ax.inset_axes([0.61, 0.61, 0.38, 0.38], label="zoom")
    ins.imshow(zoomed, cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest",
               extent=(c0 - 0.5, c1 - 0.5, r1 - 0.5, r0 - 0.5))
    ins.set_xlim(c0 - 0.5, c1 - 0.5)
    ins.set_ylim(r1 - 0.5, r0 - 0.5)
    ins.set_xticks([])
    ins.set_yticks([])
    for sp in ins.spines.values():
        sp.set_edgecolor(edge)
        sp.set_linewidth(1.2)
    ax.indicate_inset_zoom(ins, edgecolor=edge, alpha=0.9, linewidth=1.0)
    ax.set_title(title, fontsize=8.5)
    return im


def plot_reconstruction(files_or_rows, max_px: int = MAX_DISPLAY_PX, zoom: float = ZOOM,
                        box=None) -> Figure:
    """The reconstruction figure of pnp_recon files (paths) or of the rows of
    :func:`reconstruction_table`: one row per file, 3 panels (reconstruction, ground truth,
    error) or 1 (no ground truth). Size: :func:`figure_size_px` (n files, 3 if any file has a
    ground truth else 1). `box` = (r0, r1, c0, c1) replaces the centred zoom box."""
    items = list(files_or_rows)
    if not items:
        raise ValueError("reconstruction: no files given")
    paths = [r["file"] if isinstance(r, dict) else r for r in items]
    images = read_images(paths)
    scans = [scan(im, max_px, zoom, box) for im in images]
    n_cols = 3 if any(im.has_ground_truth for im in images) else 1
    w_px, h_px = figure_size_px(len(images), n_cols)
    fig = Figure(figsize=(w_px / DPI, h_px / DPI), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(images), n_cols, squeeze=False)

    # One grey scale: the ground truths' range, else the reconstructions' (1st-99th percentile
    # of the shown pixels); one symmetric error scale over all rows.
    truths = [s for s in scans if "ground truth" in s.shown]
    if truths:
        vmin = min(s.stats["truth_min"] for s in truths)
        vmax = max(s.stats["truth_max"] for s in truths)
    else:
        allrec = np.concatenate([s.shown["reconstruction"].ravel() for s in scans])
        vmin, vmax = (float(v) for v in np.nanpercentile(allrec, [1, 99]))
    if not vmax > vmin:
        vmin, vmax = vmin - 0.5, vmax + 0.5
    err_lim = 0.0
    for s in truths:
        e = np.abs(np.concatenate([s.shown["error"].ravel(), s.zoom["error"].ravel()]))
        err_lim = max(err_lim, float(np.nanpercentile(e, ERROR_PERCENTILE)))
    err_lim = err_lim if err_lim > 0 else 1e-6

    column = {name: [] for name in PANELS[:n_cols]}
    artists, over = {}, False
    for i, (row_axes, im, s) in enumerate(zip(axes, images, scans)):
        psnr, psnr_it = last_finite(im.psnr)
        ssim, ssim_it = last_finite(im.ssim)
        iterations = max(len(im.psnr) if im.psnr is not None else 0,
                         len(im.ssim) if im.ssim is not None else 0)
        size = f"{im.shape[0]}²" if im.shape[0] == im.shape[1] else f"{im.shape[0]}×{im.shape[1]}"
        shown_as = f", shown {s.factor}×{s.factor}-averaged" if s.factor > 1 else ""
        titles = {
            "reconstruction": f"{im.path.name} · {size}{shown_as}\n{im.label()}\n"
                              f"{metrics_text(psnr, psnr_it, ssim, ssim_it, iterations)}",
            "ground truth": "ground truth\n"
                            f"zoom: [{s.box[0]}:{s.box[1]}, {s.box[2]}:{s.box[3]}] at full resolution",
            "error": f"error: reconstruction − ground truth\n"
                     f"RMSE {s.stats['rmse']:.4g} · max |error| {s.stats['max_abs_error']:.4g}",
        }
        for j, ax in enumerate(row_axes):
            if j >= len(s.shown):
                ax.remove()
                continue
            name = PANELS[j]
            err = name == "error"
            cmap = ERROR_CMAP if err else GREY
            lo, hi = (-err_lim, err_lim) if err else (vmin, vmax)
            artists[name] = _panel(ax, s.shown[name], s.zoom[name], s.box, im.shape, s.factor,
                                   cmap, lo, hi, "black" if err else "tab:orange", titles[name], name)
            column[name].append((i, ax))
            over |= err and s.stats["max_abs_error"] > err_lim

    # One colour bar per column, spanning its rows: the scale is the same in every row.
    for name, cells in column.items():
        if not cells:
            continue
        err = name == "error"
        rows_spanned = cells[-1][0] - cells[0][0] + 1   # the bar is as long as its rows
        cb = fig.colorbar(artists[name], ax=[ax for _, ax in cells], fraction=0.046, pad=0.02,
                          aspect=20 * rows_spanned, shrink=0.95 if rows_spanned > 1 else 0.9,
                          extend="both" if err and over else "neither")
        cb.ax.tick_params(labelsize=7)
        cb.set_label(f"error (limits ±{ERROR_PERCENTILE:g}th percentile of |error|)" if err
                     else "attenuation per pixel", fontsize=7)
    return fig


def reconstruction_panels(fig: Figure) -> list:
    """The main panels of a reconstruction figure (no insets, no colour bars), row by row."""
    return [ax for ax in fig.axes if ax.get_label() in PANELS]
