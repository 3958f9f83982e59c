"""scripts/gpu_clocks.py on synthetic nvidia-smi samples: the stretches it finds, their medians,
the repeated readings it drops, the lines it skips, the picture, and no samples as an error."""
import datetime as dt
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("gpu_clocks", os.path.join(ROOT, "scripts", "gpu_clocks.py"))
gc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gc)


def write_samples(path, rows):
    """rows: (seconds, SM MHz, W); one nvidia-smi line each, 20 ms apart in time as given."""
    t0 = dt.datetime(2026, 12, 4, 5, 0, 0)
    with open(path, "w") as f:
        f.write("this line is not a sample\n")
        for s, clk, pw in rows:
            t = (t0 + dt.timedelta(seconds=s)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
            f.write(f"{t}, {clk} MHz, 3201 MHz, {pw:.2f} W, 45, 100 %\n")


def trace():
    rows = []
    t = 0.0
    for _ in range(50):  # idle, 1 s
        rows.append((t, 1980, 130.0)); t += 0.02
    for i in range(100):  # busy, 2 s: clocks 1400 / 1500 / 1600, power about 690 W
        rows.append((t, (1400, 1500, 1600)[i % 3], 690.0 + (i % 2))); t += 0.02
    for _ in range(50):  # idle, 1 s
        rows.append((t, 1980, 130.0)); t += 0.02
    for i in range(60):  # busy, 1.2 s, each reading repeated five times (as nvidia-smi's 100 ms refresh)
        rows.append((t, (1690, 1710)[i // 5 % 2], (694.0, 696.0)[i // 5 % 2])); t += 0.02
    return rows


def test_stretches_and_medians(tmp_path, capsys):
    csv = tmp_path / "clocks.csv"
    write_samples(csv, trace())
    png = tmp_path / "clocks.png"
    assert gc.main([str(csv), "--png", str(png), "--label", "first", "second"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 2
    assert out[0].startswith("first: 1.0-3.0 s, median SM clock 1500 MHz, median power 690 W")
    assert out[1].startswith("second: 4.0-5.1 s, median SM clock 1700 MHz, median power 695 W")
    assert png.stat().st_size > 10000  # a drawn picture


def test_repeated_readings_dropped_and_threshold(tmp_path):
    csv = tmp_path / "clocks.csv"
    write_samples(csv, trace())
    s = gc.read(str(csv))
    assert len(s) == 1 + 100 + 1 + 12  # a run of one reading counts once
    assert s[0] == (0.0, 1980, 130.0)
    # above every sample: no stretch; between idle and busy: the two busy stretches
    assert gc.stretches(s, 800.0) == []
    two = gc.stretches(s, 650.0)
    assert [(g[0][0], g[-1][0]) for g in two] == [(1.0, pytest.approx(2.98)), (4.0, pytest.approx(5.1))]


def test_no_samples_is_an_error(tmp_path, capsys):
    csv = tmp_path / "empty.csv"
    csv.write_text("no samples here\n")
    assert gc.main([str(csv)]) == 2
    assert "no nvidia-smi samples" in capsys.readouterr().err


def test_until_cuts_the_trace(tmp_path, capsys):
    csv = tmp_path / "clocks.csv"
    write_samples(csv, trace())
    assert gc.main([str(csv), "--until", "3.5"]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 1


if __name__ == "__main__":
    raise SystemExit(pytest.main([__file__, "-q"]))
