"""scripts/ncu_stalls.py on a synthetic Nsight Compute source page: the shares per stall reason and
per instruction (predicates skipped), a launch printed twice counted once, no launch an error."""
import gzip
import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
spec = importlib.util.spec_from_file_location("ncu_stalls", os.path.join(ROOT, "scripts", "ncu_stalls.py"))
ns = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ns)

HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","stall_long_sb","stall_lg","stall_wait",'
          '"stall_long_sb (Not Issued)"\n')


def page(name, rows):
    lines = [f'"Kernel Name","{name}",\n', HEADER]
    for addr, src, long_sb, lg, wait in rows:
        lines.append(f'"{addr}","{src}","{long_sb + lg + wait}","{long_sb}","{lg}","{wait}","999"\n')
    return "".join(lines)


A = [("0x10", "      LDG.E R2, desc[UR6][R4.64]", 10, 30, 0),
     ("0x20", "@!P0  STG.E desc[UR6][R6.64], R2", 0, 20, 0),
     ("0x30", "      HGMMA.64x128x8.F32.TF32 R24, gdesc[UR8], R24", 20, 0, 20)]
B = [("0x10", "      FADD R1, R2, R3", 5, 0, 5)]


def test_shares(tmp_path, capsys):
    p = tmp_path / "sass.csv.gz"
    with gzip.open(p, "wt") as f:  # launch A printed twice (as ncu can), then B
        f.write(page("kernel_a", A) + page("kernel_a", A) + page("kernel_b", B))
    assert ns.main([str(p)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "launch 0: kernel_a; 3 instructions, 100 stall samples"
    assert out[1] == "  reasons: lg 50.0 %, long_sb 30.0 %, wait 20.0 %"  # not the Not Issued column
    assert out[2] == "  instructions: HGMMA 40.0 %, LDG 40.0 %, STG 20.0 %"
    assert out[3] == "launch 1: kernel_b; 1 instructions, 10 stall samples"
    assert len(out) == 6


def test_plain_csv_and_no_launch(tmp_path, capsys):
    p = tmp_path / "sass.csv"
    p.write_text(page("kernel_b", B))
    assert ns.main([str(p)]) == 0
    assert "FADD 100.0 %" in capsys.readouterr().out
    q = tmp_path / "other.csv"
    q.write_text("a,b,c\n1,2,3\n")
    assert ns.main([str(q)]) == 2
    assert "no launch" in capsys.readouterr().err
