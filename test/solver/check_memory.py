"""The memory plan against the allocations a run makes, on the CPU (LibTorch's CPU allocator is
counted from the plan on: pnp::count_host_allocations). Each case runs pnp_recon on the study's
phantom for 2 iterations with the metrics in both, under mpiexec, and must end with every rank's
measured peak at or under its estimate, the estimate within 10 % of the peak, the peak under
denoiser.memory_limit_gb where one is set (the run then patched, its redundancy in
/decomposition matching the patches it ran), and a reconstruction with content. A limit below
the smallest that would do is exit 2 before any work, naming that smallest limit; the plan
accepts the named limit and refuses 0.1 GB less.
  check_memory.py MPIEXEC... -- PNP_RECON STUDY.toml"""
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from memory_checks import refusal_problems, run_problems  # noqa: E402

sep = sys.argv.index("--")
mpiexec = sys.argv[1:sep]
recon, study = sys.argv[sep + 1:sep + 3]
CAP = 8 << 30  # address space per process: a plan that allocates far past its estimate dies here
work = tempfile.mkdtemp(prefix="pnp_memory_")
failures = []


def cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def run(ranks, name, sets, extra=()):
    out = os.path.join(work, name + ".h5")
    cmd = mpiexec + ["-n", str(ranks), recon, study, "--output", out, "--force",
                     "--set", "distributed.device='cpu'", "--set", "solver.iterations=2",
                     "--set", "solver.metrics_every=1", *extra]
    for s in sets:
        cmd += ["--set", s]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=cap_memory)
    return p, out


def check(name, ranks, sets, patched=False):
    p, out = run(ranks, name, sets)
    if p.returncode != 0:
        failures.append(f"{name}: exit {p.returncode}: {p.stdout[-600:]} {p.stderr[-600:]}")
        return
    problems, summary = run_problems(out, 0.10, patched)
    print(f"{name}: {summary}")
    failures.extend(f"{name}: {q}" for q in problems)


def check_batched(name, ranks, sets):
    """A volume under a limit that binds: the slab denoised in several calls, each of several slices."""
    check(name, ranks, sets)
    out = os.path.join(work, name + ".h5")
    if os.path.exists(out):
        with h5py.File(out, "r") as f:
            batch, batches = f["/memory/batch"][()], f["/memory/batches"][()]
        print(f"  {batch} slices per call, {batches} calls")
        if not (np.all(batches > 1) and np.all(batch > 1)):
            failures.append(f"{name}: expected several calls of several slices, got {batch} x {batches}")


def check_refused():
    name = "refused"
    sets = ["problem.size=512", "compile.mode='none'", "denoiser.memory_limit_gb=0.2"]
    p, out = run(1, name, sets)
    problems, least = refusal_problems(p.stdout + p.stderr, out)
    print(f"{name}: exit {p.returncode}, smallest {least}")
    if p.returncode != 2:
        problems.append(f"exit {p.returncode}, expected 2")
    if problems:
        failures.extend(f"{name}: {q}" for q in problems)
        return
    # rounded up to two significant digits: one unit of the last less is refused
    step = 10.0 ** (math.floor(math.log10(float(least))) - 1)
    below = f"{float(least) - step:.{max(0, 1 - math.floor(math.log10(float(least))))}f}"
    for value, want in ((least, 0), (below, 2)):
        q, _ = run(1, name + "_dry", sets[:-1] + [f"denoiser.memory_limit_gb={value}"], extra=["--dry-run"])
        print(f"  --dry-run at {value} GB: exit {q.returncode}")
        if q.returncode != want:
            failures.append(f"{name}: the plan at {value} GB exits {q.returncode}, expected {want}")


eager = "compile.mode='none'"
native = "compile.mode='pre'"
check("drunet_256_eager", 1, ["problem.size=256", eager])  # the set-up's weights outweigh the denoiser here
check("drunet_512_eager", 1, ["problem.size=512", eager])
check("drunet_512_native_bf16", 1, ["problem.size=512", native, "denoiser.precision='bf16'"])
check("dncnn_512_native_limit", 1, ["problem.size=512", native, "denoiser.architecture='dncnn'",
                                    "denoiser.weights='dncnn_ct'", "denoiser.memory_limit_gb=0.1"], patched=True)
check("unet_512_eager_limit_2ranks", 2, ["problem.size=512", eager, "denoiser.architecture='unet'",
                                         "denoiser.weights=''", "denoiser.memory_limit_gb=0.2"], patched=True)
# volumes: each rank's slab of slices resident, the denoiser on as many of them at once as fit
check("volume_128_eager_2ranks", 2, ["problem.size=128", "problem.slices=6", eager])
check_batched("volume_128_native_limit", 1, ["problem.size=128", "problem.slices=6", native,
                                              "denoiser.memory_limit_gb=0.31"])
# a 3D denoiser (seeded DnCNN) on the slab, native and eager: its convolutions' extra buffer counted
dn3 = ["problem.size=64", "problem.slices=32", "denoiser.dim=3", "denoiser.architecture='dncnn'",
       "denoiser.weights=''", "denoiser.features=[32]", "denoiser.blocks=6"]
check("volume3d_64_native", 1, dn3 + [native])
check("volume3d_64_eager", 1, dn3 + [eager])
check_refused()
shutil.rmtree(work, ignore_errors=True)
for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
