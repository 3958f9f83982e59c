// The native backend's executor class (include/pnp/nn/native.hpp), private to src/nn/native:
// NativeImpl materialises a plan (plan.hpp: fusions, steps, liveness, in-place and slots,
// decided on the IR alone) on a device and dtype, runs its steps, warms up / autotunes cuDNN and
// captures the forward as a CUDA graph. Its members are defined by job:
//   native.cpp           construction, forward, make_native
//   materialise.cpp      weights (BN folded in float64) and buffers on the device
//   execute.cpp          running the steps (convolutions, pools, halos, transposed convolutions)
//   capture.cpp          the warm-up, its notes and the CUDA graph capture
//   autotune.cpp         the epilogue layouts chosen by timing (cuDNN graphs against pnp's kernels)
//   plan_cache_glue.cpp  the plan cache's use: stored choices, the network's list, compiles from it
// The cuDNN graphs themselves live in cudnn_epilogue.cpp, the cache's files in plan_cache.cpp.
#pragma once

#include "pnp/nn/fp8.hpp"
#include "pnp/nn/native.hpp"
#include "pnp/timing.hpp"
#include "plan.hpp"
#include "upsample_conv.hpp"
#ifdef PNP_HAVE_CUDA
#include "narrow_conv.hpp"
#include "capture.hpp"
#include "nhwc_ops.hpp"
#include "transposed_gemm.hpp"
#ifdef PNP_HAVE_WGMMA_CONV
#include "wgmma_conv.hpp"
#endif
#endif

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/core/grad_mode.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <array>
#include <chrono>
#include <future>
#include <map>
#include <optional>

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#endif
#ifdef PNP_HAVE_CUDNN_FE
#include "cudnn_epilogue.hpp"
#include "plan_cache.hpp"
#include <torch/version.h>
#endif

namespace pnp::nn::native {

// A plan step's tensors on the executor's device and dtype (conv / conv_transpose: w, b after
// BN folding; batch_norm: w, b, mean, var), and whether it runs as a cuDNN fused op.
struct Bound {
  at::Tensor w, b, mean, var;
  bool cudnn = false;  // at::cudnn_convolution_relu / _add_relu
  bool has_bias = false;  // the IR's conv has a bias (b may also be the zero bias cuDNN's fused ops want)
  // The conv with its epilogue may run as one cuDNN graph (cudnn_epilogue.hpp): conv +
  // residual add without a ReLU (cudnn_epilogues), any convolution (cudnn_graph_convs);
  // epilogue_used: it did in the warm-up (chosen by timing, or forced)
  bool epilogue = false, epilogue_used = false;
  // The bias of a graph with an epilogue (residual add or ReLU) where the IR's conv has none:
  // zeros. cuDNN's precompiled conv (+ residual) + bias (+ ReLU) engines (eng41, eng51 on an
  // H200) take those graphs; conv + residual alone, and conv + ReLU, had only engines that cuDNN
  // compiles at run time (eng4): 0.35-0.61 s to build each, and slower
  // (docs/performance.md#compile-time-and-the-plan-cache)
  at::Tensor zero_b;
  // A convolution with one output channel may run as pnp's own kernel (narrow_conv.hpp;
  // NativeOptions::narrow_convs); narrow_used: it did in the warm-up. One with few input or
  // (2 to 4) output channels may run as pnp's head or tail kernel (the same option; chosen by
  // timing like the Hopper kernels); few_in_used, few_out_used: it did
  bool narrow = false, narrow_used = false, few_in_used = false, few_out_used = false;
  // A convolution whose channels fill 64 x 256 tiles may run as pnp's Hopper kernels
  // (wgmma_conv.hpp; NativeOptions::wgmma_convs): chosen by timing with the cuDNN graphs where
  // those are (epilogue), else where it has at most kUntimedHopperMaxChannels input channels;
  // wgmma_used: it did in the warm-up
  bool wgmma = false, wgmma_used = false;
  // FP8 (NativeOptions::fp8_convs): wq the weight in e4m3 (channels-last) and w_scale its scale
  // per output channel (float32 [C_out]); x_scale the input's, calibrated on the warm-up's first
  // run (0: not yet), and descale = x_scale * w_scale, what the kernel multiplies by. fp8_reader:
  // the step of the one FP8 convolution that reads this one's output as its input (-1: none, or
  // other readers too), for which this one writes e4m3 once that reader has run in FP8.
  // fp8_used: it ran in FP8 (else in bf16, for good: fp8 is then false). copy_reader: the one
  // FP8 convolution that reads this one's output as its input where others read it in bf16
  // (NativeOptions::fp8_dual_out); this one then writes bf16 and e4m3_copy, which that reader
  // (its copy_writer) takes and releases in the same run.
  bool fp8 = false, fp8_used = false;
  at::Tensor wq, w_scale, descale;
  double x_scale = 0;
  int fp8_reader = -1, copy_reader = -1, copy_writer = -1;
  at::Tensor e4m3_copy;
};

#ifdef PNP_HAVE_CUDNN_FE
// Which of pnp's own kernels runs a layout chosen by timing (the executor's epilogue layouts).
enum class PnpKernel { none, few_in, few_out, hopper };

// Its name in the notes.
const char* pnp_kernel_name(PnpKernel k);
#endif

// Channels-last for a 2D or 3D network's tensors.
at::MemoryFormat cl_format(int dim);

// The strides of a contiguous tensor of shape s, channels-last ([B, C, spatial...]: C fastest) or not.
std::vector<int64_t> strides_for(const std::vector<int64_t>& s, bool channels_last);

class NativeImpl final : public NativeExecutor {
 public:
  NativeImpl(const Graph& g, const Weights& w, at::Device device, at::ScalarType dtype, std::vector<int64_t> shape,
             NativeOptions opt);
  ~NativeImpl() override;

  std::string name() const override { return "native"; }
  int64_t alignment() const override { return alignment_; }
  int64_t receptive_radius() const override { return radius_; }
  double compile_seconds() const override { return compile_s_; }
  std::vector<std::string> fusions() const override { return plan_.fusions; }
  bool graph_captured() const override { return captured_; }
  std::vector<std::string> notes() const override { return notes_; }
  const std::vector<int64_t>& input_shape() const override { return shape_; }
  int64_t slot_bytes() const override { return plan_.total_slot_bytes(); }
  int slot_count() const override { return static_cast<int>(slots_.size()); }

  void set_sigma(double sigma) override { sigma_.set(sigma); }  // (SigmaBuffer: only when it changes)
  at::Tensor forward(const at::Tensor& x, double sigma) override;

 private:
  // ---- materialising the plan (materialise.cpp) ----------------------------------------------
  void materialise(const Weights& w);
  void materialise_fp8(Bound& t, const at::Tensor& W);
  void link_fp8_readers();
  void allocate();
  at::Tensor slot_view(const PlanStep& s) const;

  // ---- execution (execute.cpp) ----------------------------------------------------------------
  static bool upsample_by_copy(at::Tensor& y, const at::Tensor& x);
  bool nhwc_ops() const;
  static std::optional<at::Tensor> bias(const Bound& t) { return t.b.defined() ? std::optional(t.b) : std::nullopt; }
  // ATen's cuDNN benchmark mode in the warm-up (for the convolutions pnp does not choose itself)
  bool aten_benchmark() const { return opt_.autotune && opt_.cudnn_benchmark; }
  at::Tensor conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                  const std::vector<int64_t>& padding, const at::Tensor* x2 = nullptr);
#ifdef PNP_HAVE_WGMMA_CONV
  at::Tensor fp8_conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                      const std::vector<int64_t>& padding);
  static bool wgmma_applies(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                            const std::vector<int64_t>& padding);
#endif
  at::Tensor generic_conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                          const std::vector<int64_t>& padding);
  at::Tensor window(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                    const std::vector<int64_t>& padding);
  at::Tensor window_over_halo(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z);
  at::Tensor transposed(const PlanStep& s, Bound& t, size_t k, const at::Tensor& x, at::Tensor& y);
  at::Tensor run();
  void sync() const;

  // ---- the warm-up and the capture (capture.cpp) ------------------------------------------------
  at::Tensor warm_up_and_capture(bool on_input);
  at::Tensor finish_warm_up(const at::Tensor& y);
#ifdef PNP_HAVE_CUDA
  bool capture(std::string* failed);
#endif

#ifdef PNP_HAVE_CUDNN_FE
  // ---- the epilogue layouts chosen by timing (autotune.cpp) -----------------------------------
  struct Epilogue {
    std::shared_ptr<native::EpilogueConv> graph;
    bool use = false, cached = false;  // cached: the choice (and plan) came from the plan cache
    double graph_ms = 0, generic_ms = 0;  // NaN when not timed
    // pnp's kernel for the layout (pnp_kernel: the Hopper kernels, wgmma_conv.hpp, or the head
    // or tail kernel, narrow_conv.hpp) runs instead of cuDNN's choice (the graph or the generic ops);
    // pnp_ms: its time, NaN when not timed (no kernel of pnp's applies)
    bool pnp = false;
    PnpKernel pnp_kernel = PnpKernel::none;
    double pnp_ms = std::numeric_limits<double>::quiet_NaN();
    std::string shape, engine, why;       // engine: the graph's plan; why: no graph built
    // NativeOptions::parallel_plan_builds: the candidates being built (empty once decided),
    // since warm-up run `run`; build_s: the slowest candidate's build (parallel) or the whole
    // build (serial, e.g. forced), wait_s: how long the warm-up waited for them
    std::future<std::vector<native::EpilogueCandidate>> pending;
    int run = 0;
    bool parallel = false;
    double build_s = 0, wait_s = 0;
  };

  at::Tensor epilogue_conv(const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z,
                           const std::vector<int64_t>& padding);
  // The bias of the IR's conv (not the zero bias made for cuDNN's fused ops): what pnp's kernels add.
  static const at::Tensor* ir_bias(const Bound& t) { return t.has_bias ? &t.b : nullptr; }

  // The bias a step's cuDNN graph adds: the IR's, else the zero bias of a graph with an epilogue
  // (Bound::zero_b).
  static const at::Tensor* graph_bias(const Bound& t);
  static std::string layout_key(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                                const at::Tensor& y, const std::vector<int64_t>& padding);
  bool wait_for_builds(Epilogue& e);
  native::EpilogueSpec epilogue_spec(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                                     const at::Tensor& y, const std::vector<int64_t>& padding, int candidates) const;
  Epilogue choose_epilogue(const std::string& layout, const PlanStep& s, Bound& t, const at::Tensor& x,
                           const at::Tensor* z, at::Tensor& y, const std::vector<int64_t>& padding);
  Epilogue from_cache(const native::PlanChoice& c, native::EpilogueSpec spec, const at::Tensor& like, bool pnp_ok);
  void decide_epilogue(const std::string& layout, Epilogue& e, const PlanStep& s, Bound& t, const at::Tensor& x,
                       const at::Tensor* z, at::Tensor& y, const std::vector<int64_t>& padding);
  void time_and_remember(const std::string& layout, Epilogue& e, const PlanStep& s, Bound& t, const at::Tensor& x,
                         const at::Tensor* z, at::Tensor& y, const std::vector<int64_t>& padding);
  PnpKernel pnp_kernel(const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z,
                       const std::vector<int64_t>& padding) const;
  void run_pnp(PnpKernel k, const PlanStep& s, const Bound& t, const at::Tensor& x, const at::Tensor* z, at::Tensor& y,
               const std::vector<int64_t>& padding) const;
  void time_rivals(Epilogue& e, const PlanStep& s, Bound& t, const at::Tensor& x, const at::Tensor* z, at::Tensor& y,
                   const std::vector<int64_t>& padding);
  static double pnp_margin(PnpKernel k, const Bound& t, const at::Tensor& x, const std::vector<int64_t>& padding);
  void grow_workspace(const native::EpilogueConv& graph, const at::Tensor& like);
  std::string epilogue_summary() const;

  // ---- the plan cache's use (plan_cache_glue.cpp) ----------------------------------------------
  native::PlanCache& plan_cache();
  std::string network_key() const;
  std::string fp8_key() const;
  bool capture_from_plan_cache();
  void remember_network();
  void remember(native::PlanCache& cache, const std::string& layout, const Epilogue& e);
#endif

#ifdef PNP_HAVE_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
#endif

  Graph g_;
  at::Device device_;
  at::ScalarType dtype_;
  std::vector<int64_t> shape_;
  NativeOptions opt_;
  bool cl_ = true;
  std::vector<std::vector<int64_t>> shapes_;
  int64_t alignment_ = 1, radius_ = 0;
  native::Plan plan_;
  std::vector<Bound> bound_;  // one per plan step
  std::map<size_t, Bound> phase_;  // by step: a folded upsample's phase convolution (transposed())
  std::map<size_t, at::Tensor> stride2_;  // by step: a 2×2, stride-2 transposed convolution's weight for its products
  std::future<void> stride2_warm_;  // cuBLAS's first-use work for them, beside the compile (joined by capture())
  bool phase_used_ = false, pool_used_ = false, stride2_used_ = false, add_in_kernel_ = false;  // pnp's NHWC paths ran in the warm-up (or the capture)
  std::vector<at::Tensor> slots_, vals_;
  at::Tensor static_in_, static_out_;
  at::Tensor ws_;  // the cuDNN graphs' workspace, grown in the warm-up (before any capture)
#ifdef PNP_HAVE_CUDNN_FE
  std::map<std::string, Epilogue> epilogues_;  // by layout (epilogue_conv)
  std::optional<native::PlanCache> plan_cache_;
  int cache_loaded_ = 0, cache_stored_ = 0;
  std::vector<std::string> cache_notes_;
#endif
  SigmaBuffer sigma_;
  bool captured_ = false, validating_ = false, warmed_ = false;
  bool from_cache_capture_ = false;  // capturing from the plan cache's list (capture_from_plan_cache)
  int warmup_run_ = 0;  // which warm-up run is running (epilogue_conv: parallel builds)
  // What the warm-up may still wait for parallel builds where it meets their layouts
  // (wait_for_builds): DRUNet 4096²'s candidates took 0.004-0.088 s a layout
  // (docs/performance.md#compile-time-and-the-plan-cache).
  static constexpr double kBuildWaitBudgetS = 0.5;
  double build_wait_left_s_ = kBuildWaitBudgetS;
  double compile_s_ = 0;
  std::vector<std::string> notes_;
};

}  // namespace pnp::nn::native
