// FP8 (e4m3) numerics of the denoiser, emulated in float32: the reference that a GPU FP8 path
// must reproduce, and what measures the reconstruction's loss per choice of the layers kept in
// higher precision before any FP8 kernel exists.
//   * e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa bits; largest 448, smallest normal 2^-6,
//     subnormal step 2^-9; round to nearest even; values beyond 448 saturate (no infinities).
//   * Weights: one scale per output channel, amax / 448; activations: one scale per tensor (each
//     convolution's input), amax / 448 calibrated on the first call and fixed after it (values
//     beyond the calibrated range saturate, as a static FP8 kernel's would).
//   * A convolution "kept" runs in float32 on unquantised input and weights.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "pnp/nn/executor.hpp"
#include "pnp/nn/ir.hpp"
#include "pnp/nn/weights.hpp"

namespace pnp::nn {

inline constexpr double kE4m3Max = 448.0;

// The float64 reference: v rounded to the nearest e4m3fn value (ties to even), saturated at
// +-448; NaN stays NaN.
double e4m3_reference(double v);
// The same for a tensor, through ATen's float8_e4m3fn (values clamped to +-448 first): float32
// or float64 in, the same dtype out.
at::Tensor e4m3_round(const at::Tensor& x);
// An activation's scale, one per tensor: amax / 448 (1 where x is all zeros or not finite).
double e4m3_activation_scale(const at::Tensor& x);
// x / scale in e4m3, as float8_e4m3fn (what an FP8 kernel reads).
at::Tensor e4m3_quantize(const at::Tensor& x, double scale);
// x quantised with `scale` (x / scale rounded to e4m3, times scale).
at::Tensor e4m3_fake_quant(const at::Tensor& x, double scale);
// A convolution's weight in e4m3 with one scale per output channel (dim 0 for conv, dim 1 for
// conv_transpose): w ~ q * scale, q float8_e4m3fn in w's layout, scale [K] in w's dtype
// (amax / 448 of the channel, 1 for an all-zero one).
struct E4m3Weight {
  at::Tensor q, scale;
};
E4m3Weight quantize_weight_e4m3(const at::Tensor& w, bool transposed);
// The same weight back in w's dtype (q * scale): what the emulation computes with.
at::Tensor quantize_weight_per_channel(const at::Tensor& w, bool transposed);

// Which convolutions stay in float32: "none" (every one in FP8), "head" (the first), "tail" (the
// last), "head_tail" (both), "native" (all but those pnp's FP8 kernel takes, fp8_conv_candidates:
// the layers denoiser.precision = "fp8" runs in FP8), "native_wide" (native's, and the candidates
// of fewer than 128 channels in or out: DRUNet's first level), "native_deep" (of fewer than 256:
// DRUNet's first two levels; FP8 where pnp's FP8 kernel beats bf16). Node ids of the kept conv /
// conv_transpose nodes.
std::set<int> fp8_kept_convs(const Graph& g, const std::string& keep);
// The convolutions denoiser.precision = "fp8" runs in FP8 under denoiser.fp8_keep = keep
// (NativeOptions::fp8_convs): the candidates (fp8_conv_candidates) that keep does not keep, in
// the candidates' order. InputError for an unknown keep.
std::vector<int> fp8_run_convs(const Graph& g, const std::string& keep);

// The eager executor with every convolution but the kept ones in emulated FP8 (float32 compute
// on e4m3-rounded inputs and weights). InputError for an unknown `keep`.
std::unique_ptr<Executor> make_fp8_emulated(const Graph& g, const Weights& weights, at::Device device,
                                            const std::string& keep);
// The same with the quantised convolutions named (conv / conv_transpose node ids) and the name
// name() reports: the reference of the native executor's FP8 path, which quantises the
// convolutions its kernel takes (NativeOptions::fp8_convs).
std::unique_ptr<Executor> make_fp8_emulated(const Graph& g, const Weights& weights, at::Device device,
                                            const std::set<int>& quantised, const std::string& name);

}  // namespace pnp::nn
