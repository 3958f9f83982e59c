// The shared checks of include/pnp/validate.hpp.
#include "pnp/validate.hpp"

#include <cmath>
#include <cstdio>
#include <numbers>
#include <system_error>

#include "pnp/core.hpp"
#include "pnp/messages.hpp"

namespace pnp::validate {
namespace fs = std::filesystem;

namespace {
// The absolute path with every symbolic link resolved, also a last component that dangles (a
// link to a file not written yet), lexically where nothing exists.
fs::path resolved(const fs::path& p) {
  std::error_code ec;
  fs::path cur = fs::absolute(p, ec);
  if (ec) return p.lexically_normal();
  for (int hops = 0; hops < 40; ++hops) {
    const fs::path w = fs::weakly_canonical(cur, ec);
    if (ec) return cur.lexically_normal();
    if (!fs::is_symlink(fs::symlink_status(w, ec))) return w;
    const fs::path target = fs::read_symlink(w, ec);
    if (ec) return w;
    cur = target.is_absolute() ? target : w.parent_path() / target;
  }
  return cur.lexically_normal();
}
// A number as a person writes it: 65536, 0.5, 1e+302.
std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.10g", v);
  return b;
}
}  // namespace

bool same_file(const fs::path& a, const fs::path& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ea, eb;
  const bool xa = fs::exists(a, ea), xb = fs::exists(b, eb);
  if (xa && xb) {
    std::error_code e;
    return fs::equivalent(a, b, e);  // device and inode
  }
  if (xa != xb) return false;
  return resolved(a) == resolved(b);
}

void require_distinct(const std::vector<RunPath>& writes, const std::vector<RunPath>& inputs) {
  for (size_t i = 0; i < writes.size(); ++i) {
    const RunPath& w = writes[i];
    if (w.path.empty()) continue;
    for (size_t j = i + 1; j < writes.size(); ++j)
      if (same_file(w.path, writes[j].path))
        throw InputError(w.role + " " + clip_value(w.path.string()) + " and " + writes[j].role + " " +
                         clip_value(writes[j].path.string()) +
                         " are the same file: one would overwrite or remove the other (choose two different files)");
    for (const RunPath& in : inputs)
      if (same_file(w.path, in.path))
        throw InputError(w.role + " " + clip_value(w.path.string()) + " is the input " + in.role + " " +
                         clip_value(in.path.string()) +
                         "; writing it would destroy the input (choose another file, even with --force)");
  }
}

void require_fits_memory(const std::string& what, double bytes, const std::string& hint) {
  const double have = host_memory_bytes();
  if (bytes > have)
    throw InputError(what + " about " + human_bytes(bytes) + ", more than the " + human_bytes(have) +
                     " this process may use" + (hint.empty() ? "" : " (" + hint + ")"));
}

template <class T>
void require_finite(const T* data, const std::vector<int64_t>& shape, const std::string& what) {
  size_t count = 1;
  for (int64_t s : shape) count *= static_cast<size_t>(s);
  for (size_t i = 0; i < count; ++i) {
    if (std::isfinite(static_cast<double>(data[i]))) continue;
    std::string at;
    size_t rest = i;
    for (size_t d = shape.size(); d-- > 0;) {
      at = std::to_string(rest % static_cast<size_t>(shape[d])) + (at.empty() ? "" : ", ") + at;
      rest /= static_cast<size_t>(shape[d]);
    }
    throw InputError(what + " holds a non-finite value (" + num(static_cast<double>(data[i])) + ") at [" +
                     at + "]");
  }
}
template void require_finite<float>(const float*, const std::vector<int64_t>&, const std::string&);
template void require_finite<double>(const double*, const std::vector<int64_t>&, const std::string&);

void require_in_range(const std::string& name, double value, double lo, double hi) {
  if (!(value >= lo && value <= hi))
    throw InputError(name + " must be in [" + num(lo) + ", " + num(hi) + "], got " + num(value));
}

std::string check_angles_deg(const std::vector<double>& theta, const std::string& units, const std::string& what) {
  bool within_2pi = !theta.empty();
  for (size_t i = 0; i < theta.size(); ++i) {
    const double t = theta[i];
    if (!std::isfinite(t) || std::abs(t) > kMaxAngleDeg)
      throw InputError(what + " holds " + num(t) + " at [" + std::to_string(i) +
                       "]: projection angles must be finite degrees within +-720");
    within_2pi = within_2pi && t >= 0 && t <= 2 * std::numbers::pi;
  }
  if (units == "rad" || units == "radian" || units == "radians")
    throw InputError(what + " says its units are '" + units +
                     "': pnp reads projection angles in degrees; convert them (x 180/pi)");
  const bool says_degrees = units.empty() || units == "deg" || units == "degree" || units == "degrees";
  if (!within_2pi || !says_degrees) return "";
  return what + ": every angle lies in [0, 2 pi] but the file says " +
         (units.empty() ? std::string("no units (degrees are assumed)") : "'" + units + "'") +
         ": are they radians? pnp reads degrees";
}

}  // namespace pnp::validate
