#!/usr/bin/env python3
"""The memory budget on the GPU (scripts/gpu_check.sh, section 5): a pnp_recon output run under
denoiser.memory_limit_gb must have peaked at or under the budget, its plan's estimate must bound
the measured peak (the caching allocator's) and lie within --slack of it, and the run must have
been patched (the budget is below the whole tile's need). With --refused LOG OUTPUT: the run of a
budget below the smallest that would do ended before any work (no output file) with one error
line that names that smallest budget.
  check_budget.py OUTPUT.h5 [--slack 0.10]
  check_budget.py --refused LOG OUTPUT.h5
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "solver"))
from memory_checks import refusal_problems, run_problems  # noqa: E402


def check_run(path, slack):
    problems, summary = run_problems(path, slack, patched=True)
    print(f"{path}: {summary}")
    for q in problems:
        print(f"  FAIL: {q}")
    return not problems


def check_refused(log, output):
    problems, least = refusal_problems(open(log, errors="replace").read(), output)
    print(f"{log}: refused, smallest budget named: {least}")
    for q in problems:
        print(f"  FAIL: {q}")
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output")
    ap.add_argument("extra", nargs="?")
    ap.add_argument("--slack", type=float, default=0.10)
    ap.add_argument("--refused", action="store_true")
    a = ap.parse_args()
    ok = check_refused(a.output, a.extra) if a.refused else check_run(a.output, a.slack)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
