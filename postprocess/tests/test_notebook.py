"""analysis.ipynb is a valid nbformat-4 notebook whose code imports pnp_postprocess and runs,
top to bottom, on a folder of result files."""
import ast
import json
import os
import shutil
from pathlib import Path

import pytest
from matplotlib.figure import Figure

NOTEBOOK = Path(__file__).resolve().parents[1] / "analysis.ipynb"


@pytest.fixture(scope="module")
def nb():
    return json.loads(NOTEBOOK.read_text(encoding="utf-8"))


def test_notebook_structure(nb):
    assert nb["nbformat"] == 4 and nb["nbformat_minor"] >= 5
    assert nb["metadata"]["kernelspec"]["language"] == "python"
    ids = [c["id"] for c in nb["cells"]]
    assert len(set(ids)) == len(ids)
    for c in nb["cells"]:
        assert c["cell_type"] in ("markdown", "code")
        assert isinstance(c["source"], list) and all(isinstance(s, str) for s in c["source"])
        assert isinstance(c["metadata"], dict)
        if c["cell_type"] == "code":
            assert c["outputs"] == [] and c["execution_count"] is None  # committed clean
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "import pnp_postprocess as pp" in code
    assert sum(c["cell_type"] == "markdown" for c in nb["cells"]) >= 5


def test_notebook_runs_on_results(nb, tmp_path, study_files, sweep_files, monkeypatch):
    results = tmp_path / "results"
    results.mkdir()
    for f in study_files + sweep_files:
        shutil.copy(f, results / Path(f).name)
    monkeypatch.setenv("PNP_RESULTS", str(results))
    monkeypatch.setenv("PNP_FIGURES", str(tmp_path / "figures"))
    monkeypatch.chdir(tmp_path)
    ns = {"__name__": "__main__"}
    shown = []
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        tree = ast.parse("".join(c["source"]), f"analysis.ipynb:{c['id']}")
        last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, f"analysis.ipynb:{c['id']}", "exec"), ns)
        if last is not None:  # Jupyter shows the value of a cell's last expression
            value = eval(compile(ast.Expression(last.value), c["id"], "eval"), ns)
            if isinstance(value, Figure):
                shown.append(value)
    assert len(shown) == 5
    written = sorted(p.name for p in (tmp_path / "figures").iterdir())
    for name in ("compile-speedup", "phases", "psnr", "denoiser-speedup", "roofline"):
        assert {f"{name}.png", f"{name}.pdf", f"{name}.csv"} <= set(written)
    assert os.environ["PNP_RESULTS"] == str(results)
