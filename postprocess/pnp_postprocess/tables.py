"""The numbers behind each figure, as lists of rows (dicts); each list is also the CSV.

Grouping conventions:
- pnp_recon runs are grouped by RunKey (GPU name, rank count, compile mode, backend);
  repeated runs are separate files and give the mean and the sample standard deviation.
  For compile mode ``none`` the backend is ``eager``.
- The compile speedup of a group is (1-GPU eager stable time) / (the group's time), with the
  1-GPU eager stable time taken from the files with ranks = 1 and compile mode ``none`` on the
  same GPU.
- The denoiser speedup of a sweep row is stable(eager) / stable(compiled) for the same
  (GPU, architecture, shape).
"""
from __future__ import annotations

import math
import re
import sys
from collections import defaultdict

import numpy as np

from . import schema
from .io import BenchFile, ReconRun, RunKey, gpu_type, ridge_point, run_key_sort

STABLE_ITERATIONS = 5
"""Stable = the mean of the last 5 iterations (or timed calls), as in the study."""


def mean_std(values) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof = 1; 0 for a single value)."""
    v = np.asarray(list(values), dtype=np.float64)
    if v.size == 0:
        return math.nan, math.nan
    mean = float(np.mean(v))
    std = float(np.std(v, ddof=1)) if v.size > 1 else 0.0
    return mean, std


def group_runs(runs: list[ReconRun]) -> dict[RunKey, list[ReconRun]]:
    groups: dict[RunKey, list[ReconRun]] = defaultdict(list)
    for r in runs:
        groups[r.key].append(r)
    return {k: groups[k] for k in sorted(groups, key=run_key_sort)}


def _files(runs) -> str:
    return ";".join(r.path.name for r in runs)


def baselines(runs: list[ReconRun]) -> dict[str, float]:
    """The 1-GPU eager stable time (mean over repetitions) per GPU name."""
    out: dict[str, list[float]] = defaultdict(list)
    for r in runs:
        if r.ranks == 1 and r.mode == "none":
            out[r.gpu].append(r.stable_iteration)
    return {g: mean_std(v)[0] for g, v in out.items()}


def compile_speedup(runs: list[ReconRun]) -> list[dict]:
    base = baselines(runs)
    rows = []
    for key, group in group_runs(runs).items():
        first_m, first_s = mean_std(r.first_iteration for r in group)
        stable_m, stable_s = mean_std(r.stable_iteration for r in group)
        compile_m, _ = mean_std(r.compile for r in group)
        b = base.get(key.gpu, math.nan)
        rows.append({
            "gpu": key.gpu, "ranks": key.ranks, "compile_mode": key.mode,
            "compile_backend": key.backend, "repetitions": len(group),
            "first_iteration_mean_s": first_m, "first_iteration_std_s": first_s,
            "stable_iteration_mean_s": stable_m, "stable_iteration_std_s": stable_s,
            "compile_mean_s": compile_m, "baseline_stable_s": b,
            "speedup_first": b / first_m, "speedup_stable": b / stable_m,
            "files": _files(group),
        })
    return rows


def stable_phase_means(run: ReconRun, n: int = STABLE_ITERATIONS) -> dict[str, float]:
    """Per phase (and region): mean over the last n iterations and over ranks; NaN where
    not timed."""
    out = {}
    for p in schema.PHASES + ("total", "wall") + tuple(schema.REGIONS):
        if p not in run.timings:
            out[p] = math.nan
            continue
        t = run.timings[p][-n:]
        out[p] = float(np.nanmean(t)) if np.isfinite(t).any() else math.nan
    return out


def phase_breakdown(runs: list[ReconRun]) -> list[dict]:
    """Mean stable time of each phase per group. Phases that a compiled region runs together
    are not timed apart: where all phases of a region are NaN, the region's own time
    (``region_gradient_s``, ``region_denoise_s``) stands for them, and ``other_s`` is what is
    left of the device total (all of it inside one fused graph)."""
    rows = []
    for key, group in group_runs(runs).items():
        per_run = [stable_phase_means(r) for r in group]
        row = {"gpu": key.gpu, "ranks": key.ranks, "compile_mode": key.mode,
               "compile_backend": key.backend, "repetitions": len(group),
               "iterations_used": min(STABLE_ITERATIONS, min(r.iterations for r in group))}
        for p in schema.PHASES + ("total", "wall") + tuple(schema.REGIONS):
            vals = [m[p] for m in per_run if math.isfinite(m[p])]
            row[f"{p}_s"] = mean_std(vals)[0] if vals else math.nan
        for region, phases in schema.REGIONS.items():
            if any(math.isfinite(row[f"{p}_s"]) for p in phases):
                row[f"{region}_s"] = math.nan   # its phases are timed apart: shown as phases
        attributed = sum(row[f"{p}_s"] for p in schema.PHASES + tuple(schema.REGIONS)
                         if math.isfinite(row[f"{p}_s"]))
        other = row["total_s"] - attributed
        # rounding of a sum of phases is not an unattributed part
        row["other_s"] = (math.nan if not math.isfinite(other)
                          else 0.0 if other <= 1e-6 * row["total_s"] else other)
        row["files"] = _files(group)
        rows.append(row)
    return rows


def psnr_per_iteration(runs: list[ReconRun]) -> list[dict]:
    rows = []
    for key, group in group_runs(runs).items():
        n = max(len(r.psnr) for r in group)
        for i in range(n):
            ps = [r.psnr[i] for r in group if i < len(r.psnr) and math.isfinite(r.psnr[i])]
            rs = [r.residual[i] for r in group if i < len(r.residual) and math.isfinite(r.residual[i])]
            pm, psd = mean_std(ps)
            rm, rsd = mean_std(rs)
            rows.append({"gpu": key.gpu, "ranks": key.ranks, "compile_mode": key.mode,
                         "compile_backend": key.backend, "iteration": i + 1,
                         "repetitions": len(ps), "psnr_mean_db": pm, "psnr_std_db": psd,
                         "residual_mean": rm, "residual_std": rsd})
    return rows


# --- the denoiser sweep --------------------------------------------------------------

def spatial_shape(shape: str) -> tuple[int, ...]:
    """'1x3x512x512' -> (512, 512); '1x3x8x512x512' -> (8, 512, 512)."""
    dims = tuple(int(s) for s in re.split(r"[x×]", shape.strip()) if s)
    return dims[2:] if len(dims) > 2 else dims


def shape_label(shape: str) -> str:
    s = spatial_shape(shape)
    if len(set(s)) == 1 and len(s) in (2, 3):
        return f"{s[0]}{'²' if len(s) == 2 else '³'}"
    return "×".join(str(d) for d in s)


def shape_sort_key(dim: int, shape: str):
    s = spatial_shape(shape)
    # Equal sizes: the cube first (128³ before 8×512×512), as in the study.
    return (dim, int(np.prod(s)) if s else 0, -min(s) if s else 0, s)


def denoiser_speedup(files: list[BenchFile]) -> list[dict]:
    """One row per compiled (GPU, architecture, shape, backend, mode) with an eager baseline."""
    stable = defaultdict(list)
    extra = defaultdict(list)
    for bf in files:
        for r in bf.rows:
            if r["status"] != "ok":
                continue
            k = (r["gpu"], r["architecture"], r["dim"], r["shape"], r["backend"], r["mode"])
            stable[k].append(r["stable_s"])
            extra[k].append(r)
    eager = {}
    for k, v in stable.items():
        if k[4] == "eager":
            eager[k[:4]] = mean_std(v)[0]
    rows = []
    for k in sorted(stable, key=lambda k: (k[0], k[1], shape_sort_key(k[2], k[3]), k[4], k[5])):
        gpu, arch, dim, shape, backend, mode = k
        if backend == "eager":
            continue
        if (gpu, arch, dim, shape) not in eager:
            print(f"pnp_postprocess: no eager row for {arch} {shape} on {gpu}; "
                  f"{backend} speedup left out", file=sys.stderr)
            continue
        e = eager[(gpu, arch, dim, shape)]
        c, c_std = mean_std(stable[k])
        rs = extra[k]
        rows.append({
            "gpu": gpu, "gpu_type": gpu_type(gpu), "architecture": arch, "dim": dim,
            "shape": shape, "backend": backend, "mode": mode, "repetitions": len(rs),
            "eager_stable_s": e, "compiled_stable_s": c, "compiled_stable_std_s": c_std,
            "speedup": e / c,
            "first_call_s": mean_std(r["first_call_s"] for r in rs)[0],
            "compile_s": mean_std(r["compile_s"] for r in rs)[0],
            "flops": rs[0]["flops"], "bytes": rs[0]["bytes"], "intensity": rs[0]["intensity"],
            "ridge_flop_per_byte": ridge_point(gpu) if ridge_point(gpu) is not None else math.nan,
        })
    return rows


PEER_BACKENDS = ("torch_compile", "torch_compile_max_autotune")
"""The sweep's peer arms: deepinv's own modules under torch.compile (default, max-autotune)."""


def peer_speedup(files: list[BenchFile]) -> list[dict]:
    """The study's comparison: per (GPU, architecture, shape), pnp native's stable time against
    the better of the torch.compile arms that finished, with both compile times. A peer arm that
    was cut off by its time cap is named in ``peer_capped``."""
    groups = defaultdict(lambda: defaultdict(list))
    capped = defaultdict(list)
    for bf in files:
        for r in bf.rows:
            k = (r["gpu"], r["architecture"], r["dim"], r["shape"])
            if r["status"] == "ok":
                groups[k][r["backend"]].append(r)
            elif r["backend"] in PEER_BACKENDS and str(r["reason"]).startswith("time cap"):
                capped[k].append(r["backend"])
    rows = []
    for k in sorted(groups, key=lambda k: (k[0], k[1], shape_sort_key(k[2], k[3]))):
        by = groups[k]
        peers = {b: mean_std(r["stable_s"] for r in by[b])[0] for b in PEER_BACKENDS if b in by}
        if "native" not in by or not peers:
            continue
        best = min(peers, key=peers.get)
        native = mean_std(r["stable_s"] for r in by["native"])[0]
        gpu, arch, dim, shape = k
        rows.append({
            "gpu": gpu, "gpu_type": gpu_type(gpu), "architecture": arch, "dim": dim, "shape": shape,
            "native_stable_s": native, "peer_backend": best, "peer_stable_s": peers[best],
            "speedup": peers[best] / native,
            "native_compile_s": mean_std(r["compile_s"] for r in by["native"])[0],
            "peer_compile_s": mean_std(r["compile_s"] for r in by[best])[0],
            "peer_module": by[best][0].get("module", ""),
            "peer_capped": ",".join(sorted(set(capped[k]))),
        })
    return rows


def roofline(files: list[BenchFile]) -> list[dict]:
    keep = ("gpu", "gpu_type", "architecture", "dim", "shape", "backend", "mode", "flops",
            "bytes", "intensity", "ridge_flop_per_byte", "speedup")
    rows = []
    for r in denoiser_speedup(files):
        row = {k: r[k] for k in keep}
        ridge = r["ridge_flop_per_byte"]
        row["bound"] = ("unknown" if not math.isfinite(ridge)
                        else "memory" if r["intensity"] < ridge else "compute")
        rows.append(row)
    return rows
