"""One line per pnp_recon output: what ran and what it cost, for runs whose files are too large
to bring back (4096²). Per rank: the peak device memory over the run and during the denoiser
phase, the denoiser's counted FLOPs over the ideal share, and the bytes it exchanged per call.
  recon_summary.py FILE.h5 ...
"""
import sys

import h5py
import numpy as np


def gib(v):
    return "[" + " ".join(f"{x / 2**30:.2f}" for x in np.atleast_1d(v)) + "] GiB"


for path in sys.argv[1:]:
    with h5py.File(path, "r") as f:
        a, dec, t, mem = f.attrs, f["/decomposition"], f["/timings"], f["/memory"]
        x = f["/reconstruction"][()]
        gt = f["/ground_truth"][()] if "/ground_truth" in f else None
        content = x.std() / gt.std() if gt is not None else float("nan")
        print(f"{path}: ranks {int(a['ranks'])}, halo_mode {dec.attrs['halo_mode']}, compile {a['compile_mode']}/"
              f"{a['compile_backend']}, comm {a.get('comm_backend', '?')}; first {t['first_iteration'][()]:.3f} s, "
              f"stable {t['stable_iteration'][()] * 1e3:.1f} ms (denoise {np.median(t['denoise'][()], axis=0).max() * 1e3:.1f} ms "
              f"median of the slowest rank), compile {t['compile'][()]:.2f} s; final PSNR "
              f"{f['/metrics/psnr'][()][-1]:.3f} dB, image std / truth std {content:.3f}")
        print(f"    peak {gib(mem['peak_bytes'][()])}, denoise phase peak {gib(mem['phase_peak_bytes/denoise'][()])}, "
              f"estimated {gib(mem['estimated_bytes'][()])}; redundancy {np.round(dec['redundancy'][()], 4).tolist()}, "
              f"exchange {np.round(dec['denoiser_exchange_bytes'][()] / 2**20, 2).tolist()} MiB in "
              f"{dec['denoiser_messages'][()].tolist()} messages per call")
