#!/usr/bin/env bash
# Device call 4 of 2026-12-02d: the folded upsample as four parity graphs. Build; test_native
# (its new case: the parity graphs against float64, the transposed convolution and the plan
# cache's list); UNet 3 ch 2048² fp32 and bf16 with the parity graphs (profiled) and without (q);
# the quick GPU check; UNet side by side with deepinv under torch.compile (pnp_bench).
#   bash docs/measurements/2026-12-02d/call4.sh   (device machine, repository root; carry .deps, .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 300 scripts/device_build.sh >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  stamp test_native
  timeout 120 $b/test_native > "$out/9_test_native_full.log" 2>&1
  grep -E "ERROR|FAILED|test cases|assertions" "$out/9_test_native_full.log" | head -30
  grep -A2 "parity graphs, " "$out/9_test_native_full.log" | cut -c1-400 | head -8
  nt() {
    stamp "nn_time $*"
    timeout 40 $b/nn_time "$@" --device cuda --backends native 2>&1 | grep -vE "^\s*$" | tee -a "$out/9_ab_full.log" |
      grep -E "^nn_time|rror|^ +[0-9.]+ ms" | grep -E "^nn_time|rror|dgrad|convFwd|clamp|parity" | cut -c1-230 | head -12
  }
  nt unet 3 2048x2048 --profile 3
  nt unet 3 2048x2048 --native cfagbeGq --profile 3
  nt unet 3 2048x2048 --dtype bfloat16
  nt unet 3 2048x2048 --dtype bfloat16 --native cfagbeGq
  grep -o "CUDA: [0-9]* of [0-9]* folded[^;]*" "$out/9_ab_full.log" | head -2
  stamp gpu_check
  timeout 100 scripts/gpu_check.sh --no-build --quick --out /tmp/gc >/dev/null 2>&1
  tail -1 /tmp/gc/gpu_check.log
} 2>&1 | tee "$out/9_build_test_ab.log"
. scripts/device_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PNP_PYTHON=/opt/torch/.venv/bin/python3
{
  stamp "pnp_bench unet"
  sed -e 's/^architectures = .*/architectures = ["unet"]/' -e 's/^channels = .*/channels = 3/' -e 's/^shapes = .*/shapes = [[2048, 2048]]/' \
      -e 's/^backends = .*/backends = ["eager", "native", "torch_compile"]/' -e 's/^timeout_s = .*/timeout_s = 90/' input/sweep.toml >/tmp/sweep_unet.toml
  timeout 150 $b/pnp_bench /tmp/sweep_unet.toml --output "$out/9_unet.h5" --force 2>&1 | tail -6
  stamp done
} 2>&1 | tee "$out/9_peer.log"
