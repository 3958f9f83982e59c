"""Command line: python3 -m pnp_postprocess FIGURE FILES... --out DIR"""
from __future__ import annotations

import argparse
import sys

import h5py

from .api import FIGURES, make_figure
from .images import one_per_run
from .volume import is_volume
from .io import SchemaError, gpu_label, is_ceilings, is_scaling, program_of


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python3 -m pnp_postprocess",
        description="Draw the pnp study's figures (PNG + PDF) and the same data as CSV from "
                    "pnp_recon / pnp_bench HDF5 result files. Repeated runs are separate "
                    "files and are averaged (± std) per (GPU, GPU count, mode, backend).",
        epilog="figures:\n" + "\n".join(f"  {n:<17} {s.help}" for n, s in FIGURES.items())
               + "\n  all               every figure the given files allow (reconstruction:\n"
               "                    the first file of each set of repetitions)\n"
               "  list              one line per file (program, ranks, mode, GPU, commit)",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("figure", choices=list(FIGURES) + ["all", "list"], metavar="FIGURE",
                   help="which figure to draw (see below)")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="pnp result files (.h5); memory-budget: results tables (.csv)")
    p.add_argument("--out", default="figures", metavar="DIR",
                   help="output directory (default: figures)")
    p.add_argument("--name", metavar="STEM",
                   help="file name stem of the outputs (default: the figure name)")
    return p


def _list(files) -> int:
    for path in files:
        with h5py.File(path, "r") as f:
            a = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in f.attrs.items()}
        print(f"{path}: {a.get('program')} ranks={a.get('ranks')} mode={a.get('compile_mode')} "
              f"backend={a.get('compile_backend')} gpu={gpu_label(a.get('gpu_names', ''))} "
              f"commit={a.get('git_commit')} date={a.get('date')}")
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.figure == "list":
            return _list(args.files)
        if args.figure == "all":
            by_program = {"pnp_recon": [], "pnp_recon volume": [], "pnp_bench": [], "pnp_bench --scaling": [],
                          "results table": []}
            for path in args.files:
                if path.endswith(".csv"):
                    by_program["results table"].append(path)
                    continue
                if is_scaling(path):
                    by_program["pnp_bench --scaling"].append(path)
                    continue
                if is_ceilings(path):
                    print(f"{path}: pnp_bench --ceilings file, no figure (read_ceilings reads it)")
                    continue
                prog = program_of(path)
                if prog == "pnp_recon" and is_volume(path):  # the volume figure, not the 2D ones
                    prog = "pnp_recon volume"
                if prog not in by_program:
                    raise SchemaError(f"{path}: unknown program '{prog}'")
                by_program[prog].append(path)
            names = [n for n, s in FIGURES.items() if by_program[s.program]]
            jobs = [(n, by_program[FIGURES[n].program], None) for n in names]
            # Repetitions give the same image: one row per run, not one per file.
            jobs = [(n, one_per_run(f) if n == "reconstruction" else f, s) for n, f, s in jobs]
        else:
            jobs = [(args.figure, args.files, args.name)]
        for name, files, stem in jobs:
            out = make_figure(name, files, args.out, stem)
            print(f"{name}: {out.png} {out.pdf} {out.csv} ({len(out.rows)} rows)")
    except (SchemaError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0
