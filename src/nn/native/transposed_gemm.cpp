// The 2×2, stride-2 transposed convolution as two strided-batched cuBLAS products
// (transposed_gemm.hpp).
#include "transposed_gemm.hpp"

#include "cuda_conv_checks.hpp"
#include "pnp/core.hpp"

#include <ATen/Context.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>

#include <dlfcn.h>

#include <climits>
#include <string>

namespace pnp::nn::native {

namespace {

// cuBLAS's strided-batched product from the libcublas LibTorch loaded (libtorch_cuda needs it;
// the executor's handle comes from ATen), looked up rather than linked: a second link of
// libcublas, the toolkit's or the wheel's, would tie the runtime search path of every pnp
// program to one of two directories that both hold libcudart and libcublas, and could pair one
// copy's libcublas with the other's libcublasLt. Null if absent.
using GemmStridedBatchedEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, long long, const void*,
                                                cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                                long long, int, cublasComputeType_t, cublasGemmAlgo_t);
static_assert(sizeof(static_cast<GemmStridedBatchedEx>(&cublasGemmStridedBatchedEx)) > 0,  // (unevaluated: no link)
              "the header's declaration has this type");
GemmStridedBatchedEx gemm_fn() {
  static const auto fn = reinterpret_cast<GemmStridedBatchedEx>(dlsym(RTLD_DEFAULT, "cublasGemmStridedBatchedEx"));
  return fn;
}

// x [N, C_in, H, W] and y's shape, dtype and layout (the weight's shape checked by the callers)
bool fits(const at::Tensor& x, int64_t c_out, const at::Tensor& y) {
  if (!x.is_cuda() || !nhwc(x) || !nhwc(y) || !y.is_cuda() || y.device() != x.device()) return false;
  const auto dt = x.scalar_type();
  if ((dt != at::kFloat && dt != at::kBFloat16) || y.scalar_type() != dt) return false;
  const int64_t n = x.size(0), ci = x.size(1), h = x.size(2), w = x.size(3);
  if (y.sizes().vec() != std::vector<int64_t>{n, c_out, 2 * h, 2 * w} || n * h > INT_MAX || w > INT_MAX) return false;
  // 16-byte matrices: C_in and 2 C_out whole 16-byte runs, so every row and parity offset is
  const int64_t v = 16 / x.element_size();
  return ci % v == 0 && (2 * c_out) % v == 0 && 4 * c_out <= INT_MAX && ci <= INT_MAX && aligned16(x) && aligned16(y) &&
         gemm_fn() != nullptr;
}

// cuBLAS's own name for a status (cublasGetStatusString, looked up like the product)
std::string status_name(cublasStatus_t s) {
  using Name = const char* (*)(cublasStatus_t);
  static const auto fn = reinterpret_cast<Name>(dlsym(RTLD_DEFAULT, "cublasGetStatusString"));
  return fn ? fn(s) : "status " + std::to_string(static_cast<int>(s));
}

}  // namespace

bool stride2_transposed_applies(const at::Tensor& x, const at::Tensor& w, const std::vector<int64_t>& stride,
                                const std::vector<int64_t>& padding, const std::vector<int64_t>& output_padding,
                                int64_t groups, const at::Tensor& y) {
  if (x.dim() != 4 || w.dim() != 4 || groups != 1 || w.scalar_type() != x.scalar_type()) return false;
  if (w.size(0) != x.size(1) || w.size(2) != 2 || w.size(3) != 2) return false;
  if (stride != std::vector<int64_t>{2, 2} || padding != std::vector<int64_t>{0, 0} ||
      output_padding != std::vector<int64_t>{0, 0})
    return false;
  return fits(x, w.size(1), y);
}

at::Tensor stride2_transposed_weight(const at::Tensor& w) {
  if (w.dim() != 4 || w.size(2) != 2 || w.size(3) != 2)
    throw Error("stride2_transposed_weight: a [C_in, C_out, 2, 2] weight expected");
  if (w.is_cuda()) {
    const c10::cuda::CUDAGuard guard(w.device());
    (void)at::cuda::getCurrentCUDABlasHandle();
  }
  return w.permute({0, 2, 3, 1}).contiguous();
}

void stride2_transposed_warm(int64_t c_in, int64_t c_out, int64_t w, at::ScalarType dtype, at::Device device) {
  try {
    const c10::cuda::CUDAGuard guard(device);
    const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool(false, device.index());
    const c10::cuda::CUDAStreamGuard on(stream);
    const auto o = at::TensorOptions().dtype(dtype).device(device);
    const at::Tensor x = at::zeros({1, c_in, 1, w}, o).contiguous(at::MemoryFormat::ChannelsLast);
    const at::Tensor wt = at::zeros({c_in, 2, 2, c_out}, o);
    at::Tensor y = at::empty({1, c_out, 2, 2 * w}, o).contiguous(at::MemoryFormat::ChannelsLast);
    stride2_transposed(x, wt, y);
    stream.synchronize();
  } catch (...) {
    (void)cudaGetLastError();
  }
}

void stride2_transposed(const at::Tensor& x, const at::Tensor& wt, at::Tensor& y) {
  if (wt.dim() != 4 || wt.size(0) != x.size(1) || wt.size(1) != 2 || wt.size(2) != 2 || !wt.is_contiguous() ||
      wt.scalar_type() != x.scalar_type() || !wt.is_cuda() || !aligned16(wt) || !fits(x, wt.size(3), y))
    throw Error("stride2_transposed: x, the weight and y must be aligned channels-last CUDA tensors of one dtype "
                "(float32 or bf16), x [N, C_in, H, W], the weight [C_in, 2, 2, C_out], y [N, C_out, 2H, 2W]");
  const int64_t n = x.size(0), ci = x.size(1), h = x.size(2), w = x.size(3), co = wt.size(3);
  if (n * h * w == 0 || co == 0) return;
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  const cudaDataType_t type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute =
      !bf16 && at::globalContext().allowTF32CuDNN() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const float one = 1.f, zero = 0.f;
  const int64_t es = x.element_size();
  cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();  // on the current stream, with ATen's workspace
  const GemmStridedBatchedEx gemm = gemm_fn();
  for (int64_t a = 0; a < 2; ++a) {
    // column-major: y's rows of parity a (2 C_out x W, ld 2 C_out) = W_a (2 C_out x C_in, ld 4 C_out)
    // times the input row (C_in x W, ld C_in), for each of the N H image rows
    const auto* wa = static_cast<const char*>(wt.data_ptr()) + a * 2 * co * es;
    auto* ya = static_cast<char*>(y.data_ptr()) + a * 2 * w * co * es;
    const cublasStatus_t st = gemm(
        handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(2 * co), static_cast<int>(w), static_cast<int>(ci), &one, wa,
        type, static_cast<int>(4 * co), 0, x.data_ptr(), type, static_cast<int>(ci), w * ci, &zero, ya, type,
        static_cast<int>(2 * co), 4 * w * co, static_cast<int>(n * h), compute, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) throw Error(std::string("stride2_transposed: cuBLAS ") + status_name(st));
  }
}

}  // namespace pnp::nn::native
