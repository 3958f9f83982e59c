"""pnp_peer: the study's peer, deepinv's own denoiser modules under torch.compile, timed exactly
as pnp_bench times its own arms (src/benchmark/sweep.cpp). pnp_bench's ``torch_compile`` and
``torch_compile_max_autotune`` backends run ``python -m pnp_peer`` as a subprocess, with a time
cap, and write what it prints into the same sweep file as the other arms."""

PEER_VERSION = "1"

# exit codes (pnp_bench turns each into a clear row reason)
EXIT_INPUT = 2          # bad arguments, or weights that do not fit deepinv's module
EXIT_NO_TORCH = 3       # this interpreter has no torch
EXIT_TORCH_VERSION = 4  # its torch is not pnp's LibTorch version
EXIT_NO_DEEPINV = 5     # deepinv is not installed
EXIT_WRONG = 6          # the compiled module's output differs from the eager module's
