#!/usr/bin/env python3
"""The GPU tier's judges, tried on any machine, so that a change to one is tested before a GPU call
spends its time on it. check_fp8.py on synthetic outputs: it passes an FP8 image near the bf16 one
and fails each thing it exists to catch (too far from the bf16 image for the run's own error, a
PSNR loss past its bound, a flat image, an output that ran at another precision). (check_volume.py
runs check_volume_gpu.py --streamed on its CPU outputs.)
  test_checkers.py
"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
failures = []


def output(path, image, truth, psnr, precision):
    with h5py.File(path, "w") as f:
        f["/reconstruction"] = image.astype(np.float32)
        f["/ground_truth"] = truth.astype(np.float32)
        f["/metrics/psnr"] = np.array([np.nan, 20.0, psnr])
        f.attrs["config"] = f'[problem]\nsize = 64\n[denoiser]\nprecision = "{precision}"\n'


def judge(name, want, *args):
    p = subprocess.run([sys.executable, os.path.join(HERE, "check_fp8.py"), *args], capture_output=True, text=True,
                       timeout=60)
    print(f"{name}: exit {p.returncode} (expected {want}): {p.stdout.strip()}")
    if p.returncode != want:
        failures.append(f"check_fp8.py, {name}: exit {p.returncode}, expected {want}: {p.stdout} {p.stderr}")


with tempfile.TemporaryDirectory(prefix="pnp_checkers_") as work:
    rng = np.random.default_rng(48)
    truth = rng.random((64, 64))
    bf16 = truth + 0.1 * rng.standard_normal((64, 64))  # the reconstruction's own error: 0.1 rms
    near = bf16 + 0.02 * rng.standard_normal((64, 64))  # 0.2 of it
    far = bf16 + 0.08 * rng.standard_normal((64, 64))  # 0.8 of it
    b = os.path.join(work, "bf16.h5")
    output(b, bf16, truth, 25.0, "bf16")
    cases = [("near, fp8", near, 24.9, "fp8", 0), ("far", far, 24.9, "fp8", 1), ("0.5 dB lost", near, 24.5, "fp8", 1),
             ("flat", np.full((64, 64), 0.5), 24.9, "fp8", 1), ("ran in bf16", near, 24.9, "bf16", 1)]
    for name, image, psnr, precision, want in cases:
        a = os.path.join(work, name.replace(" ", "_").replace(",", "") + ".h5")
        output(a, image, truth, psnr, precision)
        judge(name, want, a, b)
    # the bounds are options: the far image passes a looser share, the lost 0.5 dB a looser loss
    judge("far, --max-share 0.9", 0, os.path.join(work, "far.h5"), b, "--max-share", "0.9")
    judge("0.5 dB lost, --max-loss 0.6", 0, os.path.join(work, "0.5_dB_lost.h5"), b, "--max-loss", "0.6")

for q in failures:
    print(f"FAIL: {q}")
sys.exit(1 if failures else 0)
