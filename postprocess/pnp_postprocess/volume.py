"""The volume figure: orthogonal slices through a pnp_recon volume, its ground truth and the error.

A volume (``/reconstruction`` [slices, N, N], chunked by slice) is shown by its three central
planes: axial (one slice, z), coronal (every slice at the central row, y) and sagittal (every
slice at the central column, x), as rows, each with the ground truth and the error
(reconstruction − truth) beside it when the file has one. Coronal and sagittal planes are drawn
with their physical aspect: pnp's slices of a volume of S slices and N x N pixels span the same
height as the image's width, so one slice is N / S pixels tall. The planes are h5py slices: the
axial one reads one chunk; the other two read each slice's chunk once, never the volume at once.
"""
from __future__ import annotations

import math
from typing import Iterable

import h5py
import numpy as np
from matplotlib.figure import Figure

from .images import DPI, ERROR_CMAP, ERROR_PERCENTILE, GREY, ReconImage, last_finite, read_images

VIEWS = ("axial", "coronal", "sagittal")
PANEL_IN = 3.6


def is_volume(path) -> bool:
    """True for a pnp_recon file whose /reconstruction is 3D."""
    try:
        with h5py.File(path, "r") as f:
            d = f.get("reconstruction")
            return isinstance(d, h5py.Dataset) and d.ndim == 3
    except OSError:
        return False


def read_volumes(paths: Iterable) -> list[ReconImage]:
    """Checks pnp_recon volume files and reads what the figure needs but the data (shapes
    (slices, rows, cols)); a 2D file, or another program's, is a SchemaError."""
    return read_images(paths, ndim=3)


def planes(vol: ReconImage) -> dict:
    """view -> (index, {"reconstruction": plane, "ground truth": plane, "error": plane}) in float64."""
    s, n0, n1 = vol.shape
    where = {"axial": (s // 2, np.s_[s // 2, :, :]), "coronal": (n0 // 2, np.s_[:, n0 // 2, :]),
             "sagittal": (n1 // 2, np.s_[:, :, n1 // 2])}
    out = {}
    with h5py.File(vol.path, "r") as f:
        for view, (index, sl) in where.items():
            p = {"reconstruction": np.asarray(f["reconstruction"][sl], np.float64)}
            if vol.has_ground_truth:
                p["ground truth"] = np.asarray(f["ground_truth"][sl], np.float64)
                p["error"] = p["reconstruction"] - p["ground truth"]
            out[view] = (index, p)
    return out


def orthogonal_table(vols: list[ReconImage]) -> list[dict]:
    """One row per file and view: the plane's index, its RMSE and PSNR against the truth (data
    range: the truth plane's), and the run's final PSNR and SSIM (over the whole volume)."""
    rows = []
    for v in vols:
        psnr, _ = last_finite(v.psnr)
        ssim, _ = last_finite(v.ssim)
        for view, (index, p) in planes(v).items():
            rmse = plane_psnr = math.nan
            if v.has_ground_truth:
                rmse = float(np.sqrt(np.mean(p["error"] ** 2)))
                rng = float(p["ground truth"].max() - p["ground truth"].min())
                plane_psnr = 20 * math.log10(rng / rmse) if rmse > 0 and rng > 0 else math.inf
            rows.append({"file": str(v.path), "label": v.label(), "slices": v.shape[0], "rows": v.shape[1],
                         "cols": v.shape[2], "view": view, "index": index, "plane_rmse": rmse,
                         "plane_psnr_db": plane_psnr, "final_psnr_db": psnr, "final_ssim": ssim})
    return rows


def plot_orthogonal(files_or_rows) -> Figure:
    """Per file, three rows (axial, coronal, sagittal) of reconstruction, ground truth and error;
    one grey scale (the truths' range) and one symmetric error scale (±99.5th percentile)."""
    paths = list(dict.fromkeys(r["file"] if isinstance(r, dict) else str(r) for r in files_or_rows))
    vols = read_volumes(paths)
    data = [planes(v) for v in vols]
    n_cols = 3 if any(v.has_ground_truth for v in vols) else 1
    fig = Figure(figsize=(PANEL_IN * n_cols, PANEL_IN * 3 * len(vols)), dpi=DPI, layout="constrained")
    axes = fig.subplots(3 * len(vols), n_cols, squeeze=False)
    truths = [p["ground truth"] for d in data for _, p in d.values() if "ground truth" in p]
    shown = truths or [p["reconstruction"] for d in data for _, p in d.values()]
    vmin, vmax = min(float(t.min()) for t in shown), max(float(t.max()) for t in shown)
    errs = [np.abs(p["error"]).ravel() for d in data for _, p in d.values() if "error" in p]
    elim = float(np.percentile(np.concatenate(errs), ERROR_PERCENTILE)) if errs else 1.0
    elim = elim if elim > 0 else 1e-6
    for i, (v, d) in enumerate(zip(vols, data)):
        s, n0, _ = v.shape
        psnr, _ = last_finite(v.psnr)
        ssim, _ = last_finite(v.ssim)
        for j, view in enumerate(VIEWS):
            index, p = d[view]
            for k, name in enumerate(("reconstruction", "ground truth", "error")[:n_cols]):
                ax = axes[3 * i + j][k]
                ax.set_xticks([])
                ax.set_yticks([])
                if name not in p:
                    ax.remove()
                    continue
                err = name == "error"
                aspect = 1.0 if view == "axial" else n0 / s  # one slice is N / S pixels tall
                im = ax.imshow(p[name], cmap=ERROR_CMAP if err else GREY, vmin=-elim if err else vmin,
                               vmax=elim if err else vmax, interpolation="nearest", aspect=aspect)
                title = f"{view} ({'z' if view == 'axial' else 'y' if view == 'coronal' else 'x'} = {index}): {name}"
                if j == 0 and k == 0:
                    title = (f"{v.path.name} · {s} × {v.shape[1]}²\n{v.label()}\n"
                             f"PSNR {psnr:.2f} dB · SSIM {ssim:.4f}\n" + title)
                ax.set_title(title, fontsize=8)
                ax.set_label(f"{view} {name}")
                if j == 2:
                    cb = fig.colorbar(im, ax=[axes[3 * i + jj][k] for jj in range(3)], fraction=0.046, pad=0.02)
                    cb.ax.tick_params(labelsize=7)
                    cb.set_label("error (±99.5th percentile of |error|)" if err else "attenuation per pixel",
                                 fontsize=7)
    return fig
