#!/usr/bin/env bash
# Device call 2 of 2026-12-03: the kernels harness again (the rows kernel's residual rows
# prefetched into L2) while test_native and nn_time build; test_native on the GPU (the rows
# kernel's cases, the executor's timed choice); nn_time, cuDNN's choice (defaults) against
# pnp's kernels chosen per layout by timing (w): DnCNN and UNet 3 ch 2048², DRUNet 1 ch 4096²
# fp32 and bf16, with profiles.
#   bash docs/measurements/2026-12-03/call2.sh   (device machine, repository root; carry .deps .kdev)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  stamp "kernels.py (background) and the build"
  (timeout 200 env PYTHONUNBUFFERED=1 /opt/torch/.venv/bin/python docs/measurements/2026-12-03/kernels.py .kdev/libkdev.so \
     "$out/kernels2.csv" --quick > "$out/kernels2.log" 2>&1; echo "kernels rc=$?" >> "$out/kernels2.log") &
  timeout 420 scripts/device_build.sh test_native nn_time >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  wait
  grep -E "checks:|variant|rc=" "$out/kernels2.log"
  stamp test_native
  timeout 240 $b/test_native > "$out/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native.log" | head -30
} 2>&1 | tee "$out/1_build_test.log"
{
  nt() {  # arch, channels, shape, then nn_time options
    local a=$1 c=$2 s=$3; shift 3
    stamp "nn_time $a $c $s $*"
    timeout 100 $b/nn_time $a $c $s --device cuda --backends native "$@" 2>&1 | grep -vE "^\s*$" | tee -a "$out/2_ab_full.log" |
      grep -E "^nn_time|rror|^ +[0-9.]+ ms" | grep -E "^nn_time|rror|wgmma|xmma|cutlass|fort" | cut -c1-230 | head -8
  }
  nt dncnn 3 2048x2048
  nt dncnn 3 2048x2048 --native cfagbeGw --profile 3
  nt unet 3 2048x2048
  nt unet 3 2048x2048 --native cfagbeGw
  nt drunet 1 4096x4096
  nt drunet 1 4096x4096 --native cfagbeGw --profile 3
  nt drunet 1 4096x4096 --dtype bfloat16
  nt drunet 1 4096x4096 --dtype bfloat16 --native cfagbeGw --profile 3
  stamp done
} 2>&1 | tee "$out/2_ab.log"
