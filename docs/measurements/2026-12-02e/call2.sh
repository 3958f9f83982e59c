#!/usr/bin/env bash
# Device call 2 of 2026-12-02e: build test_native and nn_time; the Hopper kernel's test case
# (the TF32 operands rounded by the copy engine, and truncated, against float64 and cuDNN);
# Nsight Compute on the kernel (DnCNN 64 ch 2048²; DRUNet 4096²'s 64-, 128- and 512-channel
# levels) and on cuDNN's kernel for DnCNN's layer (w: off), to see what limits it.
#   bash docs/measurements/2026-12-02e/call2.sh   (device machine, repository root; carry .deps)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 400 scripts/device_build.sh test_native nn_time >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  stamp test_native Hopper
  timeout 240 $b/test_native -tc="*Hopper*" -s > "$out/1_test_hopper.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_hopper.log" | head -20
  grep -E "rel err" "$out/1_test_hopper.log" | sed 's/.*MESSAGE: [0-9a-fx]* //' | head -60
} 2>&1 | tee "$out/1_build_test.log"
{
  sec="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis"
  prof() {  # label, kernel regex, launches to skip, then the nn_time arguments
    local l=$1 k=$2 skip=$3; shift 3
    stamp "ncu $l"
    timeout 120 ncu --clock-control none --launch-skip "$skip" --launch-count 1 -k "regex:$k" $sec \
      $b/nn_time "$@" --device cuda --backends native 2>&1 | grep -vE "^nn_time|^==PROF==" |
      grep -E "Duration|Throughput|Busy|Pipe|Issue|Stall|Warp Cycles|Eligible|Active Warps|Registers|Shared Memory|L2|DRAM|L1|Theoretical|Achieved|Executed Ipc|Block Limit|wgmma|xmma|Mem " | cut -c1-150
  }
  prof dncnn64_wgmma wgmma 2 dncnn 3 2048x2048
  prof dncnn64_cudnn "xmma_fprop.*256x64" 2 dncnn 3 2048x2048 --native cfagbeGw
  prof drunet64_wgmma wgmma 2 drunet 1 4096x4096
  prof drunet128_wgmma wgmma 9 drunet 1 4096x4096
  prof drunet512_wgmma wgmma 25 drunet 1 4096x4096
  stamp done
} 2>&1 | tee "$out/2_ncu.log"
