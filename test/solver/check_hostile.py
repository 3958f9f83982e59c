"""Hostile and inconsistent inputs, each on 2 ranks under mpiexec, with the address space of every
process capped (a regression that allocates from a declared size fails, it cannot exhaust the
machine). Each case must end with the expected exit code (2: bad input) within its time limit,
one `error:` line for the whole job naming the problem (printed once, by rank 0), no stack dump
and no MPI_ABORT banner, nothing left behind, and the inputs unchanged.
  check_hostile.py MPIEXEC... -- PNP_RECON PNP_PHANTOM PNP_DENOISE SMALL.toml"""
import hashlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

sep = sys.argv.index("--")
mpiexec = sys.argv[1:sep]
recon, phantom, denoise, small = sys.argv[sep + 1:sep + 5]
CAP = 6 << 30  # address space per process (bytes); a 12 GB allocation cannot happen under it
work = tempfile.mkdtemp(prefix="pnp_hostile_")
failures = []


def cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (CAP, CAP))


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run(cmd, timeout=60, rlimits=()):
    """rlimits: extra (resource, value) limits, e.g. a file size limit standing for a full disk
    (SIGXFSZ ignored, so that a write beyond it fails with EFBIG as on a full disk)."""
    def limits():
        cap_memory()
        for res, v in rlimits:
            resource.setrlimit(res, (v, v))
        if rlimits:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=limits)
        return r.returncode, r.stdout, r.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired as e:
        return None, e.stdout or "", e.stderr or "", time.monotonic() - t0


def case(name, cmd, code=2, ranks=1, contains=(), limit=10.0, untouched=(), leftovers_in=None, rlimits=()):
    before = {p: sha(p) for p in untouched}
    left_before = set(os.listdir(leftovers_in)) if leftovers_in else set()
    rc, out, err, secs = run(cmd, rlimits=rlimits)
    errs = [l for l in err.splitlines() if l.startswith("error:")]
    problems = []
    if rc != code:
        problems.append(f"exit code {rc}, expected {code}")
    if (len(errs) != ranks) if ranks else not errs:
        problems.append(f"{len(errs)} error lines, expected {ranks or 'at least one'}")
    for c in contains:
        if not all(c in l for l in errs):
            problems.append(f"an error line lacks '{c}'")
    if any(s in err for s in ("terminate called", "Segmentation fault", "Exception raised from", "core dumped")):
        problems.append("a stack dump or a crash")
    if "MPI_ABORT" in err:
        problems.append("an MPI_ABORT banner after pnp's own error")
    if any(len(l) > 2100 for l in errs):
        problems.append(f"an error line of {max(len(l) for l in errs)} characters")
    if secs > limit:
        problems.append(f"took {secs:.1f} s (limit {limit:.0f} s)")
    for p, h in before.items():
        if not os.path.exists(p) or sha(p) != h:
            problems.append(f"input {p} was changed or removed")
    if leftovers_in:
        extra = set(os.listdir(leftovers_in)) - left_before
        if extra:
            problems.append(f"left behind {sorted(extra)}")
    status = "ok  " if not problems else "FAIL"
    print(f"{status} {name}: exit {rc} in {secs:.1f} s; {errs[0] if errs else '(no error line)'}")
    if problems:
        failures.append(name)
        print("     " + "; ".join(problems))
        print("     stderr: " + err[-1500:].replace("\n", "\n     "))


def recon_cmd(*args, n=2, config=small):
    return mpiexec + ["-n", str(n), recon, config] + list(args)


def out(name):
    return ["--output", os.path.join(work, name), "--force"]


def sinogram(path, k=45, det=91, n=64, data=None, gt=None, theta=True):
    with h5py.File(path, "w") as f:
        f["/exchange/data"] = np.random.default_rng(1).random((k, det), dtype=np.float32) if data is None else data
        if theta:
            f["/exchange/theta"] = np.arange(k) * 180.0 / k
        if gt is not False:
            f["/exchange/ground_truth"] = np.zeros((n, n), np.float32) if gt is None else gt


S = lambda key, value: ["--set", f"{key}={value}"]  # noqa: E731

# -- declared sizes are checked before any allocation ----------------------------------------------
huge = os.path.join(work, "huge.h5")
with h5py.File(huge, "w") as f:  # a few kB on disk, 45 x 5e6 float32 declared (chunked, never written)
    f.create_dataset("/exchange/data", shape=(45, 5_000_000), dtype=np.float32, chunks=(1, 1024))
case("huge declared sinogram, size given", recon_cmd(*S("problem.sinogram", f'"{huge}"'), *out("o1.h5")),
     contains=("5000000",), untouched=[huge], leftovers_in=work)
cfg_nosize = os.path.join(work, "nosize.toml")
with open(small) as f:
    text = f.read().replace("size = 64\n", "").replace("angles = 45\n", "")
with open(cfg_nosize, "w") as f:
    f.write(text)
case("huge declared sinogram, size inferred", recon_cmd(*S("problem.sinogram", f'"{huge}"'), *out("o2.h5"),
                                                       config=cfg_nosize), contains=("5000000",), untouched=[huge])
hugegt = os.path.join(work, "hugegt.h5")
with h5py.File(hugegt, "w") as f:
    f["/exchange/data"] = np.ones((45, 91), np.float32)
    f.create_dataset("/exchange/ground_truth", shape=(200000, 200000), dtype=np.float32, chunks=(1, 1024))
case("huge declared ground truth", recon_cmd(*S("problem.sinogram", f'"{hugegt}"'), *out("o3.h5")),
     contains=("200000",))

# -- non-finite values -----------------------------------------------------------------------------
nan = os.path.join(work, "nan.h5")
d = np.ones((45, 91), np.float32)
d[7, 11] = np.nan
sinogram(nan, data=d)
case("NaN in the sinogram", recon_cmd(*S("problem.sinogram", f'"{nan}"'), *out("o4.h5")),
     contains=("non-finite", "[7, 11]"))
inf = os.path.join(work, "inf.h5")
g = np.zeros((64, 64), np.float32)
g[3, 4] = np.inf
sinogram(inf, gt=g)
case("Inf in the ground truth", recon_cmd(*S("problem.sinogram", f'"{inf}"'), *out("o5.h5")), contains=("non-finite",))
wnan = os.path.join(work, "wnan.h5")
# weights: the small test network's seeded weights, written by pnp_denoise, then poisoned
img = os.path.join(work, "img.h5")
with h5py.File(img, "w") as f:
    f["/x"] = np.random.default_rng(2).random((16, 16), dtype=np.float32)
subprocess.run([denoise, "--arch", "dncnn", "--features", "8", "--input", img, "--output",
                os.path.join(work, "den.h5"), "--save-weights", wnan, "--force"], capture_output=True, check=True)
with h5py.File(wnan, "r+") as f:
    k = sorted(f["weights"].keys())[0]
    w = f["weights"][k][()]
    w.flat[0] = np.nan
    f["weights"][k][...] = w
case("NaN in the weights", recon_cmd(*S("denoiser.weights", f'"{wnan}"'), *out("o6.h5")), contains=("non-finite",))
os.remove(os.path.join(work, "den.h5"))

# -- inconsistent inputs ---------------------------------------------------------------------------
det = os.path.join(work, "det.h5")
sinogram(det, det=100, gt=False)
case("detector count does not fit the image size", recon_cmd(*S("problem.sinogram", f'"{det}"'), *out("o7.h5")),
     contains=("100 detector bins",))
case("detector count fits no size, none given", recon_cmd(*S("problem.sinogram", f'"{det}"'), *out("o8.h5"),
                                                          config=cfg_nosize), contains=("100 detector bins",))
gtsize = os.path.join(work, "gtsize.h5")
sinogram(gtsize, gt=np.zeros((48, 48), np.float32))
case("ground truth of another size", recon_cmd(*S("problem.sinogram", f'"{gtsize}"'), *out("o9.h5")),
     contains=("48 x 48",))
group = os.path.join(work, "group.h5")
with h5py.File(group, "w") as f:
    f.create_group("/exchange/data")
    f["/exchange/data/inner"] = np.ones(3, np.float32)
case("a group where the data should be", recon_cmd(*S("problem.sinogram", f'"{group}"'), *out("o10.h5")),
     contains=("not a dataset",))
case("denoiser.dim = 3", recon_cmd(*S("denoiser.dim", "3"), *out("o11.h5")), contains=("denoiser.dim = 3",))
case("denoiser.channels = 2", recon_cmd(*S("denoiser.channels", "2"), *out("o12.h5")), contains=("channels",))

# -- paths -----------------------------------------------------------------------------------------
cfgdir = os.path.join(work, "cfgdir")
os.mkdir(cfgdir)
case("a directory as the configuration", mpiexec + ["-n", "2", recon, cfgdir], contains=("is a directory",))
case("the output is a directory", recon_cmd("--output", cfgdir, "--force"), contains=("is a directory",))
case("an empty output name", recon_cmd("--output", ""), contains=("empty",))
case("the output's directory does not exist", recon_cmd("--output", os.path.join(work, "no", "such", "o.h5")),
     contains=("does not exist",))
case("a file name too long", recon_cmd("--output", os.path.join(work, "x" * 300 + ".h5")), contains=("too long",))
loop = os.path.join(work, "loop.h5")
os.symlink(loop, loop)
case("a symlink loop as the sinogram", recon_cmd(*S("problem.sinogram", f'"{loop}"'), *out("o13.h5")),
     contains=("symbolic links",))
good = os.path.join(work, "good.h5")
sinogram(good, gt=np.random.default_rng(3).random((64, 64), dtype=np.float32))
case("--force onto the input sinogram", recon_cmd(*S("problem.sinogram", f'"{good}"'), "--output", good, "--force"),
     contains=("destroy the input",), untouched=[good])
cfgcopy = os.path.join(work, "copy.toml")
shutil.copy(small, cfgcopy)
case("--force onto the configuration", recon_cmd("--output", cfgcopy, "--force", config=cfgcopy),
     contains=("destroy the input",), untouched=[cfgcopy])

# -- the iteration diverges ------------------------------------------------------------------------
case("a diverging step with clamp = none",
     recon_cmd(*S("solver.clamp", '"none"'), *S("solver.step", "1e9"), *S("solver.iterations", "30"), *out("o14.h5")),
     code=2, contains=("diverged",))
if os.path.exists(os.path.join(work, "o14.h5")):
    failures.append("diverged run wrote an output")

# -- ranks that disagree ---------------------------------------------------------------------------
other = os.path.join(work, "other.toml")
with open(small) as f:
    text = f.read().replace("iterations = 4", "iterations = 5")
with open(other, "w") as f:
    f.write(text)
case("ranks started with different configurations (MPMD)",
     mpiexec + ["-n", "1", recon, small] + out("o15.h5") + [":", "-n", "1", recon, other] + out("o15.h5"),
     contains=("differs from rank 0", "iterations = 5"))

# -- files that crash or hang libhdf5 itself (test/solver/data/README.md): pnp_h5probe reads every
# input first in its own process, so the crash or the hang happens there, not in a rank ----------
data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
crashes, aborts, hangs, heap_index = (os.path.join(work, f"damaged_{k}_hdf5.h5")
                                      for k in ("crashes", "aborts", "hangs", "heap_index"))
for p in (crashes, aborts, hangs, heap_index):
    shutil.copy(os.path.join(data, os.path.basename(p)), p)
case("weights that crash libhdf5 (SIGSEGV)", recon_cmd(*S("denoiser.weights", f'"{crashes}"'), *out("o16.h5")),
     contains=("crashed the HDF5 library", "damaged_crashes_hdf5.h5"), untouched=(crashes,))
case("a sinogram that aborts libhdf5 (SIGABRT)", recon_cmd(*S("problem.sinogram", f'"{aborts}"'), *out("o17.h5")),
     contains=("crashed the HDF5 library", "damaged_aborts_hdf5.h5"), untouched=(aborts,))
case("a checkpoint that hangs libhdf5", recon_cmd(*S("output.checkpoint", f'"{hangs}"'), "--resume",
                                                  *S("distributed.timeout_s", "4"), *out("o18.h5")),
     contains=("did not finish within 4 s", "damaged_hangs_hdf5.h5"), untouched=(hangs,))
case("weights whose damaged heap index reads cleanly unless the heap is poisoned",
     recon_cmd(*S("denoiser.weights", f'"{heap_index}"'), *out("o19.h5")),
     contains=("crashed the HDF5 library", "damaged_heap_index_hdf5.h5"), untouched=(heap_index,))
case("pnp_denoise on weights that crash libhdf5",
     [denoise, "--arch", "dncnn", "--input", crashes, "--output", os.path.join(work, "d2.h5")], ranks=1,
     contains=("crashed the HDF5 library",))

# -- the other programs ----------------------------------------------------------------------------
case("pnp_phantom -N 1000000", mpiexec + ["-n", "1", phantom, "-N", "1000000", "-o", os.path.join(work, "p.h5")],
     ranks=1, contains=("65536",))
hugeimg = os.path.join(work, "hugeimg.h5")
with h5py.File(hugeimg, "w") as f:
    f.create_dataset("/x", shape=(300000, 300000), dtype=np.float32, chunks=(1, 1024))
case("pnp_denoise on a huge declared image", [denoise, "--arch", "dncnn", "--input", hugeimg, "--output",
                                              os.path.join(work, "d.h5")], ranks=1, contains=("300000",))

# -- issue 49: a finished result is never lost ------------------------------------------------------
same = os.path.join(work, "same.h5")
case("output.checkpoint is output.file, neither exists yet",
     recon_cmd(*S("output.checkpoint", f'"{same}"'), "--output", same), contains=("are the same file",),
     leftovers_in=work)
dangling = os.path.join(work, "ck_link.h5")
os.symlink(os.path.join(work, "res.h5"), dangling)
case("output.checkpoint a symlink to output.file, neither exists yet",
     recon_cmd(*S("output.checkpoint", f'"{dangling}"'), "--output", os.path.join(work, "res.h5")),
     contains=("are the same file",), leftovers_in=work)
if os.path.lexists(dangling):
    os.remove(dangling)
existing = os.path.join(work, "existing.h5")
shutil.copy(good, existing)
hard = os.path.join(work, "hard.h5")
os.link(existing, hard)
case("output.checkpoint a hard link to the existing output.file (--force)",
     recon_cmd(*S("output.checkpoint", f'"{hard}"'), "--output", existing, "--force"),
     contains=("are the same file",), untouched=(existing,))
if os.path.lexists(hard):
    os.remove(hard)


def check(name, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if not ok:
        failures.append(name)
        print("     " + detail.replace("\n", "\n     ")[-1500:])


# A file at output.checkpoint that this run did not write stays (it was removed at the end).
foreign = os.path.join(work, "foreign_ckpt.h5")
shutil.copy(good, foreign)
rc, o, e, _ = run(recon_cmd(*S("output.checkpoint", f'"{foreign}"'), *out("o20.h5")))
check("a checkpoint this run did not write is kept at the end", rc == 0 and os.path.exists(foreign) and "kept" in o,
      f"exit {rc}; exists {os.path.exists(foreign)}; {o[-400:]} {e[-400:]}")
rc, o, e, _ = run(recon_cmd(*S("output.checkpoint_every", "2"), *S("solver.iterations", "5"), *out("o21.h5")))
check("the checkpoint this run wrote is removed at the end",
      rc == 0 and "removed the checkpoint" in o and not os.path.exists(os.path.join(work, "o21.h5.checkpoint.h5")),
      f"exit {rc}; {o[-400:]} {e[-400:]}")

# Another run's real checkpoint at output.checkpoint (a run id of its own) is kept, too.
rc, o, e, _ = run(recon_cmd(*S("output.stop_after", "2"), *S("solver.iterations", "5"), *out("o21b.h5")))
other = os.path.join(work, "o21b.h5.checkpoint.h5")
rc2, o2, e2, _ = run(recon_cmd(*S("output.checkpoint", f'"{other}"'), *S("solver.iterations", "5"), *out("o21c.h5")))
check("another run's checkpoint at output.checkpoint is kept at the end",
      rc == 75 and rc2 == 0 and os.path.exists(other) and "kept" in o2, f"exit {rc}, {rc2}; {o2[-400:]} {e2[-400:]}")
# A checkpoint written before checkpoints carried a run id, resumed and finished: it is this
# run's, so it is removed at the end as before.
rc, o, e, _ = run(recon_cmd(*S("output.stop_after", "2"), *S("solver.iterations", "5"), *out("o21d.h5")))
legacy = os.path.join(work, "o21d.h5.checkpoint.h5")
if os.path.exists(legacy):
    with h5py.File(legacy, "r+") as f:
        del f.attrs["run_id"]
rc2, o2, e2, _ = run(recon_cmd(*S("output.resume", "true"), *S("solver.iterations", "5"), *out("o21d.h5")))
check("a resumed checkpoint without a run id is removed at the end",
      rc == 75 and rc2 == 0 and "removed the checkpoint" in o2 and not os.path.exists(legacy),
      f"exit {rc}, {rc2}; {o2[-400:]} {e2[-400:]}")

# -- issue 49: angles ------------------------------------------------------------------------------
wild = os.path.join(work, "wild_theta.h5")
sinogram(wild)
with h5py.File(wild, "r+") as f:
    t = f["/exchange/theta"][()]
    t[5] = 1e302
    f["/exchange/theta"][...] = t
case("an angle of 1e302 degrees", recon_cmd(*S("problem.sinogram", f'"{wild}"'), *out("o22.h5")),
     contains=("720", "/exchange/theta"), untouched=(wild,))
rad = os.path.join(work, "radians.h5")
sinogram(rad, gt=np.random.default_rng(4).random((64, 64), dtype=np.float32))
with h5py.File(rad, "r+") as f:
    f["/exchange/theta"][...] = np.arange(45) * np.pi / 45
rc, o, e, _ = run(recon_cmd(*S("problem.sinogram", f'"{rad}"'), *out("o23.h5")))
warn = [l for l in e.splitlines() if l.startswith("warning:") and "radians" in l]
check("angles within [0, 2 pi] with no units: one warning", rc == 0 and len(warn) == 1, f"exit {rc}; {e[-600:]}")
notheta = os.path.join(work, "notheta.h5")
sinogram(notheta, theta=False, gt=np.random.default_rng(5).random((64, 64), dtype=np.float32))
rc, o, e, _ = run(recon_cmd(*S("problem.sinogram", f'"{notheta}"'), *S("output.progress", "true"), *out("o24.h5")))
attr = ""
if rc == 0:
    with h5py.File(os.path.join(work, "o24.h5"), "r") as f:
        attr = str(f.attrs.get("angles", ""))
check("no theta: the summary and the output's provenance say the angles were assumed",
      rc == 0 and "assumed" in o and attr.startswith("assumed"), f"exit {rc}; attr '{attr}'; {o[-600:]} {e[-300:]}")

# -- issue 49: one clear line per job --------------------------------------------------------------
case("a 100 kB output name: cut in the message", recon_cmd(*S("output.file", '"' + "y" * 100_000 + '.h5"')),
     contains=("characters)",))
big = os.path.join(work, "big_value.toml")
with open(small) as f:
    text = f.read().replace('architecture = "dncnn"', 'architecture = "' + "z" * 1_000_000 + '"')
with open(big, "w") as f:
    f.write(text)
case("a 1 MB string value: cut in the message", recon_cmd(*out("o25.h5"), config=big), contains=("characters)",))
case("an error on every rank is printed once, naming the ranks", recon_cmd(*S("denoiser.dim", "3"), *out("o26.h5")),
     contains=("(all 2 ranks)",))
nogt = os.path.join(work, "nogt.h5")
sinogram(nogt, gt=False)
case("clamp = ground_truth without a ground truth: no MPI_ABORT banner",
     recon_cmd(*S("problem.sinogram", f'"{nogt}"'), *out("o27.h5")), contains=("ground truth",))

# -- issue 49: no silent surprises -----------------------------------------------------------------
empty = os.path.join(work, "empty.toml")
open(empty, "w").close()
case("an empty configuration", mpiexec + ["-n", "2", recon, empty, "--dry-run"], contains=("--help-config",))
rc, o, e, _ = run(mpiexec + ["-n", "2", recon, empty, "--defaults", "--dry-run"])
check("an empty configuration with --defaults", rc == 0, f"exit {rc}; {e[-400:]}")
case("a --set value with a newline", recon_cmd(*S("solver.iterations", "4\n[solver]\nstep = 1e9"), *out("o29.h5")),
     contains=("line break",))

# -- issue 49: pnp_denoise checks its values as pnp_recon does ------------------------------------
nanimg = os.path.join(work, "nanimg.h5")
with h5py.File(nanimg, "w") as f:
    a = np.random.default_rng(6).random((32, 32), dtype=np.float32)
    a[3, 9] = np.nan
    f["/x"] = a
dn = [denoise, "--arch", "dncnn", "--features", "8"]
case("pnp_denoise on an image holding NaN", dn + ["--input", nanimg, "--output", os.path.join(work, "d3.h5")],
     contains=("non-finite", "[3, 9]"), untouched=(nanimg,), leftovers_in=work)
case("pnp_denoise --save-weights onto its --output",
     dn + ["--input", img, "--output", os.path.join(work, "d4.h5"), "--save-weights", os.path.join(work, "d4.h5")],
     contains=("are the same file",), leftovers_in=work)
case("pnp_denoise --sigma nan", dn + ["--input", img, "--output", os.path.join(work, "d5.h5"), "--sigma", "nan"],
     contains=("--sigma",), leftovers_in=work)
# A full disk, as a 12 kB file size limit (under mpirun the limit would hit the launcher's own
# files first, so the twin runs pnp_denoise, through the same HDF5 writer).
FSIZE = 12 << 10
bigimg = os.path.join(work, "bigimg.h5")
with h5py.File(bigimg, "w") as f:
    f["/x"] = np.random.default_rng(7).random((128, 128), dtype=np.float32)
case("pnp_denoise: the output's disk is full", dn + ["--input", bigimg, "--output", os.path.join(work, "d6.h5")],
     code=2, contains=("File too large", "d6.h5"), rlimits=[(resource.RLIMIT_FSIZE, FSIZE)], leftovers_in=work)

# -- issue 49: a signalled stop exits 75, and rank 0 names the signal ------------------------------
def stop_with(cmd, kill, name):
    """Runs cmd (progress on), calls kill(popen) after iteration 2, returns (exit, stdout, stderr)."""
    p = subprocess.Popen(cmd + ["--output", os.path.join(work, name), "--force", *S("solver.iterations", "100000"),
                                *S("output.progress", "true")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=cap_memory)
    lines = []
    for line in p.stdout:
        lines.append(line)
        if line.startswith("iteration") and int(line.split()[1].split("/")[0]) >= 2:
            kill(p)
            break
    try:
        rest, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        rest, err = p.communicate()
    return p.returncode, "".join(lines) + rest, err


def rank_pid(name, rank):
    """The pid of the pnp_recon rank `rank` whose command line names the output `name`."""
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{d}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except (OSError, ValueError):
            continue
        if (cmd and os.path.basename(cmd[0]) == b"pnp_recon" and os.path.join(work, name).encode() in cmd
                and f"OMPI_COMM_WORLD_RANK={rank}".encode() in env):
            return int(d)
    return None


wrapper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "mpirun")
rc, o, e = stop_with([wrapper, "-n", "2", recon, small], lambda p: p.send_signal(signal.SIGTERM), "sig1.h5")
check("SIGTERM to mpirun (scripts/mpirun): every rank stops with a checkpoint, exit 75",
      rc == 75 and os.path.exists(os.path.join(work, "sig1.h5.checkpoint.h5")), f"exit {rc}; {o[-300:]} {e[-600:]}")
rank1 = []


def term_rank1(p):
    rank1.append(rank_pid("sig2.h5", 1))
    os.kill(rank1[0] or p.pid, signal.SIGTERM)  # no rank found: the launcher, and the check fails


rc, o, e = stop_with(recon_cmd(), term_rank1, "sig2.h5")
check("SIGTERM to rank 1 only: exit 75, and rank 0 names the signal",
      rank1[0] is not None and rc == 75 and "(signal 15)" in o, f"rank 1's pid {rank1[0]}; exit {rc}; {o[-300:]} {e[-600:]}")

shutil.rmtree(work, ignore_errors=True)
if failures:
    print(f"{len(failures)} case(s) failed: {', '.join(failures)}")
    sys.exit(1)
print("every hostile input ended with its exit code and one error line for the job")
