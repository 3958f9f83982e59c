#!/usr/bin/env bash
# The GPU check tier: builds pnp on a GPU machine and checks what the CPU tests cannot, in
# under 10 minutes on one H200. Ends with one line "N passed, M failed" (exit 1 if M > 0).
#   scripts/gpu_check.sh [--no-build] [--quick] [--out DIR] [--path both|hopper|portable] [--only LIST]
# --quick: test_solver and the native and NCCL runs only (no test_native/physics/nn, no inductor).
# --only: these sections only, comma-separated: tests (1.), recon (2.-4.), budget (5.), volume (6.),
# sm80 (7.), fp8 (8.); for a device call too short for the tier (its closing line counts what ran).
# --path: the kernels' path. hopper: as the GPU allows (pnp's sm_90 kernels on a Hopper GPU);
# portable: with PNP_KERNELS=portable, the path an A100 takes (cuDNN and pnp's portable kernels);
# both (the default): hopper, then the tier again on the portable path into DIR/portable, each
# with its own closing line ("hopper path: ..." and "portable path: ...").
#
#  1. the GPU unit tests: test_native, test_physics, test_nn, test_solver (CUDA cases included);
#  2. pnp_recon at 1024² with the shipped drunet_ct, TF32 off (compile.tf32 = false), in none,
#     pre, post and fused with the native backend and pre, post and fused with inductor
#     (inductor_mode = default): every reconstruction non-blank (PSNR >= FBP + 3 dB), pre, post
#     and fused equal to each other to 1e-6 and to none to 1e-5 (relative L2); one pre run with
#     TF32 on, non-blank too. These runs set denoiser.memory_hold = false: held to the plan,
#     cuDNN's strict-float32 engines are the first that fit the free memory, which differs by
#     mode, and the modes then differ in rounding (up to 1.1e-5 relative, H100, 2026-12-06);
#     unheld every mode gets cuDNN's first choice. The volumes below (6.) run held, the default;
#  3. a 1-rank NCCL communicator in post and fused, its calls captured in CUDA graphs and
#     replayed, against the same run uncaptured (compile.cuda_graphs = false): equal to 1e-6;
#  4. /communication/bytes under capture: every iteration of the captured runs reports the
#     bytes of the uncaptured ones (the allreduce payload), not only the first;
#  5. the memory budget: 8192² in pre under denoiser.memory_limit_gb = 6, metrics every
#     iteration: patched, its peak <= the budget, its estimate >= the peak and within 10 % of it
#     (test/gpu/check_budget.py); and a budget below the smallest that would do is exit 2 before
#     any work, with the smallest budget named;
#  6. a volume (6 slices of 512²): the native backend, the slab's slices batched, equal to eager,
#     non-blank, its memory plan bounding the peak (test/gpu/check_volume_gpu.py); and 32 slices of
#     1024² under a budget that streams the slab through the GPU: equal to the resident run, its
#     peak under the budget and the estimate;
#  7. (hopper pass only) the sm_80 build: the CUDA libraries configured and compiled for compute
#     capability 8.0 (build/gpu_sm80), so the A100's build stays a tested target;
#  8. (hopper pass only, a GPU of compute capability 9.0) FP8: the 1024² reconstruction with
#     denoiser.precision = "fp8" against "bf16" (native, pre): non-blank, its final PSNR within
#     0.3 dB of bf16's and its image nearer bf16's than half bf16's distance to the ground truth
#     (test/gpu/check_fp8.py).
# The build: scripts/device_build.sh when .deps/ holds the carried packages (the device tool's
# machine), else cmake with PNP_WITH_CUDA=ON into build/gpu. Logs and outputs go to --out
# (default $OUT when set, else gpu_check/).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=1
quick=0
path=both
only=
out=${OUT:-gpu_check}
while [ $# -gt 0 ]; do
  case $1 in
    --no-build) build=0 ;;
    --quick) quick=1 ;;
    --out) out=$2; shift ;;
    --path) path=$2; shift
      case $path in both|hopper|portable) ;; *) echo "error: --path must be both, hopper or portable" >&2; exit 2 ;; esac ;;
    --only) only=$2; shift
      for x in ${only//,/ }; do
        case $x in tests|recon|budget|volume|sm80|fp8) ;; *) echo "error: --only takes tests, recon, budget, volume, sm80, fp8 (comma-separated), not $x" >&2; exit 2 ;; esac
      done ;;
    -h|--help) sed -n '2,38p' "$0"; exit 0 ;;
    *) echo "error: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
# want SECTION: the section runs (every one without --only)
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
if [ "$path" = portable ]; then export PNP_KERNELS=portable; else unset PNP_KERNELS; fi
label=$([ "$path" = portable ] && echo portable || echo hopper)
work=$(mktemp -d)
log="$out/gpu_check.log"
: >"$log"
pass=0 fail=0
note() { echo "$*" | tee -a "$log"; }
result() {  # name, status
  if [ "$2" -eq 0 ]; then pass=$((pass + 1)); note "PASS $1"; else fail=$((fail + 1)); note "FAIL $1"; fi
}
# shellcheck source=scripts/device_env.sh
. scripts/device_env.sh
py=$PNP_PYTHON
t0=$(date +%s)

if [ $build = 1 ]; then
  if ls .deps/*.deb >/dev/null 2>&1; then
    scripts/device_build.sh >"$work/build.log" 2>&1
  else
    { cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=Release -DPNP_WITH_CUDA=ON && cmake --build build/gpu -j"$(nproc)"; } \
      >"$work/build.log" 2>&1
  fi
  rc=$?
  tail -3 "$work/build.log" >>"$log"
  result "build ($(( $(date +%s) - t0 )) s)" $rc
  [ $rc -eq 0 ] || { tail -30 "$work/build.log"; note "$pass passed, $fail failed"; exit 1; }
fi
bin=build/gpu/bin
[ -x $bin/pnp_recon ] || { note "error: $bin/pnp_recon not built"; note "0 passed, 1 failed"; exit 1; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$log"

# 1. GPU unit tests
if want tests; then
  tests=(test_native test_physics test_nn test_solver)
  [ $quick = 1 ] && tests=(test_solver)
  for t in "${tests[@]}"; do
    if [ "$t" = test_solver ]; then cmd=(mpirun --allow-run-as-root -n 1 "$bin/$t"); else cmd=("$bin/$t"); fi
    "${cmd[@]}" >"$work/$t.log" 2>&1
    rc=$?
    grep -E "test cases:|assertions:|MESSAGE.*CUDA|CUDA.*skipped" "$work/$t.log" | head -8 | tee -a "$log"
    result "$t" $rc
  done
fi

# 2.-4. pnp_recon at 1024² with drunet_ct
cfg=$work/check_1024.toml
sed -e 's/^size = 4096/size = 1024/' -e 's/^init = "zeros"/init = "fbp"/' -e 's/^file = .*/file = "check.h5"/' \
  input/study_4096.toml >"$cfg"
printf '\n' >>"$cfg"
recon() {  # name, then --set overrides
  local name=$1; shift
  local t
  t=$(date +%s)
  mpirun --allow-run-as-root -n 1 $bin/pnp_recon "$cfg" --output "$work/$name.h5" --force \
    --set denoiser.weights='"drunet_ct"' --set compile.cache_dir="\"$work/cache\"" \
    --set compile.inductor_mode='"default"' --set solver.metrics_every=5 "$@" >"$work/$name.log" 2>&1
  local rc=$?
  grep -E "final PSNR|error" "$work/$name.log" | tail -2 | sed "s/^/  $name: /" | tee -a "$log"
  result "pnp_recon $name ($(( $(date +%s) - t )) s)" $rc
}
strict=(--set compile.tf32=false)
if want recon; then
  $bin/demo_fbp_psnr "$cfg" >"$work/fbp.txt" 2>&1
  fbp=$(awk '/^fbp_psnr /{print $2}' "$work/fbp.txt")
  note "FBP PSNR at 1024²: ${fbp:-?} dB (clamped to the truth's range)"
  same=("${strict[@]}" --set denoiser.memory_hold=false)  # every mode cuDNN's first choice (1. above)
  recon none "${same[@]}"
  for m in pre post fused; do recon "native_$m" --set compile.mode="\"$m\"" "${same[@]}"; done
  names=(none native_pre native_post native_fused)
  if [ $quick = 0 ]; then
    for m in pre post fused; do
      recon "inductor_$m" --set compile.mode="\"$m\"" --set compile.backend='"inductor"' "${strict[@]}"
    done
    recon native_pre_tf32 --set compile.mode='"pre"'
    names+=(inductor_pre inductor_post inductor_fused native_pre_tf32)
  fi
  for m in post fused; do
    recon "nccl_$m" --set compile.mode="\"$m\"" --set distributed.comm='"nccl"' "${same[@]}"
    recon "nccl_${m}_uncaptured" --set compile.mode="\"$m\"" --set distributed.comm='"nccl"' \
      --set compile.cuda_graphs=false "${same[@]}"
    names+=("nccl_$m" "nccl_${m}_uncaptured")
  done
  $py test/gpu/check_gpu_recon.py --fbp "${fbp:-nan}" --dir "$work" --names "${names[@]}" >"$work/compare.log" 2>&1
  rc=$?
  tee -a "$log" <"$work/compare.log"
  result "reconstructions: non-blank, modes and backends agree, captured NCCL equals uncaptured, bytes under capture" $rc
fi

# 5. the memory budget
if want budget; then
  recon budget_8192 --set problem.size=8192 --set denoiser.memory_limit_gb=6 --set compile.mode='"pre"' \
    --set solver.iterations=2 --set solver.metrics_every=1
  $py test/gpu/check_budget.py "$work/budget_8192.h5" >"$work/budget.log" 2>&1
  rc=$?
  tee -a "$log" <"$work/budget.log"
  result "memory budget: 8192² under 6 GB, peak <= budget, estimate bounds the peak within 10 %" $rc
  mpirun --allow-run-as-root -n 1 $bin/pnp_recon "$cfg" --output "$work/budget_refused.h5" --force \
    --set problem.size=8192 --set denoiser.memory_limit_gb=1 --set compile.mode='"pre"' >"$work/budget_refused.log" 2>&1
  rc=$?
  $py test/gpu/check_budget.py --refused "$work/budget_refused.log" "$work/budget_refused.h5" >>"$work/budget.log" 2>&1
  rc2=$?
  tail -2 "$work/budget.log" | tee -a "$log"
  [ $rc -eq 2 ] && [ $rc2 -eq 0 ]
  result "memory budget: 1 GB at 8192² is exit 2 before any work, naming the smallest budget (exit $rc)" $?
fi

# 6. a volume: 6 slices of 512² in z-slabs, the native backend with the slab's slices batched (pre)
#    against eager (none), TF32 off: equal to 1e-5, non-blank, the memory plan bounding the peak
if want volume; then
  for m in pre none; do
    recon "volume_$m" --set problem.size=512 --set problem.slices=6 --set compile.mode="\"$m\"" \
      --set solver.iterations=2 --set solver.metrics_every=1 "${strict[@]}"
  done
  $py test/gpu/check_volume_gpu.py "$work/volume_pre.h5" "$work/volume_none.h5" >"$work/volume.log" 2>&1
  rc=$?
  tee -a "$log" <"$work/volume.log"
  result "volume: 6 x 512², native (batched slices) equals eager, the memory plan bounds the peak" $rc
  # ... and a slab past its budget, streamed through the GPU: 32 slices of 1024² under the largest of
  # a few budgets whose plan streams them in whole tiles (--dry-run says so), against the resident run
  vol=(--set problem.slices=32 --set compile.mode='"pre"' --set solver.iterations=2 --set solver.metrics_every=1 "${strict[@]}")
  budget=
  for b in 8 6 4 3 2; do
    if mpirun --allow-run-as-root -n 1 $bin/pnp_recon "$cfg" --dry-run --set denoiser.weights='"drunet_ct"' "${vol[@]}" \
      --set denoiser.memory_limit_gb=$b 2>&1 | grep -q "streamed:.*whole tile"; then budget=$b; break; fi
  done
  recon volume_streamed "${vol[@]}" --set denoiser.memory_limit_gb="${budget:-2}"
  recon volume_resident "${vol[@]}"
  $py test/gpu/check_volume_gpu.py --streamed "${budget:-0}" "$work/volume_streamed.h5" "$work/volume_resident.h5" \
    >"$work/volume_streamed_check.log" 2>&1
  rc=$?
  tee -a "$log" <"$work/volume_streamed_check.log"
  result "volume streamed: 32 x 1024² under ${budget:-no} GB, equal to the resident run, peak <= budget and estimate" $rc
fi

# 7. the sm_80 build (the portable pass has the same sources: once is enough)
if [ "$label" = hopper ] && want sm80; then
  t=$(date +%s)
  if ls .deps/*.deb >/dev/null 2>&1; then
    PNP_CUDA_ARCH=80 scripts/device_build.sh pnp_nn pnp_physics >"$work/build_sm80.log" 2>&1
  else
    { cmake -S . -B build/gpu_sm80 -DCMAKE_BUILD_TYPE=Release -DPNP_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=80 &&
      cmake --build build/gpu_sm80 -j"$(nproc)" --target pnp_nn pnp_physics; } >"$work/build_sm80.log" 2>&1
  fi
  rc=$?
  [ $rc -eq 0 ] || tail -20 "$work/build_sm80.log" | tee -a "$log"
  result "sm_80 build of the CUDA libraries ($(( $(date +%s) - t )) s)" $rc
fi

# 8. FP8 against bf16 (the Hopper pass: the portable path has no FP8 kernel, and refuses it)
if [ "$label" = hopper ] && want fp8 && [ "$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)" = 9.0 ]; then
  for p in fp8 bf16; do recon "precision_$p" --set compile.mode='"pre"' --set denoiser.precision="\"$p\""; done
  $py test/gpu/check_fp8.py "$work/precision_fp8.h5" "$work/precision_bf16.h5" >"$work/fp8.log" 2>&1
  rc=$?
  tee -a "$log" <"$work/fp8.log"
  result "fp8: 1024² against bf16, non-blank, within 0.3 dB of its final PSNR, nearer its image than half its error" $rc
fi

(cd "$work" && tar czf - -- *.log *.txt) >"$out/gpu_check_logs.tgz"
note "gpu_check ($label path): $(( $(date +%s) - t0 )) s"
note "$label path: $pass passed, $fail failed"
rc=0
[ $fail -eq 0 ] || rc=1
if [ "$path" = both ]; then
  args=(--no-build --path portable --out "$out/portable")
  [ $quick = 1 ] && args+=(--quick)
  [ -n "$only" ] && args+=(--only "$only")
  "$0" "${args[@]}" || rc=1
  tail -1 "$out/portable/gpu_check.log" >>"$log"
fi
exit $rc
