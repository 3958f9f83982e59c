// The native backend's persistent plan cache (plan_cache.hpp).
#include "plan_cache.hpp"

#include "pnp/core.hpp"

#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace pnp::nn::native {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMagic = "pnp-native-plan 2";  // 2: the pnp kernel arm
constexpr const char* kNetworkMagic = "pnp-native-network 1";

// A header line "<name> <value>" (the value may hold spaces, never a newline).
bool field(std::istream& in, const std::string& name, std::string& value) {
  std::string line;
  if (!std::getline(in, line) || line.compare(0, name.size() + 1, name + " ") != 0) return false;
  value = line.substr(name.size() + 1);
  return true;
}

std::string one_line(const std::string& s) {
  std::string r = s;
  for (char& c : r)
    if (c == '\n' || c == '\r') c = ' ';
  return r;
}

std::string ms_text(double v) {
  if (std::isnan(v)) return "nan";
  std::ostringstream o;
  o.precision(17);
  o << v;
  return o.str();
}

// `content` into `p` through a temporary name and a rename: a reader never sees half a file.
bool write_atomically(const std::string& dir, const std::string& p, const std::string& content, std::string* why) {
  auto fail = [&](const std::string& reason) {
    if (why) *why = reason;
    return false;
  };
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return fail("cannot create " + dir + ": " + ec.message());
  const std::string tmp = p + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return fail("cannot write " + tmp + ": " + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return fail("cannot write " + tmp + " (disk full?)");
    }
  }
  fs::rename(tmp, p, ec);
  if (ec) {
    fs::remove(tmp, ec);
    return fail("cannot rename " + tmp + " to " + p + ": " + ec.message());
  }
  return true;
}

}  // namespace

PlanCache::PlanCache(std::string dir, std::string env) : dir_(std::move(dir)), env_(one_line(env)) {}

std::string PlanCache::path(const std::string& layout) const {
  return (fs::path(dir_) / (fnv1a_hex(env_ + "\n" + one_line(layout)) + ".plan")).string();
}

std::optional<PlanChoice> PlanCache::load(const std::string& layout, std::string* why) const {
  auto miss = [&](const std::string& reason) -> std::optional<PlanChoice> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (!enabled()) return miss("");
  const std::string p = path(layout);
  std::ifstream in(p, std::ios::binary);
  if (!in) return miss("");  // no entry
  std::string magic, env, lay, use, pnp, engine, gms, ems, pms, index, bytes;
  if (!std::getline(in, magic) || magic != kMagic) return miss(p + ": not a plan cache entry of this version");
  if (!field(in, "env", env) || !field(in, "layout", lay) || !field(in, "use", use) || !field(in, "pnp", pnp) ||
      !field(in, "engine", engine) || !field(in, "graph_ms", gms) || !field(in, "generic_ms", ems) ||
      !field(in, "pnp_ms", pms) || !field(in, "plan_index", index) || !field(in, "plan_bytes", bytes))
    return miss(p + ": damaged header");
  if (env != env_ || lay != one_line(layout)) return miss(p + ": written for another GPU, version or layout");
  if (use != "graph" && use != "ops") return miss(p + ": damaged header (use)");
  if (pnp != "yes" && pnp != "no") return miss(p + ": damaged header (pnp)");
  PlanChoice c;
  c.graph = use == "graph";
  c.pnp = pnp == "yes";
  c.engine = engine;
  try {
    c.graph_ms = gms == "nan" ? std::nan("") : std::stod(gms);
    c.generic_ms = ems == "nan" ? std::nan("") : std::stod(ems);
    c.pnp_ms = pms == "nan" ? std::nan("") : std::stod(pms);
    c.index = std::stoll(index);
    const long long n = std::stoll(bytes);
    if (n < 0 || n > (int64_t{1} << 30)) return miss(p + ": damaged header (plan_bytes)");
    c.plan.resize(static_cast<size_t>(n));
  } catch (const std::exception&) {
    return miss(p + ": damaged header (numbers)");
  }
  if (!c.plan.empty() && !in.read(reinterpret_cast<char*>(c.plan.data()), static_cast<std::streamsize>(c.plan.size())))
    return miss(p + ": truncated plan");
  if (in.peek() != std::char_traits<char>::eof()) return miss(p + ": trailing bytes");
  if (c.graph && c.plan.empty() && c.index < 0) return miss(p + ": a graph choice without its plan");
  return c;
}

bool PlanCache::store(const std::string& layout, const PlanChoice& c, std::string* why) const {
  if (!enabled()) {
    if (why) *why = "no plan cache directory";
    return false;
  }
  std::ostringstream out;
  out << kMagic << "\nenv " << env_ << "\nlayout " << one_line(layout) << "\nuse " << (c.graph ? "graph" : "ops")
      << "\npnp " << (c.pnp ? "yes" : "no") << "\nengine " << one_line(c.engine) << "\ngraph_ms " << ms_text(c.graph_ms)
      << "\ngeneric_ms " << ms_text(c.generic_ms) << "\npnp_ms " << ms_text(c.pnp_ms) << "\nplan_index " << c.index
      << "\nplan_bytes " << c.plan.size() << "\n";
  out.write(reinterpret_cast<const char*>(c.plan.data()), static_cast<std::streamsize>(c.plan.size()));
  return write_atomically(dir_, path(layout), out.str(), why);
}

std::string PlanCache::network_path(const std::string& network) const {
  return (fs::path(dir_) / (fnv1a_hex(env_ + "\n" + one_line(network)) + ".net")).string();
}

std::optional<PlanCache::Layouts> PlanCache::load_network(const std::string& network, std::string* why) const {
  auto miss = [&](const std::string& reason) -> std::optional<Layouts> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (!enabled()) return miss("");
  const std::string p = network_path(network);
  std::ifstream in(p, std::ios::binary);
  if (!in) return miss("");
  std::string magic, env, net, count;
  if (!std::getline(in, magic) || magic != kNetworkMagic) return miss(p + ": not a network entry");
  if (!field(in, "env", env) || !field(in, "network", net) || !field(in, "layouts", count))
    return miss(p + ": damaged header");
  if (env != env_ || net != one_line(network)) return miss(p + ": written for another GPU, version or network");
  long long n = -1;
  try {
    n = std::stoll(count);
  } catch (const std::exception&) {
  }
  if (n < 0 || n > 100000) return miss(p + ": damaged header (layouts)");
  Layouts r;
  for (long long i = 0; i < n; ++i) {
    std::string name, layout;
    if (!field(in, "shape", name) || !field(in, "layout", layout)) return miss(p + ": truncated");
    r.emplace_back(name, layout);
  }
  if (in.peek() != std::char_traits<char>::eof()) return miss(p + ": trailing bytes");
  return r;
}

bool PlanCache::store_network(const std::string& network, const Layouts& layouts, std::string* why) const {
  if (!enabled()) {
    if (why) *why = "no plan cache directory";
    return false;
  }
  std::ostringstream out;
  out << kNetworkMagic << "\nenv " << env_ << "\nnetwork " << one_line(network) << "\nlayouts " << layouts.size() << "\n";
  for (const auto& [name, layout] : layouts) out << "shape " << one_line(name) << "\nlayout " << one_line(layout) << "\n";
  return write_atomically(dir_, network_path(network), out.str(), why);
}

}  // namespace pnp::nn::native
