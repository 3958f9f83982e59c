#!/usr/bin/env python3
"""FP8 on the GPU (scripts/gpu_check.sh, section 8, the Hopper path): the same reconstruction with
denoiser.precision = "fp8" and "bf16" (native, pre). The FP8 run must be non-blank and finite, its
final PSNR within --max-loss dB of the bf16 run's (a scale or descale gone wrong costs many dB),
its image nearer the bf16 image than --max-share of the bf16 image's own distance to the ground
truth (FP8 moves the image less than the reconstruction's error: at 1024² on an H100, 7.3 % of
the image, PSNR -0.008 dB), and its output must record the precision it ran at.
  check_fp8.py FP8.h5 BF16.h5 [--max-loss 0.3] [--max-share 0.5]
"""
import argparse
import re
import sys

import h5py
import numpy as np


def read(path):
    """The image, the ground truth, the last finite PSNR and the denoiser's precision as the
    output's config records it."""
    with h5py.File(path, "r") as f:
        image = f["/reconstruction"][...]
        truth = f["/ground_truth"][...]
        psnr = f["/metrics/psnr"][...]
        config = f.attrs.get("config", b"")
    if isinstance(config, bytes):
        config = config.decode(errors="replace")
    section, precision = "", None
    for line in str(config).splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[denoiser]" and re.match(r"precision\s*=", line):
            precision = line.split("=", 1)[1].strip().strip("'\"")
    psnr = psnr[np.isfinite(psnr)]
    return image, truth, (float(psnr[-1]) if psnr.size else float("nan")), precision


def problems(fp8, bf16, max_loss, max_share):
    a, _, pa, prec = read(fp8)
    b, t, pb, _ = read(bf16)
    rel = float(np.linalg.norm(a - b) / np.linalg.norm(b))
    share = float(np.linalg.norm(a - b) / np.linalg.norm(b - t))
    print(f"fp8 {list(a.shape)}: final PSNR {pa:.3f} dB against bf16's {pb:.3f} dB ({pa - pb:+.3f}), "
          f"relative L2 to the bf16 image {rel:.3e}, {share:.3f} of the bf16 image's distance to the truth")
    out = []
    if not np.isfinite(a).all() or float(a.std()) < 0.01:
        out.append("the FP8 image is flat or not finite")
    if not pa >= pb - max_loss:
        out.append(f"FP8 loses {pb - pa:.3f} dB against bf16 (bound {max_loss} dB)")
    if not share <= max_share:
        out.append(f"the FP8 image is {share:.3f} of the bf16 image's error away from it (bound {max_share})")
    if prec != "fp8":
        out.append(f"the FP8 output records denoiser.precision = {prec!r}, not 'fp8'")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("fp8")
    ap.add_argument("bf16")
    ap.add_argument("--max-loss", type=float, default=0.3)
    ap.add_argument("--max-share", type=float, default=0.5)
    a = ap.parse_args()
    found = problems(a.fp8, a.bf16, a.max_loss, a.max_share)
    for q in found:
        print(f"  FAIL: {q}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
