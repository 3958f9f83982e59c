"""Each figure from fixture files: PNG of the expected size and not blank, a PDF, and a CSV
whose numbers equal the input files (read here directly with h5py, not through the package)."""
import statistics
from collections import defaultdict
from pathlib import Path

import h5py
import matplotlib.image as mpimg
import numpy as np
import pytest

from conftest import A100, H100, STUDY_TIMES
from pnp_postprocess import FIGURES, make_figure, read_csv
from pnp_postprocess.figures import figure_size_px
from pnp_postprocess.tables import shape_label

PHASES = ("forward_projection", "allreduce", "backprojection", "step", "halo_exchange",
          "denoise", "clamp")


def check_png(path: Path, size_px):
    assert path.stat().st_size > 10_000
    img = mpimg.imread(path)
    assert (img.shape[1], img.shape[0]) == size_px
    rgb = img[..., :3]
    ink = np.mean(np.any(rgb < 0.9, axis=-1))  # share of pixels that are not (near) white
    assert ink > 0.01, f"{path} is almost blank"
    assert len(np.unique(rgb.reshape(-1, 3), axis=0)) > 50  # colours, text, lines: not flat


def check_pdf(path: Path):
    data = path.read_bytes()
    assert data.startswith(b"%PDF") and len(data) > 5_000


def num(s: str) -> float:
    return float(s)


def h5(path, name):
    with h5py.File(path, "r") as f:
        return f[name][()]


def recon_files_by_name(files):
    return {Path(p).name: Path(p) for p in files}


@pytest.fixture(scope="module")
def out(tmp_path_factory, study_files, sweep_files):
    d = tmp_path_factory.mktemp("figures")
    res = {}
    for name, spec in FIGURES.items():
        if name in ("reconstruction", "scaling", "volume", "memory-budget"):
            # test_reconstruction.py, test_scaling.py, test_volume.py, test_memory.py
            continue
        files = study_files if spec.program == "pnp_recon" else sweep_files
        res[name] = make_figure(name, files, d)
    return res


@pytest.mark.parametrize("name,facets", [("compile-speedup", 2), ("phases", 2), ("psnr", 2),
                                         ("denoiser-speedup", 3), ("roofline", 2), ("peer-speedup", 2)])
def test_png_pdf_csv_exist_and_look_like_figures(out, name, facets):
    o = out[name]
    assert o.png.name == f"{name}.png" and o.csv.parent == o.png.parent
    check_png(o.png, figure_size_px(facets))
    check_pdf(o.pdf)
    assert len(read_csv(o.csv)) == len(o.rows) > 0


def test_compile_speedup_csv_equals_inputs(out, study_files):
    by_name = recon_files_by_name(study_files)
    rows = read_csv(out["compile-speedup"].csv)
    # one row per (GPU, GPU count, mode, backend): 8 on the H100, 2 on the A100
    assert len(rows) == len(STUDY_TIMES) + 2
    base = {}
    for gpu in (H100, A100):
        base[gpu] = statistics.fmean(
            h5(p, "/timings/stable_iteration") for p in study_files
            if h5py.File(p, "r").attrs["gpu_names"] == gpu
            and h5py.File(p, "r").attrs["compile_mode"] == "none")
    for r in rows:
        files = [by_name[n] for n in r["files"].split(";")]
        assert int(r["repetitions"]) == len(files)
        for f in files:
            with h5py.File(f, "r") as h:
                assert h.attrs["compile_mode"] == r["compile_mode"]
                assert int(h.attrs["ranks"]) == int(r["ranks"])
                assert h.attrs["gpu_names"].split(",")[0] == r["gpu"]
        first = [h5(f, "/timings/first_iteration") for f in files]
        stable = [h5(f, "/timings/stable_iteration") for f in files]
        if len(files) == 1:  # a single run: the very numbers of the file
            assert num(r["first_iteration_mean_s"]) == first[0]
            assert num(r["stable_iteration_mean_s"]) == stable[0]
            assert num(r["stable_iteration_std_s"]) == 0.0
        else:
            assert num(r["first_iteration_mean_s"]) == pytest.approx(statistics.fmean(first), rel=1e-14)
            assert num(r["first_iteration_std_s"]) == pytest.approx(statistics.stdev(first), rel=1e-12)
            assert num(r["stable_iteration_mean_s"]) == pytest.approx(statistics.fmean(stable), rel=1e-14)
            assert num(r["stable_iteration_std_s"]) == pytest.approx(statistics.stdev(stable), rel=1e-12)
        b = base[r["gpu"]]
        assert num(r["baseline_stable_s"]) == pytest.approx(b, rel=1e-14)
        assert num(r["speedup_stable"]) == pytest.approx(b / statistics.fmean(stable), rel=1e-12)
        assert num(r["speedup_first"]) == pytest.approx(b / statistics.fmean(first), rel=1e-12)
        if r["compile_mode"] == "none":
            assert r["compile_backend"] == "eager"
    one = [r for r in rows if r["gpu"] == H100 and r["ranks"] == "1" and r["compile_mode"] == "none"]
    assert num(one[0]["speedup_stable"]) == pytest.approx(1.0, rel=1e-14)
    # the 2-GPU fused run is the fastest stable iteration on the H100
    h100 = [r for r in rows if r["gpu"] == H100]
    assert max(h100, key=lambda r: num(r["speedup_stable"]))["compile_mode"] == "fused"


def test_phase_csv_equals_inputs(out, study_files):
    by_name = recon_files_by_name(study_files)
    for r in read_csv(out["phases"].csv):
        files = [by_name[n] for n in r["files"].split(";")]
        for p in PHASES + ("total", "wall"):
            last5 = [h5(f, f"/timings/{p}")[-5:] for f in files]
            per_file = [float(np.nanmean(t)) for t in last5 if np.isfinite(t).any()]
            if not per_file:
                assert r[f"{p}_s"] == "nan"
                continue
            assert num(r[f"{p}_s"]) == pytest.approx(statistics.fmean(per_file), rel=1e-12), p
        attributed = sum(num(r[f"{p}_s"]) for p in PHASES + ("region_gradient", "region_denoise")
                         if r[f"{p}_s"] != "nan")
        assert num(r["other_s"]) == pytest.approx(max(num(r["total_s"]) - attributed, 0),
                                                  abs=1e-6 * num(r["total_s"]))
        if r["compile_mode"] == "fused":   # a fused graph: only its total is timed
            assert num(r["other_s"]) == pytest.approx(num(r["total_s"]))
        else:
            assert num(r["other_s"]) < 1e-9
        if r["ranks"] == "1" and r["compile_mode"] in ("none", "pre"):
            assert num(r["allreduce_s"]) == 0.0 and num(r["halo_exchange_s"]) == 0.0


def test_psnr_csv_equals_inputs(out, study_files):
    by_group = defaultdict(list)
    for p in study_files:
        with h5py.File(p, "r") as f:
            mode = f.attrs["compile_mode"]
            key = (f.attrs["gpu_names"].split(",")[0], str(f.attrs["ranks"]), mode)
        by_group[key].append(p)
    rows = read_csv(out["psnr"].csv)
    assert len(rows) == 10 * len(by_group)
    for r in rows:
        files = by_group[(r["gpu"], r["ranks"], r["compile_mode"])]
        i = int(r["iteration"]) - 1
        psnr = [h5(f, "/metrics/psnr")[i] for f in files]
        res = [h5(f, "/metrics/residual")[i] for f in files]
        assert int(r["repetitions"]) == len(files)
        assert num(r["psnr_mean_db"]) == pytest.approx(statistics.fmean(psnr), rel=1e-14)
        assert num(r["residual_mean"]) == pytest.approx(statistics.fmean(res), rel=1e-14)
        if len(files) == 1:
            assert num(r["psnr_mean_db"]) == psnr[0]


def bench_input(sweep_files):
    """(gpu, arch, shape, backend) -> list of (stable_s, intensity, status) from the files."""
    out = defaultdict(list)
    for p in sweep_files:
        with h5py.File(p, "r") as f:
            g = f["results"]
            cols = {k: (g[k].asstr()[()] if h5py.check_string_dtype(g[k].dtype) else g[k][()])
                    for k in g}
        for i in range(len(cols["gpu"])):
            out[(cols["gpu"][i], cols["architecture"][i], cols["shape"][i], cols["backend"][i])].append(
                (cols["stable_s"][i], cols["intensity"][i], cols["status"][i]))
    return out


@pytest.mark.parametrize("name", ["denoiser-speedup", "roofline"])
def test_sweep_csv_equals_inputs(out, sweep_files, name):
    inp = bench_input(sweep_files)
    rows = read_csv(out[name].csv)
    # per GPU: native and torch_compile on 3 architectures x 6 shapes, max-autotune on the 2-D
    # ones (cut off by its time cap on the 3-D ones); less the A100 row skipped in both arms
    assert len(rows) == 2 * (3 * 6 * 2 + 3 * 3) - 2
    assert not any(r["gpu"] == A100 and r["architecture"] == "unet"
                   and r["shape"] == "1x3x16x512x512" for r in rows)
    for r in rows:
        eager = inp[(r["gpu"], r["architecture"], r["shape"], "eager")]
        comp = inp[(r["gpu"], r["architecture"], r["shape"], r["backend"])]
        speedup = statistics.fmean(e[0] for e in eager) / statistics.fmean(c[0] for c in comp)
        assert num(r["speedup"]) == pytest.approx(speedup, rel=1e-12)
        assert num(r["intensity"]) == comp[0][1]        # copied, not recomputed
        ridge = {"A100": 76.5, "H100": 147.0}[r["gpu_type"]]
        assert num(r["ridge_flop_per_byte"]) == ridge
        if name == "denoiser-speedup" and r["gpu"] == A100:  # one file: its own numbers
            assert num(r["eager_stable_s"]) == eager[0][0]
            assert num(r["compiled_stable_s"]) == comp[0][0]
        if name == "roofline":
            assert r["bound"] == ("memory" if num(r["intensity"]) < ridge else "compute")


def test_peer_speedup_csv_equals_inputs(out, sweep_files):
    inp = bench_input(sweep_files)
    rows = read_csv(out["peer-speedup"].csv)
    assert len(rows) == 3 * 6 * 2 - 1  # every (GPU, architecture, shape) with native and a peer arm
    for r in rows:
        key = (r["gpu"], r["architecture"], r["shape"])
        native = statistics.fmean(e[0] for e in inp[key + ("native",)])
        peers = {b: statistics.fmean(e[0] for e in inp[key + (b,)] if e[2] == "ok")
                 for b in ("torch_compile", "torch_compile_max_autotune")
                 if any(e[2] == "ok" for e in inp[key + (b,)])}
        best = min(peers, key=peers.get)
        assert r["peer_backend"] == best
        assert num(r["speedup"]) == pytest.approx(peers[best] / native, rel=1e-12)
        # max-autotune hit its time cap on the 3-D rows: named, and the default mode is the peer
        assert (r["peer_capped"] == "torch_compile_max_autotune") == (r["dim"] == "3"), r
        assert r["peer_module"].startswith("deepinv.models.")


def test_shape_order_is_2d_then_3d(out):
    rows = out["denoiser-speedup"].rows
    shapes = list(dict.fromkeys(shape_label(r["shape"]) for r in rows
                                if r["gpu"] == H100 and r["architecture"] == "dncnn"))
    assert shapes == ["512²", "1024²", "2048²", "128³", "8×512×512", "16×512×512"]


def test_single_gpu_and_no_baseline(tmp_path):
    from conftest import write_recon
    files = [write_recon(tmp_path / "pre.h5", mode="pre", gpu="cpu", ranks=2, n=16,
                         with_ground_truth=False)]
    o = make_figure("compile-speedup", files, tmp_path)
    check_png(o.png, figure_size_px(1))
    r = read_csv(o.csv)[0]
    assert r["speedup_stable"] == "nan" and r["gpu"] == "cpu"
    o = make_figure("psnr", files, tmp_path)   # no PSNR at all: still a figure, NaN in CSV
    assert read_csv(o.csv)[0]["psnr_mean_db"] == "nan"
    check_png(o.png, figure_size_px(2))


def test_regions_stand_in_for_phases_timed_together(tmp_path):
    """A post-mode run times its two compiled regions, not their phases."""
    from conftest import write_recon
    f = write_recon(tmp_path / "post.h5", ranks=2, mode="post")
    o = make_figure("phases", [f], tmp_path)
    r = read_csv(o.csv)[0]
    total = float(np.mean(h5(f, "/timings/total")[-5:]))
    grad = float(np.mean(h5(f, "/timings/region_gradient")[-5:]))
    den = float(np.mean(h5(f, "/timings/region_denoise")[-5:]))
    assert num(r["region_gradient_s"]) == pytest.approx(grad, rel=1e-12)
    assert num(r["region_denoise_s"]) == pytest.approx(den, rel=1e-12)
    assert num(r["other_s"]) == pytest.approx(total - grad - den, abs=1e-9)
    assert r["denoise_s"] == "nan"
    check_png(o.png, figure_size_px(1))
