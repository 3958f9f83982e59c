"""scripts/check_performance.py must fail on a doc whose figure is in no row, on a results file
without provenance, and on a command that no longer parses; and pass on a consistent pair."""
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("check_performance", os.path.join(ROOT, "scripts", "check_performance.py"))
cp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cp)

HEADER = "id,what,value,unit,gpu,commit,date,command,source\n"
ROW = "run1_stable,one forward,227.5412,ms,H200,bd7f6af,2026-12-04,{cmd},x.h5\n"
GOOD_CMD = "scripts/gpu_check.sh --no-build"


def write(tmp_path, measured, csv_text=None, cmd=GOOD_CMD):
    res = tmp_path / "results"
    res.mkdir(exist_ok=True)
    (res / "bench.csv").write_text(csv_text if csv_text is not None else HEADER + ROW.format(cmd=cmd))
    doc = tmp_path / "performance.md"
    doc.write_text("# t\n\n| what | measured | data |\n|---|---|---|\n"
                   f"| stable (ms) | {measured} | [bench.csv](results/bench.csv)#run1_* |\n")
    return ["--doc", str(doc), "--results", str(res), "--bin", str(tmp_path / "bin")]


def test_consistent_doc_passes(tmp_path, capsys):
    assert cp.main(write(tmp_path, "227.54")) == 0
    assert "ok" in capsys.readouterr().out


def test_number_not_in_the_data_fails(tmp_path, capsys):
    assert cp.main(write(tmp_path, "227.54; 199.99")) == 1
    assert "199.99 is the value of no row" in capsys.readouterr().out


def test_rounding_is_at_the_written_precision(tmp_path):
    assert cp.main(write(tmp_path, "227.55")) == 1   # 227.5412 is 227.54, not 227.55
    assert cp.main(write(tmp_path, "227.5")) == 0


def test_missing_provenance_fails(tmp_path, capsys):
    text = "id,what,value,unit,gpu,date,command\nrun1_stable,x,227.5412,ms,H200,2026-12-04,scripts/gpu_check.sh\n"
    assert cp.main(write(tmp_path, "227.54", csv_text=text)) == 1
    assert "missing columns commit" in capsys.readouterr().out


def test_empty_provenance_fails(tmp_path, capsys):
    assert cp.main(write(tmp_path, "227.54", cmd="")) == 1
    assert "empty command" in capsys.readouterr().out


def test_unknown_row_fails(tmp_path, capsys):
    args = write(tmp_path, "227.54")
    doc = args[1]
    open(doc, "w").write("| what | measured | data |\n|---|---|---|\n| x | 1 | [b](results/bench.csv)#nothing_* |\n")
    assert cp.main(args) == 1
    assert "no row of bench.csv matches" in capsys.readouterr().out


def test_command_that_does_not_parse_fails(tmp_path, capsys):
    assert cp.main(write(tmp_path, "227.54", cmd="scripts/gpu_check.sh --no-such-option")) == 1
    assert "--no-such-option" in capsys.readouterr().out
    assert cp.main(write(tmp_path, "227.54", cmd="scripts/device_call.sh no_such_function")) == 1
    assert cp.main(write(tmp_path, "227.54", cmd="pnp_bench input/sweep.toml")) == 1   # not built in --bin


def test_recon_override_that_does_not_parse_fails(tmp_path, capsys):
    """With pnp_recon built, an unknown --set key fails; a known one passes."""
    bindir = os.environ.get("PNP_TEST_BIN", os.path.join(ROOT, "build", "cpu", "bin"))
    if not os.path.isfile(os.path.join(bindir, "pnp_recon")):
        import pytest
        pytest.skip("pnp_recon is not built")
    args = write(tmp_path, "227.54", cmd="pnp_recon input/demo.toml --set solver.nosuch=1")
    args[-1] = bindir
    assert cp.main(args) == 1
    assert "does not parse at HEAD" in capsys.readouterr().out
    args = write(tmp_path, "227.54", cmd="pnp_recon input/demo.toml --set solver.iterations=3")
    args[-1] = bindir
    assert cp.main(args) == 0
