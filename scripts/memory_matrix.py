#!/usr/bin/env python3
"""Summarises a device_call.sh memory_matrix folder: one CSV row per run of rows.txt
(size, budget_gb, precision, mode, exit code) with the plan's estimate, the measured peak
(rank 0, GiB), their ratio, the patch size and the denoise phase's last-iteration time (s).
  scripts/memory_matrix.py FOLDER > matrix.csv
"""
import csv
import os
import sys

import h5py


def main(folder):
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(["size", "budget_gb", "precision", "mode", "exit", "estimate_gib", "peak_gib", "peak_over_estimate",
                "peak_over_budget", "patch_px", "denoise_s", "commit"])
    with open(os.path.join(folder, "rows.txt")) as f:
        rows = [line.strip().split(",") for line in f if line.strip()]
    for n, b, p, m, rc in rows:
        path = os.path.join(folder, f"n{n}_b{b}_{p}_{m}.h5")
        if rc != "0" or not os.path.exists(path):
            w.writerow([n, b, p, m, rc] + [""] * 7)
            continue
        with h5py.File(path, "r") as h:
            est = float(h["/memory/estimated_bytes"][0]) / 2**30
            peak = float(h["/memory/peak_bytes"][0]) / 2**30
            patch = int(h["/memory/patch_size"][0])
            den = float(h["/timings/denoise"][-1].max())
            commit = h.attrs.get("git_commit", "")
            commit = commit.decode() if isinstance(commit, bytes) else str(commit)
        w.writerow([n, b, p, m, rc, f"{est:.2f}", f"{peak:.2f}", f"{peak / est:.3f}", f"{peak * 2**30 / (float(b) * 1e9):.3f}",
                    patch, f"{den:.4f}", commit[:12]])


if __name__ == "__main__":
    main(sys.argv[1])
