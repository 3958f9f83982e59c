# shellcheck shell=bash
# The device-call recipes, kept once: a call's command sources this file and names what it
# measures (docs/performance.md cites these functions as `scripts/device_call.sh FUNCTION`).
# Sourced from the repository root; results and logs go to $OUT.
#   . scripts/device_call.sh
#   e.g. the side by side:   . scripts/device_call.sh; peer_env; side_by_side 2
#        the GPU check tier: . scripts/device_call.sh; build; gpu_check 1_gpu_check.log
# Then:
#   stamp TEXT                          "== [seconds since sourcing] TEXT"
#   build [TARGET ...]                  scripts/device_build.sh (all targets when none); exits on failure
#   nt LOG ARCH CH SHAPE [OPTION ...]   nn_time on $PNP_CALL_DEVICE (cuda), native backend; the whole
#                                       output appended to $OUT/LOG, its summary lines printed
#   swap_source FILE FROM [TARGET ...]  FILE replaced by FROM (a kernel from another commit, say),
#                                       touched so that the build recompiles it (a copy keeps its
#                                       older time, and make skips it), then rebuilt
#   restore_source FILE [TARGET ...]    FILE back to this tree's version (kept by swap_source),
#                                       touched and rebuilt
#   test_hopper LOG                     test_native's case of pnp's Hopper kernels against float64 (outputs
#                                       poisoned with NaN), its log to $OUT/LOG, its failures, totals and
#                                       the float32 rows-kernel lines with a residual printed
#   gpu_check LOG [OPTION ...]          scripts/gpu_check.sh --no-build on this build (OPTION: --quick, --path P, --only S;
#                                       PNP_GPU_CHECK_TIMEOUT caps it, default 360 s),
#                                       its log to $OUT/LOG, its failures and closing line printed
#   fp8_convs NAME [SIZE]               issue 48's FP8 convolutions, as cuDNN graphs and (on a Hopper GPU) on pnp's
#                                       tile kernel and in the executor (denoiser.precision = fp8, against its
#                                       emulation): test_native's FP8 and e4m3 cases (its log to
#                                       $OUT/NAME_test.log, each layer's error printed), then fp8_conv_time
#                                       (DRUNet SIZE²'s 3x3 layers, default 4096: cuDNN bf16 and FP8, pnp's wgmma
#                                       bf16 and FP8 with bf16 or e4m3 out) into $OUT/NAME.csv
#   peer_env                            the carried wheels (.whl) installed for deepinv's torch.compile
#                                       arm and the venv's Python named for pnp_bench
#   sweep NAME ARCHS CH SHAPE BACKENDS [DTYPE]
#                                       pnp_bench on input/sweep.toml with those keys replaced, to
#                                       $OUT/NAME.h5 (ARCHS and BACKENDS as TOML list items; SHAPE may
#                                       list several; PNP_SWEEP_TIMEOUT caps it, default 200 s)
#   side_by_side PREFIX                 the issue's side by side (needs peer_env): DRUNet 1 ch 4096²
#                                       in bf16 and fp32, DnCNN and UNet 3 ch 2048² in fp32, each
#                                       eager, native and torch.compile, to $OUT/PREFIX_*.h5, the
#                                       clocks sampled meanwhile into $OUT/PREFIX_clocks.csv
#   volume_share NAME CONFIG [SET ...]  issue 46's slice-wise check: CONFIG (a volume, say input/volume_2048.toml)
#                                       and its one slice alone (problem.slices = 0), 4 iterations each, into
#                                       $OUT/NAME.csv (scripts/volume_share.py: each slice's share of the
#                                       volume's iteration against the lone slice's); the logs to $OUT/NAME_*.log
#   clocks_start NAME / clocks_stop     the GPU's SM clock and power every 20 ms (nvidia-smi) into
#                                       $OUT/NAME.csv meanwhile, then each busy stretch's medians
#                                       (scripts/gpu_clocks.py): under a long forward an H200 sits at
#                                       its power limit with its clock lowered
# The tree, .deps/ and .whl/ together pass the device tool's 64 MiB: a call that needs the build
# and the peer runs as two, back to back on one machine (its build and .deps/root stay there).
set -uo pipefail
: "${OUT:?device_call.sh: set OUT, the folder whose files come back}"
PNP_CALL_BIN=${PNP_CALL_BIN:-build/gpu/bin}
PNP_CALL_DEVICE=${PNP_CALL_DEVICE:-cuda}
pnp_call_t0=$(date +%s)

stamp() { echo "== [$(($(date +%s) - pnp_call_t0)) s] $*"; }

build() {
  stamp "build ${*:-all}"
  timeout 300 scripts/device_build.sh "$@" >/tmp/pnp_call_build.log 2>&1 || {
    grep -E "error|Error" /tmp/pnp_call_build.log | head -30
    tail -20 /tmp/pnp_call_build.log
    exit 1
  }
}

nt() {
  local log=$1 arch=$2 ch=$3 shape=$4
  shift 4
  stamp "nn_time $arch $ch $shape $*"
  timeout 90 "$PNP_CALL_BIN/nn_time" "$arch" "$ch" "$shape" --device "$PNP_CALL_DEVICE" --backends native "$@" 2>&1 |
    grep -vE "^\s*$" | tee -a "$OUT/$log" | grep -E "^nn_time|rror|^ +[0-9.]+ ms" | cut -c1-220 | head -14
}

swap_source() {
  local file=$1 from=$2
  shift 2
  [ -f "/tmp/pnp_call_kept.$(basename "$file")" ] || cp "$file" "/tmp/pnp_call_kept.$(basename "$file")"
  cp "$from" "$file" && touch "$file"
  build "$@"
}

restore_source() {
  local file=$1
  shift
  cp "/tmp/pnp_call_kept.$(basename "$file")" "$file" && touch "$file"
  build "$@"
}

test_hopper() {
  stamp "test_native Hopper ($1)"
  timeout 200 "$PNP_CALL_BIN/test_native" -tc="*Hopper implicit-GEMM*" >"$OUT/$1" 2>&1
  echo "rc=$?"
  grep -E "ERROR|FAILED|test cases|assertions" "$OUT/$1" | head -12
  grep -E "Float (64->64 k3 (13x384|100x512)|32->64 k3 6x128) variant 2 kernel [34]" "$OUT/$1" | head -6
}

gpu_check() {
  local log=$1
  shift
  stamp "gpu_check $*"
  timeout "${PNP_GPU_CHECK_TIMEOUT:-360}" scripts/gpu_check.sh --no-build --out /tmp/gc "$@" >/tmp/gc.out 2>&1
  echo "gpu_check rc=$?"
  cp /tmp/gc/gpu_check.log "$OUT/$log"
  grep -E "FAIL|passed, " /tmp/gc/gpu_check.log | tail -8
}

peer_env() {
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl ||
    { echo "device_call.sh: the wheels in .whl did not install (carry .whl)"; exit 1; }
  export PYTHONPATH=/tmp/site
  export PNP_PYTHON=${PNP_PYTHON:-/opt/torch/.venv/bin/python3}
}

sweep() {
  local name=$1 archs=$2 ch=$3 shape=$4 backends=$5 dtype=${6:-float32}
  sed -e "s/^architectures = .*/architectures = [$archs]/" -e "s/^channels = .*/channels = $ch/" \
    -e "s/^shapes = .*/shapes = [$shape]/" -e "s/^backends = .*/backends = [$backends]/" \
    -e "s/^timeout_s = .*/timeout_s = 90/" -e "s/^dtype = .*/dtype = \"$dtype\"/" \
    -e "s/^device = .*/device = \"$PNP_CALL_DEVICE\"/" input/sweep.toml >"/tmp/sweep_$name.toml"
  stamp "pnp_bench $name"
  timeout "${PNP_SWEEP_TIMEOUT:-200}" "$PNP_CALL_BIN/pnp_bench" "/tmp/sweep_$name.toml" --output "$OUT/$name.h5" --force 2>&1 | tail -8
}

side_by_side() {
  local p=$1 arms='"eager", "native", "torch_compile"'
  clocks_start "${p}_clocks"
  sweep "${p}_drunet4096_bf16" '"drunet"' 1 '[4096, 4096]' "$arms" bfloat16
  sweep "${p}_drunet4096_fp32" '"drunet"' 1 '[4096, 4096]' "$arms" float32
  sweep "${p}_cnn2048_fp32" '"dncnn", "unet"' 3 '[2048, 2048]' "$arms" float32
  # shellcheck disable=SC2119  # (clocks_stop's arguments are optional: gpu_clocks.py's)
  clocks_stop
}

clocks_start() {
  pnp_clocks_csv="$OUT/$1.csv"
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu \
    --format=csv,noheader -lms 20 >"$pnp_clocks_csv" 2>&1 &
  pnp_clocks_pid=$!
}

# shellcheck disable=SC2120  # (its arguments are optional: gpu_clocks.py's)
clocks_stop() {
  kill "$pnp_clocks_pid" 2>/dev/null
  wait "$pnp_clocks_pid" 2>/dev/null
  stamp "clocks: $(wc -l <"$pnp_clocks_csv") samples in $pnp_clocks_csv"
  python3 scripts/gpu_clocks.py "$pnp_clocks_csv" "$@"
}

fp8_convs() {
  local name=$1 size=${2:-4096}
  stamp "fp8_convs $size"
  timeout 120 "$PNP_CALL_BIN/test_native" -tc="*FP8*,*e4m3*" -s >"$OUT/${name}_test.log" 2>&1
  echo "test_native FP8 cases rc=$?"
  grep -E "rel. L2|ERROR|FAILED|test cases|no FP8|off the float64|second input" "$OUT/${name}_test.log" | cut -c1-220 | head -60
  timeout 150 "$PNP_CALL_BIN/fp8_conv_time" --size "$size" --out "$OUT/$name.csv" 2>&1 | grep -v "fp8 against bf16" | tail -40
}

# memory_matrix NAME SIZES BUDGETS PRECISIONS MODES [SET ...]
#   the memory plan against the measured peak (issue 47): pnp_recon on input/study_4096.toml
#   (or $PNP_MATRIX_CONFIG: a volume's, say PNP_MATRIX_CONFIG=input/volume_3d.toml with
#   --set problem.slices=128 for 128³; budget 0 is no limit)
#   for every size x budget (denoiser.memory_limit_gb) x precision x compile mode, 2 iterations
#   with the metrics in both (their memory counts too),
#   each output read for /memory (estimate, peaks, patches) and the denoise phase's time into
#   $OUT/NAME.csv (exit 2 rows: the plan refused the budget before any work); the runs' logs
#   into $OUT/NAME_logs/
memory_matrix() {
  local name=$1 sizes=$2 budgets=$3 precs=$4 modes=$5 n b p m rc out
  shift 5
  local work
  work=$(mktemp -d)
  mkdir -p "$OUT/${name}_logs"
  python3 scripts/memory_matrix.py --header >"$OUT/$name.csv"
  for n in $sizes; do for b in $budgets; do for p in $precs; do for m in $modes; do
    stamp "pnp_recon $n² budget $b GB $p $m"
    out="$work/n${n}_b${b}_${p}_${m}"
    timeout 240 "$PNP_CALL_BIN/pnp_recon" "${PNP_MATRIX_CONFIG:-input/study_4096.toml}" --set problem.size="$n" \
      --set denoiser.memory_limit_gb="$b" --set denoiser.precision="\"$p\"" --set compile.mode="\"$m\"" \
      --set solver.iterations=2 --set solver.metrics_every=1 --set distributed.device="\"$PNP_CALL_DEVICE\"" "$@" \
      --output "$out.h5" --force >"$out.log" 2>&1
    rc=$?
    echo "rc=$rc"; grep -E "^error|memory|patch" "$out.log" | cut -c1-200 | head -4
    # a row now, and the output gone: 16384² outputs are 2 GiB each
    python3 scripts/memory_matrix.py "$n" "$b" "$p" "$m" "$rc" "$out.h5" >>"$OUT/$name.csv"
    cp "$out.log" "$OUT/${name}_logs/"
    rm -f "$out.h5"
  done; done; done; done
  rm -rf "$work"
  cat "$OUT/$name.csv"
}

volume_share() {
  local name=$1 cfg=$2 v=/tmp/pnp_share_volume.h5 a=/tmp/pnp_share_slice.h5
  shift 2
  local common=(--set solver.iterations=4 --set solver.metrics_every=4 --set solver.stable_window=3
    --set distributed.device="\"$PNP_CALL_DEVICE\"" "$@")
  stamp "volume_share $cfg $*"
  timeout 400 "$PNP_CALL_BIN/pnp_recon" "$cfg" "${common[@]}" --output $v --force >"$OUT/${name}_volume.log" 2>&1
  echo "volume rc=$?"; tail -3 "$OUT/${name}_volume.log" | cut -c1-200
  timeout 120 "$PNP_CALL_BIN/pnp_recon" "$cfg" "${common[@]}" --set problem.slices=0 --output $a --force \
    >"$OUT/${name}_slice.log" 2>&1
  echo "slice rc=$?"; tail -2 "$OUT/${name}_slice.log" | cut -c1-200
  { python3 scripts/volume_share.py --header && python3 scripts/volume_share.py $v $a; } >"$OUT/$name.csv"
  cat "$OUT/$name.csv"
  rm -f $v $a
}
