// Internal kernel entry points of the projector (raw pointers; no torch types so that the
// CUDA translation unit does not need the torch headers).
#pragma once

#include <cstdint>

namespace pnp::physics::detail {

// out[K][n_det] (contiguous) = A restricted to the box with origin (r0, c0) applied to the
// tile img[rows][cols] with row stride ld. angles: K doubles (degrees) in the same memory.
template <typename T>
void forward_cpu(const T* img, int64_t ld, int64_t rows, int64_t cols, const double* angles, int64_t K,
                 int64_t n, int64_t n_det, int64_t r0, int64_t c0, T* out);

// out[rows][cols] (row stride ld_out) = the box (r0, c0, rows, cols) of A^T sino, sino [K][n_det] contiguous.
template <typename T>
void adjoint_cpu(const T* sino, const double* angles, int64_t K, int64_t n, int64_t n_det, int64_t r0,
                 int64_t c0, int64_t rows, int64_t cols, T* out, int64_t ld_out);

#ifdef PNP_HAVE_CUDA
// CUDA versions: asynchronous on `stream` (a cudaStream_t); return nullptr or the CUDA
// error string of the launch. `angles` is device memory. The forward also writes the tile's
// transpose into imgT ([cols][ldT] scratch); img and imgT need 16-byte aligned rows (base
// aligned, ld and ldT whole multiples of 16 bytes).
template <typename T>
const char* forward_cuda(const T* img, int64_t ld, T* imgT, int64_t ldT, int64_t rows, int64_t cols,
                         const double* angles, int64_t K, int64_t n, int64_t n_det, int64_t r0, int64_t c0, T* out,
                         void* stream);
template <typename T>
const char* adjoint_cuda(const T* sino, const double* angles, int64_t K, int64_t n, int64_t n_det, int64_t r0,
                         int64_t c0, int64_t rows, int64_t cols, T* out, int64_t ld_out, void* stream);
// out[rows][cols] (contiguous) = the power method's start vector on the box with origin
// (r0, c0) of an n x n image (power_start_value, rounded to T).
template <typename T>
const char* power_start_cuda(T* out, int64_t rows, int64_t cols, int64_t n, int64_t r0, int64_t c0, uint64_t key,
                             void* stream);
#endif

}  // namespace pnp::physics::detail
