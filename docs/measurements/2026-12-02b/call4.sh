#!/usr/bin/env bash
# Device call 4 of 2026-12-02b: build; test_physics (the power method's start vector made on the
# GPU against the CPU's) and test_native; the quick GPU check; study_4096's first iteration (pre,
# 1 rank) three times; DRUNet 1 ch 4096² with the defaults (parallel plan builds, ATen's
# benchmark trying 3 algorithms), cold then from the plan cache, with and without ATen's
# benchmark mode, fp32 and bf16.
#   bash docs/measurements/2026-12-02b/call4.sh   (device machine, repository root; carry .deps)
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
{
  for t in test_physics test_native; do
    stamp "$t"
    timeout 150 $b/$t 2>&1 | grep -E "ERROR|FAILED|test cases|assertions" | head -20
  done
  stamp gpu_check
  timeout 150 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/3_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
} 2>&1 | tee "$out/2_tests.log"
{
  for i in 1 2 3; do
    stamp "study_4096 pre, run $i"
    timeout 60 $b/pnp_recon input/study_4096.toml --output /tmp/s.h5 --force --set compile.mode='"pre"' 2>&1 |
      grep -vE "^iteration " | tail -6
  done
} 2>&1 | tee "$out/4_study.log"
{
  for dt in float32 bfloat16; do
    for o in cfagbep cfagbepn; do
      rm -rf /tmp/pnp_plan_cache_time
      for run in cold cached; do
        stamp "nn_time drunet 1 4096x4096 $dt --native $o ($run)"
        timeout 60 $b/nn_time drunet 1 4096x4096 --device cuda --dtype $dt --backends native --native $o \
          --cache /tmp/pnp_plan_cache_time 2>&1 | grep -E "^nn_time|rror" | cut -c1-330
      done
    done
  done
  stamp done
} 2>&1 | tee "$out/5_drunet_compile.log"
