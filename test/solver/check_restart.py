"""Checkpoint/restart on 2 ranks: a run stopped after iteration 3 (output.stop_after) and resumed,
and a run stopped by SIGUSR1 (what Slurm's --signal sends) and resumed, each equal bit for bit to
the uninterrupted run (CPU), with every iteration's metrics and timings in the final file and one
provenance line per segment; a checkpoint from another configuration is refused.
  check_restart.py MPIEXEC... -- PNP_RECON SMALL.toml"""
import os
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

sep = sys.argv.index("--")
mpiexec = sys.argv[1:sep]
recon, small = sys.argv[sep + 1:sep + 3]
work = tempfile.mkdtemp(prefix="pnp_restart_")
EXIT_CHECKPOINTED = 75
failures = []


def check(ok, msg):
    print(("ok   " if ok else "FAIL ") + msg)
    if not ok:
        failures.append(msg)


def cmd(name, *sets, iterations=8):
    c = mpiexec + ["-n", "2", recon, small, "--output", os.path.join(work, name + ".h5"), "--force",
                   "--set", f"solver.iterations={iterations}", "--set", "solver.metrics_every=1", "--set", "output.progress=true",
                   "--set", f'output.checkpoint="{os.path.join(work, name + ".ckpt.h5")}"']
    for s in sets:
        c += ["--set", s]
    return c


def load(name):
    with h5py.File(os.path.join(work, name + ".h5"), "r") as f:
        return {"x": f["/reconstruction"][()], "psnr": f["/metrics/psnr"][()], "ssim": f["/metrics/ssim"][()],
                "total": f["/timings/total"][()], "segments": [s.decode() if isinstance(s, bytes) else s
                                                                for s in f["/provenance/segments"][()]]}


# Uninterrupted.
r = subprocess.run(cmd("a"), capture_output=True, text=True)
check(r.returncode == 0, f"uninterrupted run: exit {r.returncode}")
a = load("a")

# Stopped after iteration 3, then resumed.
r = subprocess.run(cmd("b", "output.stop_after=3"), capture_output=True, text=True)
check(r.returncode == EXIT_CHECKPOINTED, f"stop_after=3: exit {r.returncode} (expected {EXIT_CHECKPOINTED})")
check(not os.path.exists(os.path.join(work, "b.h5")), "stop_after=3: no output file yet")
with h5py.File(os.path.join(work, "b.ckpt.h5"), "r") as f:
    check(int(f.attrs["done"]) == 3, f"the checkpoint holds {int(f.attrs['done'])} iterations")
r = subprocess.run(cmd("b") + ["--resume"], capture_output=True, text=True)
check(r.returncode == 0 and "resuming after iteration 3" in r.stdout, f"resumed: exit {r.returncode}")
b = load("b")
check(np.array_equal(a["x"], b["x"]), "resumed reconstruction equals the uninterrupted one bit for bit")
check(np.array_equal(a["psnr"], b["psnr"]) and np.array_equal(a["ssim"], b["ssim"]),
      "metrics of every iteration equal")
check(bool(np.all(b["total"] > 0)) and b["total"].shape == a["total"].shape, "timings for every iteration and rank")
check(len(b["segments"]) == 2 and "iterations 1-3" in b["segments"][0] and "iterations 4-8" in b["segments"][1],
      f"segments {b['segments']}")

# A checkpoint from another configuration is refused.
r = subprocess.run(cmd("b", "output.stop_after=3"), capture_output=True, text=True)
r2 = subprocess.run(cmd("b", "solver.relaxation=0.5") + ["--resume"], capture_output=True, text=True)
errs = [l for l in r2.stderr.splitlines() if l.startswith("error:")]
check(r2.returncode == 2 and len(errs) == 1 and all("another configuration" in l for l in errs),
      f"a checkpoint of another configuration: exit {r2.returncode}, {errs[:1]}")

# SIGUSR1 mid-run (mpirun forwards it to the ranks): a checkpoint at the next iteration boundary.
n = 60
r = subprocess.run(cmd("c_ref", iterations=n), capture_output=True, text=True)
ref = load("c_ref")
p = subprocess.Popen(cmd("c", iterations=n), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
t0 = time.monotonic()
lines = []
for line in p.stdout:
    lines.append(line)
    if line.startswith("iteration") and "/" in line and int(line.split()[1].split("/")[0]) >= 3:
        os.kill(p.pid, signal.SIGUSR1)
        break
rest, err = p.communicate(timeout=60)
check(p.returncode == EXIT_CHECKPOINTED, f"SIGUSR1: exit {p.returncode} after {time.monotonic() - t0:.1f} s; {err[-300:]}")
with h5py.File(os.path.join(work, "c.ckpt.h5"), "r") as f:
    done = int(f.attrs["done"])
check(3 <= done < n, f"SIGUSR1: checkpoint after iteration {done}")
r = subprocess.run(cmd("c", iterations=n) + ["--resume"], capture_output=True, text=True)
check(r.returncode == 0, f"resumed after the signal: exit {r.returncode}")
c = load("c")
check(np.array_equal(ref["x"], c["x"]), "signal-resumed reconstruction equals the uninterrupted one bit for bit")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("checkpoint/restart checks passed")
