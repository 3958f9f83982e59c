// CUDA-graph capture of a solver region (compile.mode = post / fused). Not a public header.
#pragma once
#include <c10/core/Device.h>

#include <functional>
#include <memory>

namespace pnp {
class CapturedRegion {
 public:
  virtual ~CapturedRegion() = default;
  virtual void replay() = 0;
};
// Captures fn (run once on a side stream, not executed) into a graph replayed on the current
// stream. Throws pnp::Error on builds without CUDA or when capture fails.
std::unique_ptr<CapturedRegion> capture_region(const std::function<void()>& fn, c10::Device device);
}  // namespace pnp
