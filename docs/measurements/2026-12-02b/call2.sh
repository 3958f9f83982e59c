#!/usr/bin/env bash
# Device call 2 of 2026-12-02b: build; the quick GPU check; study_4096's first iteration (pre,
# 1 rank) three times with the singleton on ob1 + self and the power method's split; DRUNet 1 ch
# 4096² with ATen's benchmark mode trying 1, 3 or all of cuDNN's algorithms (fp32, bf16); the
# sweep's DRUNet rows, native only (the compile with parallel plan builds).
#   bash docs/measurements/2026-12-02b/call2.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 400 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
} 2>&1 | tee "$out/1_build.log"
[ -x $b/pnp_recon ] && [ -x $b/nn_time ] || exit 1
stamp gpu_check | tee -a "$out/1_build.log"
timeout 150 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
cp /tmp/gc/gpu_check.log "$out/2_gpu_check_quick.log"
tail -1 "$out/2_gpu_check_quick.log"
{
  for i in 1 2 3; do
    stamp "study_4096 pre, run $i"
    timeout 60 $b/pnp_recon input/study_4096.toml --output /tmp/s.h5 --force --set compile.mode='"pre"' 2>&1 |
      grep -vE "^iteration " | tail -6
  done
} 2>&1 | tee "$out/3_study.log"
{
  for dt in float32 bfloat16; do
    for l in 1 3 0; do
      stamp "nn_time drunet 1 4096x4096 $dt --native cfagbe --benchmark-limit $l"
      timeout 100 $b/nn_time drunet 1 4096x4096 --device cuda --dtype $dt --backends native --native cfagbe \
        --benchmark-limit $l 2>&1 | grep -E "^nn_time|rror" | cut -c1-400
    done
  done
} 2>&1 | tee "$out/4_benchmark_limit.log"
stamp "sweep: drunet, native" | tee "$out/5_sweep_drunet_native.log"
timeout 200 scripts/gpu_measure.sh sweeppart drunet native >/dev/null 2>&1
cat "$out/sweeppart.log" >>"$out/5_sweep_drunet_native.log" && rm "$out/sweeppart.log"
stamp done | tee -a "$out/5_sweep_drunet_native.log"
