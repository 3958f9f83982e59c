// A convolution with its epilogue (residual add, bias, ReLU) as one cuDNN graph, built with the
// cuDNN frontend's graph API (the C++ headers of PyPI's nvidia-cudnn-frontend). ATen's fused
// ops cover conv (+ add) + ReLU only; the second convolution of a residual block, conv + add
// with no ReLU, otherwise runs as the convolution, then add_: one more read of two tensors and
// a write of one (DRUNet 1 ch 4096², H200: the adds were 48 ms of 290). Only in CUDA builds
// that found the headers (PNP_HAVE_CUDNN_FE); the executor falls back to generic ops for
// anything cuDNN has no engine for.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace pnp::nn::native {

// What one graph computes: y = conv(x, w) (+ z) (+ b) (then ReLU). Every tensor's sizes,
// strides and dtype are the ones the graph is built for; the pointers are taken again at each
// run. (NativeOptions::cudnn_graph_convs runs every convolution this way where timed faster, so
// the graph may have no residual: conv + bias + ReLU, or the convolution alone.)
// FP8: x and w in float8_e4m3fn (channels-last, channels a multiple of 16; compute capability 8.9
// or later) with `descale` defined, a float32 [K]: y = conv(x, w) * descale (+ z) (+ b) (then
// ReLU), descale[k] = the activation's scale times output channel k's weight scale (pnp/nn/fp8.hpp),
// the products accumulated in float32 and y in y's own dtype (bfloat16 or float32; z and b in y's).
struct EpilogueSpec {
  at::Tensor x, w, z, b, y;  // z may be undefined (no residual add), b too (no bias)
  at::Tensor descale;        // FP8 only (above); undefined otherwise
  std::vector<int64_t> stride, padding;
  bool relu = false;
  bool tf32 = true;    // float32 I/O: tensor-core (TF32) engines allowed
  int candidates = 1;  // time the first plans of cuDNN's heuristic order on these tensors, keep the fastest
  // ... and this many more from further down the order whose engines are precompiled (no
  // runtime compilation: they build in milliseconds)
  int precompiled = 0;
  // A plan serialised by EpilogueConv::serialize for this same spec (plan_cache.hpp): loaded
  // instead of built and timed; make_epilogue_conv throws when cuDNN does not take it.
  const std::vector<uint8_t>* plan = nullptr;
  // Else, with index >= 0: only the plan at that position of cuDNN's heuristic order is built,
  // untimed; make_epilogue_conv throws when it does not build, or when `engine` is given and
  // the plan's name is not that (cuDNN's order changed).
  int64_t index = -1;
  std::string engine;
  // Plans that need more workspace than this many bytes are not built (-1: a 16th of y's bytes,
  // at least kMinWorkspaceCap). cuDNN's heuristic order for conv + residual + bias in float32
  // holds engines (eng26) that want 4.3 GB, twice the output, at DRUNet 4096²'s 128-channel level,
  // where the fastest plans want 2.1 MB (docs/performance.md#compile-time-and-the-plan-cache): every candidate built
  // grows the executor's one workspace.
  int64_t max_workspace = -1;
};

inline constexpr int64_t kMinWorkspaceCap = int64_t(64) << 20;

// The workspace cap of a spec (EpilogueSpec::max_workspace).
inline int64_t workspace_cap(const EpilogueSpec& s) {
  if (s.max_workspace >= 0) return s.max_workspace;
  return std::max<int64_t>(kMinWorkspaceCap, s.y.defined() ? static_cast<int64_t>(s.y.nbytes()) / 16 : 0);
}

class EpilogueConv {
 public:
  virtual ~EpilogueConv() = default;
  virtual int64_t workspace_bytes() const = 0;
  virtual std::string engine() const = 0;  // the chosen plan's name
  virtual int64_t index() const = 0;        // its position in cuDNN's heuristic order (-1: deserialised)
  // The chosen plan as the frontend serialises it (Graph::serialize, the plan only), for
  // EpilogueSpec::plan in a later process; empty when cuDNN cannot serialise this plan.
  virtual std::vector<uint8_t> serialize() const = 0;
  // The spec's computation on tensors shaped like the spec's, on the current CUDA stream (z
  // undefined and b null where the spec has none; descale given exactly when the spec is FP8).
  virtual void run(const at::Tensor& x, const at::Tensor& w, const at::Tensor& z, const at::Tensor* b, at::Tensor& y,
                   void* workspace, const at::Tensor* descale = nullptr) = 0;
};

// Builds the graph and its plan (with candidates > 1, the fastest of that many, timed on the
// spec's tensors: y is written). Throws pnp::Error with cuDNN's message when no engine supports
// it. (Building and timing every plan cuDNN offers, the frontend's autotune(), took 228 s for
// DRUNet 4096²'s 28 graphs on an H200; the split between building and timing was not measured.)
std::unique_ptr<EpilogueConv> make_epilogue_conv(const EpilogueSpec& spec);

// One candidate of build_epilogue_candidates: the graph with its one plan, or why it did not
// build; seconds: its build's own wall time.
struct EpilogueCandidate {
  std::shared_ptr<EpilogueConv> conv;
  int64_t index = -1;
  std::string why;
  double seconds = 0;
};

// The plans at positions 0 .. candidates-1 of cuDNN's heuristic order for this spec, and the
// first `precompiled` precompiled ones after them, each in a graph of its own, built on threads
// of their own (at most as many at once as the machine has cores, over all calls): most of a
// cold build is cuDNN compiling its runtime-fused kernels on the CPU, one plan after the other in
// make_epilogue_conv. (Which positions: from the heuristic order of one more graph, made first
// on a thread of its own.) Only the spec's sizes, strides and dtypes are used (not its data,
// which the caller may reuse meanwhile), on CUDA device `device`. The future's candidates are
// what the caller times and chooses from; it does not throw.
std::future<std::vector<EpilogueCandidate>> build_epilogue_candidates(const EpilogueSpec& spec, int device);

// What a plan depends on besides its layout, for the plan cache's key: the GPU (name, compute
// capability), cuDNN's version (the library loaded) and the frontend's (the headers built with).
std::string epilogue_environment(int device);

// The fastest of `reps` runs of fn on the current CUDA stream, in ms, after one untimed run.
double time_on_stream_ms(const std::function<void()>& fn, int reps = 3);

// The same for rivals, interleaved: each run once untimed, then `reps` rounds that time each in
// turn (round r from rival r), so that a drift of the GPU's clocks during the timing (they fall
// under sustained load after the warm-up's idle gaps while plans build) reaches all of them
// alike rather than favouring whichever was timed first.
std::vector<double> time_on_stream_ms(const std::vector<std::function<void()>>& fns, int reps = 3);

// Whether pnp's kernel takes a layout from cuDNN's choice, by their times in the warm-up: unless
// cuDNN's time, raised by the margin (kPnpKernelMargin: 3 %), is still below pnp's. Why a margin: the timing runs each
// rival a few times after idle gaps, at clocks the forward does not keep. The forward runs them
// back to back, at the GPU's power limit for DRUNet 4096² on an H200 (a median 1455 MHz of
// 1980: docs/performance.md#native-kernels). On DRUNet 4096²'s fp32 64-channel residual layer cuDNN's
// graph won the timing by 0.049, 0.126 and 0.149 ms (0.8-2.4 %) in three cold compiles, and in
// those forwards it ran 6.48 ms a layer against the rows kernel's 5.97 ms
// (docs/performance.md#native-kernels).
//
// The persistent rows kernel (wgmma_conv.hpp: wgmma_rows_applies) has a wider margin,
// kRowsKernelMargin. On that layout the timing gave cuDNN's graph leads of up to 7 % (5.872
// against 6.283 ms), yet in every forward measured the rows kernel was not the slower:
//   - 5.97 against 6.48 ms a layer;
//   - about 6.26 against 6.29 ms;
//   - about 5.8 against 6.3 ms, DRUNet 249.696 and 250.041 against 255.55 and 256.716 ms, one
//     machine and plan cache with only that choice flipped
// (docs/performance.md#native-kernels). The other kernels of pnp's keep 3 %: the tile kernel has lost whole networks it
// won layers of.
inline constexpr double kPnpKernelMargin = 0.03;
inline constexpr double kRowsKernelMargin = 0.08;
inline bool pnp_kernel_wins(double pnp_ms, double cudnn_ms, double margin = kPnpKernelMargin) {
  return pnp_ms < cudnn_ms * (1 + margin);
}

}  // namespace pnp::nn::native
