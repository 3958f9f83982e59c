// A 2×2, stride-2 transposed convolution (DRUNet's upsampling, padding 0) as matrix products on
// channels-last tensors, written straight into its output (the executor's CUDA path;
// NativeOptions::nhwc_kernels).
//
// With kernel = stride = 2 the taps do not overlap: output pixel (2i + a, 2j + b) is tap (a, b)'s
// product with input pixel (i, j) alone, y[n, :, 2i + a, 2j + b] = W[:, :, a, b]ᵀ x[n, :, i, j].
// In channels-last memory, for one image row i and one output-row parity a, the outputs of the
// W input pixels are W runs of 2 C_out values (pixels 2j and 2j + 1, channels (b, k) as b C_out +
// k), 2 C_out apart, in output row 2i + a: a W x 2 C_out matrix with leading dimension 2 C_out,
// the product of the row's W x C_in input pixels and W_a = W[:, :, a, :] as C_in x 2 C_out. So
// each parity is one strided-batched cuBLAS product over the N H image rows (batch stride 4 W
// C_out in the output, W C_in in the input, 0 in the weight), and no shuffle pass is needed.
//
// Where cuDNN runs a dgrad kernel (DRUNet 1 ch 4096² fp32: 7.57 ms for two of its three
// upsamplings, 1.21 ms for the third, H200, docs/performance.md#native-kernels), the products'
// floor is their bytes: the input read once per parity, the output written once.
// float32 uses TF32 tensor cores exactly where ATen's cuDNN convolutions do
// (at::globalContext().allowTF32CuDNN()); bf16 accumulates in float32, as cuDNN does.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace pnp::nn::native {

// Whether stride2_transposed takes y = conv_transpose2d(x, w) with these settings and no bias:
// CUDA, float32 or bf16 (w of x's dtype), w [C_in, C_out, 2, 2], stride 2, padding 0, output
// padding 0, groups 1, x and y channels-last with y [N, C_out, 2H, 2W] of x's dtype, channel
// counts and pointers that keep every matrix 16-byte aligned.
bool stride2_transposed_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                                const std::vector<int64_t>& padding, const std::vector<int64_t>& output_padding,
                                int64_t groups, const at::Tensor& y);

// w [C_in, C_out, 2, 2] -> [C_in, 2, 2, C_out] contiguous (W_a of parity a is its [:, a] slice,
// rows 4 C_out apart), in w's dtype and on w's device. On a CUDA device it also makes the calling
// thread's cuBLAS handle there: cublasCreate allocates, which a CUDA graph capture forbids, and
// the executor's capture from the plan cache runs nothing before it (without it, that capture
// failed and fell back to a cold compile: docs/performance.md#compile-time-and-the-plan-cache).
at::Tensor stride2_transposed_weight(const at::Tensor& w);

// cuBLAS's first-use work for these products done ahead: each parity's product run once for one
// image row (batch 1: m, n and k as the real ones) on scratch tensors, on a stream and cuBLAS
// handle of the calling thread's own, synchronised. The executor runs it on a thread of its own
// beside the plan cache's loading, and joins it before a capture: the capture from the plan
// cache took 0.181 s with the products' first calls in it, 0.075 s before them
// (docs/performance.md#compile-time-and-the-plan-cache). Errors are swallowed: the products' own calls report them.
void stride2_transposed_warm(int64_t c_in, int64_t c_out, int64_t w, at::ScalarType dtype, at::Device device);

// y = conv_transpose2d(x, w, stride 2), wt = stride2_transposed_weight(w), y written in place on
// the current stream. Throws pnp::Error where stride2_transposed_applies is false for (x, the
// weight wt came from, y) or cuBLAS fails.
void stride2_transposed(const at::Tensor& x, const at::Tensor& wt, at::Tensor& y);

}  // namespace pnp::nn::native
