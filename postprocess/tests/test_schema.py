"""The package's schema lists match docs/output_schema.md; the fixtures match both; the
readers reject files that do not."""
import re

import h5py
import numpy as np
import pytest

from conftest import H100, write_recon
from pnp_postprocess import SchemaError, read_bench, read_recon, schema


def _table_after(doc: str, heading: str) -> list[list[str]]:
    """Rows (cells) of the first Markdown table after the line containing `heading`."""
    lines = doc[doc.index(heading):].splitlines()
    rows, started = [], False
    for line in lines[1:]:
        if line.startswith("|"):
            started = True
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set(cells[0]) <= set("-: "):
                rows.append(cells)
        elif started:
            break
    return rows[1:]  # without the header row


def _ticked(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def test_root_attributes_match_the_doc(schema_doc):
    names = [n for row in _table_after(schema_doc, "Root attributes") for n in _ticked(row[0])]
    assert set(names) == set(schema.RECON_ROOT_ATTRS) | set(schema.RECON_VOLUME_ATTRS)


def test_recon_datasets_match_the_doc(schema_doc):
    rows = _table_after(schema_doc, "Datasets:")
    doc, units = {}, None
    for row in rows:
        paths = _ticked(row[0])
        units = _ticked(row[2])[0] if _ticked(row[2]) else units  # "same" as the row above
        for path in paths[1:]:
            doc[path] = units
        path = paths[0]
        if "<part>" in path:  # /timings/setup/<part>: the parts are listed before the first ';'
            parts = re.findall(r"`(\w+)`", row[3].split(";")[0])
            assert tuple(parts) == schema.SETUP_PARTS
            for p in parts:
                doc[path.replace("<part>", p)] = units
        elif "<phase>" in path:
            listed = row[3].split("Phases:")[1].split(".")[0] if "Phases:" in row[3] else ""
            phases = re.findall(r"`(\w+)`", listed)
            if phases:   # /timings/<phase>: the phases are listed
                assert tuple(phases) == schema.PHASES + ("total",)
            else:        # /memory/phase_peak_bytes/<phase>: the timed phases
                phases = schema.PHASES
            for p in phases:
                doc[path.replace("<phase>", p)] = units
        else:
            doc[path] = units
    ours = {p: u for p, (u, _) in schema.RECON_DATASETS.items()}
    assert doc == ours


def test_bench_columns_match_the_doc(schema_doc):
    rows = _table_after(schema_doc, "One group `/results`")
    doc = {}
    for row in rows:
        for name in _ticked(row[0]):
            doc[name] = row[1]
    kinds = {"string": "str", "int64": "int", "float64": "float"}
    assert {k: kinds[v] for k, v in doc.items()} == schema.BENCH_COLUMNS


def _walk(f):
    out = []
    f.visititems(lambda name, obj: out.append(obj) if isinstance(obj, h5py.Dataset) else None)
    return out


def test_fixtures_are_schema_exact(study_files, sweep_files):
    for path in study_files[:3] + sweep_files:
        with h5py.File(path, "r") as f:
            for a in schema.RECON_ROOT_ATTRS:
                assert a in f.attrs, (path, a)
            assert isinstance(f.attrs["ranks"], np.int64)
            for d in _walk(f):
                assert set(d.attrs) >= {"units", "description"}, d.name
                assert d.attrs["description"]
            if f.attrs["program"] == "pnp_recon":
                for p, (units, required) in schema.RECON_DATASETS.items():
                    if required:
                        assert f[p].attrs["units"] == units, p
                t = f["/timings/total"]
                assert t.shape == (10, f.attrs["ranks"]) and t.dtype == np.float64
                assert f["/decomposition/boxes"].shape == (f.attrs["ranks"], 4)
                assert f["/timings/stable_iteration"].shape == ()
            else:
                assert set(f["results"]) == set(schema.BENCH_COLUMNS)
                assert h5py.check_string_dtype(f["/results/shape"].dtype).encoding == "utf-8"


def test_reader_reads_what_was_written(tmp_path):
    p = write_recon(tmp_path / "r.h5", ranks=2, mode="post", first=9.5, stable=0.25, seed=7)
    run = read_recon(p)
    with h5py.File(p, "r") as f:
        assert run.first_iteration == f["/timings/first_iteration"][()]
        assert run.stable_iteration == f["/timings/stable_iteration"][()]
        np.testing.assert_array_equal(run.timings["denoise"], f["/timings/denoise"][()])
        np.testing.assert_array_equal(run.psnr, f["/metrics/psnr"][()])
    assert run.key == (H100, 2, "post", "native")
    assert run.halo == 190 and run.boxes.shape == (2, 4)


def test_reader_names_what_is_missing(tmp_path):
    p = write_recon(tmp_path / "r.h5")
    with h5py.File(p, "a") as f:
        del f.attrs["compile_mode"]
        del f["/timings/clamp"]
    with pytest.raises(SchemaError, match="compile_mode"):
        read_recon(p)
    with h5py.File(p, "a") as f:
        f.attrs["compile_mode"] = "none"
    with pytest.raises(SchemaError, match="/timings/clamp"):
        read_recon(p)


def test_reader_rejects_the_wrong_program_and_non_hdf5(tmp_path, sweep_files, study_files):
    with pytest.raises(SchemaError, match="expected pnp_recon"):
        read_recon(sweep_files[0])
    with pytest.raises(SchemaError, match="expected pnp_bench"):
        read_bench(study_files[0])
    junk = tmp_path / "junk.h5"
    junk.write_text("not hdf5")
    with pytest.raises(SchemaError, match="cannot open"):
        read_recon(junk)
