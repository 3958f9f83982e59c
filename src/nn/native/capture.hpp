// Leaving a CUDA graph capture that failed (the executor's capture: an op threw inside it).
#pragma once

#include <c10/cuda/CUDAStream.h>

namespace pnp::nn::native {

// Ends the capture on `stream` if it is still on (its graph dropped, the sticky error cleared),
// then takes ATen's default CUDA generator out of capture mode. ATen's CUDAGraph::capture_begin
// puts the generator in capture mode and only a successful capture_end takes it out; left there,
// the next random draw on the device throws "Offset increment outside graph capture encountered
// unexpectedly" (nn_time after a failed capture, docs/performance.md#compile-time-and-the-plan-cache). An empty capture on the
// same stream, begun and ended, takes it out (its "graph is empty" warning kept quiet).
void abandon_capture(const c10::cuda::CUDAStream& stream);

}  // namespace pnp::nn::native
