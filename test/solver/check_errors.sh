#!/usr/bin/env bash
# Bad input ends the job with one `error:` line (rank 0, naming the ranks) and exit code 2; a
# killed rank ends the job within 30 s.  usage: check_errors.sh MPIRUN... -- PNP_RECON SMALL_TOML
set -u
mpirun=(); while [ "$1" != "--" ]; do mpirun+=("$1"); shift; done; shift
recon=$1 small=$2
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

printf '[problem]\nsize = 64\nangels = 10\n' > "$dir/bad.toml"
"${mpirun[@]}" -n 3 "$recon" "$dir/bad.toml" >"$dir/out" 2>"$dir/err"; rc=$?
[ $rc = 2 ] || fail "bad key: exit code $rc, expected 2"
[ "$(grep -c "^error: $dir/bad.toml:3: unknown key 'problem.angels' (did you mean 'problem.angles'?) (all 3 ranks)" "$dir/err")" = 1 ] \
  || { cat "$dir/err"; fail "bad key: expected one error line for the job, naming the ranks"; }
grep -q -E "terminate called|[Ss]tack trace|core dumped|Segmentation fault|Exception raised from" "$dir/err" && fail "bad key: stack dump"

"${mpirun[@]}" -n 2 "$recon" "$small" --set problem.sinogram=\"$dir/none.h5\" >"$dir/out" 2>"$dir/err"; rc=$?
[ $rc = 2 ] || fail "missing sinogram: exit code $rc"
[ "$(grep -c '^error: --set problem.sinogram=.*file not found' "$dir/err")" = 1 ] || { cat "$dir/err"; fail "missing sinogram message"; }

"${mpirun[@]}" -n 2 "$recon" "$small" --set distributed.grid=[3,1] --set distributed.decomposition=grid \
  --output "$dir/o.h5" >"$dir/out" 2>"$dir/err"; rc=$?
[ $rc = 2 ] || fail "bad grid: exit code $rc"
[ "$(grep -c '^error: distributed.grid = \[3, 1\] does not match 2 ranks' "$dir/err")" = 1 ] || { cat "$dir/err"; fail "grid message"; }

# The layer halo refuses what it cannot do before any work (one line for the job).
layer_case() {  # name, expected message (grep -E), ranks, then --set arguments
  local name=$1 msg=$2 n=$3; shift 3
  "${mpirun[@]}" -n "$n" "$recon" "$small" --set distributed.halo_mode=layer "$@" --output "$dir/l.h5" \
    >"$dir/out" 2>"$dir/err"; rc=$?
  [ $rc = 2 ] || { cat "$dir/err"; fail "$name: exit code $rc, expected 2"; }
  [ "$(grep -c -E "^error: .*$msg" "$dir/err")" = 1 ] || { cat "$dir/err"; fail "$name: expected one error line"; }
  [ ! -e "$dir/l.h5" ] || fail "$name: left an output file"
}
layer_case "layer + inductor" 'needs compile.backend = "native"' 2 --set compile.mode=pre --set compile.backend=inductor
layer_case "layer + patches" 'denoises each rank.s tile whole' 2 --set denoiser.patch_size=32
layer_case "layer + input halo" 'leave it at 0' 2 --set distributed.halo=8
layer_case "layer, more ranks than 8 px blocks" 'cannot split a 12 px side into 3 tiles' 3 --set problem.size=12 \
  --set denoiser.architecture=drunet --set 'denoiser.features=[4,6,8,10]' --set denoiser.blocks=1

# Volumes, 3D denoisers, FP8 and its emulation refuse what they cannot do, before any work.
refused_case() {  # name, expected message (grep -E), ranks, then --set arguments
  local name=$1 msg=$2 n=$3; shift 3
  "${mpirun[@]}" -n "$n" "$recon" "$small" "$@" --output "$dir/r.h5" >"$dir/out" 2>"$dir/err"; rc=$?
  [ $rc = 2 ] || { cat "$dir/err"; fail "$name: exit code $rc, expected 2"; }
  [ "$(grep -c -E "^error: .*$msg" "$dir/err")" = 1 ] || { cat "$dir/err"; fail "$name: expected one error line"; }
  [ ! -e "$dir/r.h5" ] || fail "$name: left an output file"
}
refused_case "3D denoiser on one image" 'a 3D denoiser needs a volume' 1 --set denoiser.dim=3
refused_case "plane_ranks on one image" 'leave it at 1' 2 --set distributed.plane_ranks=2
refused_case "3D layer halo off the network's grid" 'network.s grid of 8 slices' 3 --set problem.slices=12 \
  --set denoiser.dim=3 --set denoiser.weights="''" --set denoiser.architecture=drunet --set distributed.plane_ranks=1 \
  --set distributed.halo_mode=layer --set problem.size=32 --set denoiser.features=[8,16,16,16] --set denoiser.blocks=1
refused_case "fp8 emulation compiled" 'fp8_emulated. is the eager reference' 1 --set denoiser.precision=fp8_emulated \
  --set compile.mode=pre
refused_case "fp8 on the CPU" 'fp8. runs pnp.s FP8 convolutions on a Hopper GPU, so it needs distributed.device = .cuda.' 1 \
  --set denoiser.precision=fp8 --set compile.mode=pre
refused_case "fp8 on 2 ranks" 'fp8. runs on one rank' 2 --set denoiser.precision=fp8 --set compile.mode=pre \
  --set distributed.device=auto
refused_case "fp64 compiled" 'fp64. is the CPU reference in float64, eager only' 1 --set solver.precision=fp64 \
  --set compile.mode=pre
refused_case "fp64 with a checkpoint" 'without checkpoints' 1 --set solver.precision=fp64 --set compile.mode=none \
  --set output.checkpoint_every=1
refused_case "fp64 under a memory limit" 'without a memory limit' 1 --set solver.precision=fp64 --set compile.mode=none \
  --set denoiser.memory_limit_gb=1

"${mpirun[@]}" -n 2 "$recon" "$small" --output "$dir/o.h5" --set solver.iterations=100000 >"$dir/out" 2>"$dir/err" &
pid=$!
sleep 8
victim=$(pgrep -f "$dir/o.h5" | while read -r p; do [ "$(ps -o comm= -p "$p")" = "pnp_recon" ] && echo "$p"; done | tail -1)
[ -n "$victim" ] || fail "no pnp_recon rank found to kill"
kill -9 "$victim"
for _ in $(seq 30); do kill -0 $pid 2>/dev/null || break; sleep 1; done
if kill -0 $pid 2>/dev/null; then kill -9 $pid; pkill -9 -f "$dir/o.h5"; fail "job still running 30 s after a rank was killed"; fi
[ ! -e "$dir/o.h5" ] || fail "a killed job left an output file"
# A rank that stops (SIGSTOP: a stuck device or node) ends every rank within 30 s: the others
# see no progress for distributed.timeout_s and end the job.
"${mpirun[@]}" -n 2 "$recon" "$small" --output "$dir/s.h5" --set solver.iterations=100000 \
  --set distributed.timeout_s=5 >"$dir/out" 2>"$dir/err" &
pid=$!
sleep 8
victim=$(pgrep -f "$dir/s.h5" | while read -r p; do [ "$(ps -o comm= -p "$p")" = "pnp_recon" ] && echo "$p"; done | tail -1)
[ -n "$victim" ] || fail "no pnp_recon rank found to stop"
kill -STOP "$victim"
t0=$(date +%s)
for _ in $(seq 30); do kill -0 $pid 2>/dev/null || break; sleep 1; done
if kill -0 $pid 2>/dev/null; then kill -CONT "$victim"; kill -9 $pid; pkill -9 -f "$dir/s.h5"; fail "job still running 30 s after a rank was stopped"; fi
kill -9 "$victim" 2>/dev/null
grep -q "error: rank [01]: no progress for" "$dir/err" || { cat "$dir/err"; fail "no watchdog message after a stopped rank"; }
echo "stopped rank: the job ended $(( $(date +%s) - t0 )) s after SIGSTOP"
[ ! -e "$dir/s.h5" ] || fail "a stopped job left an output file"
echo "error handling checks passed"
