#!/usr/bin/env python3
"""One CSV row per run of device_call.sh memory_matrix: size, budget_gb, precision, mode and exit
code, then from the run's output the plan's estimate, the measured peak (rank 0, GiB), their
ratio, the peak over the budget, the peaks of the set-up, the metrics and the denoise and
forward-projection phases (GiB), the patches (count, rows x cols, redundancy), the denoise
phase's last-iteration time (s), and the CUDA allocator's reserved peak (GiB: allocated bytes and
the free pieces between them; 0 on the CPU) and its retries (outputs since 2026-12-06; empty
before). A run that exited non-zero (2: the plan refused the budget) gets its exit code and empty
columns.
  scripts/memory_matrix.py --header
  scripts/memory_matrix.py SIZE BUDGET PRECISION MODE EXIT OUTPUT.h5
"""
import csv
import os
import sys

import h5py

HEADER = ["size", "budget_gb", "precision", "mode", "exit", "estimate_gib", "peak_gib", "peak_over_estimate",
          "peak_over_budget", "setup_gib", "metrics_gib", "denoise_peak_gib", "forward_peak_gib", "patches",
          "patch_shape", "redundancy", "denoise_s", "reserved_gib", "allocator_retries", "commit"]


def row(n, b, p, m, rc, path):
    if rc != "0" or not os.path.exists(path):
        return [n, b, p, m, rc] + [""] * (len(HEADER) - 5)
    with h5py.File(path, "r") as h:
        def gib(k):
            return float(h[k][0]) / 2**30
        est, peak = gib("/memory/estimated_bytes"), gib("/memory/peak_bytes")
        setup, metrics = gib("/memory/setup_peak_bytes"), gib("/memory/metrics_peak_bytes")
        den_peak, fwd_peak = gib("/memory/phase_peak_bytes/denoise"), gib("/memory/phase_peak_bytes/forward_projection")
        patches = int(h["/memory/patches"][0])
        shape = "x".join(str(int(v)) for v in h["/memory/patch_shape"][0])
        red = float(h["/decomposition/patch_redundancy"][0])
        den = float(h["/timings/denoise"][-1].max())
        reserved = f"{gib('/memory/reserved_peak_bytes'):.2f}" if "/memory/reserved_peak_bytes" in h else ""
        retries = int(h["/memory/allocator_retries"][0]) if "/memory/allocator_retries" in h else ""
        commit = h.attrs.get("git_commit", "")
        commit = commit.decode() if isinstance(commit, bytes) else str(commit)
    return [n, b, p, m, rc, f"{est:.2f}", f"{peak:.2f}", f"{peak / est:.3f}", f"{peak * 2**30 / (float(b) * 1e9):.3f}" if float(b) > 0 else "",
            f"{setup:.2f}", f"{metrics:.2f}", f"{den_peak:.2f}", f"{fwd_peak:.2f}", patches, shape, f"{red:.3f}",
            f"{den:.4f}", reserved, retries, commit[:12]]


def main(argv):
    w = csv.writer(sys.stdout, lineterminator="\n")
    if argv == ["--header"]:
        w.writerow(HEADER)
    elif len(argv) == 6:
        w.writerow(row(*argv))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
