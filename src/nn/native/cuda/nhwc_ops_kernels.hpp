// The raw launchers of pnp's memory-bound NHWC kernels (nhwc_ops_kernels.cu; the tensor
// interface is nhwc_ops.hpp). Plain types only, so this compiles without ATen in nvcc.
#pragma once

namespace pnp::nn::native::kernels {

// The phase shuffle: y[i][2m + a][2n + b][off + c] = act(p[i][m + a][n + b][(2a + b) C + c] + b[c])
// for c < C, and the other part's channels around them: y[..][c'] = other[..][c' < off ? c' :
// c' - C]. p: [n][h + 1][w + 1][4 C]; other: [n][2h][2w][C2] (null when C2 = 0); y: [n][2h][2w][C
// + C2]; off 0 (the phases first) or C2. Every tensor contiguous NHWC, float32 or bf16 (all the
// same), 16-byte aligned; C and C2 multiples of 16 bytes of elements; act: ReLU or none.
struct PhaseShuffleArgs {
  const void* p = nullptr;
  const void* b = nullptr;
  const void* other = nullptr;
  void* y = nullptr;
  int n = 0, h = 0, w = 0, c = 0, c2 = 0, off = 0;
  bool relu = false, bf16 = false;
};

// Launches it on the CUDA stream; false when the arguments are outside the above or the launch failed.
bool launch_phase_shuffle(const PhaseShuffleArgs& a, void* stream);

// The 2 x 2 max pool with stride 2 and no padding: y[i][r][s][c] = max of x[i][2r + u][2s + v][c]
// (u, v in 0, 1; NaN wins, as in ATen's max_pool2d). x: [n][h][w][c], y: [n][h / 2][w / 2][c],
// contiguous NHWC, float32 or bf16, 16-byte aligned, c a multiple of 16 bytes of elements.
struct MaxPool2Args {
  const void* x = nullptr;
  void* y = nullptr;
  int n = 0, h = 0, w = 0, c = 0;
  bool bf16 = false;
};

// Launches it on the CUDA stream; false as launch_phase_shuffle.
bool launch_max_pool2(const MaxPool2Args& a, void* stream);

// An activation into FP8 for pnp's e4m3 convolutions: y[i] = e4m3(x[i] * inv_scale), rounded to
// nearest even with saturation at +-448 (as the FP8 tile kernel's e4m3 output, wgmma_sm90.cuh).
// x bf16, y float8_e4m3fn, n elements (a multiple of 8), both 16-byte aligned.
struct E4m3QuantizeArgs {
  const void* x = nullptr;
  void* y = nullptr;
  long long n = 0;
  float inv_scale = 1.f;
};

// Launches it on the CUDA stream; false as launch_phase_shuffle.
bool launch_e4m3_quantize(const E4m3QuantizeArgs& a, void* stream);

}  // namespace pnp::nn::native::kernels
