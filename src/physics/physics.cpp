// Public physics API, the torch custom ops pnp::radon_forward / pnp::radon_adjoint (CPU,
// CUDA and Meta kernels) and their registration. The registration lives in this
// translation unit, next to the wrappers that call the ops, so a static link keeps it.
#include <pnp/physics.hpp>

#include "joseph_math.hpp"
#include "kernels.hpp"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#ifdef PNP_HAVE_CUDA
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <cmath>
#include <sstream>

namespace pnp::physics {

void cos_sin_deg(double deg, double& c, double& s) { detail::cos_sin_deg(deg, c, s); }

// ---------------------------------------------------------------------------------------
// Geometry

Geometry Geometry::standard(int64_t n, int64_t n_angles, int64_t n_det) {
  if (n <= 0) throw InputError("physics geometry: image size n must be positive, got " + std::to_string(n));
  if (n_angles <= 0) throw InputError("physics geometry: the number of angles must be positive, got " + std::to_string(n_angles));
  if (n_det < 0) throw InputError("physics geometry: n_det must be >= 0 (0 means ceil(sqrt(2) n)), got " + std::to_string(n_det));
  Geometry g;
  g.n = n;
  g.n_det = n_det > 0 ? n_det : static_cast<int64_t>(std::ceil(std::sqrt(2.0) * static_cast<double>(n)));
  g.angles_deg.resize(static_cast<size_t>(n_angles));
  for (int64_t k = 0; k < n_angles; ++k)
    g.angles_deg[static_cast<size_t>(k)] = static_cast<double>(k) * 180.0 / static_cast<double>(n_angles);
  return g;
}

void Geometry::validate() const {
  if (n <= 0) throw InputError("physics geometry: image size n must be positive, got " + std::to_string(n));
  if (n_det <= 0) throw InputError("physics geometry: n_det must be positive, got " + std::to_string(n_det));
  if (angles_deg.empty()) throw InputError("physics geometry: no projection angles");
  if (n > (int64_t{1} << 30) || n_det > (int64_t{1} << 30))
    throw InputError("physics geometry: image or detector larger than 2^30");
  for (double a : angles_deg)
    if (!std::isfinite(a)) throw InputError("physics geometry: non-finite projection angle");
}

at::Tensor Geometry::angles_tensor(at::Device device) const {
  std::lock_guard<std::mutex> lock(cache_->mu);
  if (cache_->key != angles_deg) {
    cache_->by_device.clear();
    cache_->key = angles_deg;
  }
  const std::string key = device.str();
  auto it = cache_->by_device.find(key);
  if (it != cache_->by_device.end()) return it->second;
  auto host = at::from_blob(const_cast<double*>(angles_deg.data()), {n_angles()}, at::kDouble).clone();
  auto t = device.is_cpu() ? host : host.to(device);
  cache_->by_device.emplace(key, t);
  return t;
}

// ---------------------------------------------------------------------------------------
// Kernels behind the ops

namespace {

void check_float_type(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble, what,
              " must be float32 or float64, got ", t.scalar_type());
}

// Rows of a row-major 2-D view: stride(1) == 1 (or one column), stride(0) >= cols.
bool row_major_view(const at::Tensor& t) {
  if (t.dim() != 2) return false;
  if (t.size(1) > 1 && t.stride(1) != 1) return false;
  if (t.size(0) > 1 && t.stride(0) < t.size(1)) return false;
  return true;
}

int64_t row_stride(const at::Tensor& t) { return t.size(0) > 1 ? t.stride(0) : t.size(1); }

at::Tensor angles_on(const at::Tensor& angles, const at::Device& dev) {
  TORCH_CHECK(angles.dim() == 1, "pnp radon: angles must be a 1-D tensor of degrees");
  auto a = angles;
  if (a.scalar_type() != at::kDouble || a.device() != dev) a = a.to(dev, at::kDouble);
  return a.contiguous();
}

void check_box(int64_t n, int64_t n_det, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  TORCH_CHECK(n > 0 && n_det > 0, "pnp radon: n and n_det must be positive");
  TORCH_CHECK(0 <= r0 && r0 <= r1 && r1 <= n && 0 <= c0 && c0 <= c1 && c1 <= n, "pnp radon: box [", r0, ",", r1,
              ")x[", c0, ",", c1, ") is not inside the ", n, "x", n, " image");
}

#ifdef PNP_HAVE_CUDA
void cuda_check(const char* err, const char* what) {
  TORCH_CHECK(err == nullptr, what, ": CUDA error: ", err ? err : "");
}
#endif

// out [K, n_det] contiguous, same dtype and device as tile; tile a row-major view.
void forward_into(const at::Tensor& tile, const at::Tensor& angles, int64_t n, int64_t n_det, int64_t r0,
                  int64_t c0, at::Tensor& out) {
  const int64_t K = angles.size(0);
  const int64_t rows = tile.size(0), cols = tile.size(1), ld = row_stride(tile);
  TORCH_CHECK(out.is_contiguous() && out.dim() == 2 && out.size(0) == K && out.size(1) == n_det,
              "pnp radon_forward: out must be a contiguous [", K, ", ", n_det, "] tensor");
  TORCH_CHECK(out.scalar_type() == tile.scalar_type() && out.device() == tile.device(),
              "pnp radon_forward: out must have the tile's dtype and device");
  TORCH_CHECK(angles.device() == tile.device() && angles.scalar_type() == at::kDouble && angles.is_contiguous(),
              "pnp radon_forward: angles must be float64 on the tile's device");
  if (tile.is_cuda()) {
#ifdef PNP_HAVE_CUDA
    c10::cuda::CUDAGuard guard(tile.device());
    void* st = c10::cuda::getCurrentCUDAStream(tile.device().index()).stream();
    // The kernel stages 16-byte pieces of memory rows: of the tile (row-stepping angles) and of
    // its transpose (column-stepping ones, written by forward_cuda into `tt`), both with a
    // 16-byte aligned base and a row stride of whole pieces (else an aligned copy of the tile).
    const int64_t v = 16 / tile.element_size();
    auto padded = [&](int64_t r, int64_t c) { return at::empty({r, (c + v - 1) / v * v}, tile.options()).narrow(1, 0, c); };
    at::Tensor t = tile;
    if (rows > 0 && cols > 0 &&
        (tile.stride(1) != 1 || (rows > 1 && ld % v != 0) || reinterpret_cast<uintptr_t>(tile.data_ptr()) % 16 != 0)) {
      t = padded(rows, cols);
      t.copy_(tile);
    }
    at::Tensor tt = padded(cols, rows);
    // (one row: its stride is never used, any whole number of pieces will do)
    const int64_t ldt = rows > 1 ? t.stride(0) : (cols + v - 1) / v * v, ldtt = (rows + v - 1) / v * v;
    if (tile.scalar_type() == at::kFloat)
      cuda_check(detail::forward_cuda<float>(t.data_ptr<float>(), ldt, tt.data_ptr<float>(), ldtt, rows, cols,
                                             angles.data_ptr<double>(), K, n, n_det, r0, c0, out.data_ptr<float>(), st),
                 "pnp radon_forward");
    else
      cuda_check(detail::forward_cuda<double>(t.data_ptr<double>(), ldt, tt.data_ptr<double>(), ldtt, rows, cols,
                                              angles.data_ptr<double>(), K, n, n_det, r0, c0, out.data_ptr<double>(), st),
                 "pnp radon_forward");
#else
    TORCH_CHECK(false, "pnp radon_forward: this build of pnp has no CUDA kernels (PNP_WITH_CUDA=OFF)");
#endif
  } else {
    TORCH_CHECK(tile.is_cpu(), "pnp radon_forward: unsupported device ", tile.device());
    if (tile.scalar_type() == at::kFloat)
      detail::forward_cpu<float>(tile.data_ptr<float>(), ld, rows, cols, angles.data_ptr<double>(), K, n, n_det, r0,
                                 c0, out.data_ptr<float>());
    else
      detail::forward_cpu<double>(tile.data_ptr<double>(), ld, rows, cols, angles.data_ptr<double>(), K, n, n_det,
                                  r0, c0, out.data_ptr<double>());
  }
}

// out [rows, cols] row-major view; sino [K, n_det] contiguous, same dtype/device.
void adjoint_into(const at::Tensor& sino, const at::Tensor& angles, int64_t n, int64_t n_det, int64_t r0,
                  int64_t c0, at::Tensor& out) {
  const int64_t K = angles.size(0);
  const int64_t rows = out.size(0), cols = out.size(1), ld = row_stride(out);
  TORCH_CHECK(sino.is_contiguous() && sino.dim() == 2 && sino.size(0) == K && sino.size(1) == n_det,
              "pnp radon_adjoint: sino must be a contiguous [", K, ", ", n_det, "] tensor, got ", sino.sizes());
  TORCH_CHECK(out.scalar_type() == sino.scalar_type() && out.device() == sino.device(),
              "pnp radon_adjoint: out must have the sinogram's dtype and device");
  TORCH_CHECK(angles.device() == sino.device() && angles.scalar_type() == at::kDouble && angles.is_contiguous(),
              "pnp radon_adjoint: angles must be float64 on the sinogram's device");
  if (sino.is_cuda()) {
#ifdef PNP_HAVE_CUDA
    c10::cuda::CUDAGuard guard(sino.device());
    void* st = c10::cuda::getCurrentCUDAStream(sino.device().index()).stream();
    if (sino.scalar_type() == at::kFloat)
      cuda_check(detail::adjoint_cuda<float>(sino.data_ptr<float>(), angles.data_ptr<double>(), K, n, n_det, r0, c0,
                                             rows, cols, out.data_ptr<float>(), ld, st),
                 "pnp radon_adjoint");
    else
      cuda_check(detail::adjoint_cuda<double>(sino.data_ptr<double>(), angles.data_ptr<double>(), K, n, n_det, r0,
                                              c0, rows, cols, out.data_ptr<double>(), ld, st),
                 "pnp radon_adjoint");
#else
    TORCH_CHECK(false, "pnp radon_adjoint: this build of pnp has no CUDA kernels (PNP_WITH_CUDA=OFF)");
#endif
  } else {
    TORCH_CHECK(sino.is_cpu(), "pnp radon_adjoint: unsupported device ", sino.device());
    if (sino.scalar_type() == at::kFloat)
      detail::adjoint_cpu<float>(sino.data_ptr<float>(), angles.data_ptr<double>(), K, n, n_det, r0, c0, rows, cols,
                                 out.data_ptr<float>(), ld);
    else
      detail::adjoint_cpu<double>(sino.data_ptr<double>(), angles.data_ptr<double>(), K, n, n_det, r0, c0, rows,
                                  cols, out.data_ptr<double>(), ld);
  }
}

// --- op kernels (CPU and CUDA share these; the device is read from the tensors) ---------

at::Tensor radon_forward_kernel(const at::Tensor& tile, const at::Tensor& angles, int64_t n, int64_t n_det,
                                int64_t r0, int64_t c0) {
  TORCH_CHECK(tile.dim() == 2, "pnp::radon_forward: tile must be 2-D, got ", tile.sizes());
  check_float_type(tile, "pnp::radon_forward: tile");
  check_box(n, n_det, r0, r0 + tile.size(0), c0, c0 + tile.size(1));
  const at::Tensor t = row_major_view(tile) ? tile : tile.contiguous();
  const at::Tensor a = angles_on(angles, tile.device());
  at::Tensor out = at::empty({a.size(0), n_det}, tile.options());
  forward_into(t, a, n, n_det, r0, c0, out);
  return out;
}

at::Tensor radon_adjoint_kernel(const at::Tensor& sino, const at::Tensor& angles, int64_t n, int64_t n_det,
                                int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  TORCH_CHECK(sino.dim() == 2, "pnp::radon_adjoint: sino must be 2-D, got ", sino.sizes());
  check_float_type(sino, "pnp::radon_adjoint: sino");
  check_box(n, n_det, r0, r1, c0, c1);
  const at::Tensor a = angles_on(angles, sino.device());
  const at::Tensor y = sino.contiguous();
  at::Tensor out = at::empty({r1 - r0, c1 - c0}, sino.options());
  adjoint_into(y, a, n, n_det, r0, c0, out);
  return out;
}

at::Tensor radon_forward_meta(const at::Tensor& tile, const at::Tensor& angles, int64_t n, int64_t n_det,
                              int64_t r0, int64_t c0) {
  TORCH_CHECK(tile.dim() == 2, "pnp::radon_forward: tile must be 2-D, got ", tile.sizes());
  check_float_type(tile, "pnp::radon_forward: tile");
  check_box(n, n_det, r0, r0 + tile.size(0), c0, c0 + tile.size(1));
  TORCH_CHECK(angles.dim() == 1, "pnp::radon_forward: angles must be 1-D");
  return at::empty({angles.size(0), n_det}, tile.options());
}

at::Tensor radon_adjoint_meta(const at::Tensor& sino, const at::Tensor& angles, int64_t n, int64_t n_det,
                              int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  TORCH_CHECK(sino.dim() == 2 && sino.size(1) == n_det && sino.size(0) == angles.size(0),
              "pnp::radon_adjoint: sino must be [K, n_det]");
  check_float_type(sino, "pnp::radon_adjoint: sino");
  check_box(n, n_det, r0, r1, c0, c1);
  return at::empty({r1 - r0, c1 - c0}, sino.options());
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(pnp, m) {
  m.def("radon_forward(Tensor tile, Tensor angles, int n, int n_det, int r0, int c0) -> Tensor");
  m.def("radon_adjoint(Tensor sino, Tensor angles, int n, int n_det, int r0, int r1, int c0, int c1) -> Tensor");
}
TORCH_LIBRARY_IMPL(pnp, CPU, m) {
  m.impl("radon_forward", &radon_forward_kernel);
  m.impl("radon_adjoint", &radon_adjoint_kernel);
}
#ifdef PNP_HAVE_CUDA
TORCH_LIBRARY_IMPL(pnp, CUDA, m) {
  m.impl("radon_forward", &radon_forward_kernel);
  m.impl("radon_adjoint", &radon_adjoint_kernel);
}
#endif
TORCH_LIBRARY_IMPL(pnp, Meta, m) {
  m.impl("radon_forward", &radon_forward_meta);
  m.impl("radon_adjoint", &radon_adjoint_meta);
}

// ---------------------------------------------------------------------------------------
// Public wrappers

namespace {

void check_geometry_box(const Geometry& g, const Box& box, const char* what) {
  try {
    g.validate();
  } catch (const Error&) {
    rethrow_with_context(what);
  }
  if (box.r0 < 0 || box.c0 < 0 || box.r1 > g.n || box.c1 > g.n || box.r1 < box.r0 || box.c1 < box.c0)
    throw Error(std::string(what) + ": box " + pnp::to_string(box) + " is not inside the " + std::to_string(g.n) +
                "x" + std::to_string(g.n) + " image");
}

std::string shape_str(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

void check_tile(const at::Tensor& tile, const Box& box, const char* what) {
  if (!tile.defined() || tile.dim() != 2 || tile.size(0) != box.rows() || tile.size(1) != box.cols())
    throw Error(std::string(what) + ": tile must be [" + std::to_string(box.rows()) + ", " +
                std::to_string(box.cols()) + "] for box " + pnp::to_string(box) + ", got " +
                (tile.defined() ? shape_str(tile) : std::string("undefined")));
  if (tile.scalar_type() != at::kFloat && tile.scalar_type() != at::kDouble)
    throw Error(std::string(what) + ": tile must be float32 or float64");
}

void check_sino(const at::Tensor& sino, const Geometry& g, const char* what) {
  if (!sino.defined() || sino.dim() != 2 || sino.size(0) != g.n_angles() || sino.size(1) != g.n_det)
    throw Error(std::string(what) + ": sinogram must be [" + std::to_string(g.n_angles()) + ", " +
                std::to_string(g.n_det) + "], got " + (sino.defined() ? shape_str(sino) : std::string("undefined")));
  if (sino.scalar_type() != at::kFloat && sino.scalar_type() != at::kDouble)
    throw Error(std::string(what) + ": sinogram must be float32 or float64");
}

const c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t, int64_t)>&
forward_op() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("pnp::radon_forward", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t, int64_t)>();
  return op;
}

const c10::TypedOperatorHandle<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t, int64_t,
                                          int64_t, int64_t)>&
adjoint_op() {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("pnp::radon_adjoint", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t)>();
  return op;
}

}  // namespace

at::Tensor forward(const at::Tensor& tile, const Geometry& g, const Box& box) {
  check_geometry_box(g, box, "physics forward");
  check_tile(tile, box, "physics forward");
  return forward_op().call(tile, g.angles_tensor(tile.device()), g.n, g.n_det, box.r0, box.c0);
}

void forward_out(const at::Tensor& tile, const Geometry& g, const Box& box, at::Tensor& out) {
  check_geometry_box(g, box, "physics forward_out");
  check_tile(tile, box, "physics forward_out");
  if (!out.defined() || out.dim() != 2 || out.size(0) != g.n_angles() || out.size(1) != g.n_det ||
      !out.is_contiguous() || out.scalar_type() != tile.scalar_type() || out.device() != tile.device())
    throw Error("physics forward_out: out must be a contiguous [" + std::to_string(g.n_angles()) + ", " +
                std::to_string(g.n_det) + "] tensor with the tile's dtype and device");
  const at::Tensor t = row_major_view(tile) ? tile : tile.contiguous();
  forward_into(t, g.angles_tensor(tile.device()), g.n, g.n_det, box.r0, box.c0, out);
}

at::Tensor adjoint(const at::Tensor& sino, const Geometry& g, const Box& box) {
  check_geometry_box(g, box, "physics adjoint");
  check_sino(sino, g, "physics adjoint");
  return adjoint_op().call(sino, g.angles_tensor(sino.device()), g.n, g.n_det, box.r0, box.r1, box.c0, box.c1);
}

void adjoint_out(const at::Tensor& sino, const Geometry& g, const Box& box, at::Tensor& out) {
  check_geometry_box(g, box, "physics adjoint_out");
  check_sino(sino, g, "physics adjoint_out");
  if (!out.defined() || out.dim() != 2 || out.size(0) != box.rows() || out.size(1) != box.cols() ||
      !row_major_view(out) || out.scalar_type() != sino.scalar_type() || out.device() != sino.device())
    throw Error("physics adjoint_out: out must be a row-major [" + std::to_string(box.rows()) + ", " +
                std::to_string(box.cols()) + "] view (stride(1) == 1) with the sinogram's dtype and device");
  const at::Tensor y = sino.is_contiguous() ? sino : sino.contiguous();
  adjoint_into(y, g.angles_tensor(sino.device()), g.n, g.n_det, box.r0, box.c0, out);
}

namespace {
// [S, a, b] contiguous, and out [S, c, d] contiguous of its dtype and device.
void check_batch(const at::Tensor& in, int64_t a, int64_t b, const at::Tensor& out, int64_t c, int64_t d,
                 const char* what) {
  auto shape = [](int64_t s, int64_t x, int64_t y) {
    return "[" + std::to_string(s) + ", " + std::to_string(x) + ", " + std::to_string(y) + "]";
  };
  if (!in.defined() || in.dim() != 3 || in.size(1) != a || in.size(2) != b || !in.is_contiguous())
    throw InputError(std::string(what) + ": the input must be a contiguous [slices, " + std::to_string(a) + ", " +
                     std::to_string(b) + "] tensor, got " + (in.defined() ? shape_string(in.sizes().vec()) : "none"));
  if (!out.defined() || out.dim() != 3 || out.size(0) != in.size(0) || out.size(1) != c || out.size(2) != d ||
      !out.is_contiguous() || out.scalar_type() != in.scalar_type() || out.device() != in.device())
    throw Error(std::string(what) + ": out must be a contiguous " + shape(in.size(0), c, d) +
                " tensor with the input's dtype and device");
}
}  // namespace

void forward_slices_out(const at::Tensor& slices, const Geometry& g, const Box& box, at::Tensor& out) {
  check_batch(slices, box.rows(), box.cols(), out, g.n_angles(), g.n_det, "physics forward_slices");
  for (int64_t s = 0; s < slices.size(0); ++s) {
    at::Tensor o = out.select(0, s);
    forward_out(slices.select(0, s), g, box, o);
  }
}

at::Tensor forward_slices(const at::Tensor& slices, const Geometry& g, const Box& box) {
  at::Tensor out = at::empty({slices.defined() && slices.dim() == 3 ? slices.size(0) : 0, g.n_angles(), g.n_det},
                             slices.defined() ? slices.options() : at::TensorOptions());
  forward_slices_out(slices, g, box, out);
  return out;
}

void adjoint_slices_out(const at::Tensor& sinos, const Geometry& g, const Box& box, at::Tensor& out) {
  check_batch(sinos, g.n_angles(), g.n_det, out, box.rows(), box.cols(), "physics adjoint_slices");
  for (int64_t s = 0; s < sinos.size(0); ++s) {
    at::Tensor o = out.select(0, s);
    adjoint_out(sinos.select(0, s), g, box, o);
  }
}

at::Tensor adjoint_slices(const at::Tensor& sinos, const Geometry& g, const Box& box) {
  at::Tensor out = at::empty({sinos.defined() && sinos.dim() == 3 ? sinos.size(0) : 0, box.rows(), box.cols()},
                             sinos.defined() ? sinos.options() : at::TensorOptions());
  adjoint_slices_out(sinos, g, box, out);
  return out;
}

}  // namespace pnp::physics
