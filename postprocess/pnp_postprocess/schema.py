"""The pnp HDF5 output schema (docs/output_schema.md), as data.

The readers check files against these lists, so a file that is not a pnp output (or one
from an incompatible version) fails with a message naming the file and what is missing.
"""

RECON_ROOT_ATTRS = (
    "program", "version", "git_commit", "date", "host", "ranks", "gpu_names",
    "torch_version", "cuda_version", "nccl_version", "config",
    "compile_mode", "compile_backend", "architecture", "device", "comm_backend", "step",
    "graphs_captured", "tf32", "power_iterations", "power_converged", "angles",
)
RECON_VOLUME_ATTRS = ("slices", "clipped_transmissions", "dead_bins")
"""Root attributes of volumes only (clipped_transmissions and dead_bins: a volume read from a file)."""
REQUIRED_ROOT_ATTRS = ("program", "version", "git_commit", "date", "ranks", "gpu_names",
                       "compile_mode", "compile_backend")
"""What the readers insist on; the other attributes are read when present (older files)."""
BENCH_ROOT_ATTRS = (
    "program", "version", "git_commit", "date", "host", "ranks", "gpu_names",
    "torch_version", "cuda_version", "nccl_version", "config", "device",
    "compile_mode", "compile_backend", "architecture",
)
BENCH_REQUIRED_ROOT_ATTRS = ("program", "version", "git_commit", "date", "ranks", "gpu_names")
"""pnp_bench files before 2026-12-01 lack compile_mode, compile_backend and architecture."""

PHASES = ("forward_projection", "allreduce", "backprojection", "step",
          "halo_exchange", "denoise", "clamp")
"""Phases of one PnP iteration, in execution order (``total`` is their device-event sum)."""

SETUP_PARTS = ("mpi", "configuration", "plan", "communicator", "data", "denoiser", "resume", "data_check",
               "step_size", "initial_image")
"""The parts of the set-up before iteration 1, /timings/setup/<part> (files since 2026-12-01; the
first three were one part, ``start``, in the files of that day before its evening)."""

RECON_DATASETS = {
    # path: (units, required)
    "/reconstruction": ("attenuation per pixel", True),
    "/ground_truth": ("attenuation per pixel", False),
    "/reconstruction_float64": ("attenuation per pixel", False),  # solver.precision = "fp64" only
    **{f"/timings/{p}": ("s", True) for p in PHASES + ("total", "wall")},
    "/timings/region_gradient": ("s", False),
    "/timings/region_denoise": ("s", False),
    "/timings/first_iteration": ("s", True),
    "/timings/stable_iteration": ("s", True),
    "/timings/compile": ("s", True),
    **{f"/timings/setup/{p}": ("s", False) for p in SETUP_PARTS},
    "/memory/peak_bytes": ("B", True),
    **{f"/memory/phase_peak_bytes/{p}": ("B", False) for p in PHASES},
    "/memory/estimated_bytes": ("B", False),
    "/memory/setup_peak_bytes": ("B", False),
    "/memory/metrics_peak_bytes": ("B", False),
    "/memory/reserved_peak_bytes": ("B", False),
    "/memory/allocator_retries": ("1", False),
    "/memory/patch_shape": ("px", False),
    "/memory/patches": ("1", False),
    "/memory/batch": ("slice", False),  # volumes
    "/memory/batches": ("1", False),
    "/memory/stream": ("slice", False),  # volumes: a streamed slab's group (0: resident)
    "/memory/stream_groups": ("1", False),
    "/communication/bytes_per_iteration": ("B", False),
    "/communication/bytes": ("B", False),
    "/metrics/psnr": ("dB", True),
    "/metrics/ssim": ("1", False),
    "/metrics/residual": ("1", True),
    "/metrics/sigma": ("1", False),
    "/provenance/segments": ("1", False),
    "/provenance/denoiser_compile": ("1", False),  # the native or inductor compile's report (absent for eager)
    "/decomposition/boxes": ("px", True),
    "/decomposition/slabs": ("slice", False),  # volumes
    "/decomposition/halo": ("px", True),
    "/decomposition/denoiser_flops": ("FLOP", False),
    "/decomposition/redundancy": ("1", False),
    "/decomposition/patch_redundancy": ("1", False),
    "/decomposition/denoiser_exchange_bytes": ("B", False),
    "/decomposition/denoiser_messages": ("1", False),
}

CEILINGS_ROOT_ATTRS = ("program", "version", "git_commit", "date", "host", "gpu_names")
"""Root attributes of a `pnp_bench --ceilings` file (provenance and the device)."""

CEILINGS_COLUMNS = {"name": "str", "shape": "str", "unit": "str", "seconds": "float", "rate": "float",
                    "error": "float"}
"""Columns of /ceilings (docs/output_schema.md, "pnp_bench --ceilings output")."""

SCALING_COLUMNS = {
    # column: kind, of a `pnp_bench --scaling` file's /scaling group
    "ranks": "int", "layout": "str", "halo_mode": "str", "status": "str", "reason": "str",
    "stand_in": "int", "tile": "str", "gradient_s": "float", "denoise_s": "float",
    "allreduce_s": "float", "halo_s": "float", "iteration_s": "float", "efficiency": "float",
    "redundancy": "float", "halo_bytes": "float", "halo_messages": "float", "denoiser_bytes": "int",
}
"""Columns of /scaling (docs/output_schema.md, "pnp_bench --scaling output")."""
SCALING_ROOT_ATTRS = ("program", "version", "git_commit", "date", "host", "gpu_names", "config")

DEEPINV_64_GPU_EFFICIENCY = 0.219
"""The study's measured parallel efficiency of deepinv's distributed PnP at 64 GPUs (patch 448,
overlap 32): the reference point of the scaling figure."""

BENCH_COLUMNS = {
    # column: kind ("str", "int" or "float")
    "architecture": "str", "dim": "int", "shape": "str", "backend": "str", "mode": "str",
    "gpu": "str", "status": "str", "reason": "str", "first_call_s": "float",
    "compile_s": "float", "export_s": "float", "stable_s": "float", "peak_memory_bytes": "int",
    "flops": "float", "bytes": "float", "intensity": "float", "cuda_graph": "int", "module": "str",
    "notes": "str",
}
BENCH_OPTIONAL = ("export_s", "cuda_graph", "module", "notes")
"""Columns that files written before they existed lack (pnp_bench before 2026-12-01, before the
torch_compile arms for cuda_graph and module, before 2026-12-04 for notes); read as NaN or empty."""

REGIONS = {
    "region_gradient": ("forward_projection", "allreduce", "backprojection", "step"),
    "region_denoise": ("halo_exchange", "denoise", "clamp"),
}
"""Optional /timings/region_* datasets: phases a compiled region (post mode) times as one."""

COMPILE_MODES = ("none", "pre", "post", "fused")
"""Compile placements in the order the figures show them."""

# Ridge points of the roofline: TF32 dense peak / HBM bandwidth, in FLOP per byte.
RIDGE_FLOP_PER_BYTE = {"A100": 76.5, "H100": 147.0, "H200": 103.0}
