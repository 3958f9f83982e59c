"""The volume figure: orthogonal slices of a pnp_recon volume, its truth and the error."""
import numpy as np
import pytest
from conftest import write_recon, write_recon_image

from pnp_postprocess import api, cli
from pnp_postprocess.io import SchemaError
from pnp_postprocess.volume import orthogonal_table, plot_orthogonal, read_volumes


def volume_data(s=6, n=32):
    """A truth whose central planes are known, and a reconstruction off by +0.1 in slice s // 2
    and by -0.2 at column n // 2 of every slice (so the axial, coronal and sagittal errors differ)."""
    z, y, x = np.meshgrid(np.arange(s), np.arange(n), np.arange(n), indexing="ij")
    gt = ((x + y + z) % 7 / 6.0).astype(np.float32)
    rec = gt.copy()
    rec[s // 2] += 0.1
    rec[:, :, n // 2] -= 0.2
    return rec, gt


@pytest.fixture
def volume_file(tmp_path):
    return write_recon_image(tmp_path / "vol.h5", data=volume_data(), psnr=[20.0, 25.5], ssim=[0.5, 0.8])


def test_table_has_three_central_planes_with_their_errors(volume_file):
    rows = orthogonal_table(read_volumes([volume_file]))
    assert [(r["view"], r["index"]) for r in rows] == [("axial", 3), ("coronal", 16), ("sagittal", 16)]
    rmse = {r["view"]: r["plane_rmse"] for r in rows}
    # axial: slice 3 is +0.1 everywhere and -0.2 more on one column of 32
    assert rmse["axial"] == pytest.approx(np.sqrt((31 * 0.1 ** 2 + 0.1 ** 2) / 32), rel=1e-6)
    # sagittal (x = 16): the -0.2 column in every slice, -0.1 in slice 3
    assert rmse["sagittal"] == pytest.approx(np.sqrt((5 * 32 * 0.2 ** 2 + 32 * 0.1 ** 2) / (6 * 32)), rel=1e-6)
    assert all(r["final_psnr_db"] == 25.5 and r["final_ssim"] == 0.8 for r in rows)
    assert rows[0]["slices"] == 6 and rows[0]["rows"] == 32


def test_figure_three_views_by_three_panels_with_physical_aspect(volume_file):
    fig = plot_orthogonal([volume_file])
    labels = [ax.get_label() for ax in fig.axes if " " in ax.get_label() and not ax.get_label().startswith("<")]
    views = {lab.split(" ")[0] for lab in labels}
    assert views == {"axial", "coronal", "sagittal"} and len(labels) == 9
    coronal = next(ax for ax in fig.axes if ax.get_label() == "coronal reconstruction")
    assert coronal.get_aspect() == pytest.approx(32 / 6)  # a slice is N / S pixels tall
    img = coronal.get_images()[0].get_array()
    assert img.shape == (6, 32)
    assert "PSNR 25.50 dB" in fig.axes[0].get_title()


def test_a_2d_file_is_refused(tmp_path):
    flat = write_recon_image(tmp_path / "flat.h5")
    with pytest.raises(SchemaError, match="slices, N, N"):
        read_volumes([flat])


def test_all_draws_the_volume_figure_for_volumes_only(tmp_path, volume_file, capsys):
    flat = write_recon(tmp_path / "flat.h5")
    assert cli.main(["all", str(volume_file), str(flat), "--out", str(tmp_path / "figs")]) == 0
    out = capsys.readouterr().out
    assert "volume:" in out and "(3 rows)" in out
    assert (tmp_path / "figs" / "volume.png").exists()
    assert (tmp_path / "figs" / "reconstruction.png").exists()


def test_make_figure_writes_png_pdf_csv(tmp_path, volume_file):
    out = api.make_figure("volume", [volume_file], tmp_path)
    assert out.png.exists() and out.pdf.exists() and len(api.read_csv(out.csv)) == 3
