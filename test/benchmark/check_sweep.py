"""Checks a pnp_bench output file against docs/output_schema.md ("pnp_bench output").

usage: check_sweep.py FILE.h5 [--expect-skipped BACKEND ...]
"""
import math
import sys

import h5py
import numpy as np

COLUMNS = {
    "architecture": "str", "dim": "int", "shape": "str", "backend": "str", "mode": "str",
    "gpu": "str", "status": "str", "reason": "str", "first_call_s": "float",
    "compile_s": "float", "export_s": "float", "stable_s": "float", "peak_memory_bytes": "int",
    "cuda_graph": "int", "module": "str", "notes": "str",
    "flops": "float", "bytes": "float", "intensity": "float",
}
ROOT_ATTRS = ["program", "version", "git_commit", "date", "host", "ranks", "gpu_names",
              "torch_version", "cuda_version", "nccl_version", "config", "device",
              "compile_mode", "compile_backend", "architecture"]


def fail(msg):
    print("check_sweep: FAIL:", msg)
    sys.exit(1)


def main():
    path = sys.argv[1]
    expect_skipped = sys.argv[3:] if len(sys.argv) > 2 and sys.argv[2] == "--expect-skipped" else []
    with h5py.File(path, "r") as f:
        for a in ROOT_ATTRS:
            if a not in f.attrs:
                fail(f"root attribute {a} missing")
        if f.attrs["program"] != "pnp_bench":
            fail(f"program = {f.attrs['program']}")
        if "results" not in f or not isinstance(f["results"], h5py.Group):
            fail("group /results missing")
        g = f["results"]
        if set(g.keys()) != set(COLUMNS):
            fail(f"columns {sorted(g.keys())} != {sorted(COLUMNS)}")
        cols, n = {}, None
        for name, kind in COLUMNS.items():
            d = g[name]
            for attr in ("units", "description"):
                if attr not in d.attrs:
                    fail(f"/results/{name} has no {attr} attribute")
            if d.ndim != 1:
                fail(f"/results/{name} is not 1-D")
            n = d.shape[0] if n is None else n
            if d.shape[0] != n:
                fail(f"/results/{name} has {d.shape[0]} rows, expected {n}")
            if kind == "str":
                if not h5py.check_string_dtype(d.dtype):
                    fail(f"/results/{name} is not a string dataset")
                cols[name] = list(d.asstr()[()])
            elif kind == "int":
                if d.dtype != np.int64:
                    fail(f"/results/{name} is {d.dtype}, expected int64")
                cols[name] = d[()]
            else:
                if d.dtype != np.float64:
                    fail(f"/results/{name} is {d.dtype}, expected float64")
                cols[name] = d[()]
        if n == 0:
            fail("no rows")
        ok = 0
        for i in range(n):
            row = {k: v[i] for k, v in cols.items()}
            where = f"row {i} ({row['architecture']} {row['shape']} {row['backend']})"
            dims = row["shape"].split("x")
            if len(dims) - 2 != row["dim"] or row["dim"] not in (2, 3):
                fail(f"{where}: dim {row['dim']} does not match shape")
            if row["mode"] != ("none" if row["backend"] == "eager" else "pre"):
                fail(f"{where}: mode {row['mode']}")
            if not (row["flops"] > 0 and row["bytes"] > 0 and
                    math.isclose(row["intensity"], row["flops"] / row["bytes"], rel_tol=1e-12)):
                fail(f"{where}: roofline counts {row['flops']} {row['bytes']} {row['intensity']}")
            if row["status"] == "ok":
                ok += 1
                if row["reason"] != "":
                    fail(f"{where}: ok row with a reason")
                if not (row["stable_s"] > 0 and row["first_call_s"] > 0 and row["compile_s"] >= 0):
                    fail(f"{where}: timings {row['first_call_s']} {row['compile_s']} {row['stable_s']}")
                if row["backend"] == "native" and not row["compile_s"] > 0:
                    fail(f"{where}: native compile_s {row['compile_s']}")
                # what the native backend chose is recorded (its fusions at least); the other
                # arms have no notes of pnp's
                if row["backend"] == "native" and "fusion" not in row["notes"]:
                    fail(f"{where}: native notes {row['notes']!r}")
                if row["backend"] in ("eager", "torch_compile", "torch_compile_max_autotune") and row["notes"]:
                    fail(f"{where}: notes on a {row['backend']} row")
                if row["peak_memory_bytes"] < 0:
                    fail(f"{where}: peak memory")
            elif row["status"] == "skipped":
                if not row["reason"]:
                    fail(f"{where}: skipped without a reason")
                if not math.isnan(row["stable_s"]):
                    fail(f"{where}: skipped row with a time")
            else:
                fail(f"{where}: status {row['status']}")
        for b in expect_skipped:
            rows = [i for i in range(n) if cols["backend"][i] == b]
            if not rows or any(cols["status"][i] != "skipped" for i in rows):
                fail(f"backend {b} is not recorded as skipped rows")
        if ok == 0:
            fail("no ok rows")
    print(f"check_sweep: OK ({n} rows, {ok} ok)")


if __name__ == "__main__":
    main()
