#!/usr/bin/env bash
# Device call 2 of 2026-12-03b (call 1's kernels; d8acef3 changed comments only): Nsight Compute on pnp's head and tail
# kernels (DnCNN 3 ch 2048²'s 3 -> 64 head and 64 -> 3 tail, DRUNet 1 ch 4096²'s 2 -> 64 head and
# 64 -> 1 tail), to see what holds them above their floors; then a second side by side of the
# 2048² networks (pnp_bench: eager, native, deepinv 0.5.0 under torch.compile) in this call.
#   bash docs/measurements/2026-12-03b/call2.sh   (device machine, repository root; carry .deps .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  stamp build
  timeout 300 scripts/device_build.sh nn_time pnp_bench >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  sec="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis"
  prof() {  # label, kernel regex, launches to skip, then the nn_time arguments
    local l=$1 k=$2 skip=$3; shift 3
    stamp "ncu $l"
    timeout 120 ncu --clock-control none --launch-skip "$skip" --launch-count 1 -k "regex:$k" $sec \
      $b/nn_time "$@" --device cuda --backends native 2>&1 | grep -vE "^nn_time|^==PROF==" |
      grep -E "Duration|Throughput|Busy|Pipe|Issue|Stall|Warp Cycles|Eligible|Active Warps|Registers|Shared Memory|L2|DRAM|L1|Theoretical|Achieved|Executed Ipc|Block Limit|few_|Mem " | cut -c1-150
  }
  prof dncnn_head few_in 2 dncnn 3 2048x2048
  prof dncnn_tail few_out_rows 2 dncnn 3 2048x2048
  prof drunet_head few_in 2 drunet 1 4096x4096
  prof drunet_tail few_out_rows 2 drunet 1 4096x4096
} 2>&1 | tee "$out/1_ncu.log"
. scripts/device_env.sh  # (the carried .debs: toml++ for pnp_bench)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PNP_PYTHON=/opt/torch/.venv/bin/python3
{
  sed -e 's/^architectures = .*/architectures = ["dncnn", "unet"]/' -e 's/^channels = .*/channels = 3/' \
      -e 's/^shapes = .*/shapes = [[2048, 2048]]/' -e 's/^backends = .*/backends = ["eager", "native", "torch_compile"]/' \
      -e 's/^timeout_s = .*/timeout_s = 90/' input/sweep.toml >/tmp/sweep_cnn2048.toml
  stamp "pnp_bench cnn2048"
  timeout 200 $b/pnp_bench /tmp/sweep_cnn2048.toml --output "$out/2_cnn2048.h5" --force 2>&1 | tail -8
  stamp done
} 2>&1 | tee "$out/2_peer.log"
