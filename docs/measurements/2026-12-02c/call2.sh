#!/usr/bin/env bash
# Device call 2 of 2026-12-02c (tree d52f702), in two parts on one machine:
#   a: build; test_native; DRUNet 1 ch 4096², fp32 and bf16: the previous default (cfagbep,
#      cold), every convolution a graph without ATen's benchmark (cfagbepnG) with 0, 4 and 8
#      precompiled candidates per layout (cold; 4 also from the plan cache, twice), and with
#      ATen's benchmark (cfagbepG, 4, cold)
#   b: side by side in one call, pnp_bench: DRUNet 1 ch 4096² and DnCNN / UNet 3 ch 2048², eager,
#      native and deepinv 0.5.0 under torch.compile (default mode); native again without ATen's
#      benchmark (the [native] key cudnn_benchmark = false)
#   bash docs/measurements/2026-12-02c/call2.sh a|b   (device machine, repository root; carry .deps, .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
if [ "$1" = a ]; then
  {
    stamp build
    timeout 400 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
    stamp test_native
    timeout 200 $b/test_native > "$out/a2_test_native_full.log" 2>&1
    grep -E "ERROR|FAILED|test cases|assertions" "$out/a2_test_native_full.log" | head -30
  } 2>&1 | tee "$out/a1_build_test.log"
  {
    nt() {  # label, then nn_time options
      local l=$1; shift
      stamp "nn_time drunet 1 4096x4096 $* ($l)"
      timeout 40 $b/nn_time drunet 1 4096x4096 --device cuda --backends native --cache /tmp/pnp_plan_cache_time "$@" 2>&1 |
        grep -E "^nn_time|rror" | tee -a "$out/a3_drunet_full.log" | cut -c1-260
    }
    for dt in float32 bfloat16; do
      rm -rf /tmp/pnp_plan_cache_time; nt cold --dtype $dt --native cfagbep
      for p in 0 8; do rm -rf /tmp/pnp_plan_cache_time; nt cold --dtype $dt --native cfagbepnG --precompiled $p; done
      rm -rf /tmp/pnp_plan_cache_time; nt cold --dtype $dt --native cfagbepG --precompiled 4
      rm -rf /tmp/pnp_plan_cache_time
      for run in cold cached cached; do nt $run --dtype $dt --native cfagbepnG --precompiled 4; done
    done
    stamp done
  } 2>&1 | tee "$out/a3_drunet.log"
else
  . scripts/device_env.sh  # (the carried .debs: toml++ for pnp_bench)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
  export PNP_PYTHON=/opt/torch/.venv/bin/python3
  sweep() {  # name, architectures, channels, shape, backends, extra [native] lines
    sed -e "s/^architectures = .*/architectures = [$2]/" -e "s/^channels = .*/channels = $3/" \
        -e "s/^shapes = .*/shapes = [$4]/" -e "s/^backends = .*/backends = [$5]/" -e "s/^timeout_s = .*/timeout_s = 90/" \
        -e "s/^warmup_calls = 1/warmup_calls = 1\n$6/" input/sweep.toml >/tmp/sweep_$1.toml
    stamp "pnp_bench $1"
    timeout 250 $b/pnp_bench /tmp/sweep_$1.toml --output "$out/b_$1.h5" --force 2>&1 | tail -12
  }
  {
    sweep drunet4096 '"drunet"' 1 '[4096, 4096]' '"eager", "native", "torch_compile"' ''
    sweep cnn2048 '"dncnn", "unet"' 3 '[2048, 2048]' '"eager", "native", "torch_compile"' ''
    sweep nobench '"drunet", "dncnn", "unet"' 3 '[2048, 2048]' '"native"' 'cudnn_benchmark = false'
    sweep nobench4096 '"drunet"' 1 '[4096, 4096]' '"native"' 'cudnn_benchmark = false'
    stamp done
  } 2>&1 | tee "$out/b_peer.log"
fi
