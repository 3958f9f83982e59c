// Leaving a CUDA graph capture that failed (capture.hpp).
#include "capture.hpp"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>

namespace pnp::nn::native {

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

}  // namespace pnp::nn::native
