#!/usr/bin/env bash
# Device call 3 of 2026-12-02e: build everything; test_native (all cases); the quick GPU check;
# the Hopper kernel A/B (w: off) with its residual loads batched: DnCNN and UNet 3 ch 2048²,
# DRUNet 1 ch 4096² fp32 and bf16 (profiles); Nsight Compute on DRUNet's 128-channel
# residual layer again; DRUNet fp32's compile with the plan cache (cold, then twice cached).
#   bash docs/measurements/2026-12-02e/call3.sh   (device machine, repository root; carry .deps)
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
  timeout 200 $b/test_native > "$out/1_test_native_full.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native_full.log" | head -30
  stamp gpu_check
  timeout 120 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/2_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
} 2>&1 | tee "$out/1_build_test.log"
{
  nt() {  # arch, channels, shape, then nn_time options
    local a=$1 c=$2 s=$3; shift 3
    stamp "nn_time $a $c $s $*"
    timeout 90 $b/nn_time $a $c $s --device cuda --backends native "$@" 2>&1 | grep -vE "^\s*$" | tee -a "$out/3_ab_full.log" |
      grep -E "^nn_time|rror|^ +[0-9.]+ ms" | grep -E "^nn_time|rror|wgmma|xmma|cutlass" | cut -c1-200 | head -9
  }
  nt dncnn 3 2048x2048 --profile 3
  nt dncnn 3 2048x2048 --native cfagbeGw
  nt unet 3 2048x2048 --profile 3
  nt unet 3 2048x2048 --native cfagbeGw
  nt drunet 1 4096x4096 --profile 3
  nt drunet 1 4096x4096 --native cfagbeGw
  nt drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt drunet 1 4096x4096 --dtype bfloat16 --native cfagbeGw
  rm -rf /tmp/pc
  for run in cold cached cached; do nt drunet 1 4096x4096 --native cfagbeGp --cache /tmp/pc; done
  grep -E "compiled from the plan cache" "$out/3_ab_full.log" | tail -2 | cut -c1-300
  stamp "ncu drunet128 residual"
  timeout 100 ncu --clock-control none --launch-skip 9 --launch-count 1 -k regex:wgmma --section SpeedOfLight \
    $b/nn_time drunet 1 4096x4096 --device cuda --backends native 2>&1 | grep -E "Duration|Throughput|wgmma" | cut -c1-150
  stamp done
} 2>&1 | tee "$out/3_ab.log"
