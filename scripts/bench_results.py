#!/usr/bin/env python3
"""Appends the rows of pnp_bench result files to a docs/results CSV, with their provenance.

  scripts/bench_results.py CSV PREFIX --commit C --date D --command CMD [--gpu G] [--dtype T]
                           [--compile] [--speedup] FILE.h5 ...

One row per (architecture, shape, backend) of every file: `PREFIX_<arch><shape>_<dtype>_<backend>_stable`
in ms (and `..._compile` in s with --compile), and with --speedup one row per (architecture, shape)
that has both, `PREFIX_<arch><shape>_<dtype>_speedup`: torch.compile's stable time over native's.
The source column names the file as given (keep the files in docs/results). The commit is given
by hand: a device call's build stamps the commit its copy of the tree reports, which need not be
the commit that was sent. Rows whose id is already in the CSV are refused (exit 2).
"""
import argparse
import csv
import os
import sys

import h5py

COLUMNS = ["id", "what", "value", "unit", "gpu", "commit", "date", "command", "source"]


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def shape_tag(shape):
    dims = [int(x) for x in text(shape).split("x")][2:]  # N x C x spatial
    if len(set(dims)) == 1:
        return f"{dims[0]}{'^3' if len(dims) == 3 else ''}".replace("^3", "cube")
    return "x".join(str(d) for d in dims)


def sweep_dtype(config_toml):
    """The sweep's dtype from the file's configuration: fp32 or bf16."""
    import tomllib
    d = tomllib.loads(config_toml).get("sweep", {}).get("dtype", "float32")
    return {"float32": "fp32", "bfloat16": "bf16"}.get(d, d)


def rows_of(path, a):
    f = h5py.File(path, "r")
    r = f["results"]
    dtype = a.dtype or sweep_dtype(text(f.attrs["config"]))
    out, stable = [], {}
    for i in range(len(r["architecture"])):
        if text(r["status"][i]) != "ok":
            continue
        arch, backend, shape = text(r["architecture"][i]), text(r["backend"][i]), text(r["shape"][i])
        ch = text(shape).split("x")[1]
        key = f"{a.prefix}_{arch}{shape_tag(shape)}_{dtype}"
        what = f"{arch} {ch} ch {shape} {dtype} {backend}"
        src = os.path.relpath(path)
        t = float(r["stable_s"][i]) * 1e3
        stable[(key, backend)] = (t, what, src)
        out.append([f"{key}_{backend}_stable", f"{what}, stable", f"{t:.4f}", "ms", a.gpu, a.commit, a.date, a.command, src])
        if a.compile:
            out.append([f"{key}_{backend}_compile", f"{what}, compile", f"{float(r['compile_s'][i]):.4f}", "s", a.gpu,
                        a.commit, a.date, a.command, src])
    if a.speedup:
        for (key, backend), (t, what, src) in stable.items():
            if backend == "native" and (key, "torch_compile") in stable:
                tc = stable[(key, "torch_compile")][0]
                out.append([f"{key}_speedup", what.rsplit(" ", 1)[0] + ", torch.compile / native stable", f"{tc / t:.2f}",
                            "x", a.gpu, a.commit, a.date, a.command, src])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("prefix")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--date", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--gpu", default="H200")
    ap.add_argument("--dtype", default="")
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--speedup", action="store_true")
    a = ap.parse_args()
    existing = []
    if os.path.exists(a.csv):
        with open(a.csv, newline="") as f:
            existing = [r["id"] for r in csv.DictReader(f)]
    new = [row for p in a.files for row in rows_of(p, a)]
    ids = [r[0] for r in new]
    clash = sorted(({i for i in ids if ids.count(i) > 1}) | (set(ids) & set(existing)))
    if clash:
        print(f"bench_results: ids twice or already in {a.csv}: {', '.join(clash[:5])}", file=sys.stderr)
        return 2
    header = not os.path.exists(a.csv)
    with open(a.csv, "a", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if header:
            w.writerow(COLUMNS)
        w.writerows(new)
    print(f"bench_results: {len(new)} rows appended to {a.csv}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
