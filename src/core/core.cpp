#include "pnp/core.hpp"
#include "pnp/messages.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <filesystem>
#include <random>
#include <system_error>

namespace pnp {

namespace {
thread_local const char* g_memory_stage = "";
}
MemoryStage::MemoryStage(const char* name) noexcept : previous_(g_memory_stage) { g_memory_stage = name; }
MemoryStage::~MemoryStage() { g_memory_stage = previous_; }
const char* MemoryStage::current() noexcept { return g_memory_stage; }
const char* build_git_commit();  // generated at build time (cmake/PnpStampCommit.cmake)
const char* build_version();

void rethrow_with_context(std::string_view context) {
  std::string ctx(context);
  try {
    throw;
  } catch (const InputError& e) {
    throw InputError(ctx + ": " + e.what());
  } catch (const std::exception& e) {
    throw Error(ctx + ": " + e.what());
  }
}

int report_error() {
  try {
    throw;
  } catch (const InputError& e) {
    std::fprintf(stderr, "error: %s\n", error_line(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", error_line(e.what()).c_str());
  } catch (...) {
    std::fprintf(stderr, "error: unknown exception\n");
  }
  return 1;
}

std::string clip_value(std::string_view value, size_t max) {
  if (value.size() <= max) return std::string(value);
  return std::string(value.substr(0, max)) + "... (" + std::to_string(value.size()) + " characters)";
}

std::string error_line(std::string_view message) {
  constexpr size_t kToken = 200, kLine = 2000;
  // LibTorch's errors carry their C++ backtrace after the message: a debugger's, not the user's
  if (const size_t bt = message.find("Exception raised from "); bt != std::string_view::npos && bt > 0) {
    message = message.substr(0, bt);
    while (!message.empty() && (message.back() == ' ' || message.back() == '\n')) message.remove_suffix(1);
  }
  std::string out, token;
  auto flush = [&] {  // a long run cut to 200 characters with its "...", so that a second pass keeps it
    out += token.size() <= kToken ? token
                                  : token.substr(0, kToken - 3) + "... (" + std::to_string(token.size()) + " characters)";
    token.clear();
  };
  for (size_t i = 0; i < message.size(); ++i) {
    const char c = message[i];
    if (c == '\n' || c == '\r') {
      flush();
      while (i + 1 < message.size() && (message[i + 1] == '\n' || message[i + 1] == '\r' || message[i + 1] == ' '))
        ++i;
      if (i + 1 < message.size()) out += "; ";
    } else if (c == ' ') {
      flush();
      out += c;
    } else {
      token += c;
    }
  }
  flush();
  return clip_value(out, kLine);
}

const std::string& run_id() {
  static const std::string id = [] {
    std::random_device rd;
    const uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                       static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                       (static_cast<uint64_t>(::getpid()) << 16);
    char b[20];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(splitmix64(v)));
    return std::string(b);
  }();
  return id;
}

std::string input_file_problem(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return "empty file name";
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return "file not found";
    return ec.message();
  }
  if (fs::is_directory(st)) return "is a directory, not a file";
  if (!fs::is_regular_file(st)) return "is not a regular file";
  if (::access(path.c_str(), R_OK) != 0) return std::error_code(errno, std::generic_category()).message();
  return "";
}

double host_memory_bytes() {
  double limit = static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE));
  for (int r : {RLIMIT_AS, RLIMIT_DATA}) {
    rlimit rl{};
    if (getrlimit(r, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) limit = std::min(limit, static_cast<double>(rl.rlim_cur));
  }
  return limit;
}

std::string to_string(const Box& b) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "rows [%lld, %lld) x cols [%lld, %lld)", (long long)b.r0,
                (long long)b.r1, (long long)b.c0, (long long)b.c1);
  return buf;
}

std::string shape_string(const std::vector<int64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

std::string human_bytes(double b) {
  char buf[32];
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) b /= 1024, ++u;
  std::snprintf(buf, sizeof buf, "%.1f %s", b, unit[u]);
  return buf;
}

std::string human_seconds(double s) {
  char buf[32];
  if (std::isnan(s)) return "-";
  if (s < 1) std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
  else if (s < 120) std::snprintf(buf, sizeof buf, "%.2f s", s);
  else if (s < 7200) std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  else std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  return buf;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string fnv1a_hex(std::string_view s) {
  const uint64_t h = fnv1a(s);
  char b[20];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

std::string iso8601_utc_now() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

Provenance basic_provenance(std::string program) {
  Provenance p;
  p.program = std::move(program);
  p.version = build_version();
  // PNP_GIT_COMMIT names the commit when the build's own record is stale or absent (a copy of
  // the tree whose .git is not the commit being built, as on the GPU machine of the device tool).
  const char* env = std::getenv("PNP_GIT_COMMIT");
  p.git_commit = env && *env ? std::string(env) : std::string(build_git_commit());
  p.date_utc = iso8601_utc_now();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) p.host = host;
  return p;
}

}  // namespace pnp
