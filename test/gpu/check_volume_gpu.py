#!/usr/bin/env python3
"""Volumes on the GPU (scripts/gpu_check.sh, section 6): the same volume run with the native
backend (the slab's slices batched into one denoiser call, compile.mode = pre) and eagerly
(mode none), TF32 off, must agree to 1e-5 (relative L2), each non-blank in every slice, and its
memory plan must bound the measured peak within 10 % (the slab's slices and the batch counted).
  check_volume_gpu.py NATIVE.h5 EAGER.h5
"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "solver"))
from memory_checks import run_problems  # noqa: E402

native, eager = sys.argv[1:3]
failures = []
with h5py.File(native, "r") as f, h5py.File(eager, "r") as g:
    a, b = f["/reconstruction"][...], g["/reconstruction"][...]
    batch = f["/memory/batch"][()].tolist()
rel = float(np.linalg.norm(a - b) / np.linalg.norm(b))
print(f"volume {list(a.shape)}: native (batch {batch}) vs eager, relative L2 {rel:.3e}")
if a.ndim != 3 or a.shape != b.shape:
    failures.append(f"shapes {a.shape} and {b.shape}: expected one [slices, N, N] volume each")
elif not rel <= 1e-5:
    failures.append(f"native and eager differ: relative L2 {rel:.3e} > 1e-5")
for name, v in (("native", a), ("eager", b)):
    flat = [s for s in range(v.shape[0]) if float(v[s].std()) < 0.01]
    if flat or not np.isfinite(v).all():
        failures.append(f"{name}: slices {flat} flat or values not finite")
for path in (native, eager):
    problems, summary = run_problems(path, 0.10)
    print(f"{path}: {summary}")
    failures.extend(problems)
for q in failures:
    print(f"  FAIL: {q}")
sys.exit(1 if failures else 0)
