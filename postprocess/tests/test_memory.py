"""The memory-budget figure: a memory matrix's runs from a results table (CSV)."""
import csv
import math
import os

import pytest

from pnp_postprocess import api, cli
from pnp_postprocess.io import SchemaError
from pnp_postprocess.memory import budget_table, read_budget_tables

FIELDS = ["id", "what", "value", "unit", "gpu", "commit", "date", "command", "source"]
REPO_TABLE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "results", "memory_budget.csv")


def write_table(path, values):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for k, v in values.items():
            w.writerow({"id": k, "what": "x", "value": v, "unit": "", "gpu": "H100", "commit": "abc1234",
                        "date": "2026-12-06", "command": "pnp_recon input/study_4096.toml", "source": "test"})
    return path


@pytest.fixture
def table(tmp_path):
    return write_table(tmp_path / "m.csv", {
        "h100_8192_b16_fp32_pre_b_exit": 0, "h100_8192_b16_fp32_pre_b_estimate_gib": 13.44,
        "h100_8192_b16_fp32_pre_b_peak_gib": 12.38, "h100_8192_b16_fp32_pre_b_denoise_s": 1.4868,
        "h100_16384_b16_fp32_fused_a_exit": 1, "h100_16384_b16_fp32_fused_a_estimate_gib": 14.5,
        "h100_16384_b8_bf16_pre_a_exit": 2,
        "limit40_estimate": 18.2,  # not a matrix row: left out
    })


def test_one_row_per_run_with_shares_of_the_budget(table):
    rows = budget_table(read_budget_tables([table]))
    assert [(r["size"], r["budget_gb"], r["mode"], r["exit"]) for r in rows] == [
        (8192, 16.0, "pre", 0), (16384, 8.0, "pre", 2), (16384, 16.0, "fused", 1)]
    ran = rows[0]
    assert ran["estimate_share"] == pytest.approx(13.44 * 2 ** 30 / 16e9)
    assert ran["peak_share"] == pytest.approx(12.38 * 2 ** 30 / 16e9)
    assert ran["peak_over_estimate"] == pytest.approx(12.38 / 13.44)
    assert math.isnan(rows[2]["peak_gib"]) and rows[2]["estimate_gib"] == 14.5
    assert math.isnan(rows[1]["estimate_share"])


def test_figure_and_csv_from_the_command_line(table, tmp_path):
    assert cli.main(["memory-budget", str(table), "--out", str(tmp_path / "f"), "--name", "m"]) == 0
    assert (tmp_path / "f" / "m.png").stat().st_size > 0 and (tmp_path / "f" / "m.pdf").exists()
    assert len(api.read_csv(tmp_path / "f" / "m.csv")) == 3


def test_not_a_results_table_is_an_error(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("a,b\n1,2\n")
    with pytest.raises(SchemaError):
        read_budget_tables([p])
    assert cli.main(["memory-budget", str(p), "--out", str(tmp_path)]) == 2


def test_the_repository_matrix_every_run_that_ran_held_its_budget_and_estimate():
    rows = budget_table(read_budget_tables([REPO_TABLE]))
    ran = [r for r in rows if r["exit"] == 0]
    assert len(ran) >= 20
    for r in ran:
        assert r["peak_share"] <= 1.0, r
    # The estimate within 10 % of the peak: tag f (d5d9c35) and tag e's pre runs (a trial whose pre
    # path is f's: a tile in patches without graphs), and tag g (a tile in patches filling up to
    # 95 % of its budget, with expandable segments: the plan as it stands for patches; whole tiles
    # plan as in f). Earlier tags captured every tile, and a graph's pool kept a lower allocated
    # peak (0.867 at 16384² under 16 GB).
    # Tag h: the plan of f and g on an H200 (29 runs ran; 16384² under 8 GB refused, exit 2).
    # Tag i: 88ce3fc's plan (a GPU's projections counted as one image of an aligned tile), rerun
    # where it changed the plan: 16384² under 16 GB (under 8 GB still refused).
    for tags, least in (({"f", "e"}, 15), ({"g"}, 12), ({"h"}, 29), ({"i"}, 4)):
        current = [r for r in ran if r["tag"] in tags and (r["tag"] != "e" or r["mode"] == "pre")]
        assert len(current) >= least
        for r in current:
            assert 0.9 <= r["peak_over_estimate"] <= 1.0, r
    # every run of tag g ran; of tag h, every one but those refused before any work
    assert all(r["exit"] == 0 for r in rows if r["tag"] == "g")
    assert all(r["exit"] == 0 or (r["exit"] == 2 and r["size"] == 16384 and r["budget_gb"] == 8) for r in rows if r["tag"] == "h")
    assert all(r["exit"] == 0 or (r["exit"] == 2 and r["budget_gb"] == 8) for r in rows if r["tag"] == "i")
    # The plan as it stands on an H200 (tag h where 88ce3fc left the plan as it was, and tag i):
    # every estimate within 10 % of its peak (at most 1.1 x the peak)
    now = [r for r in ran if r["gpu"] == "H200" and (r["tag"] == "i" or (r["tag"] == "h" and not (r["size"] == 16384 and r["budget_gb"] == 16)))]
    assert len(now) >= 29
    for r in now:
        assert r["estimate_gib"] <= 1.1 * r["peak_gib"], r
