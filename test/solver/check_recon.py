"""Checks pnp_recon outputs: the schema of docs/output_schema.md, and that runs on several
rank counts give the 1-rank reconstruction to within 1e-5 relative. Outputs given as
--patched=FILE must also have run the denoiser in patches (/memory/patch_size > 0 on every rank).
usage: check_recon.py REFERENCE.h5 OTHER.h5 ... [--patched=OTHER.h5 ...]"""
import sys

import h5py
import numpy as np

PHASES = ["forward_projection", "allreduce", "backprojection", "step", "halo_exchange", "denoise", "clamp", "total"]
ROOT_ATTRS = ["program", "version", "git_commit", "date", "host", "ranks", "gpu_names", "torch_version",
              "cuda_version", "nccl_version", "config", "compile_mode", "compile_backend", "architecture", "device"]


def check_schema(path):
    with h5py.File(path, "r") as f:
        for a in ROOT_ATTRS:
            assert a in f.attrs, f"{path}: root attribute {a} missing"
        assert f.attrs["program"] == "pnp_recon"
        ranks = int(f.attrs["ranks"])
        assert "[problem]" in f.attrs["config"] and "[output]" in f.attrs["config"]
        iters = f["/metrics/psnr"].shape[0]
        for ph in PHASES + ["wall"]:
            d = f["/timings/" + ph]
            assert d.shape == (iters, ranks), (ph, d.shape)
            assert np.all(np.isfinite(d[()])) and np.all(d[()] >= 0), ph
        assert np.all(f["/timings/total"][()] > 0)
        for s in ["first_iteration", "stable_iteration", "compile"]:
            assert f["/timings/" + s].shape == ()
        assert f["/timings/first_iteration"][()] > f["/timings/stable_iteration"][()] > 0
        assert f["/memory/peak_bytes"].shape == (ranks,)
        assert f["/memory/estimated_bytes"].shape == (ranks,) and np.all(f["/memory/estimated_bytes"][()] > 0)
        assert f["/memory/patch_size"].shape == (ranks,) and np.all(f["/memory/patch_size"][()] >= 0)
        assert f["/decomposition/boxes"].shape == (ranks, 4)
        boxes = f["/decomposition/boxes"][()]
        n = f["/reconstruction"].shape[0]
        assert sum((b[1] - b[0]) * (b[3] - b[2]) for b in boxes) == n * n
        assert np.all(np.isfinite(f["/metrics/psnr"][()]))

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                assert "units" in obj.attrs and "description" in obj.attrs, f"{path}: {name} lacks units/description"
        f.visititems(visit)
        return f["/reconstruction"][()], f["/metrics/psnr"][()], ranks, f["/memory/patch_size"][()]


ref, ref_psnr, _, _ = check_schema(sys.argv[1])
assert np.abs(ref).max() > 0, "reconstruction is all zeros"
for arg in sys.argv[2:]:
    other = arg.removeprefix("--patched=")
    x, psnr, ranks, patch = check_schema(other)
    if arg.startswith("--patched="):
        assert np.all(patch > 0), f"{other}: expected a patched denoiser, got patch sizes {patch}"
        print(f"{other}: patch sizes {patch}")
    rel = np.linalg.norm(x - ref) / np.linalg.norm(ref)
    print(f"{other}: {ranks} ranks, relative difference to 1 rank {rel:.3e}, PSNR {psnr[-1]:.4f} vs {ref_psnr[-1]:.4f} dB")
    assert rel < 1e-5, f"{other}: differs from the 1-rank reconstruction by {rel:.3e}"
print("schema and rank-count checks passed")
