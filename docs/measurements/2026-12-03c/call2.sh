#!/usr/bin/env bash
# Device call 2 of 2026-12-03c, at the session's last code: the build; test_native on the GPU
# (call 1's one test bug fixed); the quick GPU check; DRUNet 1 ch 4096² fp32 and bf16 profiled
# (the gap to issue 19's targets at HEAD); UNet 3 ch 2048² bf16 with and without pnp's NHWC
# kernels, profiled; a second side by side in one call (pnp_bench: DnCNN / UNet 3 ch 2048²,
# eager, native and deepinv 0.5.0 under torch.compile).
#   bash docs/measurements/2026-12-03c/call2.sh   (device machine, repository root; carry .deps .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  stamp build
  timeout 300 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  stamp test_native
  timeout 150 $b/test_native > "$out/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native.log" | head -30
  stamp gpu_check
  timeout 100 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  cp /tmp/gc/gpu_check.log "$out/1_gpu_check_quick.log"
  tail -1 /tmp/gc/gpu_check.log
} 2>&1 | tee "$out/1_build_test.log"
{
  nt() {  # arch, channels, shape, then nn_time options
    local a=$1 c=$2 s=$3; shift 3
    stamp "nn_time $a $c $s $*"
    timeout 90 $b/nn_time $a $c $s --device cuda --backends native "$@" 2>&1 | grep -vE "^\s*$" | tee -a "$out/2_ab_full.log" |
      grep -E "^nn_time|rror|^ +[0-9.]+ ms" | cut -c1-220 | head -16
  }
  nt drunet 1 4096x4096 --profile 3
  nt drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt unet 3 2048x2048 --dtype bfloat16 --profile 3
  nt unet 3 2048x2048 --dtype bfloat16 --native cfagbeGwd --profile 3
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
  stamp done
} 2>&1 | tee "$out/3_peer.log"
