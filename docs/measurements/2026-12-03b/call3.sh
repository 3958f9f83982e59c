#!/usr/bin/env bash
# Device call 3 of 2026-12-03b: the tail kernel with its window rows through a cp.async ring in
# shared memory, three rows ahead (2 to 4 outputs; the 1-output kernel unchanged). test_native's
# narrow, head and tail cases on the GPU; nn_time DnCNN 3 ch 2048² with the kernels and without
# the head and tail kernels (`k`), with a profile; the side by side of DnCNN (pnp_bench: eager,
# native, deepinv 0.5.0 under torch.compile). Short: the session's device time is nearly spent.
#   bash docs/measurements/2026-12-03b/call3.sh   (device machine, repository root; carry .deps .whl)
set -uo pipefail
out=${OUT:?}
b=build/gpu/bin
t0=$(date +%s)
stamp() { echo "== [$(( $(date +%s) - t0 )) s] $*"; }
{
  stamp build
  timeout 200 scripts/device_build.sh test_native nn_time pnp_bench >/tmp/build.log 2>&1 || { grep -E "error|Error" /tmp/build.log | head -30; tail -20 /tmp/build.log; exit 1; }
  stamp test_native
  timeout 60 $b/test_native -tc="*narrow kernel*,*head and tail*" > "$out/1_test_native.log" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$out/1_test_native.log" | head -20
  for o in "" "--native cfagbeGwk"; do
    stamp "nn_time dncnn 3 2048x2048 $o"
    timeout 60 $b/nn_time dncnn 3 2048x2048 --device cuda --backends native --profile 3 $o 2>&1 | grep -vE "^\s*$" |
      tee -a "$out/2_dncnn.log" | grep -E "^nn_time|rror|^ +[0-9.]+ ms" | cut -c1-220 | head -6
  done
  grep -o "\[1, 3, 2048, 2048\]: [^;]*" "$out/2_dncnn.log" | head -2
} 2>&1 | tee "$out/1_build_test.log"
. scripts/device_env.sh  # (the carried .debs: toml++ for pnp_bench)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
export PNP_PYTHON=/opt/torch/.venv/bin/python3
{
  sed -e 's/^architectures = .*/architectures = ["dncnn"]/' -e 's/^channels = .*/channels = 3/' \
      -e 's/^shapes = .*/shapes = [[2048, 2048]]/' -e 's/^backends = .*/backends = ["eager", "native", "torch_compile"]/' \
      -e 's/^timeout_s = .*/timeout_s = 60/' input/sweep.toml >/tmp/sweep_dncnn.toml
  stamp "pnp_bench dncnn"
  timeout 100 $b/pnp_bench /tmp/sweep_dncnn.toml --output "$out/3_dncnn.h5" --force 2>&1 | tail -5
  stamp done
} 2>&1 | tee "$out/3_peer.log"
