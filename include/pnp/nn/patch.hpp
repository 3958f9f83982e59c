// Patch-wise application of a denoiser, for memory limits. The output is tiled into cores;
// each core is run with `overlap` extra input pixels on every side (clipped at the image
// border) and only the core is kept: patches are cropped, never blended, so every output pixel
// comes from exactly one patch. With overlap >= receptive radius the result equals the
// un-patched one (patch starts are aligned to the executor's alignment for that).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "pnp/nn/executor.hpp"

namespace pnp::nn {

// One patch along one axis: input range [in0, in1), kept output range [out0, out1) (global).
struct PatchRange {
  int64_t in0, in1, out0, out1;
};
// The 1-D tiling of an axis of `size` for the given patch (input extent) and overlap;
// `overlap` is rounded up and the core down to multiples of `alignment`. patch <= 0 or
// patch >= size gives one range. Every range has the same input extent (core + 2 * overlap)
// where its aligned start allows it, always when size is a multiple of the alignment: a
// compiled backend then builds one patch shape. Throws InputError when the patch is too small
// for the overlap.
std::vector<PatchRange> patch_ranges(int64_t size, int64_t patch, int64_t overlap, int64_t alignment);

// The [B, C, spatial...] shape under which a stored array of shape `stored` is denoised: rank
// dim = one single-channel image; rank dim+1 = channels first (C = channels) or, for a 2D
// denoiser with one channel, a stack of slices denoised one by one; rank dim+2 = as is.
// Throws InputError for any other rank or a channel count that does not fit.
std::vector<int64_t> network_shape(const std::vector<int64_t>& stored, int dim, int channels);

// patch = 0: whole input (one call). overlap < 0: the executor's receptive radius.
at::Tensor denoise_patched(Executor& ex, const at::Tensor& x, double sigma, int64_t patch, int64_t overlap);
// The same with a patch size per spatial axis (0 = that axis whole): rectangular patches.
at::Tensor denoise_patched(Executor& ex, const at::Tensor& x, double sigma, const std::vector<int64_t>& patch,
                           int64_t overlap);

}  // namespace pnp::nn
