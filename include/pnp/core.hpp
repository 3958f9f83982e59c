// Core vocabulary shared by every module: errors, tile boxes and provenance.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "pnp/splitmix64.hpp"

namespace pnp {

// Any failure inside pnp. The message carries its context ("reading /exchange/data of
// sino.h5: ..."); programs print it as one `error: ...` line.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure caused by the user's input (config, command line, input file). Programs
// exit with code 2 for these and with code 1 for everything else.
class InputError : public Error {
 public:
  using Error::Error;
};

// Rethrows the exception in flight with `context: ` prepended, keeping its type.
[[noreturn]] void rethrow_with_context(std::string_view context);
// For a program's main, inside a catch block: prints "error: <what>" of the exception in flight
// to stderr and returns the exit code, 2 for an InputError (bad input), 1 for anything else.
int report_error();

// Half-open pixel box [r0, r1) x [c0, c1) in global image coordinates.
struct Box {
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;
  int64_t rows() const { return r1 - r0; }
  int64_t cols() const { return c1 - c0; }
  int64_t size() const { return rows() * cols(); }
  bool empty() const { return r1 <= r0 || c1 <= c0; }
  bool contains(int64_t r, int64_t c) const { return r >= r0 && r < r1 && c >= c0 && c < c1; }
  friend bool operator==(const Box&, const Box&) = default;
};
std::string to_string(const Box& b);

// "12.3 GiB" (binary units), for progress and plans.
std::string human_bytes(double bytes);
// A shape as "[1, 3, 64, 64]".
std::string shape_string(const std::vector<int64_t>& s);
// "12.34 ms", "1.23 s", "2.5 min" or "3.1 h"; "-" for NaN.
std::string human_seconds(double seconds);

// 64-bit FNV-1a of the bytes of s, and as 16 lowercase hex digits (content hashes, cache keys).
uint64_t fnv1a(std::string_view s);
std::string fnv1a_hex(std::string_view s);
// splitmix64 (pnp/splitmix64.hpp): seeds derived from (seed, index) pairs.

// An input file that must exist and be a regular file: "" when it is, else the reason it is
// not ("file not found", "is a directory", "too many levels of symbolic links", "file name too
// long", "permission denied", ...), without throwing.
std::string input_file_problem(const std::string& path);
// The host memory this process may use, in bytes: the smaller of the physical memory and the
// address-space and data limits (ulimit -v / -d); what declared sizes are checked against.
double host_memory_bytes();

// Build and runtime provenance written into every output file.
// What pnp is doing, named as the memory plan's terms ("solver", "metrics", "denoiser", ...): the
// allocations made inside a scope are named after it when the device's allocator keeps a record
// (device.hpp, record_memory_stages), so that an out-of-memory report says which term held what.
// Scopes nest (the innermost names); per thread.
class MemoryStage {
 public:
  explicit MemoryStage(const char* name) noexcept;
  ~MemoryStage();
  MemoryStage(const MemoryStage&) = delete;
  MemoryStage& operator=(const MemoryStage&) = delete;
  static const char* current() noexcept;  // "" outside every scope

 private:
  const char* previous_;
};

struct Provenance {
  std::string program;
  std::string version;
  std::string git_commit;
  std::string date_utc;       // ISO 8601, time of the run
  std::string host;
  std::string torch_version;  // filled by modules that link torch
  std::string cuda_version;
  std::string nccl_version;
};
Provenance basic_provenance(std::string program);  // program, version, commit, date, host
std::string iso8601_utc_now();

}  // namespace pnp
