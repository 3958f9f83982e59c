// The typed HDF5 layer under every file pnp reads or writes (include/pnp/io.hpp): handles,
// files, datasets of every element type, float16, strings and attributes, and the error
// mapping (a read that fails is an input error). Over 400 lines because it is one concern whose
// helpers (handle types, attribute writers, dataset opening) are private to it; the DXchange
// layout on top of it is src/io/dxchange.cpp.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <numeric>
#include <system_error>
#include <type_traits>

#include "pnp/io.hpp"
#include "h5_detail.hpp"
#include "pnp/validate.hpp"

namespace pnp::io {
namespace fs = std::filesystem;
using namespace detail;

namespace {

// HDF5 prints its own error stack to stderr by default; pnp reports errors itself. Its
// at-exit clean-up is off: every file pnp opens is closed by its handle, and libhdf5 1.10
// crashes (SIGSEGV in H5F__close_cb) when it closes at exit a file whose close failed, as on a
// full disk, so that an exit 2 would end as a crash.
struct SilenceHdf5 {
  SilenceHdf5() {
    H5dont_atexit();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
};
const SilenceHdf5 silence_hdf5;

}  // namespace

namespace detail {

// The innermost message of HDF5's error stack, to append to ours.
std::string hdf5_reason() {
  std::string msg;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned n, const H5E_error2_t* e, void* out) -> herr_t {
        if (n == 0 && e->desc) *static_cast<std::string*>(out) = e->desc;
        return 0;
      },
      &msg);
  H5Eclear2(H5E_DEFAULT);
  return msg.empty() ? std::string() : " (" + msg + ")";
}

// The operating system's reason in HDF5's error stack ("No space left on device"), if any: its
// file driver records errno as "..., error message = '<strerror>', ...".
std::string system_reason() {
  std::string msg;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* e, void* out) -> herr_t {
        auto& m = *static_cast<std::string*>(out);
        const std::string d = e->desc ? e->desc : "";
        const size_t a = d.find("error message = '");
        if (m.empty() && a != std::string::npos) {
          const size_t b = d.find('\'', a + 17);
          m = d.substr(a + 17, b == std::string::npos ? std::string::npos : b - a - 17);
        }
        return 0;
      },
      &msg);
  return msg;
}

// A write that fails: when the system says why (a full disk, a file size limit, permissions),
// an input error naming the file and the cause (exit code 2); else an internal error.
[[noreturn]] void fail(const H5File& f, const std::string& what) {
  const std::string cause = system_reason();
  if (!cause.empty()) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError(what + " in " + f.path().string() + ": " + cause);
  }
  throw Error(what + " in " + f.path().string() + hdf5_reason());
}
// A read that fails is a damaged or foreign input file: an input error (exit code 2).
[[noreturn]] void bad_file(const H5File& f, const std::string& what) {
  throw InputError(what + " in " + f.path().string() + hdf5_reason());
}


std::string absolute(const std::string& path) { return path.empty() || path[0] != '/' ? "/" + path : path; }

Handle utf8_string_type() {
  Handle t(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(t.id(), H5T_VARIABLE);
  H5Tset_cset(t.id(), H5T_CSET_UTF8);
  return t;
}

Handle link_creation_props() {
  Handle p(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  H5Pset_create_intermediate_group(p.id(), 1);
  return p;
}

Handle open_object(H5File& f, const std::string& path) {
  hid_t id = H5Oopen(f.id(), absolute(path).c_str(), H5P_DEFAULT);
  if (id < 0) bad_file(f, "cannot open object '" + path + "'");
  return Handle(id, H5Oclose);
}

Handle open_dataset(H5File& f, const std::string& path) {
  if (!exists(f, path)) throw InputError("dataset '" + path + "' not found in " + f.path().string());
  {
    Handle obj = open_object(f, path);
    const H5I_type_t type = H5Iget_type(obj.id());
    if (type != H5I_DATASET)
      throw InputError("'" + path + "' in " + f.path().string() + " is not a dataset" +
                       (type == H5I_GROUP ? " (it is a group)" : ""));
  }
  hid_t id = H5Dopen2(f.id(), absolute(path).c_str(), H5P_DEFAULT);
  if (id < 0) bad_file(f, "cannot open dataset '" + path + "'");
  return Handle(id, H5Dclose);
}

std::vector<int64_t> dataset_shape(H5File& f, hid_t ds, const std::string& path) {
  Handle space(H5Dget_space(ds), H5Sclose);
  int rank = H5Sget_simple_extent_ndims(space.id());
  if (rank < 0) bad_file(f, "cannot read the shape of '" + path + "'");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr);
  return {dims.begin(), dims.end()};
}

void write_string_attr(hid_t obj, const std::string& name, const std::string& value) {
  Handle type = utf8_string_type();
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Handle a(H5Acreate2(obj, name.c_str(), type.id(), space.id(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const char* p = value.c_str();
  if (!a || H5Awrite(a.id(), type.id(), &p) < 0) throw Error("cannot write attribute '" + name + "'" + hdf5_reason());
}


void annotate(hid_t ds, std::string_view units, std::string_view description) {
  write_string_attr(ds, "units", std::string(units));
  write_string_attr(ds, "description", std::string(description));
}

}  // namespace detail

void Handle::reset() {
  if (id_ >= 0 && close_) close_(id_);
  id_ = H5I_INVALID_HID;
}

template <class T>
int64_t Array<T>::numel() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
}
template struct Array<float>;
template struct Array<double>;
template struct Array<int64_t>;
template struct Array<int32_t>;
template struct Array<int8_t>;

H5File H5File::create(const fs::path& path) {
  hid_t id = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (id < 0) throw InputError("cannot create HDF5 file " + path.string() + hdf5_reason());
  return H5File(Handle(id, H5Fclose), path);
}

H5File H5File::open(const fs::path& path, bool writable) {
  if (const std::string problem = input_file_problem(path.string()); !problem.empty())
    throw InputError(problem == "file not found" ? "file not found: " + path.string() : path.string() + ": " + problem);
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    throw InputError("not an HDF5 file: " + path.string());
  }
  hid_t id = H5Fopen(path.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw InputError("cannot open HDF5 file " + path.string() + hdf5_reason());
  return H5File(Handle(id, H5Fclose), path);
}

// Creates dataset `path` of file type `file_type` and writes `data` given in memory type
// `mem_type`, with its units and description.
static void write_dataset(H5File& f, const std::string& path, hid_t file_type, hid_t mem_type, const void* data,
                   const std::vector<int64_t>& shape, std::string_view units, std::string_view description) {
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  Handle lcpl = link_creation_props();
  Handle ds(H5Dcreate2(f.id(), absolute(path).c_str(), file_type, space.id(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  if (!ds) fail(f, "cannot create dataset '" + path + "'");
  if (H5Dwrite(ds.id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) fail(f, "cannot write dataset '" + path + "'");
  annotate(ds.id(), units, description);
}

template <class T>
void write(H5File& f, const std::string& path, const T* data, const std::vector<int64_t>& shape,
           std::string_view units, std::string_view description) {
  write_dataset(f, path, mem_type<T>(), mem_type<T>(), data, shape, units, description);
}

// IEEE binary16 as an HDF5 file type (HDF5 1.10 has no predefined one): sign bit 15, exponent
// bits 10-14 (bias 15), mantissa bits 0-9. HDF5 converts to and from native float on I/O, and
// h5py reads it as numpy.float16.
static Handle float16_type() {
  Handle t(H5Tcopy(H5T_IEEE_F32LE), H5Tclose);
  if (H5Tset_fields(t.id(), 15, 10, 5, 0, 10) < 0 || H5Tset_precision(t.id(), 16) < 0 || H5Tset_offset(t.id(), 0) < 0 ||
      H5Tset_size(t.id(), 2) < 0 || H5Tset_ebias(t.id(), 15) < 0)
    throw Error("cannot define the HDF5 float16 type" + hdf5_reason());
  return t;
}

// The float of IEEE binary16 bits, exactly (every binary16 value is a float): by its fields,
// since the compiler's _Float16 conversion is a library call without F16C (57 ns a value).
static float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero and subnormals: m * 2^-24
    const float v = static_cast<float>(m) * 0x1p-24f;
    return sign ? -v : v;
  }
  const uint32_t bits = sign | (e == 0x1f ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13));
  return std::bit_cast<float>(bits);
}

// A little-endian IEEE binary16 layout, whoever wrote it (write_float16, h5py's float16).
static bool is_ieee_half(hid_t t) {
  size_t spos = 0, epos = 0, esize = 0, mpos = 0, msize = 0;
  return H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 2 && H5Tget_order(t) == H5T_ORDER_LE &&
         H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0 && spos == 15 && epos == 10 && esize == 5 &&
         mpos == 0 && msize == 10 && H5Tget_ebias(t) == 15 && H5Tget_norm(t) == H5T_NORM_IMPLIED &&
         H5Tget_offset(t) == 0 && H5Tget_precision(t) == 16;
}

float round_to_float16(float v) { return static_cast<float>(static_cast<_Float16>(v)); }

void write_float16(H5File& f, const std::string& path, const float* data, const std::vector<int64_t>& shape,
                   std::string_view units, std::string_view description) {
  // Rounded here (to nearest, ties to even), so the stored value does not depend on how
  // HDF5's float conversion rounds.
  std::vector<float> rounded(data, data + std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>()));
  for (float& v : rounded) v = round_to_float16(v);
  Handle type = float16_type();
  write_dataset(f, path, type.id(), H5T_NATIVE_FLOAT, rounded.data(), shape, units, description);
}

template <class T>
void write_scalar(H5File& f, const std::string& path, T value, std::string_view units,
                  std::string_view description) {
  write<T>(f, path, &value, {}, units, description);
}

void write_strings(H5File& f, const std::string& path, const std::vector<std::string>& values,
                   std::string_view description) {
  Handle type = utf8_string_type();
  hsize_t n = values.size();
  Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
  Handle lcpl = link_creation_props();
  Handle ds(H5Dcreate2(f.id(), absolute(path).c_str(), type.id(), space.id(), lcpl.id(), H5P_DEFAULT, H5P_DEFAULT),
            H5Dclose);
  if (!ds) fail(f, "cannot create dataset '" + path + "'");
  std::vector<const char*> ptrs;
  for (const auto& s : values) ptrs.push_back(s.c_str());
  if (n > 0 && H5Dwrite(ds.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0)
    fail(f, "cannot write dataset '" + path + "'");
  annotate(ds.id(), "1", description);
}

template <class T>
Array<T> read(H5File& f, const std::string& path) {
  Handle ds = open_dataset(f, path);
  Handle type(H5Dget_type(ds.id()), H5Tclose);
  H5T_class_t cls = H5Tget_class(type.id());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER)
    throw InputError("dataset '" + path + "' in " + f.path().string() + " is not numeric");
  Array<T> out;
  out.shape = dataset_shape(f, ds.id(), path);
  out.data.resize(static_cast<size_t>(out.numel()));
  if (out.data.empty()) return out;
  if constexpr (std::is_same_v<T, float>) {
    // IEEE binary16 (write_float16's type) is read as stored and widened here: HDF5 1.10
    // converts it one element at a time, about 80 ns each (0.3 s for drunet_ct's 3.8 M scales).
    if (is_ieee_half(type.id())) {  // read in the file's own type: no conversion
      std::vector<uint16_t> raw(out.data.size());
      if (H5Dread(ds.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) < 0)
        bad_file(f, "cannot read dataset '" + path + "'");
      std::transform(raw.begin(), raw.end(), out.data.begin(), half_bits_to_float);
      return out;
    }
  }
  if (H5Dread(ds.id(), mem_type<T>(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data.data()) < 0)
    bad_file(f, "cannot read dataset '" + path + "'");
  return out;
}

std::vector<std::string> read_strings(H5File& f, const std::string& path) {
  Handle ds = open_dataset(f, path);
  auto shape = dataset_shape(f, ds.id(), path);
  size_t n = shape.empty() ? 1 : static_cast<size_t>(shape[0]);
  Handle type = utf8_string_type();
  std::vector<char*> ptrs(n, nullptr);
  if (n > 0 && H5Dread(ds.id(), type.id(), H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()) < 0)
    bad_file(f, "cannot read strings '" + path + "'");
  std::vector<std::string> out;
  for (char* p : ptrs) {
    out.emplace_back(p ? p : "");
    H5free_memory(p);
  }
  return out;
}

ElementType element_type_of(H5File& f, const std::string& path) {
  Handle ds = open_dataset(f, path);
  Handle type(H5Dget_type(ds.id()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.id());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER)
    throw InputError("dataset '" + path + "' in " + f.path().string() + " is not numeric");
  return {cls == H5T_INTEGER, H5Tget_size(type.id())};
}

std::vector<int64_t> shape_of(H5File& f, const std::string& path) {
  Handle ds = open_dataset(f, path);
  return dataset_shape(f, ds.id(), path);
}

bool exists(H5File& f, const std::string& path) {
  std::string p = absolute(path);
  if (p == "/") return true;
  // H5Lexists requires every intermediate link to exist: walk component by component.
  size_t pos = 1;
  while (true) {
    size_t next = p.find('/', pos);
    std::string prefix = p.substr(0, next);
    if (H5Lexists(f.id(), prefix.c_str(), H5P_DEFAULT) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return false;
    }
    if (next == std::string::npos) return true;
    pos = next + 1;
  }
}

std::vector<std::string> list_datasets(H5File& f, const std::string& group) {
  struct Ctx {
    std::string prefix;
    std::vector<std::string> names;
  } ctx{absolute(group), {}};
  if (ctx.prefix.back() != '/') ctx.prefix += '/';
  Handle g = open_object(f, group);
  H5Ovisit(
      g.id(), H5_INDEX_NAME, H5_ITER_INC,
      [](hid_t, const char* name, const H5O_info_t* info, void* data) -> herr_t {
        auto* c = static_cast<Ctx*>(data);
        if (info->type == H5O_TYPE_DATASET) c->names.push_back(c->prefix + name);
        return 0;
      },
      &ctx);
  std::sort(ctx.names.begin(), ctx.names.end());
  return ctx.names;
}

void write_attr(H5File& f, const std::string& obj_path, const std::string& name, const AttrValue& v) {
  Handle obj = open_object(f, obj_path);
  if (auto s = std::get_if<std::string>(&v)) write_string_attr(obj.id(), name, *s);
  else if (auto i = std::get_if<int64_t>(&v)) write_numeric_attr(obj.id(), name, *i);
  else write_numeric_attr(obj.id(), name, std::get<double>(v));
}

bool has_attr(H5File& f, const std::string& obj_path, const std::string& name) {
  if (!exists(f, obj_path)) return false;
  Handle obj = open_object(f, obj_path);
  return H5Aexists(obj.id(), name.c_str()) > 0;
}

namespace {
Handle open_attr(H5File& f, const std::string& obj_path, const std::string& name) {
  if (!has_attr(f, obj_path, name))
    throw InputError("attribute '" + name + "' of '" + obj_path + "' not found in " + f.path().string());
  Handle obj = open_object(f, obj_path);
  Handle a(H5Aopen(obj.id(), name.c_str(), H5P_DEFAULT), H5Aclose);
  if (a.id() < 0) bad_file(f, "cannot open attribute '" + name + "' of '" + obj_path + "'");
  // Every attribute pnp reads holds one value, read into one variable: a damaged or foreign
  // file that declares more must not write past it.
  Handle space(H5Aget_space(a.id()), H5Sclose);
  const hssize_t n = space.id() < 0 ? -1 : H5Sget_simple_extent_npoints(space.id());
  if (n != 1)
    bad_file(f, "attribute '" + name + "' of '" + obj_path + "' holds " + std::to_string(n) + " values, expected one");
  return a;
}
template <class T>
T read_numeric_attr(H5File& f, const std::string& obj_path, const std::string& name) {
  Handle a = open_attr(f, obj_path, name);
  T v{};
  if (H5Aread(a.id(), mem_type<T>(), &v) < 0) bad_file(f, "cannot read attribute '" + name + "'");
  return v;
}
}  // namespace

std::string read_attr_string(H5File& f, const std::string& obj_path, const std::string& name) {
  Handle a = open_attr(f, obj_path, name);
  Handle stored(H5Aget_type(a.id()), H5Tclose);
  if (H5Tget_class(stored.id()) != H5T_STRING) bad_file(f, "attribute '" + name + "' is not a string");
  if (H5Tis_variable_str(stored.id()) > 0) {
    Handle type = utf8_string_type();
    char* p = nullptr;
    if (H5Aread(a.id(), type.id(), &p) < 0) bad_file(f, "cannot read attribute '" + name + "'");
    std::string s = p ? p : "";
    H5free_memory(p);
    return s;
  }
  size_t n = H5Tget_size(stored.id());
  std::string s(n, '\0');
  if (H5Aread(a.id(), stored.id(), s.data()) < 0) bad_file(f, "cannot read attribute '" + name + "'");
  s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
  return s;
}
int64_t read_attr_int(H5File& f, const std::string& o, const std::string& n) { return read_numeric_attr<int64_t>(f, o, n); }
double read_attr_double(H5File& f, const std::string& o, const std::string& n) { return read_numeric_attr<double>(f, o, n); }

void check_output_path(const fs::path& path, bool overwrite, const std::vector<fs::path>& inputs) {
  const std::string name = path.string();
  if (name.empty()) throw InputError("the output file name is empty");
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw InputError("output file " + name + ": " + ec.message());
  if (fs::is_directory(st)) throw InputError("output file " + name + " is a directory");
  const bool exists = fs::exists(st);
  if (exists && !fs::is_regular_file(st)) throw InputError("output file " + name + " exists and is not a regular file");
  for (const auto& in : inputs) {
    if (!exists) continue;
    if (validate::same_file(path, in))
      throw InputError("output file " + name + " is the input " + in.string() +
                       "; writing it would destroy the input (choose another output, even with --force)");
  }
  if (exists && !overwrite) throw InputError("output file " + name + " exists; pass --force to overwrite it");
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const fs::file_status ds = fs::status(dir, ec);
  if (ec || !fs::is_directory(ds))
    throw InputError("output directory " + dir.string() + (ec && ec != std::errc::no_such_file_or_directory
                                                               ? ": " + ec.message()
                                                               : fs::exists(ds) ? " is not a directory" : " does not exist"));
  // Writable? Create (and remove) the temporary file AtomicOutput would create.
  const std::string probe = name + ".tmp." + std::to_string(::getpid()) + ".probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    const std::string why = std::error_code(errno, std::generic_category()).message();
    throw InputError("cannot write the output file " + name + ": " + why);
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

AtomicOutput::AtomicOutput(fs::path final_path, bool overwrite)
    : final_(std::move(final_path)),
      tmp_(final_.string() + ".tmp." + std::to_string(::getpid())),
      file_((check_output_path(final_, overwrite), H5File::create(tmp_))) {}

AtomicOutput::~AtomicOutput() {
  if (!committed_) {
    file_.close();
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
}

void AtomicOutput::commit() {
  if (committed_) return;
  if (H5Fflush(file_.id(), H5F_SCOPE_GLOBAL) < 0) fail(file_, "cannot flush");
  file_.close();
  std::error_code ec;
  fs::rename(tmp_, final_, ec);
  if (ec) throw InputError("cannot rename " + tmp_.string() + " to " + final_.string() + ": " + ec.message());
  committed_ = true;
}

void write_provenance(H5File& f, const Provenance& p) {
  write_attr(f, "/", "program", p.program);
  write_attr(f, "/", "version", p.version);
  write_attr(f, "/", "git_commit", p.git_commit);
  write_attr(f, "/", "date", p.date_utc);
  write_attr(f, "/", "host", p.host);
  write_attr(f, "/", "torch_version", p.torch_version.empty() ? "none" : p.torch_version);
  write_attr(f, "/", "cuda_version", p.cuda_version.empty() ? "none" : p.cuda_version);
  write_attr(f, "/", "nccl_version", p.nccl_version.empty() ? "none" : p.nccl_version);
}

#define PNP_IO_INSTANTIATE(T)                                                                           \
  template void write<T>(H5File&, const std::string&, const T*, const std::vector<int64_t>&,            \
                         std::string_view, std::string_view);                                          \
  template void write_scalar<T>(H5File&, const std::string&, T, std::string_view, std::string_view);    \
  template Array<T> read<T>(H5File&, const std::string&);
PNP_IO_INSTANTIATE(float)
PNP_IO_INSTANTIATE(double)
PNP_IO_INSTANTIATE(int64_t)
PNP_IO_INSTANTIATE(int32_t)
PNP_IO_INSTANTIATE(int8_t)
#undef PNP_IO_INSTANTIATE

}  // namespace pnp::io
