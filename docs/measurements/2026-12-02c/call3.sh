#!/usr/bin/env bash
# Device call 3 of 2026-12-02c: build (the new defaults: every convolution a graph candidate,
# no ATen benchmark); test_native; the quick GPU check; study_4096 (pre, 1 rank) twice with
# one plan cache, cold then cached (its first iteration compiles from the network's list);
# DRUNet 1 ch 4096² with nn_time's defaults, fp32 and bf16, cold then cached.
#   bash docs/measurements/2026-12-02c/call3.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 400 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  stamp test_native
  timeout 200 $b/test_native > "$out/2_test_native_full.log" 2>&1
  grep -E "ERROR|FAILED|test cases|assertions" "$out/2_test_native_full.log" | head -30
  stamp gpu_check
  timeout 150 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/3_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
} 2>&1 | tee "$out/1_build_tests.log"
{
  rm -rf /tmp/pnp_study_cache
  for run in cold cached; do
    stamp "study_4096 pre, plan cache $run"
    timeout 60 $b/pnp_recon input/study_4096.toml --output /tmp/s.h5 --force --set compile.mode='"pre"' \
      --set compile.cache_dir='"/tmp/pnp_study_cache"' 2>&1 | grep -vE "^iteration " | tail -8
  done
  for dt in float32 bfloat16; do
    rm -rf /tmp/pnp_plan_cache_time
    for run in cold cached; do
      stamp "nn_time drunet 1 4096x4096 $dt --native cfagbepG ($run)"
      timeout 40 $b/nn_time drunet 1 4096x4096 --device cuda --dtype $dt --backends native --native cfagbepG \
        --cache /tmp/pnp_plan_cache_time 2>&1 | grep -E "^nn_time|rror" | tee -a "$out/4_drunet_full.log" | cut -c1-260
    done
  done
  stamp done
} 2>&1 | tee "$out/4_study_drunet.log"
