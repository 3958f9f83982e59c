#!/usr/bin/env bash
# Device call 1 of 2026-12-02c: build; test_native (every convolution a cuDNN graph candidate,
# the capture from the plan cache's list of a network); DRUNet 1 ch
# 4096²'s compile and speed, fp32 and bf16, cold then from the plan cache, three ways: graphs
# for the residual convolutions only with ATen's benchmark (the previous default, cfagbep),
# graphs for every convolution with ATen's benchmark (cfagbepG) and without it (cfagbepnG, run
# three times: cold, cached, cached); the quick GPU check.
#   bash docs/measurements/2026-12-02c/call1.sh   (device machine, repository root; carry .deps)
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
  stamp test_native
  timeout 200 $b/test_native > "$out/2_test_native_full.log" 2>&1
  grep -E "ERROR|FAILED|test cases|assertions" "$out/2_test_native_full.log" | head -30
} 2>&1 | tee "$out/2_tests.log"
{
  for dt in float32 bfloat16; do
    for o in cfagbep cfagbepG cfagbepnG; do
      rm -rf /tmp/pnp_plan_cache_time
      runs="cold cached"; [ $o = cfagbepnG ] && runs="cold cached cached"
      for run in $runs; do
        stamp "nn_time drunet 1 4096x4096 $dt --native $o ($run)"
        timeout 40 $b/nn_time drunet 1 4096x4096 --device cuda --dtype $dt --backends native --native $o \
          --cache /tmp/pnp_plan_cache_time 2>&1 | grep -E "^nn_time|rror" | tee -a "$out/4_drunet_full.log" | cut -c1-300
      done
    done
  done
} 2>&1 | tee "$out/4_drunet_compile.log"
{
  stamp gpu_check
  timeout 150 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/3_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
  stamp done
} 2>&1 | tee "$out/3_gpu_check.log"
