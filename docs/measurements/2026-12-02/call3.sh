#!/usr/bin/env bash
# Device call 3 of 2026-12-02 (warm machine, no build): the sweep's DnCNN and DRUNet rows with
# deepinv under torch.compile in max-autotune mode, each row capped at 28 s.
#   bash docs/measurements/2026-12-02/call3.sh ARCHS   (device machine, repository root; carry .deps, .whl)
set -uo pipefail
out=${OUT:?}
archs=${1:-dncnn,drunet}
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
  export PYTHONPATH=/tmp/site || exit 1
. scripts/device_env.sh  # (a carry of .deps replaces the unpacked libraries)
[ -x build/gpu/bin/pnp_bench ] || { echo "no build: the machine was not warm"; exit 1; }
log="$out/6_sweep_${archs//,/_}_max_autotune.log"
stamp "sweep: $archs, torch_compile_max_autotune (cap 28 s)" | tee "$log"
timeout 570 scripts/gpu_measure.sh sweeppart "$archs" torch_compile_max_autotune 28 >/dev/null 2>&1
cat "$out/sweeppart.log" >>"$log" && rm "$out/sweeppart.log"
stamp done | tee -a "$log"
