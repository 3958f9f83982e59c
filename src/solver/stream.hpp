// A volume's slab streamed through the device (MemoryPlan::stream): the slab's iterate, data and
// truth stay in host memory (host_store), and each iteration runs the step's two regions on one
// group of slices at a time, in the device buffers of one group. The groups are nearly equal
// ranges of `resident` slices; the last one may start earlier and overlap the one before it,
// whose slices it recomputes without writing them back (the slices are independent problems:
// per-slice physics, a 2D denoiser). The next group's upload and the finished group's download
// go through staging buffers; on a CUDA device they run on a copy stream of their own and
// overlap the current group's compute, on the CPU they are plain copies. Not a public header:
// run_pnp (loop.cpp) builds it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "pnp/solver.hpp"
#include "pnp/timing.hpp"
#include "quality.hpp"
#include "regions.hpp"

namespace pnp {

class SlabStream {
 public:
  // slab: the rank's problem, its y and truth in host memory; x: the slab's iterate (host memory,
  // [slices, rows, cols]); resident: slices per group.
  SlabStream(const Problem& slab, at::Tensor x, int64_t resident, at::Device device);
  ~SlabStream();
  SlabStream(const SlabStream&) = delete;
  SlabStream& operator=(const SlabStream&) = delete;

  // The group's problem (its y and truth in device buffers of `resident` slices): the regions
  // and the group's LoopState are made on it.
  const Problem& group() const { return group_; }
  // One iteration over the groups of s (the group's LoopState): upload, the gradient region, the
  // denoise region, download; the regions' and phases' times summed over the groups. With
  // `quality`, each group's new slices are added to `sums` (a metrics iteration).
  void run(LoopState& s, GradientRegion& gradient, DenoiseRegion& denoise, PhaseTimer* timer, QualityMonitor* quality,
           QualityMonitor::Sums* sums);
  // Waits for the downloads: the host iterate is complete (before the host reads it).
  void sync();
  const at::Tensor& x() const { return x_; }
  int64_t groups() const { return static_cast<int64_t>(starts_.size()); }

 private:
  void upload(int64_t k);  // group k's iterate and data into the staging buffers
  const Problem& slab_;
  Problem group_;
  at::Tensor x_;                  // [slices, rows, cols] in host memory
  at::Tensor in_x_, in_y_, out_x_;  // the device's staging buffers
  std::vector<int64_t> starts_;   // each group's first slice
  int64_t resident_ = 0;
  at::Device device_;
  struct Copies;                  // the copy stream and its events (CUDA)
  std::unique_ptr<Copies> copies_;
};

}  // namespace pnp
