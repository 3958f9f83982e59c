"""Schema-exact pnp output files for the tests (docs/output_schema.md), written with h5py.

`write_recon` and `write_bench` write one file each with every root attribute, every dataset,
and `units` + `description` on each dataset, exactly as pnp_recon and pnp_bench do. The
session fixtures `study_files` and `sweep_files` hold a whole study: 1 and 2 GPUs x the four
compile modes x 3 repetitions on an H100 (plus a 1-GPU A100 eager/pre pair), and a denoiser
sweep on an A100 and an H100.
"""
from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[2]
PHASES = ("forward_projection", "allreduce", "backprojection", "step", "halo_exchange",
          "denoise", "clamp")
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
H200 = "NVIDIA H200"
STR = h5py.string_dtype("utf-8")


def _dataset(f, path, data, units, description, dtype=None):
    d = f.create_dataset(path, data=data, dtype=dtype)
    d.attrs["units"] = units
    d.attrs["description"] = description
    return d


def _root_attrs(f, program, ranks, gpu, mode, backend, architecture, config, device="cuda"):
    f.attrs["program"] = program
    f.attrs["version"] = "0.1.0"
    f.attrs["git_commit"] = "0123456789abcdef0123456789abcdef01234567"
    f.attrs["date"] = "2026-11-29T10:00:00Z"
    f.attrs["host"] = "node042"
    f.attrs["ranks"] = np.int64(ranks)
    f.attrs["gpu_names"] = ",".join([gpu] * ranks)
    f.attrs["torch_version"] = "2.11.0"
    f.attrs["cuda_version"] = "13.0" if gpu != "cpu" else "none"
    f.attrs["nccl_version"] = "2.27.7" if gpu != "cpu" else "none"
    f.attrs["config"] = config
    f.attrs["compile_mode"] = mode
    f.attrs["compile_backend"] = backend
    f.attrs["architecture"] = architecture
    f.attrs["device"] = device if gpu != "cpu" else "cpu"
    f.attrs["comm_backend"] = ("nccl" if gpu != "cpu" else "mpi") if ranks > 1 else "mpi"
    f.attrs["step"] = np.float64(2.2e-5)
    f.attrs["graphs_captured"] = np.int64(mode in ("post", "fused") and gpu != "cpu")
    f.attrs["tf32"] = np.int64(1)
    f.attrs["power_iterations"] = np.int64(37)
    f.attrs["power_converged"] = np.int64(1)
    f.attrs["angles"] = "simulated: 100 angles evenly spaced over [0, 180) degrees"


def phase_profile(mode: str, ranks: int, stable: float) -> dict:
    """Stable phase times (s) per iteration for a run whose stable iteration is `stable`."""
    share = {"forward_projection": 0.12, "allreduce": 0.02 if ranks > 1 else 0.0,
             "backprojection": 0.12, "step": 0.01, "halo_exchange": 0.03 if ranks > 1 else 0.0,
             "denoise": 0.68, "clamp": 0.01}
    total = sum(share.values())
    return {p: stable * s / total for p, s in share.items()}


def write_recon(path, *, ranks=1, mode="none", backend="native", gpu=H100, n=64,
                iterations=10, first=2.0, stable=0.5, compile_s=0.0, psnr0=18.0,
                with_ground_truth=True, phases_timed=None, seed=0) -> Path:
    """One pnp_recon output. Iteration 1 takes `first` s, the others about `stable` s, and
    /timings/stable_iteration is exactly the mean of the last 5 wall times (max over ranks).
    As pnp_recon does, iterations replayed as a CUDA graph (post and fused, from iteration 2)
    have NaN inner phases; the two regions are timed in every mode except inside a fused graph."""
    rng = np.random.default_rng(seed)
    path = Path(path)
    config = (f'[problem]\nsize = {n}\nangles = 100\n[compile]\nmode = "{mode}"\n'
              f'backend = "{backend}"\n[distributed]\nhalo = 0\n')
    if phases_timed is None:
        phases_timed = mode in ("none", "pre")
    wall = stable * (1 + 0.02 * rng.standard_normal((iterations, ranks)))
    wall[0, :] = first * (1 + 0.01 * rng.standard_normal(ranks))
    prof = phase_profile(mode, ranks, stable)
    with h5py.File(path, "w") as f:
        _root_attrs(f, "pnp_recon", ranks, gpu, mode, backend, "drunet", config)
        x, y = np.meshgrid(np.linspace(-1, 1, n), np.linspace(-1, 1, n))
        gt = ((x ** 2 / 0.5 + y ** 2 / 0.8) < 1).astype(np.float32)
        _dataset(f, "/reconstruction", gt + 0.01 * rng.standard_normal(gt.shape).astype(np.float32),
                 "attenuation per pixel", "final image")
        if with_ground_truth:
            _dataset(f, "/ground_truth", gt, "attenuation per pixel", "phantom of the input")
        total = np.zeros((iterations, ranks))
        region_t = {"region_gradient": np.zeros((iterations, ranks)),
                    "region_denoise": np.zeros((iterations, ranks))}
        for p in PHASES:
            t = prof[p] * (wall / stable) * 0.95
            t[0, :] = prof[p] * 0.95
            total += t
            region_t["region_gradient" if p in PHASES[:4] else "region_denoise"] += t
            if not phases_timed:
                t[1:] = np.nan
            _dataset(f, f"/timings/{p}", t, "s", f"device-event time of {p} per iteration and rank")
        _dataset(f, "/timings/total", total, "s", "device-event time of the iteration")
        for name, t in region_t.items():
            if mode == "fused":
                t[1:] = np.nan
            _dataset(f, f"/timings/{name}", t, "s", f"{name}: the phases of the region timed as one")
        _dataset(f, "/timings/wall", wall, "s", "host wall time of each iteration")
        per_it = wall.max(axis=1)
        _dataset(f, "/timings/first_iteration", float(per_it[0]), "s",
                 "wall time of iteration 1 incl. setup, warm-up and compile (max over ranks)")
        _dataset(f, "/timings/stable_iteration", float(np.mean(per_it[-5:])), "s",
                 "mean wall time of the last 5 iterations (max over ranks)")
        _dataset(f, "/timings/compile", float(compile_s), "s", "compile cost (max over ranks)")
        _dataset(f, "/memory/peak_bytes", np.full(ranks, 2 ** 30 // ranks, dtype=np.int64), "B",
                 "peak device memory of each rank")
        for p in PHASES:
            _dataset(f, f"/memory/phase_peak_bytes/{p}",
                     np.full(ranks, 2 ** 29 // ranks, dtype=np.int64), "B",
                     f"peak device memory during {p}, over all iterations")
        _dataset(f, "/communication/bytes_per_iteration",
                 np.full(ranks, 0.0 if ranks == 1 else 4.0 * (2 * 100 * 1.5 * n + 2 * 190 * n)),
                 "B", "halo-exchange and allreduce payload sent by each rank per iteration")
        it = np.arange(1, iterations + 1)
        psnr = psnr0 + 12 * (1 - np.exp(-it / 3)) + 0.05 * rng.standard_normal(iterations)
        residual = 0.5 * np.exp(-it / 2.5) + 0.01
        if not with_ground_truth:
            psnr[:] = np.nan
        _dataset(f, "/metrics/psnr", psnr, "dB", "PSNR against the ground truth")
        _dataset(f, "/metrics/residual", residual, "1", "relative residual ||Ax - y|| / ||y||")
        rows = np.linspace(0, n, ranks + 1).astype(np.int64)
        boxes = np.array([[rows[r], rows[r + 1], 0, n] for r in range(ranks)], dtype=np.int64)
        _dataset(f, "/decomposition/boxes", boxes, "px", "owned tile of each rank: r0, r1, c0, c1")
        _dataset(f, "/decomposition/halo", np.int64(190 if ranks > 1 else 0), "px", "halo width")
        f["/decomposition"].attrs["kind"] = "slabs"
    return path


SHAPES = [(2, "1x3x512x512"), (2, "1x3x1024x1024"), (2, "1x3x2048x2048"),
          (3, "1x3x128x128x128"), (3, "1x3x8x512x512"), (3, "1x3x16x512x512")]
# (flops per voxel, bytes per voxel) of each architecture, 2D; 3D kernels are 3x heavier.
ARCH_COUNTS = {"dncnn": (1.33e6, 19.5e3), "drunet": (4.24e6, 23.0e3), "unet": (1.9e6, 52.0e3)}


def bench_rows(gpu, speed=1.0, skip=(), seed=0) -> list[dict]:
    """Rows of a sweep: eager, native and the two torch.compile arms for every architecture and
    shape on `gpu` (max-autotune cut off by its time cap on the 3-D rows)."""
    rng = np.random.default_rng(seed)
    rows = []
    for arch, (fpv, bpv) in ARCH_COUNTS.items():
        for dim, shape in SHAPES:
            vox = math.prod(int(s) for s in shape.split("x")[2:])
            flops = fpv * vox * (3 if dim == 3 else 1)
            nbytes = bpv * vox + 4.0e7  # + weights, read once per call
            eager = flops / (40e12 * speed) + nbytes / (1.2e12 * speed)
            intensity = flops / nbytes
            # Compiling wins most on small, memory-bound inputs (launch overhead, fusion).
            native = eager / (1.3 + 2.5 / (1 + intensity / 100) + 0.3 / (1 + vox / 1e6)
                              + 0.1 * rng.random())
            # the peer: deepinv under torch.compile, a little slower than native; max-autotune
            # is cut off by its time cap on the 3-D rows
            arms = (("eager", "none", eager), ("native", "pre", native),
                    ("torch_compile", "pre", native * 1.15), ("torch_compile_max_autotune", "pre", native * 1.1))
            for backend, mode, t in arms:
                skipped = (arch, shape) in skip
                capped = backend == "torch_compile_max_autotune" and dim == 3 and not skipped
                peer = backend.startswith("torch_compile")
                rows.append({
                    "architecture": arch, "dim": dim, "shape": shape, "backend": backend,
                    "mode": mode, "gpu": gpu, "status": "skipped" if skipped or capped else "ok",
                    "reason": "out of memory" if skipped else
                              "time cap: torch.compile (max-autotune) did not finish within 300.00 s" if capped else "",
                    "first_call_s": math.nan if skipped or capped else t * (3 if backend == "eager" else 300 if peer else 60),
                    "compile_s": math.nan if skipped or capped else (0.0 if backend == "eager" else t * (295 if peer else 55)),
                    "export_s": math.nan,
                    "stable_s": math.nan if skipped or capped else t,
                    "peak_memory_bytes": 0 if skipped or capped else int(nbytes * 0.3),
                    "cuda_graph": int(backend in ("native", "torch_compile_max_autotune") and not (skipped or capped)),
                    "module": f"deepinv.models.{arch} (deepinv 0.5.0, torch 2.11.0)" if peer else "",
                    "notes": "20 fusions" if backend == "native" and not skipped else "",
                    "flops": flops, "bytes": nbytes, "intensity": intensity})
    return rows


def write_bench(path, rows, *, gpu=H100, mode="pre", backend="native") -> Path:
    """One pnp_bench output holding `rows` as the /results columns."""
    path = Path(path)
    kinds = {"architecture": STR, "dim": np.int64, "shape": STR, "backend": STR, "mode": STR,
             "gpu": STR, "status": STR, "reason": STR, "first_call_s": np.float64,
             "compile_s": np.float64, "export_s": np.float64, "stable_s": np.float64,
             "peak_memory_bytes": np.int64, "cuda_graph": np.int64, "module": STR, "notes": STR,
             "flops": np.float64, "bytes": np.float64, "intensity": np.float64}
    units = {"first_call_s": "s", "compile_s": "s", "export_s": "s", "stable_s": "s", "peak_memory_bytes": "B",
             "flops": "FLOP", "bytes": "B", "intensity": "FLOP/B", "dim": "1", "cuda_graph": "1"}
    with h5py.File(path, "w") as f:
        _root_attrs(f, "pnp_bench", 1, gpu, mode, backend, "dncnn,drunet,unet",
                    '[denoiser]\narchitectures = ["dncnn", "drunet", "unet"]\n')
        f.create_group("results")
        for col, dt in kinds.items():
            _dataset(f, f"/results/{col}", [r[col] for r in rows], units.get(col, ""),
                     f"sweep column {col}", dtype=dt)
    return path


STUDY_TIMES = {  # (ranks, mode): (first, stable) on the H100, seconds
    (1, "none"): (3.1, 0.92), (1, "pre"): (38.0, 0.61), (1, "post"): (55.0, 0.50),
    (1, "fused"): (61.0, 0.47), (2, "none"): (2.2, 0.50), (2, "pre"): (36.0, 0.33),
    (2, "post"): (52.0, 0.27), (2, "fused"): (58.0, 0.25),
}


@pytest.fixture(scope="session")
def study_files(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("study")
    files, seed = [], 0
    for (ranks, mode), (first, stable) in STUDY_TIMES.items():
        for rep in range(3):
            seed += 1
            files.append(write_recon(
                d / f"study_h100_{ranks}g_{mode}_r{rep}.h5", ranks=ranks, mode=mode, gpu=H100,
                first=first * (1 + 0.03 * rep), stable=stable * (1 + 0.01 * rep),
                compile_s=0.0 if mode == "none" else first * 0.9, seed=seed))
    for mode, (first, stable) in (("none", (4.0, 1.6)), ("pre", (47.0, 1.1))):
        seed += 1
        files.append(write_recon(d / f"study_a100_1g_{mode}.h5", ranks=1, mode=mode, gpu=A100,
                                 first=first, stable=stable, seed=seed))
    return files


@pytest.fixture(scope="session")
def sweep_files(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("sweep")
    return [
        write_bench(d / "sweep_h100_1.h5", bench_rows(H100, speed=2.0, seed=1), gpu=H100),
        write_bench(d / "sweep_h100_2.h5", bench_rows(H100, speed=2.05, seed=2), gpu=H100),
        write_bench(d / "sweep_a100.h5",
                    bench_rows(A100, speed=1.0, skip={("unet", "1x3x16x512x512")}, seed=3),
                    gpu=A100),
    ]


@pytest.fixture
def schema_doc() -> str:
    return (REPO / "docs" / "output_schema.md").read_text(encoding="utf-8")


def write_ceilings(path, gpu=H200):
    """A `pnp_bench --ceilings` file as src/benchmark/ceilings.cpp writes it."""
    rows = [("copy", "536870912", "GB/s", 1.1e-3, 3905.0, 0.0),
            ("matmul_tf32", "8192x8192x8192", "TFLOP/s", 2.9e-3, 379.0, 4.1e-4),
            ("matmul_bf16", "8192x8192x8192", "TFLOP/s", 1.6e-3, 690.0, 1.7e-3)]
    with h5py.File(path, "w") as f:
        f.attrs["program"] = "pnp_bench"
        f.attrs["version"] = "0.1.0"
        f.attrs["git_commit"] = "0123456789abcdef0123456789abcdef01234567"
        f.attrs["date"] = "2026-12-01T10:00:00Z"
        f.attrs["host"] = "node042"
        f.attrs["gpu_names"] = gpu
        for k, (name, units, desc) in enumerate([("name", "", "kernel"), ("shape", "", "size"),
                                                 ("unit", "", "unit of rate")]):
            _dataset(f, f"/ceilings/{name}", [r[k] for r in rows], units, desc, dtype=STR)
        for k, (name, units) in enumerate([("seconds", "s"), ("rate", "see unit"), ("error", "1")], start=3):
            _dataset(f, f"/ceilings/{name}", np.array([r[k] for r in rows]), units, name)
    return path


@pytest.fixture(scope="session")
def ceilings_file(tmp_path_factory):
    return write_ceilings(tmp_path_factory.mktemp("ceilings") / "ceilings.h5")


def recon_config(mode="none", backend="native", precision="fp32", n=64) -> str:
    """An effective config as pnp_recon writes it (TOML, single-quoted strings); precision=None
    leaves the key out, as configs before [denoiser] precision existed."""
    prec = f"precision = '{precision}'\n" if precision is not None else ""
    return (f"[problem]\nsize = {n}\nphantom = 'shepp_logan'\n\n[denoiser]\narchitecture = 'drunet'\n"
            f"sigma = 0.01\n{prec}patch_size = 0\n\n[compile]\nmode = '{mode}'\n"
            f"backend = '{backend}'\n\n[distributed]\ngrid = [ 0, 0 ]\n")


def recon_image_data(n, seed=0, scale=1.0):
    """(reconstruction, ground truth) float32 [n, n]: an ellipse phantom (0, 0.3 and 1) and
    the phantom plus noise and a smooth bias, so that errors differ from pixel to pixel."""
    rng = np.random.default_rng(seed)
    x, y = np.meshgrid(np.linspace(-1, 1, n), np.linspace(-1, 1, n))
    gt = np.where(x ** 2 / 0.6 + y ** 2 / 0.85 < 1, 1.0, 0.0)
    gt[(x - 0.1) ** 2 / 0.05 + y ** 2 / 0.1 < 1] = 0.3
    gt = (scale * gt).astype(np.float32)
    rec = (gt + 0.03 * rng.standard_normal((n, n)) + 0.02 * np.sin(5 * x + 3 * y)).astype(np.float32)
    return rec, gt


def write_recon_image(path, *, n=64, mode="none", backend="native", gpu=H100, ranks=1,
                      precision="fp32", with_ground_truth=True, psnr=None, ssim=None,
                      program="pnp_recon", seed=0, scale=1.0, data=None) -> Path:
    """A pnp_recon file with what the reconstruction figure reads: every root attribute,
    /reconstruction, /ground_truth (unless with_ground_truth=False), /metrics/psnr and, unless
    ssim is False (files written before it existed), /metrics/ssim. psnr / ssim: the per-
    iteration values (NaN where not computed); default: a 10-iteration series. `data` =
    (reconstruction, ground truth) replaces the generated images."""
    path = Path(path)
    rec, gt = data if data is not None else recon_image_data(n, seed, scale)
    if psnr is None:
        psnr = np.linspace(24.0, 31.5, 10) if with_ground_truth else np.full(10, np.nan)
    if ssim is None:
        ssim = np.linspace(0.6, 0.9123, 10)
    with h5py.File(path, "w") as f:
        _root_attrs(f, program, ranks, gpu, mode, backend, "drunet",
                    recon_config(mode, backend, precision, rec.shape[0]))
        kw = {"chunks": True} if rec.size > 2 ** 20 else {}
        d = f.create_dataset("/reconstruction", data=rec, dtype=np.float32, **kw)
        d.attrs["units"], d.attrs["description"] = "attenuation per pixel", "final image"
        if with_ground_truth:
            d = f.create_dataset("/ground_truth", data=gt, dtype=np.float32, **kw)
            d.attrs["units"], d.attrs["description"] = "attenuation per pixel", "phantom of the input"
        _dataset(f, "/metrics/psnr", np.asarray(psnr, dtype=np.float64), "dB",
                 "PSNR against the ground truth")
        if ssim is not False:
            _dataset(f, "/metrics/ssim", np.asarray(ssim, dtype=np.float64), "1",
                     "SSIM against the ground truth")
    return path


@pytest.fixture(scope="session")
def recon_image_files(tmp_path_factory) -> dict:
    """Three pnp_recon images of 64²: 'fp32' (eager, PSNR 31.5 and SSIM 0.9123 at the last
    iteration), 'bf16' (pre/inductor, a ground truth of range 0..1.2, metrics computed every
    other iteration so their last finite values are at iteration 9), 'no_truth' (no ground
    truth, PSNR all NaN, no /metrics/ssim)."""
    d = tmp_path_factory.mktemp("recon_images")

    def every_other(last, step):   # computed at iterations 1, 3, ..., 9 (metrics_every = 2)
        return [last - step * (8 - i) if i % 2 == 0 else np.nan for i in range(10)]
    return {
        "fp32": write_recon_image(d / "eager_fp32.h5", seed=1),
        "bf16": write_recon_image(d / "pre_bf16.h5", mode="pre", backend="inductor",
                                  precision="bf16", seed=2, scale=1.2,
                                  psnr=every_other(30.75, 1.0), ssim=every_other(0.8877, 0.01)),
        "no_truth": write_recon_image(d / "no_truth.h5", with_ground_truth=False, ssim=False,
                                      gpu="cpu", ranks=2, seed=3),
    }
