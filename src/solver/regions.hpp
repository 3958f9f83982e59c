// The two regions of one PnP step and how each compile placement runs them. Not a public
// header: run_pnp (loop.cpp) builds them.
//   GradientRegion  forward_projection, allreduce, backprojection, step    (z = x - gamma A^T(Ax - y))
//   DenoiseRegion   halo_exchange, denoise, clamp                           (x = clamp(D(z (+) halo)))
//   StepRunner      the capture policy (solver_captures): modes none and pre run both regions
//                   op by op every iteration; mode post captures each region as its own CUDA
//                   graph, mode fused the whole step as one, after iteration 1 (the warm-up:
//                   autotuning, handle creation), and replays them from iteration 2 on. On
//                   CPUs, or with compile.cuda_graphs = false, post and fused run as pre does.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "capture.hpp"
#include "pnp/halo.hpp"
#include "pnp/solver.hpp"
#include "pnp/timing.hpp"

namespace pnp {

// Timer slots: the kPhaseCount phases, then the two regions.
inline constexpr int kGradientRegionSlot = kPhaseCount, kDenoiseRegionSlot = kPhaseCount + 1;

// The loop's state on one rank, allocated once: the iterate and every buffer a phase writes.
// A volume's slab puts its slices in front of each: [slices, own], [slices, K, D].
// A 3D denoiser's z_ext holds its z-halo slices too (z_own is the slab's part).
struct LoopState {
  at::Tensor x;      // [own] the iterate
  at::Tensor z_ext;  // [ext] z with its halo
  at::Tensor z_own;  // the owned view of z_ext
  at::Tensor p;      // [K, D] projection, then the residual A x - y
  at::Tensor g;      // [own] gradient
};

class GradientRegion {
 public:
  GradientRegion(const Problem& prob, const Box& own, Communicator& comm, LoopState& s, double step)
      : prob_(prob), own_(own), comm_(comm), s_(s), step_(step) {}
  // With a timer every phase is bracketed by events; without (inside a captured graph) not.
  void run(PhaseTimer* timer);

 private:
  const Problem& prob_;
  Box own_;
  Communicator& comm_;
  LoopState& s_;
  double step_;
};

struct DenoiseSettings {
  double sigma = 0.01;    // given to the denoiser
  int64_t patch_rows = 0, patch_cols = 0;  // input extent of a patch; 0 = the whole extended tile
  int64_t overlap = 0;
  int64_t batches = 1;    // a volume's slab denoised in this many calls of nearly equal slices
  double alpha = 1.0;     // relaxation: x = (1 - alpha) z + alpha D(z)
  bool clamp = true;
  double lo = 0, hi = 1;  // clamp bounds
};

class DenoiseRegion {
 public:
  // zhalo: a 3D denoiser's z-halo (null: a 2D denoiser); z_before: the halo slices ahead of the
  // slab's own in z_ext.
  DenoiseRegion(const TilePlan& tile, HaloPlan& halo, Denoiser& den, LoopState& s, DenoiseSettings set,
                ZHaloPlan* zhalo = nullptr, int64_t z_before = 0);
  void run(PhaseTimer* timer);
  // The sigma of the next run (called outside any captured graph: a replay reads it from the
  // executor's device buffer).
  void set_sigma(double sigma);

 private:
  TilePlan tile_;
  HaloPlan& halo_;
  Denoiser& den_;
  LoopState& s_;
  DenoiseSettings set_;
  ZHaloPlan* zhalo_ = nullptr;
  int64_t z_before_ = 0;
  at::Tensor z4_;  // z_ext as [1, 1, rows, cols] (a volume's slab: [slices, 1, rows, cols]; 3D: [1, 1, slices, ...])
  std::vector<std::pair<int64_t, int64_t>> batches_;  // (first slice, slices) of each denoiser call
};

class StepRunner {
 public:
  // Throws InputError for a capture (modes post and fused) over a communicator that cannot be
  // captured.
  // allowed = false (a denoiser in patches, captures_allowed): nothing is captured.
  StepRunner(CompileMode mode, bool cuda_graphs, at::Device device, Communicator& comm, GradientRegion& grad,
             DenoiseRegion& den, PhaseTimer& timer, bool allowed = true);
  bool capturing() const { return capture_; }
  // Runs iteration `it`: both regions with every phase timed, or the captured graph(s).
  void run(int64_t it);
  bool replays(int64_t it) const { return capture_ && it > 0; }
  // After iteration 1: captures the region(s). Records its seconds and the bytes the captured
  // communication sends per replay (counted while capturing).
  void capture();
  bool captured() const { return step_ || gradient_; }
  double capture_seconds() const { return capture_seconds_; }
  int64_t capture_bytes() const { return capture_bytes_; }
  // Whether the regions' own times exist in a replayed iteration (mode post: yes; fused: no).
  bool regions_timed_when_replayed() const { return mode_ == CompileMode::post; }

 private:
  CompileMode mode_;
  bool capture_ = false;
  at::Device device_;
  Communicator& comm_;
  GradientRegion& grad_;
  DenoiseRegion& den_;
  PhaseTimer& timer_;
  std::unique_ptr<CapturedRegion> gradient_, denoise_, step_;
  double capture_seconds_ = 0;
  int64_t capture_bytes_ = 0;
};

}  // namespace pnp
