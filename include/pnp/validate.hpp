// The checks every program applies to what it reads and what it writes, in one place (the table
// of docs/reliability.md says which program uses which): declared sizes against the memory this
// process may use, finite values, ranges, projection angles, and the identity of the files a run
// reads, writes and removes. Each throws pnp::InputError (exit code 2) with one line naming the
// value, the file or the option.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace pnp::validate {

// Whether two paths name the same file: device and inode when both exist (symbolic and hard
// links alike), else the absolute paths with every symbolic link resolved (one that dangles too),
// so that two names of a file that does not exist yet compare equal.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b);

// A path of a run and the option or key that names it ("output.file", "--save-weights").
struct RunPath {
  std::string role;
  std::filesystem::path path;
};
// Throws InputError when two of `writes` (every file the run writes or removes) are the same
// file, or when one of them is one of `inputs`; empty paths are skipped.
void require_distinct(const std::vector<RunPath>& writes, const std::vector<RunPath>& inputs = {});

// Throws InputError "<what> about <bytes>, more than the <limit> this process may use (<hint>)"
// when `bytes` exceed the memory this process may use (host_memory_bytes); `what` ends with
// its verb ("reading it needs").
void require_fits_memory(const std::string& what, double bytes, const std::string& hint = "");

// Throws InputError naming `what` and the index of its first non-finite value.
template <class T>  // float, double
void require_finite(const T* data, const std::vector<int64_t>& shape, const std::string& what);

// Throws InputError unless lo <= value <= hi (NaN fails): "NAME must be in [lo, hi], got value".
void require_in_range(const std::string& name, double value, double lo, double hi);

// Projection angles in degrees as read from `what`: each must be finite with |theta| <= 720
// (InputError naming the first that is not). Returns a warning, or "" when none: every angle lies
// in [0, 2 pi] while `units` says degrees or nothing, so the file probably holds radians.
inline constexpr double kMaxAngleDeg = 720;
std::string check_angles_deg(const std::vector<double>& theta, const std::string& units, const std::string& what);

}  // namespace pnp::validate
