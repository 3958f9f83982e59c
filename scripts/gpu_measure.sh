#!/usr/bin/env bash
# The GPU measurements still open (issues 7 and 10), in as few device calls as the 10-minute
# limit allows. Run on the device machine from the repository root, after
# scripts/device_build.sh; every result and log goes to $OUT (at most 8 files come back).
#   scripts/gpu_measure.sh tests     GPU test binaries: native (incl. bf16 on CUDA), physics, nn
#   scripts/gpu_measure.sh denoiser  ceilings; DRUNet 4096² eager/native in fp32 and bf16
#   scripts/gpu_measure.sh study     study_4096 at 1 GPU: pre in bf16, with a 40 GB and an 8 GB
#                                    memory limit, and eager bf16
#   scripts/gpu_measure.sh inductor  DRUNet 4096² eager/native/inductor (max-autotune, cold and
#                                    warm); study_4096 with inductor in pre, post and fused
#   scripts/gpu_measure.sh sweep     input/sweep.toml: eager, native and inductor (packages compiled
#                                    in parallel first), to $OUT/pnp_bench.h5
#   scripts/gpu_measure.sh profile   kernel profiles of eager, native and inductor: DnCNN and UNet
#                                    3 ch 2048², DRUNet 1 ch 4096²; study_4096 in all four modes
#                                    (fp32) and pre in bf16
#   scripts/gpu_measure.sh profile3d kernel profiles of native and inductor, DnCNN and DRUNet 3 ch 128³
#   scripts/gpu_measure.sh unet      test_native; UNet 3 ch 2048² and 128³ eager/native with kernel profiles
#   scripts/gpu_measure.sh unetsweep the sweep's UNet rows, eager/native/inductor, to $OUT/pnp_bench_unet.h5
#   scripts/gpu_measure.sh quality   DRUNet 4096² bf16 kernel profile; study_4096 with the trained
#                                    dncnn_ct (FBP start, 20 iterations) in fp32 and bf16: PSNR
#   scripts/gpu_measure.sh layer [speed|agree]
#                                    the layer halo (issue 18) on study_4096: 1 rank in post, input
#                                    and layer alternated twice (speed); 2 ranks sharing the GPU in
#                                    none, pre, post and fused (uncaptured: MPI) against 1 rank (TF32
#                                    off), and the input halo on 2 ranks: agreement, per-rank memory
#   scripts/gpu_measure.sh scaling   pnp_bench --scaling input/study_4096.toml (native, pre)
#   scripts/gpu_measure.sh peer [CAP] the peer side by side: input/sweep.toml's 2048² rows (3 ch) with
#                                    eager, native and deepinv under torch.compile (default and
#                                    max-autotune, CAP s each, default 60); needs deepinv on
#                                    PYTHONPATH (the device tool: carried wheels)
#   scripts/gpu_measure.sh sweeppart ARCHS ARMS [CAP]
#                                    input/sweep.toml's rows of these architectures and arms (comma
#                                    lists; the torch_compile arms capped at CAP s, default 60), to
#                                    $OUT/pnp_bench_<ARCHS>_<ARMS>.h5: the sweep in 10-minute parts
#   scripts/gpu_measure.sh plancache the native plan cache: test_native's cuDNN graph case; DRUNet 1 ch 4096²
#                                    compiled with serial and with parallel plan builds, then cold and from
#                                    the cache, with and without ATen's benchmark mode, fp32 and bf16
#   scripts/gpu_measure.sh setup     study_4096's first iteration part by part (pre, 1 rank, twice,
#                                    for the spread); DRUNet 4096²'s native compile without and with
#                                    autotune; the projector standalone, and Nsight Compute's view of its two kernels
#   scripts/gpu_measure.sh projector the projector's kernels (forward, its transpose, adjoint) under Nsight
#                                    Compute inside study_4096 (pre, 3 iterations) and inside pnp_radon_bench,
#                                    caches and clocks left alone: time, SM clock, L2 hit rate, DRAM bytes
set -uo pipefail
out=${OUT:?set OUT to the folder that comes back}
bin=build/gpu/bin
export PNP_PYTHON=/opt/torch/.venv/bin/python3
stage=${1:?usage: scripts/gpu_measure.sh tests|denoiser|study|inductor|sweep|profile|profile3d|unet|unetsweep|quality|layer|scaling|peer|sweeppart|plancache|setup|projector}
log="$out/$stage.log"
cache=/tmp/pnp_inductor_cache
grid() {  # channels, architectures, shape: a one-row inductor sweep that fills the cache
  printf '[sweep]\narchitectures = %s\nchannels = %s\nshapes = [%s]\nbackends = ["inductor"]\n' "$2" "$1" "$3"
  printf 'warmup = 1\ntimed = 1\nstable = 1\n[inductor]\ncache_dir = "%s"\ncompile_jobs = 2\n' "$cache"
}
run() {  # name, then --set overrides
  local name=$1; shift
  echo "== study $name"
  # (the 4096² output files exceed what comes back: they stay in /tmp, the log keeps the figures)
  "$bin/pnp_recon" input/study_4096.toml --output "/tmp/study_$name.h5" --force "$@" 2>&1 |
    grep -vE "^iteration " | tail -25
}
{
  echo "== $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) stage $stage"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  case $stage in
    tests)
      for t in test_native test_physics test_nn; do
        echo "== $t"; "$bin/$t" -s 2>&1 | grep -E -A2 "MESSAGE|ERROR|FAILED|test cases|assertions" | grep -vE "^--$|^$" | tail -60
      done ;;
    denoiser)
      "$bin/pnp_bench" --ceilings --device cuda --output "$out/ceilings.h5" --force
      for dt in float32 bfloat16; do
        "$bin/nn_time" drunet 1 4096x4096 --device cuda --dtype "$dt" --backends eager,native --native cfg
      done
      # bf16 with cuDNN's fused conv+ReLU (NativeOptions::cudnn_fused_bf16), against the above
      "$bin/nn_time" drunet 1 4096x4096 --device cuda --dtype bfloat16 --backends native --native cfgb ;;
    study)
      run pre_bf16 --set compile.mode='"pre"' --set denoiser.precision='"bf16"'
      run none_bf16 --set denoiser.precision='"bf16"'
      run pre_limit40 --set compile.mode='"pre"' --set denoiser.memory_limit_gb=40
      run pre_limit8 --set compile.mode='"pre"' --set denoiser.memory_limit_gb=8 ;;
    inductor)
      # cold: nn_time removes the package first; the study runs then hit the same package
      "$bin/nn_time" drunet 1 4096x4096 --device cuda --backends eager,native,inductor --mode max-autotune \
        --cache "$cache"
      cp "$cache"/inductor/*.log "$out/" 2>/dev/null
      for m in pre post fused; do
        run "inductor_$m" --set compile.mode="\"$m\"" --set compile.backend='"inductor"' \
          --set compile.cache_dir="\"$cache\""
      done ;;
    sweep)
      TORCHINDUCTOR_COMPILE_THREADS=2 PNP_CACHE_DIR=$cache "$bin/pnp_bench" input/sweep.toml --output "$out/pnp_bench.h5" --force
      python3 test/benchmark/check_sweep.py "$out/pnp_bench.h5" ;;
    profile)
      # the inductor packages first, all at once (pnp_bench compiles them before timing)
      grid 3 '["dncnn", "unet"]' '[2048, 2048]' >/tmp/grid3.toml
      grid 1 '["drunet"]' '[4096, 4096]' >/tmp/grid1.toml
      for g in 3 1; do "$bin/pnp_bench" /tmp/grid$g.toml --output /tmp/grid$g.h5 --force & done
      wait
      for a in "dncnn 3 2048x2048" "unet 3 2048x2048" "drunet 1 4096x4096"; do
        # shellcheck disable=SC2086
        "$bin/nn_time" $a --device cuda --backends eager,native,inductor --mode max-autotune --cache "$cache" \
          --warm-only --profile 3
      done
      for m in none pre post fused; do run "fp32_$m" --set compile.mode="\"$m\""; done
      run pre_bf16 --set compile.mode='"pre"' --set denoiser.precision='"bf16"' ;;
    profile3d)
      grid 3 '["dncnn", "drunet"]' '[128, 128, 128]' >/tmp/grid3d.toml
      "$bin/pnp_bench" /tmp/grid3d.toml --output /tmp/grid3d.h5 --force
      for a in "dncnn 3 128x128x128" "drunet 3 128x128x128"; do
        # shellcheck disable=SC2086
        "$bin/nn_time" $a --device cuda --backends native,inductor --mode max-autotune --cache "$cache" \
          --warm-only --profile 3
      done ;;
    unet)
      "$bin/test_native" 2>&1 | tail -3
      for s in 2048x2048 128x128x128; do
        "$bin/nn_time" unet 3 "$s" --device cuda --backends eager,native --profile 3
      done ;;
    unetsweep)
      # the sweep's UNet rows, all three arms in one call (after the upsample change)
      sed -e 's/^architectures = .*/architectures = ["unet"]/' -e 's/^compile_jobs = .*/compile_jobs = 6/' \
        input/sweep.toml >/tmp/sweep_unet.toml
      TORCHINDUCTOR_COMPILE_THREADS=2 PNP_CACHE_DIR=$cache "$bin/pnp_bench" /tmp/sweep_unet.toml \
        --output "$out/pnp_bench_unet.h5" --force ;;
    quality)
      "$bin/nn_time" drunet 1 4096x4096 --device cuda --dtype bfloat16 --backends native --profile 3
      q=(--set solver.init='"fbp"' --set solver.step_scale=1.9 --set solver.relaxation=0.2
         --set solver.iterations=20 --set solver.metrics_every=5 --set denoiser.architecture='"dncnn"'
         --set denoiser.weights='"dncnn_ct"' --set compile.mode='"pre"')
      run dncnn_fp32 "${q[@]}"
      run dncnn_bf16 "${q[@]}" --set denoiser.precision='"bf16"' ;;
    layer)
      ranks() {  # name, rank count, then --set overrides
        local name=$1 n=$2; shift 2
        echo "== study $name ($n rank(s))"
        mpirun --allow-run-as-root -n "$n" "$bin/pnp_recon" input/study_4096.toml --output "/tmp/study_$name.h5" \
          --force "$@" 2>&1 | grep -vE "^iteration " | tail -12
      }
      part=${2:-all}  # speed, agree or all
      if [ "$part" != agree ]; then
        for i in 1 2; do
          for h in input layer; do ranks "speed_${h}_$i" 1 --set compile.mode='"post"' --set distributed.halo_mode="\"$h\""; done
        done
      fi
      [ "$part" = speed ] && { python3 test/gpu/recon_summary.py /tmp/study_*.h5; exit 0; }
      strict=(--set compile.tf32=false --set solver.metrics_every=5)
      ranks ref 1 --set compile.mode='"pre"' "${strict[@]}"
      # (two ranks on one GPU talk over MPI, which a CUDA graph cannot capture: post and fused
      # run uncaptured, as pnp_recon's error says)
      for m in none pre post fused; do
        graphs=(); [ $m = post ] || [ $m = fused ] && graphs=(--set compile.cuda_graphs=false)
        ranks "layer2_$m" 2 --set compile.mode="\"$m\"" --set distributed.halo_mode='"layer"' "${strict[@]}" "${graphs[@]}"
      done
      input2=()
      [ "$part" = all ] && { ranks input2_pre 2 --set compile.mode='"pre"' "${strict[@]}"; input2=(/tmp/study_input2_pre.h5); }
      python3 test/gpu/recon_summary.py /tmp/study_*.h5
      python3 test/solver/check_recon.py /tmp/study_ref.h5 --layer=/tmp/study_layer2_{pre,post,fused,none}.h5 "${input2[@]}" ;;
    scaling)
      modes=(); [ -n "${2:-}" ] && modes=(--halo-modes "$2")
      "$bin/pnp_bench" --scaling input/study_4096.toml --set compile.mode='"pre"' "${modes[@]}" \
        --output "$out/scaling_study_4096${2:+_$2}.h5" --force ;;
    peer)
      sed -e 's/^shapes = .*/shapes = [[2048, 2048]]/' \
          -e 's/^backends = .*/backends = ["eager", "native", "torch_compile", "torch_compile_max_autotune"]/' \
          -e "s/^timeout_s = .*/timeout_s = ${2:-60}/" input/sweep.toml >/tmp/sweep_peer.toml
      "$bin/pnp_bench" /tmp/sweep_peer.toml --output "$out/pnp_bench_peer.h5" --force ;;
    sweeppart)
      # input/sweep.toml split by architecture and arm, for the device tool's 10-minute calls:
      # ARCHS and ARMS are comma lists (dncnn,drunet / eager,native,...), CAP the peer's cap in s;
      # to $out/pnp_bench_<ARCHS>_<ARMS>.h5 (the figures read several files as one sweep)
      archs=${2:?sweeppart ARCHS ARMS [CAP]} arms=${3:?sweeppart ARCHS ARMS [CAP]}
      q() { printf '"%s", ' ${1//,/ } | sed 's/, $//'; }
      n=$(( $(tr -cd , <<<"$archs" | wc -c) + 1 ))
      sed -e "s/^architectures = .*/architectures = [$(q "$archs")]/" -e "s/^backends = .*/backends = [$(q "$arms")]/" \
          -e "s/^timeout_s = .*/timeout_s = ${4:-60}/" -e "s/^compile_jobs = .*/compile_jobs = $(( n * 6 ))/" \
          input/sweep.toml >/tmp/sweep_part.toml
      grep -E "^(architectures|backends|timeout_s|compile_jobs) =" /tmp/sweep_part.toml
      TORCHINDUCTOR_COMPILE_THREADS=2 PNP_CACHE_DIR=$cache "$bin/pnp_bench" /tmp/sweep_part.toml \
        --output "$out/pnp_bench_${archs//,/_}_${arms//,/_}.h5" --force ;;
    plancache)
      # the native plan cache (NativeOptions::plan_cache_dir): test_native's cuDNN graph case
      # (cold, then cached, against float64; serial plan builds too), then DRUNet 1 ch 4096²'s
      # compile: serial against parallel plan builds (no cache), then cold / cached with and
      # without ATen's benchmark mode, fp32 and bf16
      timeout 300 "$bin/test_native" -tc='*cuDNN graph*' 2>&1 |
        grep -E "plan cache|serial plan|ERROR|FAILED|test cases|assertions" | cut -c1-1500 | head -60
      nt() {
        echo "== nn_time drunet 1 4096x4096 $*"
        timeout 200 "$bin/nn_time" drunet 1 4096x4096 --device cuda --cache /tmp/pnp_plan_cache_time "$@" 2>&1 |
          grep -E "^nn_time|rror"
      }
      for dt in float32 bfloat16; do
        nt --dtype $dt --backends eager,native --native cfagbes
        nt --dtype $dt --backends native --native cfagbe
        for o in cfagbepB cfagbep; do
          rm -rf /tmp/pnp_plan_cache_time
          for run in cold cached; do echo "($run)"; nt --dtype $dt --backends native --native $o; done
        done
      done ;;
    setup)
      for i in 1 2; do
        "$bin/pnp_recon" input/study_4096.toml --output "/tmp/study_setup_$i.h5" --force \
          --set compile.mode='"pre"' 2>&1 | grep -vE "^iteration " | tail -40
      done
      "$bin/pnp_radon_bench" --n 4096 --angles 100 --device cuda
      # the native compile of DRUNet 4096², autotune off and on
      for o in cfg cfag; do "$bin/nn_time" drunet 1 4096x4096 --device cuda --backends native --native $o; done
      for k in fwd_kernel adj_kernel; do
        echo "== ncu $k"
        ncu --clock-control none --launch-skip 2 --launch-count 1 -k regex:$k --section SpeedOfLight \
          --section Occupancy --section LaunchStats --section WarpStateStats --section MemoryWorkloadAnalysis \
          --section SchedulerStats --section ComputeWorkloadAnalysis \
          "$bin/pnp_radon_bench" --n 4096 --angles 100 --device cuda --reps 1 --warmup 3 --no-check 2>&1 |
          grep -vE "^==PROF==" | tail -120
      done ;;
    projector)
      m=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__t_sector_hit_rate.pct,dram__bytes_read.sum
      k='regex:fwd_kernel|transpose_kernel|adj_kernel'
      echo "== in study_4096 (the power method's calls first)"
      ncu --clock-control none --cache-control none -k "$k" --metrics $m "$bin/pnp_recon" input/study_4096.toml \
        --output /tmp/study_ncu.h5 --force --set compile.mode='"pre"' --set solver.iterations=3 2>&1 |
        grep -E "_kernel<|gpu__time|per_second|hit_rate|dram__bytes" | tail -80
      echo "== in pnp_radon_bench"
      ncu --clock-control none --cache-control none -k "$k" --metrics $m "$bin/pnp_radon_bench" --n 4096 --angles 100 \
        --device cuda --reps 3 --warmup 1 --no-check 2>&1 | grep -E "_kernel<|gpu__time|per_second|hit_rate|dram__bytes" ;;
    *) echo "unknown stage $stage"; exit 2 ;;
  esac
} 2>&1 | tee "$log"
