#!/usr/bin/env bash
# Device call 3 of 2026-12-03e, part 1 of 2 (cedd8cf's tree; call 2's machine was released before
# its part 2 ran): the build; nn_time in fp32 (DRUNet 1 ch 4096² with its profile, DnCNN 3 ch
# 2048²) and bf16 (DRUNet); then 97c0603's kernel (old_rows_kernels.cu.txt, untracked) rebuilt
# into the same tree and the same runs on the same machine; then cedd8cf's kernel rebuilt for
# call3b.sh, which runs right after on the same machine carrying .whl.
#   bash docs/measurements/2026-12-03e/call3.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
here=docs/measurements/2026-12-03e
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
nt() {  # log, arch, channels, shape, then nn_time options
  local log=$1 a=$2 c=$3 s=$4; shift 4
  stamp "nn_time $a $c $s $*"
  timeout 90 $b/nn_time $a $c $s --device cuda --backends native "$@" 2>&1 | grep -vE "^\s*$" | tee -a "$out/$log" |
    grep -E "^nn_time|rror|^ +[0-9.]+ ms" | cut -c1-220 | head -14
}
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  stamp build
  timeout 300 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  nt 2_new_full.log drunet 1 4096x4096 --profile 3
  nt 2_new_full.log dncnn 3 2048x2048
  nt 2_new_full.log drunet 1 4096x4096 --dtype bfloat16
} 2>&1 | tee "$out/2_new.log"
{
  stamp "97c0603's kernel"
  cp $here/old_rows_kernels.cu.txt src/nn/native/wgmma_rows_kernels.cu
  timeout 200 scripts/device_build.sh nn_time >/tmp/build_old.log 2>&1 || { tail -20 /tmp/build_old.log; exit 1; }
  nt 4_old_full.log drunet 1 4096x4096 --profile 3
  nt 4_old_full.log dncnn 3 2048x2048
  nt 4_old_full.log drunet 1 4096x4096 --dtype bfloat16
  stamp "cedd8cf's kernel again"
  git checkout src/nn/native/wgmma_rows_kernels.cu
  timeout 200 scripts/device_build.sh >/tmp/build_new.log 2>&1 || { tail -20 /tmp/build_new.log; exit 1; }
  stamp done
} 2>&1 | tee "$out/4_old.log"
