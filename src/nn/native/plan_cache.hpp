// The native backend's persistent plan cache: what the executor chose for one convolution
// layout (a cuDNN graph or the generic ops, the graph's engine, both times) and the chosen
// cuDNN plan itself, serialised by the cuDNN frontend (Graph::serialize, which covers the
// runtime-compiled engines the epilogue graphs pick; for others, the plan's position in cuDNN's
// heuristic order), so that a later process loads the plan instead of building and timing three
// of them (the epilogue choice added 5.2 s to the 5.2 s cold autotuned compile of DRUNet 1 ch
// 4096², H200, docs/performance.md#compile-time-and-the-plan-cache).
//
// With pnp's Hopper kernels (wgmma_conv.hpp) the choice has a third arm, the kernel, timed
// against cuDNN's side; an executor without them takes cuDNN's side of the entry.
//
// One file per layout: <dir>/<fnv1a(env, layout)>.plan, where env names everything a plan
// depends on besides the layout (GPU and its compute capability, cuDNN, the frontend, torch,
// the dtype, TF32) and layout the tensors' sizes and strides, stride, padding and bias. Keyed by
// layout rather than by network: a layout's choice does not depend on the network around it, so
// DRUNet's levels are shared by every DRUNet of that width and input shape. The file repeats env
// and layout, and a load checks both (a hash collision or a file from elsewhere is a miss).
// Written to a temporary name and renamed: readers never see half a file; a damaged or
// unreadable entry is a miss with a reason, never an error (the executor then chooses again).
// CPU-only code (no CUDA): the executor fills and reads it on CUDA builds with the frontend.
//
// Beside the layouts, one file per network (<dir>/<fnv1a(env, network)>.net, network naming the
// IR's hash, the input shape and the options that decide which layouts it meets): the list of
// its layouts, written once every one of them is decided and stored. With it, a later compile
// loads every plan before it runs anything and captures the forward straight away, with no
// warm-up run (NativeExecutor: compiled from the plan cache); a layout the capture meets that
// the list lacks, or a plan cuDNN does not take, ends the capture and the compile warms up as
// without the list.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace pnp::nn::native {

struct PlanChoice {
  bool graph = false;   // cuDNN's side: run the layout as the cuDNN graph (else the generic ops)
  bool pnp = false;     // run pnp's Hopper kernel instead (faster than cuDNN's side as timed)
  double pnp_ms = std::numeric_limits<double>::quiet_NaN();  // its time (NaN: not timed)
  std::string engine;   // the graph's plan name (empty: no graph was built)
  double graph_ms = std::numeric_limits<double>::quiet_NaN(), generic_ms = std::numeric_limits<double>::quiet_NaN();
  // With graph: the frontend's serialised plan, or (for an engine cuDNN cannot serialise) its
  // position in cuDNN's heuristic order, rebuilt and checked against `engine` on load.
  std::vector<uint8_t> plan;
  int64_t index = -1;
};

class PlanCache {
 public:
  PlanCache() = default;  // disabled
  PlanCache(std::string dir, std::string env);
  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& layout) const;
  // The stored choice, or nullopt: no entry (why empty) or a damaged / foreign one (why says).
  std::optional<PlanChoice> load(const std::string& layout, std::string* why = nullptr) const;
  // False (with why) when it could not be written; never throws.
  bool store(const std::string& layout, const PlanChoice& c, std::string* why = nullptr) const;

  // A network's layouts: (what the notes call it, i.e. its output shape; the layout key).
  using Layouts = std::vector<std::pair<std::string, std::string>>;
  std::string network_path(const std::string& network) const;
  std::optional<Layouts> load_network(const std::string& network, std::string* why = nullptr) const;
  bool store_network(const std::string& network, const Layouts& layouts, std::string* why = nullptr) const;

 private:
  std::string dir_, env_;
};

}  // namespace pnp::nn::native
