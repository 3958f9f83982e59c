// The native executor's warm-up and capture (impl.hpp): validating and autotuning runs, the
// forward captured as one CUDA graph, the notes on what ran; and leaving a CUDA graph capture
// that failed (capture.hpp).
#include "impl.hpp"
#include "pnp/core.hpp"

#ifdef PNP_HAVE_CUDA
#include <c10/util/Exception.h>
#endif

namespace pnp::nn::native {

#ifdef PNP_HAVE_CUDA
void abandon_capture(const c10::cuda::CUDAStream& stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream.stream(), &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) {
    cudaGraph_t dead = nullptr;
    cudaStreamEndCapture(stream.stream(), &dead);
    if (dead) cudaGraphDestroy(dead);
  }
  (void)cudaGetLastError();
  struct Quiet : c10::WarningHandler {
    void process(const c10::Warning&) override {}
  } quiet;
  try {
    const c10::WarningUtils::WarningHandlerGuard warnings(&quiet);
    const c10::cuda::CUDAStreamGuard guard(stream);
    at::cuda::CUDAGraph empty;
    empty.capture_begin();
    empty.capture_end();
  } catch (...) {
    (void)cudaGetLastError();
  }
}

#endif

// The warm-up (validation, autotuning) and the capture. On the input in static_in_ (and the
// sigma set) when `on_input`: the output of its last run is returned (a copy, made before
// the capture). Otherwise on random input, never zeros: autotuning on real data.
at::Tensor NativeImpl::warm_up_and_capture(bool on_input) {
  warmed_ = true;
  const MemoryStage stage("denoiser warm-up");
  if (!device_.is_cuda()) {
    notes_.push_back("CPU: generic ops (conv, then relu_/add_ in place), no autotuning, no graph capture");
    return on_input ? run().clone(at::MemoryFormat::Contiguous) : at::Tensor();
  }
  auto& ctx = at::globalContext();
  const bool bench_before = ctx.benchmarkCuDNN();
  const int limit_before = ctx.benchmarkLimitCuDNN();
  auto restore = [&] {
    ctx.setBenchmarkCuDNN(bench_before);
    ctx.setBenchmarkLimitCuDNN(limit_before);
  };
  at::Tensor y;
#ifdef PNP_HAVE_CUDNN_FE
  {
    const auto t_capture = std::chrono::steady_clock::now();
    ctx.setBenchmarkCuDNN(false);  // (nothing may be timed inside a capture)
    bool done = false;
    try {
      done = capture_from_plan_cache();
    } catch (...) {
      restore();
      throw;
    }
    restore();
    if (done) {
      if (on_input) {
        compile_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_capture).count();
        graph_->replay();
        y = static_out_.clone(at::MemoryFormat::Contiguous);
      }
      return finish_warm_up(y);
    }
  }
#endif
  if (!on_input) {
    static_in_.uniform_(-1.0, 1.0);
    sigma_.set(0.1);
  }
  if (aten_benchmark()) ctx.setBenchmarkCuDNN(true);
  if (opt_.cudnn_benchmark_limit >= 0) ctx.setBenchmarkLimitCuDNN(opt_.cudnn_benchmark_limit);
  try {
    validating_ = true;
    build_wait_left_s_ = kBuildWaitBudgetS;
    // One more validating run while plans built in parallel are still to be timed (the
    // two ops ran in their place meanwhile).
    // FP8: the first run calibrates the activation scales, a second runs with them fixed
    // (NativeOptions::fp8_convs), so that the output returned is what later calls compute
    const bool fp8 = std::any_of(bound_.begin(), bound_.end(), [](const Bound& t) { return t.fp8; });
    for (int i = 0, runs = std::max(fp8 ? 2 : 1, opt_.warmup_calls); i < runs; ++i) {
      warmup_run_ = i;
      y = run();
      sync();
      bool pending = false;
#ifdef PNP_HAVE_CUDNN_FE
      pending = std::any_of(epilogues_.begin(), epilogues_.end(), [](const auto& kv) { return kv.second.pending.valid(); });
#endif
      if (pending && i + 1 == runs) ++runs;
      validating_ = pending;
    }
    if (on_input) y = y.clone(at::MemoryFormat::Contiguous);
    else y = at::Tensor();
    const auto t_capture = std::chrono::steady_clock::now();
#ifdef PNP_HAVE_CUDA
    if (opt_.cuda_graph) {
      std::string failed;
      if (!capture(&failed)) notes_.push_back("CUDA graph capture failed, running without a graph: " + failed);
    }
#else
    if (opt_.cuda_graph) notes_.push_back("CUDA graph: not built with CUDA support");
#endif
    if (on_input) compile_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t_capture).count();
  } catch (...) {
    restore();
    throw;
  }
  restore();
#ifdef PNP_HAVE_CUDNN_FE
  remember_network();
#endif
  return finish_warm_up(y);
}

// The warm-up's (or the capture from the plan cache's) memory hand-back and notes; returns y.
at::Tensor NativeImpl::finish_warm_up(const at::Tensor& y) {
#ifdef PNP_HAVE_CUDA
  // cuDNN's benchmark mode tries plans with workspaces up to the free memory; hand the cached
  // (now unused) blocks back so that later non-torch allocations (NCCL, ...) find memory.
  c10::cuda::CUDACachingAllocator::emptyCache();
#endif
  int fused = 0, epilogues = 0, graphs = 0, adds = 0, adds_used = 0, narrow = 0, few_in = 0, few_out = 0, wgmma = 0;
  for (size_t k = 0; k < bound_.size(); ++k) {
    const Bound& t = bound_[k];
    fused += t.cudnn && !t.epilogue_used && !t.narrow_used && !t.few_in_used && !t.few_out_used && !t.wgmma_used;
    narrow += t.narrow_used;
    few_in += t.few_in_used;
    few_out += t.few_out_used;
    wgmma += t.wgmma_used;
    epilogues += t.epilogue, graphs += t.epilogue_used;
    const PlanStep& s = plan_.steps[k];
    if (t.epilogue && s.z >= 0 && !s.relu) ++adds, adds_used += t.epilogue_used;
  }
  (void)epilogues, (void)graphs, (void)adds, (void)adds_used;
  notes_.push_back("CUDA: " + std::to_string(fused) + " convolutions run as cuDNN fused ops");
  if (narrow > 0)
    notes_.push_back("CUDA: " + std::to_string(narrow) +
                     " convolution(s) with one output channel run as pnp's narrow kernel (narrow_conv.hpp)");
  if (few_in > 0)
    notes_.push_back("CUDA: " + std::to_string(few_in) +
                     " convolution(s) with few input channels run as pnp's head kernel (narrow_conv.hpp)");
  if (few_out > 0)
    notes_.push_back("CUDA: " + std::to_string(few_out) +
                     " convolution(s) with few output channels run as pnp's tail kernel (narrow_conv.hpp)");
  if (wgmma > 0)
    notes_.push_back("CUDA: " + std::to_string(wgmma) + " convolution(s) run as pnp's Hopper kernel (wgmma_conv.hpp)");
  if (!opt_.fp8_convs.empty()) {
    int fp8 = 0, e4m3_out = 0, copies = 0;
    double lo = 0, hi = 0;
    for (const Bound& t : bound_) {
      if (!t.fp8_used) continue;
      lo = fp8 == 0 ? t.x_scale : std::min(lo, t.x_scale), hi = std::max(hi, t.x_scale);
      ++fp8;
      e4m3_out += t.fp8_reader >= 0 && bound_[static_cast<size_t>(t.fp8_reader)].fp8_used;
      copies += t.copy_reader >= 0 && bound_[static_cast<size_t>(t.copy_reader)].fp8_used;
    }
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "FP8: %d of %zu candidate convolution(s) run in e4m3 on pnp's Hopper kernel (wgmma_conv_fp8), "
                  "activation scales %.4g to %.4g calibrated on the warm-up's first run; %d write e4m3 for their "
                  "one reader, %d bf16 and an e4m3 copy for their FP8 reader, the others bf16",
                  fp8, opt_.fp8_convs.size(), lo, hi, e4m3_out, copies);
    notes_.push_back(buf);
  }
  if (phase_used_)
    notes_.push_back("CUDA: the ×2 upsample convolutions as convolutions of their four phases, then pnp's shuffle with "
                     "the bias, ReLU and concat (nhwc_ops.hpp)");
  if (pool_used_) notes_.push_back("CUDA: the 2×2 max pools as pnp's kernel (nhwc_ops.hpp)");
  if (add_in_kernel_)
    notes_.push_back("CUDA: the adds folded into their convolution summed as pnp's tail kernel loads its input "
                     "(narrow_conv.hpp)");
  if (stride2_used_)
    notes_.push_back("CUDA: the 2×2, stride-2 transposed convolutions as two cuBLAS products each, written into their "
                     "output (transposed_gemm.hpp)");
#ifdef PNP_HAVE_CUDNN_FE
  if (adds > 0)
    notes_.push_back("CUDA: " + std::to_string(adds_used) + " of " + std::to_string(adds) +
                     " convolutions with a residual add run as cuDNN graphs with the add in their epilogue" +
                     (opt_.cudnn_graph_convs ? std::string() : epilogue_summary()));
  if (opt_.cudnn_graph_convs && epilogues > 0)
    notes_.push_back("CUDA: " + std::to_string(graphs) + " of " + std::to_string(epilogues) +
                     " convolutions run as cuDNN graphs (conv with its bias, residual add and ReLU)" +
                     epilogue_summary());
  if (plan_cache_ && plan_cache_->enabled()) {
    std::string n = "plan cache " + plan_cache_->dir() + ": " + std::to_string(cache_loaded_) + " of " +
                    std::to_string(epilogues_.size()) + " layouts loaded, " + std::to_string(cache_stored_) + " stored";
    for (const auto& c : cache_notes_) n += "; " + c;
    notes_.push_back(n);
  }
#endif
  return y;
}

#ifdef PNP_HAVE_CUDA
// The forward captured as one CUDA graph; false (why in `failed`) when the capture failed.
bool NativeImpl::capture(std::string* failed) {
  if (stride2_warm_.valid()) stride2_warm_.get();  // (no other thread's CUDA calls in a capture)
  sync();
  // The warm-up's cached blocks back to the device: the graph allocates from a pool of its own,
  // which cannot reuse them, and no block can be freed while the capture runs (under a budget
  // the capture ran out of memory with a fifth of it cached but unallocated).
  c10::cuda::CUDACachingAllocator::emptyCache();
  auto side = c10::cuda::getStreamFromPool(false, device_.index());
  graph_ = std::make_unique<at::cuda::CUDAGraph>();
  try {
    c10::cuda::CUDAStreamGuard sg(side);
    graph_->capture_begin();
    try {
      const MemoryStage stage("denoiser capture");
      static_out_ = run();
    } catch (...) {
      // Ended through the graph where it can be: the allocator then stops routing into the graph's
      // pool, and the pool goes back with the graph. Ended by hand, the pool stays reserved for
      // good (5.2 GiB of a 16 GB budget, at 16384² in bf16 on an H100), and the run goes on
      // without a graph in what is left.
      bool ended = false;
      try {
        graph_->capture_end();
        ended = true;
      } catch (...) {
      }
      if (!ended) native::abandon_capture(side);
      throw;
    }
    graph_->capture_end();
    sync();
    captured_ = true;
  } catch (const std::exception& e) {
    captured_ = false;
    static_out_ = at::Tensor();
    graph_.reset();
    c10::cuda::CUDACachingAllocator::emptyCache();  // the graph's pool back to the device
    const std::string msg = e.what();
    *failed = msg.substr(0, msg.find('\n'));
  }
  return captured_;
}
#endif

}  // namespace pnp::nn::native
