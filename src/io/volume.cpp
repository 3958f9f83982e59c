// Volumes in HDF5 (include/pnp/io.hpp): a part of a dataset read alone, and a chunked,
// compressed float32 dataset written part by part, which a notebook slices without reading it
// all.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "h5_detail.hpp"
#include "pnp/io.hpp"

namespace pnp::io {

using namespace detail;

namespace {

std::string range_text(const std::vector<int64_t>& start, const std::vector<int64_t>& count) {
  std::string s = "[";
  for (size_t d = 0; d < start.size(); ++d)
    s += (d ? ", " : "") + std::to_string(start[d]) + ":" + std::to_string(start[d] + count[d]);
  return s + "]";
}

// The hyperslab [start, start + count) of a dataset of `shape`, checked: InputError naming the
// file and dataset for a rank that differs or a range outside the shape.
Handle select(H5File& f, hid_t ds, const std::string& path, const std::vector<int64_t>& start,
              const std::vector<int64_t>& count) {
  const std::vector<int64_t> shape = dataset_shape(f, ds, path);
  if (start.size() != shape.size() || count.size() != shape.size())
    throw InputError("'" + path + "' in " + f.path().string() + " has " + std::to_string(shape.size()) +
                     " dimensions, not " + std::to_string(start.size()));
  for (size_t d = 0; d < shape.size(); ++d)
    if (start[d] < 0 || count[d] < 0 || start[d] + count[d] > shape[d])
      throw InputError("the range " + range_text(start, count) + " lies outside '" + path + "' in " +
                       f.path().string() + " (shape " + shape_string(shape) + ")");
  Handle space(H5Dget_space(ds), H5Sclose);
  const std::vector<hsize_t> s(start.begin(), start.end()), c(count.begin(), count.end());
  if (!shape.empty() && H5Sselect_hyperslab(space.id(), H5S_SELECT_SET, s.data(), nullptr, c.data(), nullptr) < 0)
    bad_file(f, "cannot select " + range_text(start, count) + " of '" + path + "'");
  return space;
}

}  // namespace

template <class T>
Array<T> read_hyperslab(H5File& f, const std::string& path, const std::vector<int64_t>& start,
                        const std::vector<int64_t>& count) {
  Handle ds = open_dataset(f, path);
  Handle type(H5Dget_type(ds.id()), H5Tclose);
  const H5T_class_t cls = H5Tget_class(type.id());
  if (cls != H5T_FLOAT && cls != H5T_INTEGER)
    throw InputError("dataset '" + path + "' in " + f.path().string() + " is not numeric");
  Handle file_space = select(f, ds.id(), path, start, count);
  Array<T> out;
  out.shape = count;
  out.data.resize(static_cast<size_t>(out.numel()));
  if (out.data.empty()) return out;
  const std::vector<hsize_t> c(count.begin(), count.end());
  Handle mem_space(H5Screate_simple(static_cast<int>(c.size()), c.data(), nullptr), H5Sclose);
  if (H5Dread(ds.id(), mem_type<T>(), mem_space.id(), file_space.id(), H5P_DEFAULT, out.data.data()) < 0)
    bad_file(f, "cannot read " + range_text(start, count) + " of '" + path + "'");
  return out;
}
template Array<float> read_hyperslab<float>(H5File&, const std::string&, const std::vector<int64_t>&,
                                            const std::vector<int64_t>&);
template Array<double> read_hyperslab<double>(H5File&, const std::string&, const std::vector<int64_t>&,
                                              const std::vector<int64_t>&);

void create_chunked(H5File& f, const std::string& path, const std::vector<int64_t>& shape,
                    const std::vector<int64_t>& chunk, int level, std::string_view units,
                    std::string_view description) {
  if (shape.empty() || chunk.size() != shape.size())
    throw Error("create_chunked: '" + path + "' needs a chunk size per dimension");
  if (level < 0 || level > 9) throw Error("create_chunked: deflate level must be 0 to 9, got " + std::to_string(level));
  std::vector<hsize_t> dims(shape.begin(), shape.end()), cdims;
  for (size_t d = 0; d < shape.size(); ++d)
    cdims.push_back(static_cast<hsize_t>(std::clamp<int64_t>(chunk[d], 1, std::max<int64_t>(shape[d], 1))));
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  // Never written parts read as NaN, not as zeros that look like an image.
  const float fill = std::numeric_limits<float>::quiet_NaN();
  if (H5Pset_chunk(dcpl.id(), static_cast<int>(cdims.size()), cdims.data()) < 0 ||
      H5Pset_fill_value(dcpl.id(), H5T_NATIVE_FLOAT, &fill) < 0 ||
      (level > 0 && (H5Pset_shuffle(dcpl.id()) < 0 || H5Pset_deflate(dcpl.id(), static_cast<unsigned>(level)) < 0)))
    throw Error("cannot set the chunked layout of '" + path + "'" + hdf5_reason());
  Handle lcpl = link_creation_props();
  Handle ds(H5Dcreate2(f.id(), absolute(path).c_str(), H5T_IEEE_F32LE, space.id(), lcpl.id(), dcpl.id(), H5P_DEFAULT),
            H5Dclose);
  if (!ds) fail(f, "cannot create dataset '" + path + "'");
  annotate(ds.id(), units, description);
}

void write_hyperslab(H5File& f, const std::string& path, const std::vector<int64_t>& start,
                     const std::vector<int64_t>& count, const float* data) {
  Handle ds = open_dataset(f, path);
  Handle file_space = select(f, ds.id(), path, start, count);
  const std::vector<hsize_t> c(count.begin(), count.end());
  if (std::any_of(c.begin(), c.end(), [](hsize_t v) { return v == 0; })) return;
  Handle mem_space(H5Screate_simple(static_cast<int>(c.size()), c.data(), nullptr), H5Sclose);
  if (H5Dwrite(ds.id(), H5T_NATIVE_FLOAT, mem_space.id(), file_space.id(), H5P_DEFAULT, data) < 0)
    fail(f, "cannot write " + range_text(start, count) + " of '" + path + "'");
}

ChunkLayout chunk_layout(H5File& f, const std::string& path) {
  Handle ds = open_dataset(f, path);
  Handle dcpl(H5Dget_create_plist(ds.id()), H5Pclose);
  ChunkLayout l;
  if (H5Pget_layout(dcpl.id()) != H5D_CHUNKED) return l;
  const int rank = static_cast<int>(dataset_shape(f, ds.id(), path).size());
  std::vector<hsize_t> c(static_cast<size_t>(rank));
  H5Pget_chunk(dcpl.id(), rank, c.data());
  l.chunk.assign(c.begin(), c.end());
  const int n = H5Pget_nfilters(dcpl.id());
  for (int i = 0; i < n; ++i) {
    unsigned flags = 0, conf = 0;
    size_t nelmts = 0;
    const H5Z_filter_t id = H5Pget_filter2(dcpl.id(), static_cast<unsigned>(i), &flags, &nelmts, nullptr, 0, nullptr, &conf);
    l.deflate = l.deflate || id == H5Z_FILTER_DEFLATE;
  }
  return l;
}

}  // namespace pnp::io
