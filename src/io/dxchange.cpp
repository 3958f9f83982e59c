// Sinograms in the DXchange layout: /exchange/data [angles, detector], /exchange/theta
// (degrees), optional /exchange/ground_truth [N, N].
#include <cmath>
#include <filesystem>

#include "h5_detail.hpp"
#include "pnp/io.hpp"
#include "pnp/validate.hpp"

namespace pnp::io {
namespace fs = std::filesystem;

namespace detail {

std::vector<int64_t> data_shape(H5File& f, const std::string& path, size_t dims, const std::string& layout) {
  std::vector<int64_t> s = shape_of(f, path);
  if (s.size() != dims)
    throw InputError("'" + path + "' must be " + layout + ", got " + std::to_string(s.size()) + " dimensions " +
                     shape_string(s));
  for (int64_t d : s)
    if (d < 1) throw InputError("'" + path + "' is empty " + shape_string(s));
  return s;
}

std::vector<int64_t> theta_shape(H5File& f, const std::string& theta, const std::string& data, int64_t angles) {
  if (theta.empty() || !exists(f, theta)) return {};
  std::vector<int64_t> s = shape_of(f, theta);
  if (s.size() != 1 || s[0] != angles)
    throw InputError("'" + theta + "' has shape " + shape_string(s) + " but '" + data + "' has " + std::to_string(angles) +
                     " angles");
  return s;
}

}  // namespace detail

DxchangeShapes read_dxchange_shapes(const fs::path& path, const DxchangePaths& paths) {
  try {
    H5File f = H5File::open(path);
    DxchangeShapes sh;
    sh.data = detail::data_shape(f, paths.data, 2, "[angles, detector] (or a volume's [angles, slices, detector])");
    sh.theta = detail::theta_shape(f, paths.theta, paths.data, sh.data[0]);
    sh.has_theta = !sh.theta.empty();
    if (!paths.ground_truth.empty() && exists(f, paths.ground_truth)) {
      sh.ground_truth = shape_of(f, paths.ground_truth);
      if (sh.ground_truth.size() != 2 || sh.ground_truth[0] != sh.ground_truth[1] || sh.ground_truth[0] < 1)
        throw InputError("'" + paths.ground_truth + "' must be a square [N, N] image, has shape " +
                         shape_string(sh.ground_truth));
      sh.has_truth = true;
    }
    return sh;
  } catch (...) {
    rethrow_with_context("reading sinogram " + path.string());
  }
}

namespace {
template <class T>
void require_finite(const Array<T>& a, const std::string& dataset) {
  validate::require_finite(a.data.data(), a.shape, "'" + dataset + "'");
}
}  // namespace

std::vector<double> read_angles(H5File& f, const fs::path& path, const std::string& theta, std::string& warning) {
  auto th = read<double>(f, theta);
  std::string units;  // degrees when absent or not a string
  try {
    if (has_attr(f, theta, "units")) units = read_attr_string(f, theta, "units");
  } catch (const InputError&) {
  }
  const std::string w = validate::check_angles_deg(th.data, units, "'" + theta + "'");
  warning = w.empty() ? "" : path.string() + ": " + w;
  return th.data;
}

Sinogram read_dxchange(const fs::path& path, const DxchangePaths& paths, const DxchangeExpect& expect) {
  const DxchangeShapes sh = read_dxchange_shapes(path, paths);
  try {
    const int64_t k = sh.data[0], det = sh.data[1], n = sh.has_truth ? sh.ground_truth[0] : 0;
    auto mismatch = [&](const std::string& what, int64_t want, int64_t have) {
      throw InputError("'" + paths.data + "' declares " + std::to_string(have) + " " + what + ", but " +
                       std::to_string(want) + " are expected (" + expect.source + ")");
    };
    if (expect.angles > 0 && k != expect.angles) mismatch("angles", expect.angles, k);
    if (expect.detector > 0 && det != expect.detector) mismatch("detector bins", expect.detector, det);
    if (expect.size > 0 && sh.has_truth && n != expect.size)
      throw InputError("'" + paths.ground_truth + "' is " + std::to_string(n) + " x " + std::to_string(n) + ", but a " +
                       std::to_string(expect.size) + " x " + std::to_string(expect.size) + " image is expected (" +
                       expect.source + ")");
    // Declared sizes against what this process may allocate, before any allocation.
    const double bytes = 4.0 * static_cast<double>(k) * static_cast<double>(det) + 8.0 * static_cast<double>(k) +
                         4.0 * static_cast<double>(n) * static_cast<double>(n);
    if (expect.max_bytes > 0 && bytes > expect.max_bytes)
      throw InputError("it declares " + std::to_string(k) + " x " + std::to_string(det) + " projections" +
                       (n ? " and a " + std::to_string(n) + "^2 ground truth" : std::string()) + ": " +
                       human_bytes(bytes) + " to read, more than the " + human_bytes(expect.max_bytes) + " allowed");
    H5File f = H5File::open(path);
    Sinogram s;
    s.data = read<float>(f, paths.data);
    require_finite(s.data, paths.data);
    if (sh.has_theta) s.theta_deg = read_angles(f, path, paths.theta, s.theta_warning);
    if (sh.has_truth) {
      auto gt = read<float>(f, paths.ground_truth);
      require_finite(gt, paths.ground_truth);
      s.ground_truth = std::move(gt);
    }
    return s;
  } catch (...) {
    rethrow_with_context("reading sinogram " + path.string());
  }
}

void write_dxchange(H5File& f, const Sinogram& s, const DxchangePaths& paths) {
  write(f, paths.data, s.data.data.data(), s.data.shape, "attenuation line integral",
        "sinogram [angles, detector], unit detector bins");
  write(f, paths.theta, s.theta_deg.data(), {static_cast<int64_t>(s.theta_deg.size())}, "deg",
        "projection angles");
  if (s.ground_truth)
    write(f, paths.ground_truth, s.ground_truth->data.data(), s.ground_truth->shape, "attenuation per pixel",
          "ground-truth image [N, N]");
}

}  // namespace pnp::io
