#!/usr/bin/env bash
# Device call 1, part 2 of 2026-12-03e (call1.sh says what the tree holds; its build and the
# unpacked .deps stay on the machine): the side by side in one call (pnp_bench: DnCNN / UNet 3 ch
# 2048² and DRUNet 1 ch 4096², eager, native and deepinv 0.5.0 under torch.compile), then
# 97c0603's kernel (old_rows_kernels.cu.txt, untracked) rebuilt into the same tree and timed.
#   bash docs/measurements/2026-12-03e/call1b.sh   (device machine, repository root; carry .whl)
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
. scripts/device_env.sh  # (the carried .debs: toml++ for pnp_bench)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PNP_PYTHON=/opt/torch/.venv/bin/python3
sweep() {  # name, architectures, channels, shape, backends, dtype
  sed -e "s/^architectures = .*/architectures = [$2]/" -e "s/^channels = .*/channels = $3/" \
      -e "s/^shapes = .*/shapes = [$4]/" -e "s/^backends = .*/backends = [$5]/" -e "s/^timeout_s = .*/timeout_s = 90/" \
      input/sweep.toml >/tmp/sweep_$1.toml
  stamp "pnp_bench $1"
  timeout 200 $b/pnp_bench /tmp/sweep_$1.toml --output "$out/3_$1.h5" --force 2>&1 | tail -8
}
{
  sweep cnn2048 '"dncnn", "unet"' 3 '[2048, 2048]' '"eager", "native", "torch_compile"'
  sweep drunet4096 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"'
} 2>&1 | tee "$out/3_peer.log"
{
  stamp "97c0603's kernel"
  cp $here/old_rows_kernels.cu.txt src/nn/native/wgmma_rows_kernels.cu
  timeout 200 scripts/device_build.sh nn_time >/tmp/build_old.log 2>&1 || { tail -20 /tmp/build_old.log; exit 1; }
  nt 5_old_full.log drunet 1 4096x4096 --dtype bfloat16 --profile 3
  nt 5_old_full.log dncnn 3 2048x2048 --dtype bfloat16 --profile 3
  nt 5_old_full.log unet 3 2048x2048 --dtype bfloat16
  stamp done
} 2>&1 | tee "$out/5_old.log"
