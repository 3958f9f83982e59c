"""What a run under a memory plan must show, shared by the CPU test (check_memory.py) and the GPU
check tier (test/gpu/check_budget.py): every rank's measured peak at or under its estimate, the
estimate within `slack` of the peak, the peak under denoiser.memory_limit_gb where one is set,
patches where the budget must bind, and a reconstruction with content; and for a budget no
tiling meets, the refusal: exit before any work, one error line naming the smallest budget."""
import os
import re

import h5py
import numpy as np

SMALLEST = re.compile(r"The smallest limit that would do is denoiser\.memory_limit_gb = ([0-9]+(?:\.[0-9]+)?)")


def run_problems(path, slack=0.10, patched=False):
    """(problems, one-line summary) of a pnp_recon output."""
    with h5py.File(path, "r") as f:
        limit = float(f["/memory"].attrs["limit_gb"]) * 1e9
        peak = f["/memory/peak_bytes"][()].astype(float)
        est = f["/memory/estimated_bytes"][()].astype(float)
        patches = f["/memory/patches"][()]
        shape = f["/memory/patch_shape"][()]
        red = f["/decomposition/patch_redundancy"][()]
        psnr = f["/metrics/psnr"][()]
        x = f["/reconstruction"][()]
        # CUDA: what the allocator held, free pieces included (0 on the CPU; absent before 2026-12-06)
        reserved = f["/memory/reserved_peak_bytes"][()].astype(float) if "/memory/reserved_peak_bytes" in f else None
        held = int(f["/memory"].attrs.get("held", -1))  # -1: written before 2026-12-06
    mib = 2.0 ** 20
    summary = (f"peak {np.round(peak / mib, 1)} MiB, estimate {np.round(est / mib, 1)} MiB, ratio "
               f"{np.round(peak / est, 3)}, limit {limit / 1e9:g} GB, {patches} patches of {shape.tolist()}, "
               f"redundancy {np.round(red, 3)}, held {held}, PSNR {psnr[-1]:.2f} dB")
    problems = []
    if np.any(peak <= 0):
        problems.append(f"no allocations measured ({peak})")
    if np.any(peak > est):
        problems.append(f"peak over the estimate: peak / estimate {peak / est}")
    if np.any(est > (1 + slack) * peak):
        problems.append(f"estimate more than {slack:.0%} over the peak: estimate / peak {est / peak}")
    if limit > 0 and np.any(peak > limit):
        problems.append(f"peak over the limit {limit / 1e9:g} GB: {peak / 1e9} GB")
    if limit > 0 and reserved is not None and np.any(reserved > limit):
        problems.append(f"the allocator's reserved peak over the limit {limit / 1e9:g} GB: {reserved / 1e9} GB")
    if reserved is not None and np.any(reserved > 0):
        summary += f", reserved peak {np.round(reserved / mib, 1)} MiB"
        if np.any(reserved < peak):
            problems.append(f"reserved peak {reserved} below the allocated peak {peak}")
    if patched:
        if limit <= 0:
            problems.append("no memory_limit_gb in the output")
        if not np.all(patches > 1):
            problems.append(f"expected patches (the limit binds), ran {patches}")
        if not np.all(red > 1):  # the patches' FLOPs over one call on the tile
            problems.append(f"/decomposition/patch_redundancy {red} does not show the patches' work")
    if not (np.isfinite(psnr[-1]) and float(np.std(x)) > 1e-3):
        problems.append(f"blank reconstruction or no PSNR (PSNR {psnr[-1]}, std {np.std(x)})")
    return problems, summary


def refusal_problems(text, output):
    """(problems, the smallest budget named or None) of a run refused for its budget."""
    errors = [line for line in text.splitlines() if line.startswith("error:")]
    m = SMALLEST.search(text)
    problems = []
    if os.path.exists(output):
        problems.append(f"{output} exists: the refused run wrote an output")
    if len(errors) != 1:
        problems.append(f"expected one error line, got {len(errors)}")
    if not m:
        problems.append("the error does not name the smallest budget that would do")
    if re.search(r"^iteration |iteration 1\b", text, re.M):
        problems.append("iterations ran before the refusal")
    return problems, (m.group(1) if m else None)
