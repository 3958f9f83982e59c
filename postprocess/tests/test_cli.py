"""python3 -m pnp_postprocess FIGURE FILES... --out DIR, as a user runs it."""
import os
import subprocess
import sys
from pathlib import Path

from pnp_postprocess import FIGURES, read_csv

PKG_ROOT = Path(__file__).resolve().parents[1]


def cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(PKG_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "pnp_postprocess", *map(str, args)], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=300)


def test_help_lists_every_figure():
    r = cli("--help")
    assert r.returncode == 0
    for name in FIGURES:
        assert name in r.stdout


def test_one_figure_from_many_files(tmp_path, study_files):
    r = cli("compile-speedup", *study_files, "--out", tmp_path / "figs")
    assert r.returncode == 0, r.stderr
    for ext in ("png", "pdf", "csv"):
        assert (tmp_path / "figs" / f"compile-speedup.{ext}").stat().st_size > 0
    assert "10 rows" in r.stdout
    r = cli("phases", *study_files[:3], "--out", tmp_path / "figs", "--name", "h100_1gpu_eager")
    assert r.returncode == 0, r.stderr
    rows = read_csv(tmp_path / "figs" / "h100_1gpu_eager.csv")
    assert len(rows) == 1 and rows[0]["repetitions"] == "3"


def test_all_sorts_files_by_program(tmp_path, study_files, sweep_files):
    r = cli("all", *study_files, *sweep_files, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    for name, spec in FIGURES.items():  # the scaling, volume and memory-budget figures need their own files
        want = spec.program not in ("pnp_bench --scaling", "pnp_recon volume", "results table")
        assert (tmp_path / f"{name}.png").exists() == want, name
    # the reconstruction figure: one row per (GPU, ranks, mode, backend), its first repetition
    rows = read_csv(tmp_path / "reconstruction.csv")
    assert len(rows) == 10 and rows[0]["file"] == str(study_files[0])
    r = cli("all", *sweep_files, "--out", tmp_path / "sweep_only")
    assert r.returncode == 0, r.stderr
    assert sorted(p.stem for p in (tmp_path / "sweep_only").glob("*.png")) == \
        ["denoiser-speedup", "peer-speedup", "roofline"]


def test_list(study_files):
    r = cli("list", study_files[0])
    assert r.returncode == 0 and "pnp_recon ranks=1 mode=none" in r.stdout
    assert "commit=0123456789abcdef" in r.stdout


def test_errors_are_one_line_and_exit_2(tmp_path, study_files, sweep_files):
    r = cli("roofline", study_files[0], "--out", tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith("error: ") and "expected pnp_bench" in r.stderr
    r = cli("psnr", tmp_path / "missing.h5", "--out", tmp_path)
    assert r.returncode == 2 and "missing.h5" in r.stderr
    r = cli("nonsense", study_files[0])
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_ceilings_files_are_read_by_read_ceilings_and_skipped_by_all(tmp_path, sweep_files, ceilings_file):
    from pnp_postprocess import SchemaError, read_bench, read_ceilings
    rows = read_ceilings(ceilings_file)
    assert [r["name"] for r in rows] == ["copy", "matmul_tf32", "matmul_bf16"]
    assert rows[1]["rate"] == 379.0 and rows[1]["unit"] == "TFLOP/s" and rows[0]["gpu"] == "NVIDIA H200"
    try:
        read_bench(ceilings_file)
        raise AssertionError("read_bench accepted a ceilings file")
    except SchemaError as e:
        assert "read_ceilings" in str(e)
    r = cli("all", *sweep_files, ceilings_file, "--out", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "pnp_bench --ceilings file, no figure" in r.stdout
    assert (tmp_path / "roofline.png").exists()
