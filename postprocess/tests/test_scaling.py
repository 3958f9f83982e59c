"""The scaling figure (pnp_bench --scaling files): reader, table, figure, CLI."""
import h5py
import numpy as np
import pytest

from conftest import H100, _root_attrs
from pnp_postprocess import SchemaError, is_scaling, make_figure, read_scaling, schema, table
from pnp_postprocess.cli import main


def write_scaling(path, t1=0.3):
    """A --scaling file: input and layer halo at 1, 2, 4 ranks (slabs; grid at 4), one skipped row."""
    rows = []
    for mode in ("input", "layer"):
        for R, layout in ((1, "slabs"), (2, "slabs"), (4, "slabs"), (4, "grid")):
            extra = 0.0 if R == 1 else (0.08 if mode == "input" else 0.01) * R
            t = t1 / R + extra
            rows.append(dict(ranks=R, layout=layout, halo_mode=mode, status="ok", reason="", stand_in=R // 2,
                             tile=f"[1, 1, {4096 // R}, 4096]", gradient_s=0.02 / R, denoise_s=t - 0.02 / R - extra,
                             allreduce_s=extra / 2, halo_s=extra / 2, iteration_s=t, efficiency=t1 / (R * t),
                             redundancy=1.0 if mode == "layer" else 1 + 0.1 * R, halo_bytes=1e6 * R,
                             halo_messages=0 if R == 1 else 58, denoiser_bytes=int(8e9 / R)))
    rows.append(dict(rows[-1], ranks=3, layout="grid", status="skipped", reason="no 2-d factorisation",
                     iteration_s=np.nan, efficiency=np.nan))
    with h5py.File(path, "w") as f:
        _root_attrs(f, "pnp_bench", 1, H100, "pre", "native", "drunet", "[problem]\nsize = 4096\n")
        for name, kind in schema.SCALING_COLUMNS.items():
            v = [r[name] for r in rows]
            if kind == "str":
                d = f.create_dataset(f"/scaling/{name}", data=v, dtype=h5py.string_dtype())
            else:
                d = f.create_dataset(f"/scaling/{name}", data=np.array(v, dtype=np.int64 if kind == "int" else np.float64))
            d.attrs["units"], d.attrs["description"] = "1", name
        f["scaling"].attrs["gpus_per_node"] = np.int64(8)
        f["scaling"].attrs["intra_gb_per_s"] = 450.0
    return path


def test_reader_and_table(tmp_path):
    p = write_scaling(tmp_path / "s.h5")
    assert is_scaling(p)
    rows = read_scaling(p)
    assert len(rows) == 9 and "H100" in rows[0]["gpu"] and rows[0]["gpus_per_node"] == 8
    t = table("scaling", [p])
    assert all(r["ranks"] != 3 for r in t)  # the skipped row is not drawn
    # the 1-rank point starts the slabs and the grid line of each mode
    assert sum(1 for r in t if r["ranks"] == 1) == 4
    layer4 = [r for r in t if r["halo_mode"] == "layer" and r["ranks"] == 4 and r["layout"] == "slabs"][0]
    assert layer4["efficiency"] == pytest.approx(0.3 / (4 * (0.3 / 4 + 0.04)))


def test_figure_and_cli(tmp_path):
    p = write_scaling(tmp_path / "s.h5")
    out = make_figure("scaling", [p], tmp_path / "fig")
    assert out.png.stat().st_size > 10000 and out.pdf.exists() and out.csv.exists()
    fig = out.figure
    eff = fig.axes[0]
    labels = [l.get_label() for l in eff.get_lines()]
    assert "deepinv, measured by the study (64 GPUs)" in labels
    star = [l for l in eff.get_lines() if l.get_label().startswith("deepinv")][0]
    assert list(star.get_xdata()) == [64] and list(star.get_ydata()) == [pytest.approx(21.9)]
    assert len(eff.get_lines()) == 5  # 4 lines (mode x layout) + the reference point
    assert main(["all", str(p), "--out", str(tmp_path / "all")]) == 0
    assert (tmp_path / "all" / "scaling.png").exists()


def test_not_a_scaling_file(tmp_path):
    p = tmp_path / "x.h5"
    with h5py.File(p, "w") as f:
        _root_attrs(f, "pnp_bench", 1, H100, "pre", "native", "drunet", "")
    with pytest.raises(SchemaError, match="/scaling"):
        read_scaling(p)
