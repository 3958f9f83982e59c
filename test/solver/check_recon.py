"""Checks pnp_recon outputs: the schema of docs/output_schema.md, and that runs on several
rank counts give the 1-rank reconstruction to within 1e-5 relative. Outputs given as
--patched=FILE must also have run the denoiser in patches (/memory/patches > 1 on every rank);
outputs given as --layer=FILE must have run with distributed.halo_mode = "layer": no input halo,
tile starts on the denoiser's alignment, and (on more than one rank) no redundant denoiser work.
usage: check_recon.py REFERENCE.h5 OTHER.h5 ... [--patched=OTHER.h5 ...] [--layer=OTHER.h5 ...]"""
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
        # what the native compile chose (pnp_recon's Denoiser::report): the fusions per compiled
        # shape, then the executor's notes; none for mode none (eager)
        notes = [s.decode() if isinstance(s, bytes) else s for s in f["/provenance/denoiser_compile"][()]] \
            if "/provenance/denoiser_compile" in f else []
        if f.attrs["compile_mode"] != "none" and f.attrs["compile_backend"] == "native":
            assert notes and notes[0].startswith("native [") and " fusions" in notes[0], (path, notes[:2])
            assert len(notes) > 1, (path, "no executor notes")
        elif f.attrs["compile_mode"] == "none":
            assert not notes, (path, notes[:2])
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
        assert f["/timings/stable_iteration"][()] > 0
        # the first iteration is measured from program start to its end: the set-up's parts and
        # iteration 1 itself, sequential wall intervals on each rank, fit inside it (a stable
        # iteration need not be shorter: on a loaded machine it can take longer)
        parts = ["mpi", "configuration", "plan", "communicator", "data", "denoiser", "resume", "data_check", "step_size", "initial_image"]
        assert sorted(f["/timings/setup"].keys()) == sorted(parts), list(f["/timings/setup"].keys())
        setup = np.array([f["/timings/setup/" + p][()] for p in parts])
        assert setup.shape == (len(parts), ranks) and np.all(setup >= 0), setup
        first = f["/timings/first_iteration"][()]
        used = setup.sum(axis=0) + f["/timings/wall"][0]
        assert np.all(used <= first + 1e-3), (used, first, path)
        assert f["/memory/peak_bytes"].shape == (ranks,)
        assert f["/memory/estimated_bytes"].shape == (ranks,) and np.all(f["/memory/estimated_bytes"][()] > 0)
        assert f["/memory/patch_shape"].shape == (ranks, 2) and np.all(f["/memory/patch_shape"][()] >= 0)
        assert f["/memory/patches"].shape == (ranks,) and np.all(f["/memory/patches"][()] >= 1)
        assert f["/decomposition/boxes"].shape == (ranks, 4)
        boxes = f["/decomposition/boxes"][()]
        n = f["/reconstruction"].shape[0]
        assert sum((b[1] - b[0]) * (b[3] - b[2]) for b in boxes) == n * n
        # computed every solver.metrics_every iterations and at the last (NaN in between)
        psnr = f["/metrics/psnr"][()]
        assert np.isfinite(psnr[-1]) and not np.any(np.isinf(psnr)), f"{path}: PSNR {psnr}"

        def visit(name, obj):
            if isinstance(obj, h5py.Dataset):
                assert "units" in obj.attrs and "description" in obj.attrs, f"{path}: {name} lacks units/description"
        f.visititems(visit)
        return f["/reconstruction"][()], f["/metrics/psnr"][()], ranks, f["/memory/patches"][()]


def check_layer(path):
    with h5py.File(path, "r") as f:
        dec = f["/decomposition"]
        assert dec.attrs["halo_mode"] == "layer", f"{path}: halo_mode {dec.attrs['halo_mode']}"
        assert f["/decomposition/halo"][()] == 0
        ranks = int(f.attrs["ranks"])
        red = f["/decomposition/redundancy"][()]
        # the mean over ranks is the repeated work (1: none); the spread is the load imbalance of
        # splitting the image on the 8 px grid
        assert red.shape == (ranks,) and abs(red.mean() - 1) < 1e-9, f"{path}: redundancy {red}"
        msgs = f["/decomposition/denoiser_messages"][()]
        assert np.all(msgs > 0) if ranks > 1 else np.all(msgs == 0), f"{path}: messages {msgs}"
        boxes = f["/decomposition/boxes"][()]
        assert np.all(boxes[:, [0, 2]] % 8 == 0), f"{path}: tile starts {boxes[:, [0, 2]]} not on the 8 px grid"
        print(f"{path}: layer halo, work {red.mean():.4f}x the whole image's (largest share {red.max():.4f}x), "
              f"{int(msgs.max())} messages per call")


ref, ref_psnr, _, _ = check_schema(sys.argv[1])
assert np.abs(ref).max() > 0, "reconstruction is all zeros"
with h5py.File(sys.argv[1], "r") as f:  # an image with content, not one the clamp has flattened
    if "/ground_truth" in f:
        assert ref.std() > 0.2 * f["/ground_truth"][()].std(), f"{sys.argv[1]}: a nearly flat reconstruction"
for arg in sys.argv[2:]:
    other = arg.removeprefix("--patched=").removeprefix("--layer=")
    if arg.startswith("--layer="):
        check_layer(other)
    x, psnr, ranks, patch = check_schema(other)
    if arg.startswith("--patched="):
        assert np.all(patch > 1), f"{other}: expected a patched denoiser, got {patch} patches per rank"
        print(f"{other}: {patch} patches per rank")
    rel = np.linalg.norm(x - ref) / np.linalg.norm(ref)
    print(f"{other}: {ranks} ranks, relative difference to 1 rank {rel:.3e}, PSNR {psnr[-1]:.4f} vs {ref_psnr[-1]:.4f} dB")
    assert rel < 1e-5, f"{other}: differs from the 1-rank reconstruction by {rel:.3e}"
print("schema and rank-count checks passed")
