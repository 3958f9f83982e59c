#!/usr/bin/env bash
# Device call 2 (and 3) of 2026-12-02d: build; test_native; the quick GPU check; the narrow
# kernel(s) A/B (k: off) with profiles; the upsample fold A/B (u: off, UNet); then side by side in
# one call (pnp_bench): DRUNet 1 ch 4096² and DnCNN / UNet 3 ch 2048², eager, native and deepinv
# 0.5.0 under torch.compile (default mode), and native again with the narrow kernels off
# ([native] narrow_convs = false). Call 3 (the final code: one-output kernel only) adds the
# u arm and DRUNet fp32's compile with the plan cache (cold, twice cached), leaves out the
# narrow-off pnp_bench rows; its files are numbered 6-8 (the arguments).
#   bash docs/measurements/2026-12-02d/call2.sh [3 4 5 | 6 7 8]   (device machine, repository root; carry .deps, .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
n1=${1:-3} n2=${2:-4} n3=${3:-5}
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 400 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  stamp test_native
  timeout 200 $b/test_native > "$out/${n1}_test_native_full.log" 2>&1
  grep -E "ERROR|FAILED|test cases|assertions" "$out/${n1}_test_native_full.log" | head -30
  stamp gpu_check
  timeout 120 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/${n1}_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
} 2>&1 | tee "$out/${n1}_build_test.log"
{
  nt() {  # arch, channels, shape, then nn_time options
    local a=$1 c=$2 s=$3; shift 3
    stamp "nn_time $a $c $s $*"
    timeout 60 $b/nn_time $a $c $s --device cuda --backends native "$@" 2>&1 | grep -vE "^\s*$" | tee -a "$out/${n2}_ab_full.log" |
      grep -E "^nn_time|rror|^ +[0-9.]+ ms" | grep -E "^nn_time|rror|few_|tilesize256x32|indexed_wo|dgrad|nhwcToNchw|upsample|clamp" | cut -c1-230
  }
  nt dncnn 3 2048x2048 --profile 3
  nt dncnn 3 2048x2048 --native cfagbeGk
  nt unet 3 2048x2048 --profile 3
  nt unet 3 2048x2048 --native cfagbeGk --profile 3
  [ "$n1" = 3 ] || nt unet 3 2048x2048 --native cfagbeGu --profile 3
  nt drunet 1 4096x4096 --profile 3
  nt drunet 1 4096x4096 --native cfagbeGk --profile 3
  nt drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt drunet 1 4096x4096 --dtype bfloat16 --native cfagbeGk
  if [ "$n1" != 3 ]; then  # the compile from the plan cache (fp32): cold, then twice from the network's list
    rm -rf /tmp/pc
    for run in cold cached cached; do nt drunet 1 4096x4096 --native cfagbeGp --cache /tmp/pc; done
    grep -E "compiled from the plan cache" "$out/${n2}_ab_full.log" | tail -2 | cut -c1-400
  fi
  stamp done
} 2>&1 | tee "$out/${n2}_ab.log"
. scripts/device_env.sh  # (the carried .debs: toml++ for pnp_bench)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PNP_PYTHON=/opt/torch/.venv/bin/python3
sweep() {  # name, architectures, channels, shape, backends, extra [native] lines
  sed -e "s/^architectures = .*/architectures = [$2]/" -e "s/^channels = .*/channels = $3/" \
      -e "s/^shapes = .*/shapes = [$4]/" -e "s/^backends = .*/backends = [$5]/" -e "s/^timeout_s = .*/timeout_s = 90/" \
      -e "s/^warmup_calls = 1/warmup_calls = 1\n$6/" input/sweep.toml >/tmp/sweep_$1.toml
  stamp "pnp_bench $1"
  timeout 250 $b/pnp_bench /tmp/sweep_$1.toml --output "$out/${n3}_$1.h5" --force 2>&1 | tail -12
}
{
  sweep drunet4096 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' ''
  sweep cnn2048 '"dncnn", "unet"' 3 '[2048, 2048]' '"eager", "native", "torch_compile"' ''
  if [ "$n1" = 3 ]; then
    sweep nonarrow '"dncnn", "unet"' 3 '[2048, 2048]' '"native"' 'narrow_convs = false'
    sweep nonarrow4096 '"drunet"' 1 '[4096, 4096]' '"native"' 'narrow_convs = false'
  fi
  stamp done
} 2>&1 | tee "$out/${n3}_peer.log"
