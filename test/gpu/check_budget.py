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
import re
import sys

import h5py
import numpy as np


def check_run(path, slack):
    with h5py.File(path, "r") as f:
        budget = float(f["/memory"].attrs["limit_gb"]) * 1e9
        peak = f["/memory/peak_bytes"][()].astype(float)
        est = f["/memory/estimated_bytes"][()].astype(float)
        patches = f["/memory/patches"][()]
        red = f["/decomposition/patch_redundancy"][()]
        psnr = f["/metrics/psnr"][()]
        x = f["/reconstruction"][()]
    gib = 2.0 ** 30
    print(f"{path}: budget {budget / 1e9:g} GB, peak {peak / gib} GiB, estimate {est / gib} GiB, "
          f"{patches} patches, redundancy {red}, final PSNR {psnr[-1]:.3f} dB")
    ok = True
    if budget <= 0:
        print("  FAIL: no memory_limit_gb in the output"); ok = False
    if np.any(peak <= 0):
        print("  FAIL: no peak measured"); ok = False
    if np.any(peak > budget):
        print(f"  FAIL: the peak exceeds the budget by {(peak.max() - budget) / gib:.3f} GiB"); ok = False
    if np.any(est < peak):
        print(f"  FAIL: the estimate is short of the peak (peak / estimate {np.max(peak / est):.3f})"); ok = False
    if np.any(est > (1 + slack) * peak):
        print(f"  FAIL: the estimate is more than {slack:.0%} over the peak (estimate / peak {np.max(est / peak):.3f})")
        ok = False
    if np.any(patches <= 1):
        print("  FAIL: the run was not patched: the budget did not bind"); ok = False
    if not (np.isfinite(psnr[-1]) and float(np.std(x)) > 0):
        print("  FAIL: the reconstruction is blank or its PSNR not finite"); ok = False
    return ok


def check_refused(log, output):
    text = open(log, errors="replace").read()
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    ok = True
    if os.path.exists(output):
        print(f"  FAIL: {output} exists: the refused run wrote an output"); ok = False
    if len(errors) != 1:
        print(f"  FAIL: expected one error line, got {len(errors)}"); ok = False
    m = re.search(r"The smallest limit that would do is denoiser\.memory_limit_gb = ([0-9]+(?:\.[0-9]+)?)", text)
    if not m:
        print("  FAIL: the error does not name the smallest budget that would do"); ok = False
    if re.search(r"^iteration ", text, re.M):
        print("  FAIL: iterations ran before the refusal"); ok = False
    print(f"{log}: {errors[:1]}")
    return ok


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
