#!/usr/bin/env python3
"""Volumes on the GPU (scripts/gpu_check.sh, section 6): the same volume run with the native
backend (the slab's slices batched into one denoiser call, compile.mode = pre) and eagerly
(mode none), TF32 off, must agree to 1e-5 (relative L2), each non-blank in every slice, and its
memory plan must bound the measured peak within 10 % (the slab's slices and the batch counted).
  check_volume_gpu.py NATIVE.h5 EAGER.h5
With --streamed: a slab streamed through the GPU under BUDGET GB (/memory/stream > 0) against the
resident run of the same volume: equal to 1e-5, its peak <= the budget, the estimate bounding it.
  check_volume_gpu.py --streamed BUDGET STREAMED.h5 RESIDENT.h5
"""
import os
import sys

import h5py
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "solver"))
from memory_checks import run_problems  # noqa: E402

failures = []


def relative(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def streamed_against_resident(budget, streamed, resident):
    """A slab streamed through the GPU under `budget` GB against the resident run of the volume."""
    with h5py.File(streamed, "r") as f, h5py.File(resident, "r") as g:
        a, b = f["/reconstruction"][...], g["/reconstruction"][...]
        stream, groups = f["/memory/stream"][()].tolist(), f["/memory/stream_groups"][()].tolist()
        peak = f["/memory/peak_bytes"][()]
        # where the peak is: each phase's, the set-up's and the metrics' (MiB, the largest rank)
        parts = {f"phase {k}": f[f"/memory/phase_peak_bytes/{k}"][()] for k in f["/memory/phase_peak_bytes"]}
        parts.update({k: f[f"/memory/{k}_peak_bytes"][()] for k in ("setup", "metrics") if f"/memory/{k}_peak_bytes" in f})
    print("  peaks (MiB): " + ", ".join(f"{k} {v.max() / 2**20:.1f}" for k, v in parts.items()))
    rel = relative(a, b)
    print(f"volume {list(a.shape)} streamed ({stream} slices x {groups} groups) under {budget} GB: peak "
          f"{peak.max() / 1e9:.3f} GB, vs the resident run relative L2 {rel:.3e}")
    if budget <= 0 or min(stream) < 1:
        failures.append(f"not streamed: budget {budget}, /memory/stream {stream}")
    if not rel <= 1e-5:
        failures.append(f"streamed and resident differ: relative L2 {rel:.3e} > 1e-5")
    if not (peak <= budget * 1e9).all():
        failures.append(f"peak {peak} over the budget of {budget} GB")
    if float(a[a.shape[0] // 2].std()) < 0.01 or not np.isfinite(a).all():
        failures.append("the streamed volume's middle slice is flat or not finite")
    return [streamed]


def native_against_eager(native, eager):
    """The slab's slices batched (native) against eager."""
    with h5py.File(native, "r") as f, h5py.File(eager, "r") as g:
        a, b = f["/reconstruction"][...], g["/reconstruction"][...]
        batch = f["/memory/batch"][()].tolist()
    rel = relative(a, b)
    print(f"volume {list(a.shape)}: native (batch {batch}) vs eager, relative L2 {rel:.3e}")
    if a.ndim != 3 or a.shape != b.shape:
        failures.append(f"shapes {a.shape} and {b.shape}: expected one [slices, N, N] volume each")
    elif not rel <= 1e-5:
        failures.append(f"native and eager differ: relative L2 {rel:.3e} > 1e-5")
    for name, v in (("native", a), ("eager", b)):
        flat = [s for s in range(v.shape[0]) if float(v[s].std()) < 0.01]
        if flat or not np.isfinite(v).all():
            failures.append(f"{name}: slices {flat} flat or values not finite")
    return [native, eager]


if sys.argv[1] == "--streamed":
    planned = streamed_against_resident(float(sys.argv[2]), sys.argv[3], sys.argv[4])
else:
    planned = native_against_eager(sys.argv[1], sys.argv[2])
for path in planned:  # the memory plan bounds the measured peak within 10 %
    problems, summary = run_problems(path, 0.10)
    print(f"{path}: {summary}")
    failures.extend(problems)
for q in failures:
    print(f"  FAIL: {q}")
sys.exit(1 if failures else 0)
