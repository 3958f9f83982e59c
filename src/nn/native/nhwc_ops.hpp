// pnp's memory-bound NHWC kernels on tensors (nhwc_ops_kernels.cu). CUDA builds only.
//
// The phase shuffle finishes a ×2 nearest upsample and its 3×3 convolution (upsample_conv.hpp)
// run as one convolution of the four output phases: a 2×2 convolution, padding 1, of the
// upsample's input to 4 C_out channels (upsample_conv_phase_weight), whose output pixel (m + a,
// n + b) holds phase (a, b) of output pixel (2m + a, 2n + b). The shuffle writes each phase to
// its pixel with the bias and ReLU, and the concat's other part around it, in one pass: where
// cuDNN's transposed convolution (a dgrad kernel) would be followed by ATen's bias add, ReLU and
// concat, three more passes over the output (UNet 3 ch 2048², H200: dgrad 5.0 ms, the bias adds
// 1.38, ReLUs 0.89, concats 2.13 ms for its three Up levels, docs/performance.md#native-kernels).
// With the phase convolutions and the shuffle (2.10 ms for three), and the max pool below, UNet 3
// ch 2048² went from 24.42 to 18.81 ms in one call (docs/performance.md#native-kernels).
//
// The 2×2 max pool (stride 2, no padding) in one read of the input: ATen's NHWC kernel took
// 1.28 ms for UNet 3 ch 2048²'s three, where the bytes take about 0.4 ms.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace pnp::nn::native {

// Whether phase_shuffle takes a ×2 upsample convolution of x (CUDA, float32 or bf16, [n, C_in, h,
// w]) to c channels, written into y ([n, c + C2, 2h, 2w]) with other (null, or [n, C2, 2h, 2w])
// around it, and bias b (null, or [c]): y and other channels-last, all of x's dtype and 16-byte
// aligned, c and C2 multiples of 16 bytes of elements.
bool phase_shuffle_applies(const at::Tensor& x, int64_t c, const at::Tensor* b, const at::Tensor* other,
                           const at::Tensor& y);

// y[:, off : off + c] = act(the phases of p + b), y's other channels = other's (nhwc_ops_kernels.hpp:
// off = C2 when other_first, else 0), on the current CUDA stream. p: [n, 4c, h + 1, w + 1]
// channels-last, the phase convolution's output (channel (2a + b) c + k: phase (a, b), channel k).
// Throws pnp::Error where phase_shuffle_applies is false for p's shapes.
void phase_shuffle(const at::Tensor& p, const at::Tensor* b, bool relu, const at::Tensor* other, bool other_first,
                   at::Tensor& y);

// Whether max_pool2 takes this max pool: CUDA, 2D, float32 or bf16, x channels-last and aligned,
// C a multiple of 16 bytes of elements, kernel 2, stride 2, padding 0 on both axes.
bool max_pool2_applies(const at::Tensor& x, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                       const std::vector<int64_t>& padding);

// The max pool of max_pool2_applies into a new channels-last tensor, on the current CUDA stream.
at::Tensor max_pool2(const at::Tensor& x);

// Whether e4m3_quantize_nhwc takes x: CUDA, bf16, 4D channels-last, 16-byte aligned, C a
// multiple of 8.
bool e4m3_quantize_nhwc_applies(const at::Tensor& x);

// x / scale in float8_e4m3fn (round to nearest even, saturating at +-448: pnp/nn/fp8.hpp's
// e4m3_quantize, computed as x times 1 / scale in float32), channels-last, in one pass on the
// current CUDA stream: an FP8 convolution's input (wgmma_conv.hpp). Throws pnp::Error where
// e4m3_quantize_nhwc_applies is false or scale is not positive and finite.
at::Tensor e4m3_quantize_nhwc(const at::Tensor& x, double scale);

}  // namespace pnp::nn::native
