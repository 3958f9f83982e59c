#!/usr/bin/env python3
"""Issue 46's slice-wise volume check: the per-slice share of a volume's iteration against one
slice of the same size run alone. Reads the two pnp_recon outputs and writes one CSV row: slices,
size, the volume's stable iteration (s), its share per slice (s), the lone slice's stable
iteration (s), their ratio, the denoiser's slices per call and calls per iteration (rank 0), the
volume's denoise phase per slice and the lone slice's (s), the peak memory (GiB) and the commit.
  scripts/volume_share.py --header
  scripts/volume_share.py VOLUME.h5 SLICE.h5
"""
import csv
import sys

import h5py

HEADER = ["slices", "size", "volume_stable_s", "share_per_slice_s", "slice_alone_s", "share_over_alone", "batch",
          "batches", "volume_denoise_per_slice_s", "slice_denoise_s", "volume_peak_gib", "commit"]


def stable_denoise(h):  # the mean of the last iterations (the first one's set-up left out)
    d = h["/timings/denoise"][()]  # [iterations, ranks]
    return float(d[-max(1, min(3, len(d) - 1)):].max(axis=1).mean())


def row(volume, alone):
    with h5py.File(volume, "r") as v, h5py.File(alone, "r") as a:
        s, n = v["/reconstruction"].shape[0], v["/reconstruction"].shape[-1]
        if v["/reconstruction"].ndim != 3 or a["/reconstruction"].ndim != 2:
            sys.exit("volume_share.py: the first output must be a volume, the second one image")
        vt, at = float(v["/timings/stable_iteration"][()]), float(a["/timings/stable_iteration"][()])
        commit = v.attrs.get("git_commit", "")
        commit = commit.decode() if isinstance(commit, bytes) else str(commit)
        return [s, n, f"{vt:.4f}", f"{vt / s:.5f}", f"{at:.5f}", f"{vt / s / at:.3f}", int(v["/memory/batch"][0]),
                int(v["/memory/batches"][0]), f"{stable_denoise(v) / s:.5f}", f"{stable_denoise(a):.5f}",
                f"{float(v['/memory/peak_bytes'][0]) / 2**30:.2f}", commit[:12]]


def main(argv):
    w = csv.writer(sys.stdout, lineterminator="\n")
    if argv == ["--header"]:
        w.writerow(HEADER)
    elif len(argv) == 2:
        w.writerow(row(*argv))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
