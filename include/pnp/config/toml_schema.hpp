// A typed TOML schema: one table of fields drives parsing, validation, `--set` overrides,
// printing back as TOML and the key reference. Every error names the key and the line
// ("file.toml:12: problem.size: ..."). Used by every pnp program that reads TOML.
//
//   Schema<MyConfig> s({"sectionA", "sectionB"}, {
//       int_field<MyConfig>("sectionA", "size", PNP_MEMBER(MyConfig, a.size), 8, 65536, "image size"),
//       ...});
//   MyConfig c = s.parse(text, "file.toml", base_dir);
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#ifndef TOML_EXCEPTIONS
#define TOML_EXCEPTIONS 1
#endif
#include <toml++/toml.h>

#include "pnp/core.hpp"

namespace pnp::toml_schema {

// Where a value came from: file and line, or a --set argument (line 0).
struct Where {
  std::string source;
  int64_t line = 0;
  std::filesystem::path base_dir;  // relative paths in the source resolve against this
  std::string prefix() const;      // "file:12: " or "--set a.b=c: "
};

[[noreturn]] void bad(const Where& w, const std::string& key, const std::string& msg);
std::string describe(const toml::node& n);  // "integer 3", "string 'x'"
std::string num(double x);
std::string join(const std::vector<std::string>& v, const char* sep = ", ");
// Closest name by edit distance, for did-you-mean hints; empty if nothing is close.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

// Typed reads of one TOML value, validated; errors are InputError("<where><name>: ...").
// The fields below use them, and so can readers whose tables are not fixed in advance.
int64_t to_int(const toml::node& n, const Where& w, const std::string& name, int64_t lo, int64_t hi);
double to_float(const toml::node& n, const Where& w, const std::string& name, double lo, double hi);
bool to_bool(const toml::node& n, const Where& w, const std::string& name);
const std::string& as_string(const toml::node& n, const Where& w, const std::string& name);
std::string to_choice(const toml::node& n, const Where& w, const std::string& name, const std::vector<std::string>& choices);
std::vector<int64_t> to_ints(const toml::node& n, const Where& w, const std::string& name, size_t min_len,
                             size_t max_len, int64_t lo, int64_t hi);
std::vector<std::string> to_choices(const toml::node& n, const Where& w, const std::string& name,
                                    const std::vector<std::string>& choices);  // non-empty array of strings
// The Where of a node: its source and line.
inline Where where_of(const toml::node& n, const std::string& source, const std::filesystem::path& base_dir = {}) {
  return Where{source, static_cast<int64_t>(n.source().begin.line), base_dir};
}

template <class T>
std::string toml_text(const T& v) {
  std::ostringstream os;
  if constexpr (std::is_same_v<T, std::vector<int64_t>> || std::is_same_v<T, std::vector<std::string>>) {
    toml::array a;
    for (const auto& x : v) a.push_back(x);
    os << a;
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    os << toml::value<int64_t>(static_cast<int64_t>(v));
  } else {
    os << toml::value<T>(v);
  }
  return os.str();
}

// Access to a field's storage inside the config struct C.
template <class C, class T>
using Get = std::function<T&(C&)>;
#define PNP_MEMBER(C, member) [](C& c) -> auto& { return c.member; }

template <class C>
struct Field {
  std::string section, key, type, constraint, help;
  std::function<void(C&, const toml::node&, const Where&)> set;
  std::function<std::string(const C&)> show;
  std::string name() const { return section + "." + key; }
};

template <class C, class T, class G>
Field<C> make_field(const char* sec, const char* key, std::string type, std::string constraint, const char* help, G get,
                    std::function<T(const toml::node&, const Where&, const std::string& name)> convert) {
  Field<C> f{sec, key, std::move(type), std::move(constraint), help, {}, {}};
  std::string name = f.name();
  f.set = [=](C& c, const toml::node& n, const Where& w) { get(c) = convert(n, w, name); };
  f.show = [=](const C& c) { return toml_text(get(const_cast<C&>(c))); };
  return f;
}

template <class C, class G>
Field<C> int_field(const char* sec, const char* key, G get, int64_t lo, int64_t hi, const char* help) {
  using T = std::remove_reference_t<decltype(get(std::declval<C&>()))>;
  return make_field<C, T>(sec, key, "integer", "in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]", help, get,
                          [=](const toml::node& n, const Where& w, const std::string& name) {
                            return static_cast<T>(to_int(n, w, name, lo, hi));
                          });
}

template <class C, class G>
Field<C> float_field(const char* sec, const char* key, G get, double lo, double hi, const char* help) {
  return make_field<C, double>(sec, key, "float", "in [" + num(lo) + ", " + num(hi) + "]", help, get,
                               [=](const toml::node& n, const Where& w, const std::string& name) {
                                 return to_float(n, w, name, lo, hi);
                               });
}

template <class C, class G>
Field<C> bool_field(const char* sec, const char* key, G get, const char* help) {
  return make_field<C, bool>(sec, key, "boolean", "true or false", help, get, to_bool);
}

template <class C, class G>
Field<C> choice_field(const char* sec, const char* key, G get, std::vector<std::string> choices, const char* help) {
  return make_field<C, std::string>(sec, key, "string", "one of: " + join(choices), help, get,
                                    [=](const toml::node& n, const Where& w, const std::string& name) {
                                      return to_choice(n, w, name, choices);
                                    });
}

// An enum E named by enum_names(E{}) (found by argument-dependent lookup: the names in
// enumerator order): read and checked like a choice_field of those names, printed as its name.
template <class C, class G>
Field<C> enum_field(const char* sec, const char* key, G get, const char* help) {
  using E = std::remove_reference_t<decltype(get(std::declval<C&>()))>;
  const std::vector<std::string>& names = enum_names(E{});
  Field<C> f{sec, key, "string", "one of: " + join(names), help, {}, {}};
  std::string name = f.name();
  f.set = [=, &names](C& c, const toml::node& n, const Where& w) {
    const std::string v = to_choice(n, w, name, names);
    get(c) = static_cast<E>(std::find(names.begin(), names.end(), v) - names.begin());
  };
  f.show = [=, &names](const C& c) { return toml_text(names[static_cast<size_t>(get(const_cast<C&>(c)))]); };
  return f;
}

// text: any string. file: an existing file (or empty), resolved against the source's base
// directory. file_or_name: like file when the value looks like a path (has a '/' or an
// extension), else a bare name resolved later (a shipped model). output: a path resolved
// against the base directory, not required to exist.
enum class PathKind { text, file, file_or_name, output };
std::string resolve_path(const std::string& v, PathKind kind, const Where& w, const std::string& name);

template <class C, class G>
Field<C> string_field(const char* sec, const char* key, G get, PathKind kind, const char* help) {
  const char* constraint = kind == PathKind::file           ? "existing file, or empty"
                           : kind == PathKind::file_or_name ? "existing .h5 file, model name, or empty"
                           : kind == PathKind::output       ? "file path"
                                                            : "any text";
  return make_field<C, std::string>(sec, key, "string", constraint, help, get,
                                    [=](const toml::node& n, const Where& w, const std::string& name) {
                                      return resolve_path(as_string(n, w, name), kind, w, name);
                                    });
}

template <class C, class G>
Field<C> int_list_field(const char* sec, const char* key, G get, size_t min_len, size_t max_len, int64_t lo, int64_t hi,
                        const char* help) {
  return make_field<C, std::vector<int64_t>>(
      sec, key, "array of integers",
      std::to_string(min_len) + " to " + std::to_string(max_len) + " entries in [" + std::to_string(lo) + ", " +
          std::to_string(hi) + "]",
      help, get, [=](const toml::node& n, const Where& w, const std::string& name) {
        return to_ints(n, w, name, min_len, max_len, lo, hi);
      });
}

// Parses a TOML document with toml++; syntax errors become InputError("source:line: ...").
toml::table parse_document(std::string_view text, const std::string& source);
// The value of a `--set` right-hand side: TOML syntax, or a bare word taken as a string.
toml::table parse_override_value(const std::string& value);
// Splits "section.key=value" (whitespace trimmed); throws InputError naming the argument.
struct Assignment {
  std::string section, key, value;
};
Assignment split_assignment(const std::string& assignment, const Where& w);
// Reads a whole file; InputError naming it when it cannot be read.
std::string read_text_file(const std::filesystem::path& path, const char* what);

template <class C>
class Schema {
 public:
  using Validate = std::function<void(const C&, const std::string& source)>;
  Schema(std::vector<std::string> sections, std::vector<Field<C>> fields, Validate validate = {})
      : sections_(std::move(sections)), fields_(std::move(fields)), validate_(std::move(validate)) {}

  // Parses text on top of `defaults` (relative paths resolve against base_dir); the whole
  // checked (the validator's cross-key rules) unless `validate` is false.
  C parse(std::string_view text, const std::string& source, const std::filesystem::path& base_dir, C defaults = {},
          bool validate = true) const {
    toml::table root = parse_document(text, source);
    C cfg = std::move(defaults);
    for (const auto& [sec_key, sec_node] : root) {
      std::string section(sec_key.str());
      Where w{source, line_of(sec_node), base_dir};
      check_section(section, w);
      const toml::table* tbl = sec_node.as_table();
      if (!tbl) throw InputError(w.prefix() + "'" + section + "' must be a table [" + section + "]");
      for (const auto& [key, node] : *tbl) {
        Where kw{source, line_of(node), base_dir};
        const Field<C>& f = field(section, std::string(key.str()), kw);
        f.set(cfg, node, kw);
        note_given(cfg, f.name());
      }
    }
    if (validate && validate_) validate_(cfg, source);
    return cfg;
  }
  // The file, then the overrides in order, each key checked as it is set; the cross-key rules
  // once on the result, so that no order of --set matters (a file's combination that its
  // overrides change is not refused first). Their errors name the file and the overrides.
  C load(const std::filesystem::path& path, const std::vector<std::string>& overrides = {}, C defaults = {}) const {
    std::string text = read_text_file(path, "config file");
    auto base = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
    C cfg = parse(text, path.string(), base, std::move(defaults), overrides.empty());
    if (overrides.empty()) return cfg;
    std::string source = path.string() + " with";
    for (const auto& o : overrides) {
      apply_override(cfg, o, /*validate=*/false);
      source += " --set " + o;
    }
    if (validate_) validate_(cfg, source);
    return cfg;
  }
  // "section.key=value": TOML value syntax, bare words taken as strings; validated like a file
  // (the cross-key rules too, unless `validate` is false: load checks them after the last).
  void apply_override(C& cfg, std::string_view assignment, bool validate = true) const {
    std::string a(assignment);
    Where w{"--set " + a, 0, std::filesystem::current_path()};
    Assignment s = split_assignment(a, w);
    const Field<C>& f = field(s.section, s.key, w);
    toml::table parsed = parse_override_value(s.value);
    f.set(cfg, *parsed.get("v"), w);
    note_given(cfg, f.name());
    if (validate && validate_) validate_(cfg, w.source);
  }
  // Every key in schema order, as TOML that parses back to the same config.
  std::string to_toml(const C& cfg) const {
    std::ostringstream os;
    for (const auto& section : sections_) {
      os << "[" << section << "]\n";
      for (const auto& f : fields_)
        if (f.section == section) os << f.key << " = " << f.show(cfg) << "\n";
      os << "\n";
    }
    return os.str();
  }
  // Every key with its default, type, constraint and meaning.
  std::string reference(const C& defaults = {}) const {
    std::ostringstream os;
    for (const auto& section : sections_) {
      os << "[" << section << "]\n";
      for (const auto& f : fields_) {
        if (f.section != section) continue;
        os << "  " << f.key << " = " << f.show(defaults) << "\n      " << f.help << "\n      (" << f.type << ", "
           << f.constraint << ")\n";
      }
      os << "\n";
    }
    return os.str();
  }
  const std::vector<Field<C>>& fields() const { return fields_; }

 private:
  static int64_t line_of(const toml::node& n) { return static_cast<int64_t>(n.source().begin.line); }
  // Configurations with a `given` set record which keys the file or a --set named (a default
  // left open can then be inferred, e.g. the sizes of a sinogram file).
  static void note_given(C& cfg, const std::string& name) {
    if constexpr (requires { cfg.given.insert(name); }) cfg.given.insert(name);
  }
  void check_section(const std::string& section, const Where& w) const {
    if (std::find(sections_.begin(), sections_.end(), section) != sections_.end()) return;
    std::string hint = closest_match(section, sections_);
    throw InputError(w.prefix() + "unknown section [" + section + "]" +
                     (hint.empty() ? "" : " (did you mean [" + hint + "]?)") + "; sections are: " + join(sections_));
  }
  const Field<C>& field(const std::string& section, const std::string& key, const Where& w) const {
    check_section(section, w);
    std::vector<std::string> keys;
    for (const auto& f : fields_)
      if (f.section == section) {
        if (f.key == key) return f;
        keys.push_back(f.key);
      }
    std::string hint = closest_match(key, keys);
    throw InputError(w.prefix() + "unknown key '" + section + "." + key + "'" +
                     (hint.empty() ? "" : " (did you mean '" + section + "." + hint + "'?)"));
  }

  std::vector<std::string> sections_;
  std::vector<Field<C>> fields_;
  Validate validate_;
};

}  // namespace pnp::toml_schema
