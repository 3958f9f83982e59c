// HDF5 input and output: RAII over the HDF5 C API, typed dataset and attribute access,
// DXchange sinogram reading, and atomic (temp + rename) output files.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "pnp/core.hpp"

namespace pnp::io {

// An owned HDF5 identifier closed by the matching H5*close when it goes out of scope.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle() = default;
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)), close_(o.close_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) { reset(); id_ = std::exchange(o.id_, H5I_INVALID_HID); close_ = o.close_; }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }
  hid_t id() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
  Closer close_ = nullptr;
};

// An open HDF5 file. Errors name the file and the object.
class H5File {
 public:
  static H5File create(const std::filesystem::path& path);  // truncates
  static H5File open(const std::filesystem::path& path, bool writable = false);
  hid_t id() const { return h_.id(); }
  const std::filesystem::path& path() const { return path_; }
  void close() { h_.reset(); }

 private:
  H5File(Handle h, std::filesystem::path p) : h_(std::move(h)), path_(std::move(p)) {}
  Handle h_;
  std::filesystem::path path_;
};

template <class T>
struct Array {
  std::vector<int64_t> shape;
  std::vector<T> data;
  int64_t numel() const;
};

// Datasets: `path` is absolute or relative to the root; intermediate groups are created.
// Every dataset written by pnp carries `units` and `description` attributes.
template <class T>  // float, double, int64_t, int32_t, int8_t
void write(H5File& f, const std::string& path, const T* data, const std::vector<int64_t>& shape,
           std::string_view units, std::string_view description);
// float32 values stored as IEEE binary16 (rounded to nearest, ties to even; readers get
// float32 back through read<float>, h5py gets numpy.float16).
void write_float16(H5File& f, const std::string& path, const float* data, const std::vector<int64_t>& shape,
                   std::string_view units, std::string_view description);
// The nearest binary16 value of v (ties to even), as a float; overflow gives +-inf.
float round_to_float16(float v);
template <class T>
void write_scalar(H5File& f, const std::string& path, T value, std::string_view units,
                  std::string_view description);
void write_strings(H5File& f, const std::string& path, const std::vector<std::string>& values,
                   std::string_view description);

// One column of a table stored as column datasets (pnp_bench's /results and /ceilings):
// get(row) for every row, written as a string dataset when it returns a string (units are not
// stored for strings), else as float64 or int64.
template <class Row, class Get>
void write_column(H5File& f, const std::string& path, const std::vector<Row>& rows, Get get,
                  std::string_view units, std::string_view description) {
  using V = std::decay_t<decltype(get(rows.front()))>;
  if constexpr (std::is_same_v<V, std::string>) {
    std::vector<std::string> v;
    for (const auto& r : rows) v.push_back(get(r));
    write_strings(f, path, v, description);
  } else {
    using Stored = std::conditional_t<std::is_floating_point_v<V>, double, int64_t>;
    std::vector<Stored> v;
    for (const auto& r : rows) v.push_back(static_cast<Stored>(get(r)));
    write(f, path, v.data(), {static_cast<int64_t>(v.size())}, units, description);
  }
}

// Reads and converts to T, whatever the stored numeric type.
template <class T>
Array<T> read(H5File& f, const std::string& path);
std::vector<std::string> read_strings(H5File& f, const std::string& path);

bool exists(H5File& f, const std::string& path);  // dataset or group, any depth
// The declared shape of a dataset, read without reading (or allocating for) its data: check
// it before calling read<T>.
std::vector<int64_t> shape_of(H5File& f, const std::string& path);
// The stored element type of a numeric dataset: integer or floating point, and its bytes.
struct ElementType {
  bool integer = false;
  size_t bytes = 0;
};
ElementType element_type_of(H5File& f, const std::string& path);
std::vector<std::string> list_datasets(H5File& f, const std::string& group = "/");

using AttrValue = std::variant<std::string, int64_t, double>;
void write_attr(H5File& f, const std::string& obj_path, const std::string& name, const AttrValue& v);
std::string read_attr_string(H5File& f, const std::string& obj_path, const std::string& name);
int64_t read_attr_int(H5File& f, const std::string& obj_path, const std::string& name);
double read_attr_double(H5File& f, const std::string& obj_path, const std::string& name);
bool has_attr(H5File& f, const std::string& obj_path, const std::string& name);

// Writes to `<final>.tmp.<pid>` and renames onto the final name only on commit(), so a crash
// never leaves a half-written file under the final name. Without commit() the temp file is
// removed. Refuses to replace an existing final file unless `overwrite`.
class AtomicOutput {
 public:
  AtomicOutput(std::filesystem::path final_path, bool overwrite);
  ~AtomicOutput();
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;
  H5File& file() { return file_; }
  void commit();
  const std::filesystem::path& final_path() const { return final_; }

 private:
  std::filesystem::path final_, tmp_;
  H5File file_;
  bool committed_ = false;
};
// Checked before long runs start; throws InputError unless `path` can be written: a non-empty
// name, not a directory, no existing file unless `overwrite`, its directory exists and is
// writable (probed with a temporary file), and it is none of `inputs` (not even with overwrite).
void check_output_path(const std::filesystem::path& path, bool overwrite,
                       const std::vector<std::filesystem::path>& inputs = {});

// Reads each file whole (every object, attribute and dataset; datasets over 256 MiB in their
// first 1 MiB) in a separate process, `pnp_h5probe` beside the running program, and throws
// InputError when that process crashes, hangs longer than `timeout_s` or finds a file
// unreadable: a damaged file that would crash or hang the HDF5 library (libhdf5 has
// out-of-bounds reads on some corrupted metadata) is refused before any rank reads it. Files
// that do not exist or are not regular files are skipped (their readers say why).
void probe_hdf5(const std::vector<std::filesystem::path>& files, double timeout_s = 120);
// What pnp_h5probe does, in this process: "" when every object of the file reads, else why not.
std::string whole_file_problem(const std::filesystem::path& path);

// Volumes: a part of a dataset read alone, and a chunked, compressed float32 dataset written
// part by part (src/io/volume.cpp).
// The hyperslab [start, start + count) of dataset `path` (one entry per dimension), converted to
// T; InputError naming the file and dataset for another rank or a range outside its shape.
template <class T>
Array<T> read_hyperslab(H5File& f, const std::string& path, const std::vector<int64_t>& start,
                        const std::vector<int64_t>& count);
// Creates float32 dataset `path` of `shape`, stored in chunks of `chunk` (clipped to the shape)
// and, for level 1-9, shuffled and deflate-compressed; parts never written read as NaN. It
// carries `units` and `description`; write_hyperslab fills it.
void create_chunked(H5File& f, const std::string& path, const std::vector<int64_t>& shape,
                    const std::vector<int64_t>& chunk, int level, std::string_view units,
                    std::string_view description);
// Writes `data` (float32, row-major of shape `count`) into [start, start + count) of `path`.
void write_hyperslab(H5File& f, const std::string& path, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& count, const float* data);
// How a dataset is stored: its chunk shape (empty: contiguous) and whether it is deflated.
struct ChunkLayout {
  std::vector<int64_t> chunk;
  bool deflate = false;
};
ChunkLayout chunk_layout(H5File& f, const std::string& path);

// A sinogram in the DXchange layout: data [angles, detector] float32, theta in degrees,
// optional ground truth image [N, N].
struct Sinogram {
  Array<float> data;
  std::vector<double> theta_deg;
  std::optional<Array<float>> ground_truth;
  std::string theta_warning;  // read_dxchange: the angles look like radians (validate::check_angles_deg)
};
struct DxchangePaths {
  std::string data = "/exchange/data";
  std::string theta = "/exchange/theta";
  std::string ground_truth = "/exchange/ground_truth";
};
// The declared shapes of a DXchange file, read without its data (and validated: data
// [K, D] non-empty, theta [K], ground truth [N, N]).
struct DxchangeShapes {
  std::vector<int64_t> data, theta, ground_truth;
  bool has_theta = false, has_truth = false;
};
DxchangeShapes read_dxchange_shapes(const std::filesystem::path& path, const DxchangePaths& paths = {});
// What the reader checks the declared shapes against before it reads: 0 = anything.
struct DxchangeExpect {
  int64_t angles = 0, detector = 0, size = 0;
  double max_bytes = 0;  // the data it may allocate
  std::string source;    // where the expectations come from, for messages ("problem.size = 512")
};
// Reads the data (float32), theta (degrees) and ground truth; every value must be finite, and
// every angle within +-720 degrees (a `units` attribute of theta is read for the warning).
// InputError naming the file and dataset for a declared shape that does not fit `expect`, a
// non-finite value, or a group where a dataset belongs.
Sinogram read_dxchange(const std::filesystem::path& path, const DxchangePaths& paths = {},
                       const DxchangeExpect& expect = {});
void write_dxchange(H5File& f, const Sinogram& s, const DxchangePaths& paths = {});
// The angles of dataset `theta` of the open file `f` (at `path`, for messages), in degrees:
// every one finite and within +-720 degrees (InputError), and `warning` set ("" when none) when
// they look like radians (a `units` attribute is read for it).
std::vector<double> read_angles(H5File& f, const std::filesystem::path& path, const std::string& theta,
                                std::string& warning);

// A projection volume in the DXchange layout: data [angles, slices, detector], either raw
// counts with flat fields (data_white) and optionally dark fields (data_dark), both [frames,
// slices, detector], or line integrals without them; theta [angles] in degrees; a ground truth
// [slices, N, N] where the file has one.
struct VolumePaths {
  std::string data = "/exchange/data";
  std::string theta = "/exchange/theta";
  std::string white = "/exchange/data_white";
  std::string dark = "/exchange/data_dark";
  std::string ground_truth = "/exchange/ground_truth";
};
struct VolumeShapes {
  std::vector<int64_t> data, theta, white, dark, ground_truth;  // empty: absent
  bool has_theta = false;
  int64_t angles() const { return data[0]; }
  int64_t slices() const { return data[1]; }
  int64_t detector() const { return data[2]; }
};
// The declared shapes, validated without reading any data: InputError naming the file and the
// dataset for a data set that is not 3D or is empty, a theta, flat, dark or truth whose shape
// does not match it, or dark fields without flat fields.
VolumeShapes read_volume_shapes(const std::filesystem::path& path, const VolumePaths& paths = {});
// The sinograms of slices [z0, z1), [z1 - z0, angles, detector] float32, read without the rest
// of the volume. With flat fields: -log((data - dark) / (flat - dark)), flats and darks
// averaged per (slice, bin), transmissions below 1e-6 clipped there (counted in `clipped`), the
// bins whose flat is at or below their dark set to 0 (counted in `dead_bins`; more than 1 in
// 1000 is an InputError). Every value read must be finite.
struct SlabSinograms {
  Array<float> sinograms;
  int64_t clipped = 0, dead_bins = 0;
};
SlabSinograms read_volume_slab(const std::filesystem::path& path, const VolumePaths& paths, const VolumeShapes& shapes,
                               int64_t z0, int64_t z1);

// An image or volume (pnp_denoise's input): `dataset` of the file, or its only dataset when
// empty (then set to its name). Its declared shape goes to `check_declared` (which throws to
// refuse it: sizes against the network and memory) before anything is read; every value read
// must be finite (InputError naming the file, dataset and index).
Array<float> read_image(const std::filesystem::path& path, std::string& dataset,
                        const std::function<void(const std::vector<int64_t>&)>& check_declared = {});

// Root provenance attributes of every pnp output file (docs/output_schema.md).
void write_provenance(H5File& f, const Provenance& p);

}  // namespace pnp::io
