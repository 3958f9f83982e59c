// Projection volumes in the DXchange layout (include/pnp/io.hpp, read_volume_shapes and
// read_volume_slab): /exchange/data [angles, slices, detector], raw counts with
// /exchange/data_white and /exchange/data_dark [frames, slices, detector], or line integrals
// without them; /exchange/theta [angles] in degrees; /exchange/ground_truth [slices, N, N].
// Read slab by slab: a volume larger than the host's memory is never read whole.
#include <cmath>
#include <filesystem>
#include <string>

#include "h5_detail.hpp"
#include "pnp/io.hpp"
#include "pnp/validate.hpp"

namespace pnp::io {
namespace fs = std::filesystem;

namespace {

// [frames, slices, detector] matching the data's slices and detector, at least one frame.
std::vector<int64_t> frames_shape(H5File& f, const std::string& path, const std::vector<int64_t>& data,
                                  const std::string& data_path) {
  const std::vector<int64_t> s = shape_of(f, path);
  if (s.size() != 3 || s[0] < 1 || s[1] != data[1] || s[2] != data[2])
    throw InputError("'" + path + "' has shape " + shape_string(s) + " but must be [frames >= 1, " +
                     std::to_string(data[1]) + ", " + std::to_string(data[2]) + "] to match '" + data_path + "' " +
                     shape_string(data));
  return s;
}

// The per-pixel mean over the frames of [frames, z1 - z0, detector] for slices [z0, z1).
std::vector<double> frame_mean(H5File& f, const std::string& path, const std::vector<int64_t>& shape, int64_t z0,
                               int64_t z1) {
  const Array<float> a = read_hyperslab<float>(f, path, {0, z0, 0}, {shape[0], z1 - z0, shape[2]});
  validate::require_finite(a.data.data(), a.shape,
                           "'" + path + "' (slices [" + std::to_string(z0) + ", " + std::to_string(z1) + "))");
  const size_t plane = static_cast<size_t>((z1 - z0) * shape[2]);
  std::vector<double> m(plane, 0.0);
  for (int64_t k = 0; k < shape[0]; ++k)
    for (size_t i = 0; i < plane; ++i) m[i] += a.data[static_cast<size_t>(k) * plane + i];
  for (double& v : m) v /= static_cast<double>(shape[0]);
  return m;
}

}  // namespace

VolumeShapes read_volume_shapes(const fs::path& path, const VolumePaths& paths) {
  try {
    H5File f = H5File::open(path);
    VolumeShapes sh;
    sh.data = detail::data_shape(f, paths.data, 3, "[angles, slices, detector]");
    sh.theta = detail::theta_shape(f, paths.theta, paths.data, sh.data[0]);
    sh.has_theta = !sh.theta.empty();
    if (exists(f, paths.white)) sh.white = frames_shape(f, paths.white, sh.data, paths.data);
    if (exists(f, paths.dark)) sh.dark = frames_shape(f, paths.dark, sh.data, paths.data);
    if (!sh.dark.empty() && sh.white.empty())
      throw InputError("'" + paths.dark + "' without '" + paths.white + "': dark fields need flat fields to normalise by");
    if (exists(f, paths.ground_truth)) {
      sh.ground_truth = shape_of(f, paths.ground_truth);
      if (sh.ground_truth.size() != 3 || sh.ground_truth[0] != sh.data[1] || sh.ground_truth[1] != sh.ground_truth[2] ||
          sh.ground_truth[1] < 1)
        throw InputError("'" + paths.ground_truth + "' must be [" + std::to_string(sh.data[1]) +
                         " slices, N, N], has shape " + shape_string(sh.ground_truth));
    }
    return sh;
  } catch (...) {
    rethrow_with_context("reading projection volume " + path.string());
  }
}

SlabSinograms read_volume_slab(const fs::path& path, const VolumePaths& paths, const VolumeShapes& sh, int64_t z0,
                               int64_t z1) {
  try {
    const int64_t K = sh.angles(), Z = sh.slices(), D = sh.detector(), n = z1 - z0;
    if (z0 < 0 || z1 > Z || n < 1)
      throw InputError("slices [" + std::to_string(z0) + ", " + std::to_string(z1) + ") lie outside the volume's " +
                       std::to_string(Z));
    H5File f = H5File::open(path);
    const Array<float> raw = read_hyperslab<float>(f, paths.data, {0, z0, 0}, {K, n, D});  // [K, n, D]
    const std::string slab = " (slices [" + std::to_string(z0) + ", " + std::to_string(z1) + ") as [angle, slice - " +
                             std::to_string(z0) + ", bin])";
    validate::require_finite(raw.data.data(), raw.shape, "'" + paths.data + "'" + slab);
    SlabSinograms out;
    out.sinograms.shape = {n, K, D};
    out.sinograms.data.resize(static_cast<size_t>(n * K * D));
    const bool normalise = !sh.white.empty();
    std::vector<double> white, dark;
    if (normalise) {
      white = frame_mean(f, paths.white, sh.white, z0, z1);
      dark = sh.dark.empty() ? std::vector<double>(white.size(), 0.0) : frame_mean(f, paths.dark, sh.dark, z0, z1);
      // A dead detector bin (flat <= dark) carries no information: its line integrals are 0,
      // counted; more than one bin in a thousand is a file to look at, refused.
      int64_t dead = 0, first = -1;
      for (size_t i = 0; i < white.size(); ++i)
        if (!(white[i] - dark[i] > 0)) dead += 1, first = first < 0 ? static_cast<int64_t>(i) : first;
      out.dead_bins = dead;
      if (dead * 1000 > static_cast<int64_t>(white.size()))
        throw InputError(std::to_string(dead) + " of the " + std::to_string(white.size()) +
                         " (slice, detector) bins of slices [" + std::to_string(z0) + ", " + std::to_string(z1) +
                         ") have a flat field at or below the dark field (the first: slice " +
                         std::to_string(z0 + first / D) + ", bin " + std::to_string(first % D) + "): '" + paths.white +
                         "' and '" + paths.dark + "' do not describe this detector");
    }
    constexpr double kMinTransmission = 1e-6;  // -log = 13.8: beyond it the counts are noise
    for (int64_t k = 0; k < K; ++k)
      for (int64_t z = 0; z < n; ++z)
        for (int64_t d = 0; d < D; ++d) {
          const double v = raw.data[static_cast<size_t>((k * n + z) * D + d)];
          double p = v;
          if (normalise) {
            const size_t i = static_cast<size_t>(z * D + d);
            const double den = white[i] - dark[i];
            double t = den > 0 ? (v - dark[i]) / den : 1.0;
            if (t < kMinTransmission) t = kMinTransmission, out.clipped += 1;
            p = -std::log(t);
          }
          out.sinograms.data[static_cast<size_t>((z * K + k) * D + d)] = static_cast<float>(p);
        }
    return out;
  } catch (...) {
    rethrow_with_context("reading projection volume " + path.string());
  }
}

}  // namespace pnp::io
