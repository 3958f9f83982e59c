// Helpers of the HDF5 layer shared by its files (h5.cpp, volume.cpp); not a public header.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pnp/io.hpp"

namespace pnp::io::detail {

// The innermost message of HDF5's error stack, as " (message)" to append to ours ("" if none).
std::string hdf5_reason();
// The operating system's reason in HDF5's error stack ("No space left on device"), if any.
std::string system_reason();
// A write that fails: an input error naming the file and the system's cause when there is one
// (exit code 2), else an internal error.
[[noreturn]] void fail(const H5File& f, const std::string& what);
// A read that fails is a damaged or foreign input file: an input error (exit code 2).
[[noreturn]] void bad_file(const H5File& f, const std::string& what);

template <class T>
hid_t mem_type() {
  if constexpr (std::is_same_v<T, float>) return H5T_NATIVE_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return H5T_NATIVE_DOUBLE;
  else if constexpr (std::is_same_v<T, int64_t>) return H5T_NATIVE_INT64;
  else if constexpr (std::is_same_v<T, int32_t>) return H5T_NATIVE_INT32;
  else if constexpr (std::is_same_v<T, int8_t>) return H5T_NATIVE_INT8;
  else static_assert(sizeof(T) == 0, "unsupported HDF5 element type");
}

std::string absolute(const std::string& path);
Handle utf8_string_type();
Handle link_creation_props();
Handle open_object(H5File& f, const std::string& path);
// The dataset at `path`: InputError when it is missing or not a dataset.
Handle open_dataset(H5File& f, const std::string& path);
std::vector<int64_t> dataset_shape(H5File& f, hid_t ds, const std::string& path);
void write_string_attr(hid_t obj, const std::string& name, const std::string& value);
template <class T>
void write_numeric_attr(hid_t obj, const std::string& name, T value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  if (H5Aexists(obj, name.c_str()) > 0) H5Adelete(obj, name.c_str());
  Handle a(H5Acreate2(obj, name.c_str(), mem_type<T>(), space.id(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  if (!a || H5Awrite(a.id(), mem_type<T>(), &value) < 0)
    throw Error("cannot write attribute '" + name + "'" + hdf5_reason());
}
// The `units` and `description` attributes every dataset pnp writes carries.
void annotate(hid_t ds, std::string_view units, std::string_view description);

// A DXchange data set's declared shape: `dims` dimensions as `layout` names them ("[angles,
// detector]"), none empty (InputError naming the dataset otherwise).
std::vector<int64_t> data_shape(H5File& f, const std::string& path, size_t dims, const std::string& layout);
// The declared shape of `theta` when the file has it ([angles] of the data set `data`,
// InputError otherwise); empty when it is absent.
std::vector<int64_t> theta_shape(H5File& f, const std::string& theta, const std::string& data, int64_t angles);

}  // namespace pnp::io::detail
