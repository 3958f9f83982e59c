#!/usr/bin/env python3
"""Checks docs/performance.md against docs/results, and the results' commands against HEAD.

  scripts/check_performance.py [--doc docs/performance.md] [--results docs/results] [--bin build/cpu/bin]

docs/performance.md's tables have the header `| what | measured | data |`; a data cell names rows
of docs/results as FILE.csv#ID, where ID may hold shell wildcards (`call4_*`).
1. Every docs/results/*.csv has the columns id, what, value, unit and the provenance columns
   command, gpu, commit, date, every one filled in every row, and no id twice.
2. Every FILE.csv#ID of a table names a file there and matches at least one row.
3. Every number in a "measured" cell is the value of one of the rows its data cell names, at the
   precision it is written with (also after a unit change by a power of 1000: s and ms).
4. Every command of a named row (and every `command` in backticks in the row) runs at HEAD as far
   as this machine can tell without a GPU: a script in scripts/ exists (with the stage it names for
   gpu_measure.sh, the function it names for device_call.sh; `python3 PATH`: PATH exists), a pnp
   program is built in --bin,
   every --option it uses is in the program's --help, every input/*.toml it names exists, and a
   pnp_recon command's configuration and --set overrides parse (`--print-config`).
Exit 1 with one line per problem.
"""
from __future__ import annotations

import argparse
import csv
import fnmatch
import math
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
REF = re.compile(r"([\w./-]+\.csv)\)?#([\w*?\[\]-]+)")
COLUMNS = ("id", "what", "value", "unit")
PROVENANCE = ("command", "gpu", "commit", "date")


def found(figure: str, values) -> bool:
    value = float(figure)
    mantissa = figure.lower().split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(figure.lower().split("e")[1]) if "e" in figure.lower() else 0
    tol = 0.5 * 10 ** (exponent - decimals) + 1e-12 * abs(value)
    return any(abs(v * s - value) <= tol for v in values for s in (1.0, 1e3, 1e-3))


def load_results(folder, problems):
    """{file name: [row dict]} for every CSV in folder, its columns checked."""
    out = {}
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not name.endswith(".csv"):
            continue
        with open(os.path.join(folder, name), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
            header = rows[0].keys() if rows else []
        missing = [c for c in COLUMNS + PROVENANCE if c not in header]
        if missing or not rows:
            problems.append(f"results/{name}: no rows or missing columns {', '.join(missing)}")
            continue
        seen = set()
        for i, r in enumerate(rows, 2):
            empty = [c for c in ("id", "value") + PROVENANCE if not (r.get(c) or "").strip()]
            if empty:
                problems.append(f"results/{name} line {i}: empty {', '.join(empty)}")
            if r["id"] in seen:
                problems.append(f"results/{name} line {i}: id {r['id']} twice")
            seen.add(r["id"])
            try:
                float(r["value"])
            except ValueError:
                problems.append(f"results/{name} line {i}: value '{r['value']}' is not a number")
        out[name] = rows
    if not out:
        problems.append(f"{folder}: no results files (*.csv)")
    return out


def table_rows(doc):
    """The rows of every table whose header starts with '| what | measured | data |'."""
    rows, inside = [], False
    for line in open(doc, encoding="utf-8"):
        if line.startswith("| what | measured | data |"):
            inside = True
            continue
        if inside:
            if not line.startswith("|"):
                inside = False
                continue
            if set(line.strip()) <= set("|-: "):
                continue
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
    return rows


def _help_text(prog, bindir, problems, what, cmd):
    if prog.startswith("scripts/"):
        path = os.path.join(ROOT, prog)
        if not os.path.isfile(path):
            problems.append(f"{what}: command '{cmd}': no script {prog}")
            return None
        return open(path, encoding="utf-8").read()
    exe = os.path.join(bindir, os.path.basename(prog))
    if not os.path.isfile(exe):
        problems.append(f"{what}: command '{cmd}': program {prog} is not built in {bindir}")
        return None
    r = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    return r.stdout + r.stderr


def check_command(cmd, bindir, problems, what, cache):
    if ("checked", cmd) in cache:   # each command once
        return
    cache[("checked", cmd)] = True
    try:
        toks = shlex.split(cmd)
    except ValueError as e:
        problems.append(f"{what}: command '{cmd}': {e}")
        return
    if not toks:
        return
    if toks[0] in ("python3", "python") and len(toks) > 1:  # a repository script: it exists
        if not os.path.isfile(os.path.join(ROOT, toks[1])):
            problems.append(f"{what}: command '{cmd}': no script {toks[1]}")
        return
    prog = toks[0]
    key = (prog, bindir)
    if key not in cache:
        cache[key] = _help_text(prog, bindir, problems, what, cmd)
    text = cache[key]
    if text is None:
        return
    if len(toks) > 1 and prog.endswith("gpu_measure.sh") and not re.search(rf"^\s*{re.escape(toks[1])}\)", text, re.M):
        problems.append(f"{what}: command '{cmd}': {prog} has no stage '{toks[1]}'")
    if len(toks) > 1 and prog.endswith("device_call.sh") and not re.search(rf"^{re.escape(toks[1])}\(\)", text, re.M):
        problems.append(f"{what}: command '{cmd}': {prog} has no function '{toks[1]}'")
    for t in toks[1:]:
        if t.startswith("--") and t.split("=")[0] not in text:
            problems.append(f"{what}: command '{cmd}': option {t.split('=')[0]} is not in {prog} --help")
        if t.startswith("input/") and t.endswith(".toml") and not os.path.isfile(os.path.join(ROOT, t)):
            problems.append(f"{what}: command '{cmd}': {t} does not exist")
    if os.path.basename(prog) == "pnp_recon" and "--help" not in toks:
        # the configuration and every --set parse at HEAD: the effective configuration, no run
        args = [a for a in toks[1:] if a not in ("--dry-run", "--force", "--resume")]
        r = subprocess.run([os.path.join(bindir, "pnp_recon"), *args, "--print-config"], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0 or "error:" in r.stdout + r.stderr:
            err = [l for l in (r.stdout + r.stderr).splitlines() if "error" in l][:1]
            problems.append(f"{what}: command '{cmd}' does not parse at HEAD: {err[0] if err else r.returncode}")


def check(doc, results_dir, bindir):
    """The problems found (a list of lines) and the number of figures checked."""
    problems, cache = [], {}
    results = load_results(results_dir, problems)
    rows = table_rows(doc)
    if not rows:
        problems.append(f"{doc}: no table with the header '| what | measured | data |'")
    checked = 0
    for cells in rows:
        if len(cells) < 3:
            problems.append(f"row '{cells[0] if cells else ''}': expected 3 columns, got {len(cells)}")
            continue
        what, measured, data = cells[:3]
        named = []
        refs = REF.findall(data)
        if not refs:
            problems.append(f"{what}: its data cell names no FILE.csv#ID")
        for path, pattern in refs:
            name = os.path.basename(path)
            if name not in results:
                problems.append(f"{what}: no results file {name}")
                continue
            match = [r for r in results[name] if fnmatch.fnmatchcase(r["id"], pattern)]
            if not match:
                problems.append(f"{what}: no row of {name} matches '{pattern}'")
            named += match
        values = [float(r["value"]) for r in named if not math.isnan(_num(r["value"]))]
        for fig in NUM.findall(measured.replace("–", " ").replace("−", "-")):
            checked += 1
            if named and not found(fig, values):
                problems.append(f"{what}: {fig} is the value of no row it names ({data})")
        commands = {r["command"] for r in named} | set(re.findall(r"`([^`]+)`", " ".join(cells)))
        for cmd in sorted(commands):
            check_command(cmd, bindir, problems, what, cache)
    for name, file_rows in results.items():   # every result's command, cited or not
        for cmd in sorted({r["command"] for r in file_rows}):
            check_command(cmd, bindir, problems, f"results/{name}", cache)
    return problems, len(rows), checked


def _num(s):
    try:
        return float(s)
    except ValueError:
        return math.nan


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "performance.md"))
    ap.add_argument("--results", default=os.path.join(ROOT, "docs", "results"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "cpu", "bin"))
    a = ap.parse_args(argv)
    problems, n_rows, checked = check(a.doc, a.results, a.bin)
    for p in problems:
        print("error: " + p)
    print(f"{n_rows} rows, {checked} figures checked against docs/results: "
          + ("ok" if not problems else f"{len(problems)} problem(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
