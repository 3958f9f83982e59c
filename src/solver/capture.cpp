#include "capture.hpp"

#include "pnp/core.hpp"
#include "pnp/device.hpp"
#include "pnp/messages.hpp"

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace pnp {

#ifdef PNP_HAVE_CUDA
namespace {
class CudaRegion final : public CapturedRegion {
 public:
  CudaRegion(const std::function<void()>& fn, c10::Device device) : device_(device) {
    c10::cuda::CUDAGuard guard(device_);
    // The warm-up's cached blocks back to the device: the graph's allocations come from a pool
    // of its own, which cannot reuse them (under a budget: 26.6 GiB cached but unallocated, the
    // capture out of memory at 16384²).
    c10::cuda::device_synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
    auto side = c10::cuda::getStreamFromPool(false, device_.index());
    auto current = c10::cuda::getCurrentCUDAStream(device_.index());
    at::cuda::CUDAEvent queued;
    queued.record(current);
    queued.block(side);  // the side stream follows what is already queued
    {
      c10::cuda::CUDAStreamGuard sg(side);
      graph_.capture_begin();
      try {
        fn();
      } catch (const std::exception& e) {
        // The pools as the failed capture holds them (ending it frees its blocks).
        const std::string pools = device_memory_summary(device_);
        try { graph_.capture_end(); } catch (...) {}
        if (pools.empty()) throw;
        throw Error(error_line(e.what()) + " [the allocator's pools in the capture: " + pools + "]");
      } catch (...) {
        try { graph_.capture_end(); } catch (...) {}
        throw;
      }
      graph_.capture_end();
    }
    at::cuda::CUDAEvent done;
    done.record(side);
    done.block(current);
  }
  void replay() override { graph_.replay(); }

 private:
  c10::Device device_;
  at::cuda::CUDAGraph graph_;
};
}  // namespace

std::unique_ptr<CapturedRegion> capture_region(const std::function<void()>& fn, c10::Device device) {
  if (!device.is_cuda()) throw Error("CUDA graph capture needs a CUDA device");
  try {
    return std::make_unique<CudaRegion>(fn, device);
  } catch (...) {
    rethrow_with_context("capturing a compiled region as a CUDA graph");
  }
}
#else
std::unique_ptr<CapturedRegion> capture_region(const std::function<void()>&, c10::Device) {
  throw Error("CUDA graph capture needs a CUDA build of pnp");
}
#endif

}  // namespace pnp
