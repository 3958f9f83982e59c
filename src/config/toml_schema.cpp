#include "pnp/config/toml_schema.hpp"

#include <cstdint>

#include <fstream>

namespace pnp::toml_schema {
namespace fs = std::filesystem;

std::string Where::prefix() const {
  return line > 0 ? source + ":" + std::to_string(line) + ": " : source + ": ";
}

void bad(const Where& w, const std::string& key, const std::string& msg) { throw InputError(w.prefix() + key + ": " + msg); }

std::string describe(const toml::node& n) {
  std::ostringstream os;
  os << n.type();
  if (n.is_value()) {
    os << ' ';
    n.visit([&](auto&& v) { os << v; });
  }
  return os.str();
}

std::string num(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  auto distance = [](std::string_view a, std::string_view b) {
    std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
    for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= a.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= b.size(); ++j)
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      std::swap(prev, cur);
    }
    return prev[b.size()];
  };
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  size_t limit = std::max<size_t>(1, word.size() / 3);
  return best_d <= limit ? best : std::string();
}

int64_t to_int(const toml::node& n, const Where& w, const std::string& name, int64_t lo, int64_t hi) {
  auto v = n.value_exact<int64_t>();
  if (!n.is_integer() || !v) bad(w, name, "must be an integer, got " + describe(n));
  if (*v < lo || *v > hi)
    bad(w, name, std::to_string(*v) + " is out of range: must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return *v;
}

double to_float(const toml::node& n, const Where& w, const std::string& name, double lo, double hi) {
  if (!n.is_floating_point() && !n.is_integer()) bad(w, name, "must be a number, got " + describe(n));
  double v = n.is_integer() ? static_cast<double>(*n.value<int64_t>()) : *n.value<double>();
  if (!(v >= lo && v <= hi)) bad(w, name, num(v) + " is out of range: must be in [" + num(lo) + ", " + num(hi) + "]");
  return v;
}

bool to_bool(const toml::node& n, const Where& w, const std::string& name) {
  if (!n.is_boolean()) bad(w, name, "must be true or false, got " + describe(n));
  return *n.value<bool>();
}

const std::string& as_string(const toml::node& n, const Where& w, const std::string& name) {
  if (!n.is_string()) bad(w, name, "must be a string, got " + describe(n));
  return n.as_string()->get();
}

std::string to_choice(const toml::node& n, const Where& w, const std::string& name, const std::vector<std::string>& choices) {
  const std::string& v = as_string(n, w, name);
  if (std::find(choices.begin(), choices.end(), v) == choices.end()) {
    std::string hint = closest_match(v, choices);
    bad(w, name, "\"" + v + "\" is not one of: " + join(choices) + (hint.empty() ? "" : " (did you mean \"" + hint + "\"?)"));
  }
  return v;
}

std::vector<int64_t> to_ints(const toml::node& n, const Where& w, const std::string& name, size_t min_len,
                             size_t max_len, int64_t lo, int64_t hi) {
  std::string constraint = std::to_string(min_len) + " to " + std::to_string(max_len) + " entries in [" +
                           std::to_string(lo) + ", " + std::to_string(hi) + "]";
  const toml::array* a = n.as_array();
  if (!a) bad(w, name, "must be an array of integers, got " + describe(n));
  std::vector<int64_t> v;
  for (const auto& e : *a) {
    if (!e.is_integer()) bad(w, name, "must be an array of integers, got an element " + describe(e));
    int64_t x = *e.value<int64_t>();
    if (x < lo || x > hi) bad(w, name, "element " + std::to_string(x) + " is out of range: " + constraint);
    v.push_back(x);
  }
  if (v.size() < min_len || v.size() > max_len) bad(w, name, "has " + std::to_string(v.size()) + " entries: " + constraint);
  return v;
}

std::vector<std::string> to_choices(const toml::node& n, const Where& w, const std::string& name,
                                    const std::vector<std::string>& choices) {
  const toml::array* a = n.as_array();
  if (!a) bad(w, name, "must be an array of strings, got " + describe(n));
  if (a->empty()) bad(w, name, "must not be empty");
  std::vector<std::string> v;
  for (const auto& e : *a) v.push_back(choices.empty() ? as_string(e, w, name) : to_choice(e, w, name, choices));
  return v;
}

std::string resolve_path(const std::string& v, PathKind kind, const Where& w, const std::string& name) {
  if (v.empty() || kind == PathKind::text) return v;
  bool is_path = kind != PathKind::file_or_name || v.find('/') != std::string::npos || fs::path(v).has_extension();
  if (!is_path) return v;
  fs::path p(v);
  if (p.is_relative()) p = w.base_dir / p;
  p = p.lexically_normal();
  if (kind != PathKind::output) {
    const std::string problem = input_file_problem(p.string());
    if (!problem.empty()) bad(w, name, (problem == "file not found" ? problem + ": " : p.string() + ": ") +
                                           (problem == "file not found" ? p.string() : problem));
  }
  return p.string();
}

toml::table parse_document(std::string_view text, const std::string& source) {
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    throw InputError(source + ":" + std::to_string(e.source().begin.line) + ": TOML syntax error: " +
                     std::string(e.description()));
  }
}

toml::table parse_override_value(const std::string& value) {
  try {
    return toml::parse("v = " + value);
  } catch (const toml::parse_error&) {
    toml::table t;  // a bare word is a string: --set compile.mode=pre
    t.insert("v", value);
    return t;
  }
}

Assignment split_assignment(const std::string& a, const Where& w) {
  if (a.find_first_of("\n\r") != std::string::npos)
    throw InputError(w.prefix() + "a --set argument may not hold a line break (one key=value per --set)");
  size_t eq = a.find('='), dot = a.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq) throw InputError(w.prefix() + "expected section.key=value");
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t"));
    s.erase(s.find_last_not_of(" \t") + 1);
    return s;
  };
  return {trim(a.substr(0, dot)), trim(a.substr(dot + 1, eq - dot - 1)), trim(a.substr(eq + 1))};
}

std::string read_text_file(const fs::path& path, const char* what) {
  const std::string problem = input_file_problem(path.string());
  if (!problem.empty()) throw InputError(std::string("cannot read ") + what + " " + path.string() + ": " + problem);
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  constexpr std::uintmax_t kMax = 16u << 20;  // a configuration is a few kB; this is no configuration
  if (!ec && size > kMax)
    throw InputError(std::string(what) + " " + path.string() + " is " + std::to_string(size >> 20) +
                     " MiB: not a TOML configuration (at most 16 MiB)");
  std::ifstream in(path);
  if (!in) throw InputError(std::string("cannot read ") + what + " " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace pnp::toml_schema
