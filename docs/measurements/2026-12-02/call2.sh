#!/usr/bin/env bash
# Device call 2 of 2026-12-02 (right after call 1, on the warm machine: no build): the sweep's
# DRUNet and UNet rows with eager, native, inductor and deepinv under torch.compile (default).
#   bash docs/measurements/2026-12-02/call2.sh   (device machine, repository root; carry .deps, .whl)
set -uo pipefail
out=${OUT:?}
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
  export PYTHONPATH=/tmp/site || exit 1
. scripts/device_env.sh  # (a carry of .deps replaces the unpacked libraries)
[ -x build/gpu/bin/pnp_bench ] || { echo "no build: the machine was not warm"; exit 1; }
stamp "sweep: drunet, unet, eager/native/inductor/torch_compile" | tee "$out/5_sweep_drunet_unet.log"
timeout 570 scripts/gpu_measure.sh sweeppart drunet,unet eager,native,inductor,torch_compile 60 >/dev/null 2>&1
cat "$out/sweeppart.log" >>"$out/5_sweep_drunet_unet.log" && rm "$out/sweeppart.log"
stamp done | tee -a "$out/5_sweep_drunet_unet.log"
