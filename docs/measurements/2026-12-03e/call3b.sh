#!/usr/bin/env bash
# Device call 3 of 2026-12-03e, part 2 of 2 (call3.sh's build of cedd8cf kept on the machine):
# the side by side in bf16 in one call (pnp_bench: DRUNet 1 ch 4096² and DnCNN / UNet 3 ch
# 2048², eager, native and deepinv 0.5.0 under torch.compile).
#   bash docs/measurements/2026-12-03e/call3b.sh   (device machine, repository root; carry .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
# (call3.sh's last rebuild found its tree's kernel file unchanged: the device copy's git index is
# not this tree's, so `git checkout` there restored nothing; this call's copy of the tree brings
# cedd8cf's kernel back, and pnp_bench is rebuilt with it)
stamp "rebuild pnp_bench"
timeout 200 scripts/device_build.sh pnp_bench >/tmp/build_new.log 2>&1 || { tail -20 /tmp/build_new.log; exit 1; }
grep -c "wgmma_rows_kernels" /tmp/build_new.log
. scripts/device_env.sh  # (the unpacked .debs: toml++ for pnp_bench)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PNP_PYTHON=/opt/torch/.venv/bin/python3
sweep() {  # name, architectures, channels, shape, backends, dtype
  sed -e "s/^architectures = .*/architectures = [$2]/" -e "s/^channels = .*/channels = $3/" \
      -e "s/^shapes = .*/shapes = [$4]/" -e "s/^backends = .*/backends = [$5]/" -e "s/^timeout_s = .*/timeout_s = 90/" \
      -e "s/^dtype = .*/dtype = \"$6\"/" input/sweep.toml >/tmp/sweep_$1.toml
  stamp "pnp_bench $1"
  timeout 200 $b/pnp_bench /tmp/sweep_$1.toml --output "$out/3_$1.h5" --force 2>&1 | tail -8
}
{
  sweep drunet4096_bf16 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' bfloat16
  sweep cnn2048_bf16 '"dncnn", "unet"' 3 '[2048, 2048]' '"eager", "native", "torch_compile"' bfloat16
} 2>&1 | tee "$out/3_peer.log"
