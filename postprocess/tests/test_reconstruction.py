"""The reconstruction figure (pnp_postprocess.images) from synthetic pnp_recon images: panels
and insets, shared scales, titles, the pixels shown (checked against the files read here with
h5py and numpy), downsampling of large images, errors, and the command line."""
import math

import h5py
import matplotlib.image as mpimg
import numpy as np
import pytest

from conftest import write_recon_image
from test_cli import cli
from test_figures import check_pdf, check_png
from pnp_postprocess import SchemaError, make_figure, read_csv
from pnp_postprocess import images
from pnp_postprocess.images import (PANELS, figure_size_px, plot_reconstruction,
                                    reconstruction_panels)


def h5(path, name):
    with h5py.File(path, "r") as f:
        return f[name][()]


def shown(ax) -> np.ndarray:
    """The array of a panel's image (the main one, not the inset)."""
    assert len(ax.images) == 1
    return np.asarray(ax.images[0].get_array(), dtype=np.float64)


def inset(ax):
    zooms = [c for c in ax.child_axes if c.get_label() == "zoom"]
    assert len(zooms) == 1, f"{ax.get_label()}: {len(zooms)} insets"
    return zooms[0]


def colorbars(fig):
    return [a for a in fig.axes if a.get_label() == "<colorbar>"]


def blocks(a, f):
    """Means of f x f blocks, the last ones partial: padded with NaN and nan-averaged."""
    a = np.asarray(a, dtype=np.float64)
    n0, n1 = (math.ceil(s / f) * f for s in a.shape)
    p = np.full((n0, n1), np.nan)
    p[:a.shape[0], :a.shape[1]] = a
    return np.nanmean(p.reshape(n0 // f, f, n1 // f, f), axis=(1, 3))


# --- one file ------------------------------------------------------------------------

def test_one_file_three_panels_each_with_inset(recon_image_files):
    f = recon_image_files["fp32"]
    fig = plot_reconstruction([f])
    panels = reconstruction_panels(fig)
    assert [a.get_label() for a in panels] == list(PANELS)
    assert len(colorbars(fig)) == 3
    rec, gt = h5(f, "/reconstruction"), h5(f, "/ground_truth")
    # 64² is shown as it is: the panels hold the file's pixels, the error is rec - truth
    np.testing.assert_array_equal(shown(panels[0]), rec)
    np.testing.assert_array_equal(shown(panels[1]), gt)
    np.testing.assert_allclose(shown(panels[2]), rec.astype(np.float64) - gt, rtol=0, atol=1e-7)
    # the inset: the central 8x8 box (rows and columns 28-36) at full resolution
    for ax, full in zip(panels, (rec, gt, rec.astype(np.float64) - gt)):
        z = inset(ax)
        np.testing.assert_allclose(shown(z), full[28:36, 28:36], rtol=0, atol=1e-7)
        assert z.get_xlim() == (27.5, 35.5) and z.get_ylim() == (35.5, 27.5)
    # one grey scale (the truth's range, 0..1) for images and insets; a symmetric error scale
    for ax in panels[:2]:
        assert ax.images[0].get_clim() == (0.0, 1.0)
        assert inset(ax).images[0].get_clim() == (0.0, 1.0)
    lo, hi = panels[2].images[0].get_clim()
    assert lo == -hi and 0 < hi <= np.max(np.abs(rec.astype(np.float64) - gt))
    assert inset(panels[2]).images[0].get_clim() == (lo, hi)
    assert panels[2].images[0].get_cmap().name == "RdBu_r"
    assert panels[0].images[0].get_cmap().name == "gray"


def test_titles_give_label_and_final_psnr_ssim(recon_image_files):
    fig = plot_reconstruction([recon_image_files["fp32"], recon_image_files["bf16"]])
    p = reconstruction_panels(fig)
    t0, t1 = p[0].get_title(), p[3].get_title()
    assert "eager_fp32.h5" in t0 and "drunet · none (eager) · fp32 · H100, 1 GPU" in t0
    assert "PSNR 31.50 dB" in t0 and "SSIM 0.9123" in t0 and "(it." not in t0
    # metrics every other iteration: the last finite values, at iteration 9 of 10
    assert "drunet · pre (inductor) · bf16" in t1
    assert "PSNR 30.75 dB (it. 9)" in t1 and "SSIM 0.8877 (it. 9)" in t1
    rec, gt = h5(recon_image_files["fp32"], "/reconstruction"), h5(recon_image_files["fp32"], "/ground_truth")
    rmse = math.sqrt(np.mean((rec.astype(np.float64) - gt) ** 2))
    assert f"RMSE {rmse:.4g}" in p[2].get_title()


def test_no_ground_truth_one_panel(recon_image_files):
    f = recon_image_files["no_truth"]
    fig = plot_reconstruction([f])
    (ax,) = reconstruction_panels(fig)
    assert ax.get_label() == "reconstruction" and len(colorbars(fig)) == 1
    assert "no PSNR / SSIM" in ax.get_title() and "cpu, 2 ranks" in ax.get_title()
    rec = h5(f, "/reconstruction")
    np.testing.assert_array_equal(shown(ax), rec)
    # no truth: the grey scale is the 1st-99th percentile of the reconstruction
    lo, hi = ax.images[0].get_clim()
    assert (lo, hi) == pytest.approx(tuple(np.percentile(rec.astype(np.float64), [1, 99])), rel=1e-6)
    w, h = fig.get_size_inches() * fig.dpi
    assert (round(w), round(h)) == figure_size_px(1, 1)


# --- several files -------------------------------------------------------------------

def test_grid_one_row_per_file_with_shared_scales(recon_image_files):
    files = [recon_image_files[k] for k in ("fp32", "no_truth", "bf16")]
    fig = plot_reconstruction(files)
    panels = reconstruction_panels(fig)
    assert [a.get_label() for a in panels] == list(PANELS) + ["reconstruction"] + list(PANELS)
    assert all(len(a.child_axes) == 1 for a in panels)
    assert len(colorbars(fig)) == 3            # one per column, for all rows
    w, h = fig.get_size_inches() * fig.dpi
    assert (round(w), round(h)) == figure_size_px(3, 3)
    # the grey scale is the union of the truths' ranges (0..1 and 0..1.2), in every row
    assert h5(files[2], "/ground_truth").max() == pytest.approx(1.2)
    grey = [a.images[0].get_clim() for a in panels if a.get_label() != "error"]
    assert len(grey) == 5 and all(c == (0.0, pytest.approx(1.2)) for c in grey)
    err = [a.images[0].get_clim() for a in panels if a.get_label() == "error"]
    assert len(err) == 2 and err[0] == err[1] and err[0][0] == -err[0][1]
    # each row shows its own file
    np.testing.assert_array_equal(shown(panels[3]), h5(files[1], "/reconstruction"))
    e = h5(files[2], "/reconstruction").astype(np.float64) - h5(files[2], "/ground_truth")
    np.testing.assert_allclose(shown(panels[6]), e, atol=1e-7)
    assert "pre_bf16.h5" in panels[4].get_title()


def test_downsampled_panels_are_block_means_and_inset_full_resolution(tmp_path):
    f = write_recon_image(tmp_path / "r102.h5", n=102, seed=5)
    rec, gt = h5(f, "/reconstruction"), h5(f, "/ground_truth")
    fig = plot_reconstruction([f], max_px=32)      # 102 / 32 -> 4x4 blocks, the last 2 wide
    panels = reconstruction_panels(fig)
    err = rec.astype(np.float64) - gt
    for ax, full in zip(panels, (rec, gt, err)):
        s = shown(ax)
        assert s.shape == (26, 26)
        np.testing.assert_allclose(s, blocks(full, 4), rtol=0, atol=1e-6)
        # in full-resolution pixel coordinates, clipped to the image
        assert ax.images[0].get_extent() == [-0.5, 103.5, 103.5, -0.5]
        assert ax.get_xlim() == (-0.5, 101.5)
        # the inset box: side round(102 / 8) = 13, centred: rows and columns 44-57, every pixel
        z = inset(ax)
        np.testing.assert_allclose(shown(z), full[44:57, 44:57], rtol=0, atol=1e-7)
        assert z.images[0].get_extent() == [43.5, 56.5, 56.5, 43.5]
    assert "r102.h5 · 102², shown 4×4-averaged" in panels[0].get_title()
    assert "zoom: [44:57, 44:57] at full resolution" in panels[1].get_title()
    # the error panel is the block mean of the error = block(rec) - block(truth)
    np.testing.assert_allclose(shown(panels[2]), shown(panels[0]) - shown(panels[1]), atol=1e-6)
    # a chosen box
    fig = plot_reconstruction([f], max_px=32, box=(0, 10, 90, 102))
    np.testing.assert_array_equal(shown(inset(reconstruction_panels(fig)[0])), rec[0:10, 90:102])


def test_large_image_is_read_in_strips(tmp_path, monkeypatch):
    n = 4096
    x = np.arange(n, dtype=np.float32)
    gt = (np.add.outer(x, x) % 512 < 256).astype(np.float32)
    rec = gt + np.sin(np.add.outer(x / 7, x / 11)).astype(np.float32) * 0.05
    f = write_recon_image(tmp_path / "big.h5", data=(rec, gt))
    biggest = []
    getitem = h5py.Dataset.__getitem__

    def spy(self, key, *a, **k):
        out = getitem(self, key, *a, **k)
        if self.name in ("/reconstruction", "/ground_truth"):
            biggest.append(np.size(out))
        return out

    monkeypatch.setattr(h5py.Dataset, "__getitem__", spy)
    fig = plot_reconstruction([f])
    monkeypatch.undo()
    # never a whole image in memory: row strips of STRIP_BYTES (in float64) at most
    assert 0 < max(biggest) <= images.STRIP_BYTES // 8 < n * n
    panels = reconstruction_panels(fig)
    for ax, full in zip(panels, (rec, gt)):
        s = shown(ax)
        assert s.shape == (1024, 1024)    # 4096² shown as 4x4 block means
        np.testing.assert_allclose(s, full.astype(np.float64).reshape(1024, 4, 1024, 4).mean(axis=(1, 3)),
                                   atol=1e-6)
        np.testing.assert_array_equal(shown(inset(ax)), full[1792:2304, 1792:2304])
    np.testing.assert_allclose(shown(panels[2]), (rec.astype(np.float64) - gt).reshape(
        1024, 4, 1024, 4).mean(axis=(1, 3)), atol=1e-6)


# --- files, CSV, errors, the command line --------------------------------------------

def test_make_figure_writes_png_pdf_csv(tmp_path, recon_image_files):
    files = [recon_image_files[k] for k in ("fp32", "bf16", "no_truth")]
    o = make_figure("reconstruction", files, tmp_path)
    check_png(o.png, figure_size_px(3, 3))
    check_pdf(o.pdf)
    assert o.png.name == "reconstruction.png"
    rows = read_csv(o.csv)
    assert [r["file"] for r in rows] == [str(f) for f in files]
    fp32, bf16, none = rows
    assert float(fp32["final_psnr_db"]) == 31.5 and float(fp32["final_ssim"]) == pytest.approx(0.9123)
    assert fp32["psnr_iteration"] == "10" and fp32["precision"] == "fp32"
    assert float(bf16["final_psnr_db"]) == 30.75 and bf16["psnr_iteration"] == "9"
    assert bf16["compile_mode"] == "pre" and bf16["compile_backend"] == "inductor"
    assert none["ground_truth"] == "False" and none["final_psnr_db"] == "nan"
    assert none["final_ssim"] == "nan" and none["rmse"] == "nan"
    for r, f in ((fp32, files[0]), (bf16, files[1])):
        e = h5(f, "/reconstruction").astype(np.float64) - h5(f, "/ground_truth")
        assert float(r["rmse"]) == pytest.approx(math.sqrt(np.mean(e ** 2)), rel=1e-12)
        assert float(r["max_abs_error"]) == pytest.approx(np.max(np.abs(e)), rel=1e-12)
        assert (r["display_factor"], r["zoom_r0"], r["zoom_r1"]) == ("1", "28", "36")
    assert float(bf16["truth_max"]) == pytest.approx(1.2, rel=1e-6)


def test_not_a_recon_file_is_a_schema_error(tmp_path, sweep_files):
    with pytest.raises(SchemaError, match="expected pnp_recon"):
        plot_reconstruction([sweep_files[0]])
    with pytest.raises(SchemaError, match="expected pnp_recon"):
        make_figure("reconstruction", [sweep_files[0]], tmp_path)
    bad = write_recon_image(tmp_path / "bad.h5")
    with h5py.File(bad, "a") as f:
        del f["reconstruction"]
    with pytest.raises(SchemaError, match="missing dataset '/reconstruction'"):
        plot_reconstruction([bad])
    rec, gt = np.zeros((16, 16), np.float32), np.zeros((16, 8), np.float32)
    odd = write_recon_image(tmp_path / "odd.h5", data=(rec, gt))
    with pytest.raises(SchemaError, match=r"/ground_truth is \[16, 8\]"):
        plot_reconstruction([odd])


def test_zoom_box():
    assert images.zoom_box((64, 64)) == (28, 36, 28, 36)
    assert images.zoom_box((4096, 4096)) == (1792, 2304, 1792, 2304)
    assert images.zoom_box((16384, 16384)) == (7936, 8448, 7936, 8448)   # at most 512 px
    assert images.zoom_box((100, 40)) == (47, 52, 17, 22)                 # 1/8 of the shorter side
    assert images.zoom_box((4, 4)) == (1, 2, 1, 2)
    assert images.display_factor((4096, 4096)) == 4 and images.display_factor((4097, 10)) == 5
    assert images.display_factor((1024, 1024)) == 1


def test_config_precision():
    assert images.config_precision("[denoiser]\nprecision = 'bf16'\n") == "bf16"
    assert images.config_precision("[train]\nprecision = 'bf16'\n[denoiser]\nsigma = 0.01\n") is None
    assert images.config_precision(None) is None


def test_config_precision_without_tomllib(monkeypatch):
    monkeypatch.setattr(images, "tomllib", None)
    assert images.config_precision("[denoiser]\nsigma = 0.01\nprecision = \"fp32\"\n[compile]\n") == "fp32"
    assert images.config_precision("[train]\nprecision = 'bf16'\n[denoiser]\nsigma = 0.01\n") is None


def test_cli_reconstruction(tmp_path, recon_image_files, sweep_files):
    files = [recon_image_files["fp32"], recon_image_files["bf16"]]
    r = cli("reconstruction", *files, "--out", tmp_path / "figs")
    assert r.returncode == 0, r.stderr
    assert "(2 rows)" in r.stdout
    png = tmp_path / "figs" / "reconstruction.png"
    check_png(png, figure_size_px(2, 3))
    check_pdf(tmp_path / "figs" / "reconstruction.pdf")
    assert len(read_csv(tmp_path / "figs" / "reconstruction.csv")) == 2
    r = cli("reconstruction", recon_image_files["no_truth"], "--out", tmp_path / "one", "--name", "nt")
    assert r.returncode == 0, r.stderr
    img = mpimg.imread(tmp_path / "one" / "nt.png")
    assert (img.shape[1], img.shape[0]) == figure_size_px(1, 1)
    r = cli("reconstruction", sweep_files[0], "--out", tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and "expected pnp_recon" in r.stderr
    assert "reconstruction" in cli("--help").stdout


def test_all_draws_one_row_per_run(tmp_path, recon_image_files):
    """`all` draws the reconstruction of the first file of each set of repetitions."""
    from conftest import write_recon
    reps = [write_recon(tmp_path / f"none_r{i}.h5", mode="none", seed=i) for i in range(3)]
    pre = write_recon(tmp_path / "pre.h5", mode="pre", seed=7)
    other_gpu = write_recon(tmp_path / "none_2gpu.h5", mode="none", ranks=2, seed=8)
    r = cli("all", *reps, pre, other_gpu, "--out", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    rows = read_csv(tmp_path / "out" / "reconstruction.csv")
    assert [r["file"] for r in rows] == [str(reps[0]), str(pre), str(other_gpu)]
    assert "reconstruction:" in r.stdout and "(3 rows)" in r.stdout
    check_png(tmp_path / "out" / "reconstruction.png", figure_size_px(3, 3))
    # the same for pnp_recon image files: repetitions differ in nothing but their pixels
    reps = [write_recon_image(tmp_path / f"img{i}.h5", seed=10 + i) for i in range(2)]
    files = reps + [recon_image_files["bf16"], recon_image_files["no_truth"]]
    assert images.one_per_run(files) == [reps[0], files[2], files[3]]
