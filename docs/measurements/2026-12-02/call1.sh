#!/usr/bin/env bash
# Device call 1 of 2026-12-02: build; the quick GPU check; study_4096's first iteration (pre,
# 1 rank, twice) with the isolated singleton and the parallel power-method start; the sweep's
# DnCNN rows with eager, native, inductor and deepinv under torch.compile (default mode).
#   bash docs/measurements/2026-12-02/call1.sh   (device machine, repository root; carry .deps, .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl &&
  export PYTHONPATH=/tmp/site || exit 1
{
  stamp build
  timeout 400 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
} 2>&1 | tee "$out/1_build.log"
[ -x $b/pnp_recon ] && [ -x $b/pnp_bench ] || exit 1
stamp gpu_check | tee -a "$out/1_build.log"
timeout 150 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
cp /tmp/gc/gpu_check.log "$out/2_gpu_check_quick.log"
tail -1 "$out/2_gpu_check_quick.log"
{
  for i in 1 2; do
    stamp "study_4096 pre, run $i"
    timeout 60 $b/pnp_recon input/study_4096.toml --output /tmp/s$i.h5 --force --set compile.mode='"pre"' 2>&1 |
      grep -vE "^iteration " | tail -24
  done
} 2>&1 | tee "$out/3_study.log"
stamp "sweep: dncnn, eager/native/inductor/torch_compile" | tee "$out/4_sweep_dncnn.log"
timeout 330 scripts/gpu_measure.sh sweeppart dncnn eager,native,inductor,torch_compile 60 >/dev/null 2>&1
cat "$out/sweeppart.log" >>"$out/4_sweep_dncnn.log" && rm "$out/sweeppart.log"
stamp done | tee -a "$out/4_sweep_dncnn.log"
