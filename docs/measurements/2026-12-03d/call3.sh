#!/usr/bin/env bash
# Device call 3 of 2026-12-03d: the rows kernel's rows start from their bias and residual
# (row_start: all 64 loads of a thread in flight at once, into the accumulators, before the
# row's first products), and the store only stores (row_end). The build; test_native on the
# GPU; nn_time with profiles (DnCNN, DRUNet 4096² fp32 and bf16, UNet); DRUNet's compile with the plan cache, cold then cached; the side by side in
# one call (pnp_bench: DnCNN / UNet 3 ch 2048² and DRUNet 1 ch 4096², eager, native and
# deepinv 0.5.0 under torch.compile); the quick GPU check.
# (stops after test_native if it fails)
#   bash docs/measurements/2026-12-03d/call3.sh   (device machine, repository root; carry .deps .whl)
set -uo pipefail
out=${OUT:?}
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
  stamp test_native
  timeout 150 $b/test_native > "$out/1_test_native.log" 2>&1
  rc=$?
  echo "rc=$rc"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native.log" | head -30
  echo $rc >/tmp/test_rc
} 2>&1 | tee "$out/1_build_test.log"
[ "$(cat /tmp/test_rc 2>/dev/null)" = 0 ] || exit 1
{
  nt 2_ab_full.log dncnn 3 2048x2048 --profile 3
  nt 2_ab_full.log drunet 1 4096x4096 --profile 3
  nt 2_ab_full.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 2_ab_full.log unet 3 2048x2048
  nt 2_ab_full.log unet 3 2048x2048 --dtype bfloat16
  rm -rf /tmp/pc
  for run in cold cached; do nt 2_ab_full.log drunet 1 4096x4096 --native cfagbeGwp --cache /tmp/pc; done
  grep -E "compiled from the plan cache" "$out/2_ab_full.log" | tail -1 | cut -c1-300
  stamp done
} 2>&1 | tee "$out/2_ab.log"
. scripts/device_env.sh  # (the carried .debs: toml++ for pnp_bench)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PNP_PYTHON=/opt/torch/.venv/bin/python3
sweep() {  # name, architectures, channels, shape, backends
  sed -e "s/^architectures = .*/architectures = [$2]/" -e "s/^channels = .*/channels = $3/" \
      -e "s/^shapes = .*/shapes = [$4]/" -e "s/^backends = .*/backends = [$5]/" -e "s/^timeout_s = .*/timeout_s = 90/" \
      input/sweep.toml >/tmp/sweep_$1.toml
  stamp "pnp_bench $1"
  timeout 200 $b/pnp_bench /tmp/sweep_$1.toml --output "$out/3_$1.h5" --force 2>&1 | tail -8
}
{
  sweep cnn2048 '"dncnn", "unet"' 3 '[2048, 2048]' '"eager", "native", "torch_compile"'
  sweep drunet4096 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"'
  stamp gpu_check
  timeout 100 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/4_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
  stamp done
} 2>&1 | tee "$out/3_peer.log"
