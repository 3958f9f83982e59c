// pnp_denoise's input: one dataset of an HDF5 file, checked before and after it is read.
#include <string>

#include "pnp/io.hpp"
#include "pnp/messages.hpp"
#include "pnp/validate.hpp"

namespace pnp::io {

Array<float> read_image(const std::filesystem::path& path, std::string& dataset,
                        const std::function<void(const std::vector<int64_t>&)>& check_declared) {
  auto in = H5File::open(path);
  if (dataset.empty()) {
    auto all = list_datasets(in, "/");
    if (all.size() != 1) {
      std::string names;
      for (const auto& d : all) names += (names.empty() ? "" : ", ") + d;
      throw InputError(path.string() + " holds " + std::to_string(all.size()) + " datasets (" + clip_value(names) +
                       "); choose one with --dataset");
    }
    dataset = all[0];
  }
  if (!exists(in, dataset)) throw InputError(path.string() + " has no dataset " + clip_value(dataset));
  const std::vector<int64_t> declared = shape_of(in, dataset);
  if (check_declared) check_declared(declared);
  Array<float> a = read<float>(in, dataset);
  validate::require_finite(a.data.data(), a.shape, path.string() + ":" + dataset);
  return a;
}

}  // namespace pnp::io
