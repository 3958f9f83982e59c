"""pnp_phantom --slices: a projection volume of pnp's 3D Shepp-Logan. Checked with h5py alone:
the shapes, the chunks (one slice's sinogram, one truth slice) and compression; the middle slice's
truth and sinogram equal the 2D phantom's (pnp_phantom without --slices) bit for bit; with
--counts the flat- and dark-field normalisation (numpy) recovers the line integrals where the
counts carry them; bad options are exit 2 with one error line and no output.
  check_phantom_volume.py PNP_PHANTOM"""
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

phantom = sys.argv[1]
work = tempfile.mkdtemp(prefix="pnp_phantom_volume_")
failures = []


def run(*args, want=0):
    p = subprocess.run([phantom, *args], capture_output=True, text=True, timeout=300)
    if p.returncode != want:
        failures.append(f"pnp_phantom {' '.join(args)}: exit {p.returncode}, expected {want}: {p.stderr[-400:]}")
    return p


N, K, S = 48, 24, 7
vol, flat2d, counts = (os.path.join(work, f) for f in ("vol.h5", "two_d.h5", "counts.h5"))
run("-N", str(N), "-K", str(K), "--slices", str(S), "--noise", "0", "-o", vol)
run("-N", str(N), "-K", str(K), "--noise", "0", "-o", flat2d)
run("-N", str(N), "-K", str(K), "--slices", str(S), "--noise", "0", "--counts", "1e4", "-o", counts)
if not failures:
    with h5py.File(vol) as v, h5py.File(flat2d) as t, h5py.File(counts) as c:
        d, g = v["/exchange/data"], v["/exchange/ground_truth"]
        det = t["/exchange/data"].shape[1]
        if d.shape != (K, S, det) or g.shape != (S, N, N):
            failures.append(f"shapes {d.shape}, {g.shape}")
        if d.chunks != (K, 1, det) or g.chunks != (1, N, N) or d.compression != "gzip":
            failures.append(f"layout: chunks {d.chunks}, {g.chunks}, compression {d.compression}")
        if not np.array_equal(g[S // 2], t["/exchange/ground_truth"][()]):
            failures.append("the middle slice's truth differs from the 2D phantom")
        if not np.array_equal(d[:, S // 2, :], t["/exchange/data"][()]):
            failures.append("the middle slice's sinogram differs from the 2D phantom's")
        if np.array_equal(g[0], g[S // 2]) or float(np.std(g[S // 2])) == 0:
            failures.append("the volume does not vary along z, or its middle is blank")
        p = d[()]
        raw = c["/exchange/data"][()]
        white = c["/exchange/data_white"][()].mean(axis=0)
        dark = c["/exchange/data_dark"][()].mean(axis=0)
        rec = -np.log((raw - dark[None]) / (white - dark)[None])
        carried = p < 6  # transmission above 0.25 %: 25 counts or more above the dark
        err = float(np.abs(rec - p)[carried].max())
        print(f"counts: line integrals recovered to {err:.2e} where the transmission is >= 0.25 %")
        if err > 1e-3:
            failures.append(f"the counts do not recover the line integrals: {err}")
        if c["/exchange/data"].attrs["units"] not in ("counts", b"counts"):
            failures.append("raw counts not labelled as counts")
for args in (["--slices", "-1"], ["--slices", "3", "--phantom", "ellipses"], ["--counts", "100"]):
    out = os.path.join(work, "bad.h5")
    p = run("-N", "32", "-K", "8", *args, "-o", out, want=2)
    errors = [line for line in p.stderr.splitlines() if line.startswith("error:")]
    if len(errors) != 1 or os.path.exists(out):
        failures.append(f"{args}: expected one error line and no output, got {p.stderr[-300:]}")
for f in failures:
    print("FAIL", f)
print(f"{len(failures)} failure(s)")
sys.exit(1 if failures else 0)
