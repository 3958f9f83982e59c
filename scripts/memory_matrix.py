#!/usr/bin/env python3
"""Summarises a device_call.sh memory_matrix folder: one CSV row per run of rows.txt
(size, budget_gb, precision, mode, exit code) with the plan's estimate, the measured peak
(rank 0, GiB), their ratio, the peaks of the set-up, the metrics and the denoise and forward
projection phases (GiB), the patches (count, rows x cols, redundancy) and the denoise phase's
last-iteration time (s).
  scripts/memory_matrix.py FOLDER > matrix.csv
"""
import csv
import os
import sys

import h5py


def main(folder):
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["size", "budget_gb", "precision", "mode", "exit", "estimate_gib", "peak_gib", "peak_over_estimate",
                "peak_over_budget", "setup_gib", "metrics_gib", "denoise_peak_gib", "forward_peak_gib", "patches",
                "patch_shape", "redundancy", "denoise_s", "commit"])
    with open(os.path.join(folder, "rows.txt")) as f:
        rows = [line.strip().split(",") for line in f if line.strip()]
    for n, b, p, m, rc in rows:
        path = os.path.join(folder, f"n{n}_b{b}_{p}_{m}.h5")
        if rc != "0" or not os.path.exists(path):
            w.writerow([n, b, p, m, rc] + [""] * 14)
            continue
        with h5py.File(path, "r") as h:
            est = float(h["/memory/estimated_bytes"][0]) / 2**30
            peak = float(h["/memory/peak_bytes"][0]) / 2**30
            gib = lambda k: float(h[k][0]) / 2**30
            setup, metrics = gib("/memory/setup_peak_bytes"), gib("/memory/metrics_peak_bytes")
            den_peak, fwd_peak = gib("/memory/phase_peak_bytes/denoise"), gib("/memory/phase_peak_bytes/forward_projection")
            patches = int(h["/memory/patches"][0])
            shape = "x".join(str(int(v)) for v in h["/memory/patch_shape"][0])
            red = float(h["/decomposition/patch_redundancy"][0])
            den = float(h["/timings/denoise"][-1].max())
            commit = h.attrs.get("git_commit", "")
            commit = commit.decode() if isinstance(commit, bytes) else str(commit)
        w.writerow([n, b, p, m, rc, f"{est:.2f}", f"{peak:.2f}", f"{peak / est:.3f}", f"{peak * 2**30 / (float(b) * 1e9):.3f}",
                    f"{setup:.2f}", f"{metrics:.2f}", f"{den_peak:.2f}", f"{fwd_peak:.2f}", patches, shape, f"{red:.3f}",
                    f"{den:.4f}", commit[:12]])


if __name__ == "__main__":
    main(sys.argv[1])
