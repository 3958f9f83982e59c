// A C entry point to pnp's Hopper convolution kernels for the Python harness beside it
// (kernels.py): builds with nvcc alone, no ATen, so a kernel can be checked and timed against
// torch's cuDNN on the GPU machine without building pnp.
//   nvcc -shared -Xcompiler -fPIC -O3 -gencode=arch=compute_90a,code=sm_90a -I<cutlass include> \
//     -I src/nn/native docs/measurements/2026-12-03/kdev.cu src/nn/native/wgmma_rows_kernels.cu \
//     src/nn/native/wgmma_conv_kernels.cu -o libkdev.so
#include "wgmma_conv_kernels.hpp"

using pnp::nn::native::kernels::WgmmaConvArgs;

// kernel 1: the tile kernel; 2: the persistent rows kernel. 3 x 3, padding 1, NHWC, KRSC
// weights. 0 when launched.
extern "C" int pnp_conv(int kernel, const void* x, const void* w, const void* b, const void* z, void* y, int n, int h,
                        int w_in, int ci, int co, int relu, int bf16) {
  WgmmaConvArgs a;
  a.x = x, a.w = w, a.b = b, a.z = z, a.y = y;
  a.n = n, a.h = h, a.w_in = w_in, a.ci = ci, a.co = co, a.oh = h, a.ow = w_in;
  a.kh = 3, a.kw = 3, a.pad_h = 1, a.pad_w = 1;
  a.relu = relu != 0, a.bf16 = bf16 != 0;
  a.kernel = kernel == 2 ? pnp::nn::native::kernels::WgmmaKernel::rows : pnp::nn::native::kernels::WgmmaKernel::tiles;
  return pnp::nn::native::kernels::launch_wgmma_conv(a, nullptr) ? 0 : 1;
}
