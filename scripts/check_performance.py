#!/usr/bin/env python3
"""Checks docs/performance.md against the measurement files it cites, and its commands against HEAD.

  scripts/check_performance.py [--doc docs/performance.md] [--bin build/cpu/bin]

The summary table of docs/performance.md has the columns
  | what | measured | GPU, date, commit | command | files |
1. Every number in a "measured" cell must be found in one of the row's files (paths relative to
   docs/): some number in the file, times a power of 1000 (a unit change: s and ms, TB/s and
   GB/s), rounds to it at the precision it is written with. Text files are scanned for numbers,
   HDF5 files (.h5) for every numeric dataset value and attribute.
2. Every command in the "command" cell (in backticks) must run at HEAD as far as this machine
   can tell without a GPU: its program exists (a script in scripts/ with the stage it names, or a
   pnp program built in --bin), every --option it uses appears in the program's --help, and every
   input/*.toml it names exists.
Exit 1 with one line per problem.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def numbers_in_text(path):
    with open(path, errors="replace") as f:
        return [float(m.group()) for m in NUM.finditer(f.read())]


def numbers_in_h5(path):
    import h5py
    import numpy as np

    out = []

    def add(v):
        a = np.asarray(v)
        if a.dtype.kind in "fiu":
            out.extend(float(x) for x in a.ravel()[:100000] if np.isfinite(x))
        elif a.dtype.kind in "SOU":
            for s in a.ravel()[:10000]:
                s = s.decode() if isinstance(s, bytes) else str(s)
                out.extend(float(m.group()) for m in NUM.finditer(s))

    with h5py.File(path, "r") as f:
        for v in f.attrs.values():
            add(v)

        def visit(_name, obj):
            if isinstance(obj, h5py.Dataset):
                add(obj[()])
            for v in obj.attrs.values():
                add(v)
        f.visititems(visit)
    return out


def found(figure: str, candidates) -> bool:
    value = float(figure)
    decimals = len(figure.split(".")[1]) if "." in figure else 0
    tol = 0.5 * 10 ** (-decimals) + 1e-12 * abs(value)
    for c in candidates:
        for scale in (1.0, 1e3, 1e-3, 1e6, 1e-6):
            if abs(c * scale - value) <= tol:
                return True
    return False


def table_rows(doc):
    """The rows of the first table whose header starts with '| what | measured |'."""
    rows, inside = [], False
    for line in open(doc):
        if line.startswith("| what | measured |"):
            inside = True
            continue
        if inside:
            if not line.startswith("|"):
                break
            if set(line.strip()) <= set("|-: "):
                continue
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            rows.append(cells)
    return rows


def check_command(cmd, bindir, problems, what):
    toks = cmd.split()
    if not toks:
        return
    prog = toks[0]
    if prog.startswith("scripts/"):
        path = os.path.join(ROOT, prog)
        if not os.path.isfile(path):
            problems.append(f"{what}: command '{cmd}': no script {prog}")
            return
        text = open(path).read()
        if prog.endswith("gpu_measure.sh") and len(toks) > 1 and not re.search(rf"^\s*{re.escape(toks[1])}\)", text, re.M):
            problems.append(f"{what}: command '{cmd}': {prog} has no stage '{toks[1]}'")
        help_text = text
    else:
        exe = os.path.join(bindir, os.path.basename(prog))
        if not os.path.isfile(exe):
            problems.append(f"{what}: command '{cmd}': program {prog} is not built in {bindir}")
            return
        r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
        help_text = r.stdout + r.stderr
    for t in toks[1:]:
        if t.startswith("--"):
            opt = t.split("=")[0]
            if opt not in help_text:
                problems.append(f"{what}: command '{cmd}': option {opt} is not in {prog} --help")
        if t.endswith(".toml") and t.startswith("input/") and not os.path.isfile(os.path.join(ROOT, t)):
            problems.append(f"{what}: command '{cmd}': {t} does not exist")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "performance.md"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "cpu", "bin"))
    a = ap.parse_args(argv)
    rows = table_rows(a.doc)
    problems = []
    if not rows:
        problems.append(f"{a.doc}: no summary table (a header starting '| what | measured |')")
    docdir = os.path.dirname(os.path.abspath(a.doc))
    checked = 0
    for cells in rows:
        if len(cells) < 5:
            problems.append(f"row '{cells[0] if cells else ''}': expected 5 columns, got {len(cells)}")
            continue
        what, measured, _where, command, files = cells[:5]
        paths = re.findall(r"\(([^)]+)\)", files) or [p.strip() for p in files.split(",") if p.strip()]
        candidates = []
        for p in paths:
            full = os.path.normpath(os.path.join(docdir, p))
            if not os.path.isfile(full):
                problems.append(f"{what}: file {p} does not exist")
                continue
            candidates += numbers_in_h5(full) if full.endswith(".h5") else numbers_in_text(full)
        for fig in NUM.findall(measured.replace("–", " ").replace("−", "-")):
            checked += 1
            if not found(fig, candidates):
                problems.append(f"{what}: {fig} is in no number of {', '.join(paths)}")
        for cmd in re.findall(r"`([^`]+)`", command):
            check_command(cmd, a.bin, problems, what)
    for p in problems:
        print("error: " + p)
    print(f"{len(rows)} rows, {checked} figures checked against their files: "
          + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
