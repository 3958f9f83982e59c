// pnp_denoise: apply a denoiser (DnCNN, DRUNet, UNet or identity; 2D or 3D) to an image or
// volume stored in HDF5, or print a network's roofline counts. The command line and the output
// file; the denoising is pnp::nn's (denoise_patched, network_shape).
#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "pnp/device.hpp"
#include "pnp/io.hpp"
#include "pnp/nn/nn.hpp"
#include "pnp/roofline.hpp"

namespace po = boost::program_options;
using namespace pnp;

namespace {

std::vector<int64_t> parse_list(const std::string& s, const std::string& what) {
  std::vector<int64_t> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t pos = 0;
      out.push_back(std::stoll(item, &pos));
      if (pos != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw InputError("--" + what + ": expected comma-separated integers, got '" + s + "'");
    }
  }
  return out;
}

int run(int argc, char** argv) {
  std::string input, dataset, output, out_dataset, weights, save_weights_path, dump_ir, device_s, dtype_s, backend,
      features_s, counts_s;
  nn::DenoiserSpec spec;
  double sigma = 0.1;
  int64_t patch = 0, overlap = -1;
  uint64_t seed = 0;
  bool overwrite = false, no_pad = false;
  po::options_description opts(
      "pnp_denoise: apply a denoiser to an image or volume in HDF5\n\n"
      "Usage: pnp_denoise --input IN.h5 --output OUT.h5 [--arch drunet] [--weights W.h5] [options]\n\n"
      "The input dataset may be [H, W] or [D, H, W] (one channel), [C, ...] (channels first),\n"
      "[B, C, ...], or for a 2D denoiser with one channel a stack [N, H, W] of slices.\n"
      "The output has the input's shape (out-channels may differ) and is float32.\n\nOptions");
  opts.add_options()
      ("help,h", "print this help and exit")
      ("input,i", po::value(&input), "input HDF5 file (required)")
      ("dataset,d", po::value(&dataset), "dataset to denoise in the input; default: the file's only dataset")
      ("output,o", po::value(&output), "output HDF5 file (required); written atomically")
      ("output-dataset", po::value(&out_dataset)->default_value("/denoised"), "dataset name in the output")
      ("force", po::bool_switch(&overwrite), "replace an existing output file")
      ("arch,a", po::value(&spec.architecture)->default_value("drunet"), "architecture: dncnn, drunet, unet or identity")
      ("dim", po::value(&spec.dim)->default_value(2), "spatial dimensions of the denoiser: 2 or 3")
      ("channels,c", po::value(&spec.in_channels)->default_value(1), "image channels (in = out)")
      ("features", po::value(&features_s),
       "comma-separated feature counts; default per architecture: drunet 64,128,256,512; dncnn 64; "
       "unet 64,128,256,512")
      ("blocks", po::value(&spec.blocks)->default_value(-1),
       "drunet: ResBlocks per stage (4); dncnn: depth (20); -1 = default")
      ("no-pad", po::bool_switch(&no_pad), "build without pad-then-crop: sizes must be multiples of the alignment")
      ("weights,w", po::value(&weights), "weights HDF5 (/weights/<deepinv key>; see deepinv_convert.py); "
                                         "without it, seeded random weights are used")
      ("seed", po::value(&seed)->default_value(0), "seed of the random weights when --weights is not given")
      ("sigma,s", po::value(&sigma)->default_value(0.1), "noise level passed to the denoiser (used by drunet)")
      ("backend,b", po::value(&backend)->default_value("eager"), "executor: eager (plain ATen, op by op)")
      ("device", po::value(&device_s)->default_value("cpu"), "cpu, cuda or cuda:N")
      ("dtype", po::value(&dtype_s)->default_value("float32"), "compute precision: float32, float64 or bfloat16 (bf16 activations and weights, fp32 accumulation)")
      ("patch", po::value(&patch)->default_value(0), "patch size in pixels along every axis; 0 = whole input")
      ("overlap", po::value(&overlap)->default_value(-1),
       "patch overlap in pixels; -1 = the receptive radius (result equals the un-patched one)")
      ("counts", po::value(&counts_s),
       "print the roofline counts (FLOPs, bytes, floors on A100/H100/H200) and the activation memory "
       "of this comma-separated input shape (e.g. 1,1,4096,4096) at --dtype, and exit; needs no input")
      ("dump-ir", po::value(&dump_ir), "also write the denoiser IR as JSON to this file")
      ("save-weights", po::value(&save_weights_path), "also write the weights used to this HDF5 file");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  po::notify(vm);
  spec.out_channels = spec.in_channels;
  spec.pad = !no_pad;
  if (!features_s.empty()) spec.features = parse_list(features_s, "features");
  if (!counts_s.empty()) {
    std::cout << roofline::report(nn::build(spec), parse_list(counts_s, "counts"),
                                  at::elementSize(nn::parse_dtype(dtype_s, "--dtype")));
    return 0;
  }
  if (input.empty()) throw InputError("--input is required (see --help)");
  if (output.empty()) throw InputError("--output is required (see --help)");
  if (backend != "eager")
    throw InputError("--backend " + backend + " is not available in this build (available: eager)");
  if (sigma < 0) throw InputError("--sigma must be >= 0, got " + std::to_string(sigma));
  if (patch < 0) throw InputError("--patch must be >= 0, got " + std::to_string(patch));
  const at::Device device = parse_device(device_s, "--device");
  const at::ScalarType dtype = nn::parse_dtype(dtype_s, "--dtype");
  io::check_output_path(output, overwrite, {input});
  io::probe_hdf5({input, weights});

  const nn::Graph g = nn::build(spec);
  nn::Weights w = weights.empty() ? nn::init_weights(g, seed) : nn::load_weights(weights, g);
  if (weights.empty())
    std::cerr << "pnp_denoise: no --weights given: using seeded random weights (seed " << seed
              << "); this is not a trained denoiser\n";
  if (!dump_ir.empty()) {
    std::ofstream f(dump_ir);
    f << g.to_json();
    if (!f) throw InputError("cannot write --dump-ir file " + dump_ir);
  }
  if (!save_weights_path.empty()) nn::save_weights(save_weights_path, g, w);

  io::Array<float> a;
  {
    auto in = io::H5File::open(input);
    if (dataset.empty()) {
      auto all = io::list_datasets(in, "/");
      if (all.size() != 1) {
        std::string names;
        for (const auto& d : all) names += (names.empty() ? "" : ", ") + d;
        throw InputError(input + " holds " + std::to_string(all.size()) + " datasets (" + names +
                         "); choose one with --dataset");
      }
      dataset = all[0];
    }
    if (!io::exists(in, dataset)) throw InputError(input + " has no dataset " + dataset);
    // The declared shape first: the network must take it, and the host must hold the input, the
    // output and the denoiser's activations, before anything is read.
    const auto declared = io::shape_of(in, dataset);
    const auto dshape = nn::network_shape(declared, spec.dim, spec.in_channels);
    nn::infer_output_shape(g, dshape);
    double activations = 0;  // of the whole image; with --patch, of a patch (not counted: small)
    if (patch == 0) {
      std::vector<int64_t> one = dshape;
      one[0] = 1;
      activations = roofline::activation_memory(g, one, at::elementSize(dtype), roofline::ExecutorStyle::eager).peak_bytes;
    }
    double elements = 1;
    for (auto v : declared) elements *= static_cast<double>(v);
    const double need = 8.0 * elements + activations;
    if (device.is_cpu() && need > host_memory_bytes())
      throw InputError(input + ":" + dataset + " declares " + nn::shape_string(declared) + ": denoising it needs about " +
                       human_bytes(need) + ", more than the " + human_bytes(host_memory_bytes()) +
                       " this process may use (try --patch)");
    a = io::read<float>(in, dataset);
  }
  const auto nshape = nn::network_shape(a.shape, spec.dim, spec.in_channels);
  nn::infer_output_shape(g, nshape);  // clear errors before any work
  at::Tensor x = at::from_blob(a.data.data(), nshape, at::kFloat).clone();

  auto ex = nn::make_eager(g, w, device, dtype);
  const auto t0 = std::chrono::steady_clock::now();
  at::Tensor y = nn::denoise_patched(*ex, x, sigma, patch, overlap);
  y = y.to(at::kCPU, at::kFloat).contiguous();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<int64_t> oshape = a.shape;
  if (spec.out_channels != spec.in_channels) oshape = y.sizes().vec();
  io::AtomicOutput out(output, overwrite);
  auto& f = out.file();
  io::write_provenance(f, basic_provenance("pnp_denoise"));
  io::write<float>(f, out_dataset, y.data_ptr<float>(), oshape, "same as input",
                   "denoised " + dataset + " of " + input + " by " + g.architecture);
  io::write_attr(f, "/", "architecture", g.architecture);
  io::write_attr(f, "/", "dim", static_cast<int64_t>(g.dim));
  io::write_attr(f, "/", "ir_hash", g.hash());
  io::write_attr(f, "/", "weights", weights.empty() ? "random seed " + std::to_string(seed) : weights);
  io::write_attr(f, "/", "sigma", sigma);
  io::write_attr(f, "/", "backend", ex->name());
  io::write_attr(f, "/", "device", device.str());
  io::write_attr(f, "/", "dtype", dtype_s);
  io::write_attr(f, "/", "patch", patch);
  io::write_attr(f, "/", "overlap", overlap < 0 ? ex->receptive_radius() : overlap);
  io::write_attr(f, "/", "input", input + ":" + dataset);
  io::write_attr(f, "/", "seconds", seconds);
  out.commit();
  std::cout << "pnp_denoise: " << g.architecture << " " << g.dim << "D on " << nn::shape_string(nshape) << " ("
            << device.str() << ", " << dtype_s << ") in " << seconds << " s -> " << output << ":" << out_dataset
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const po::error& e) {
    std::cerr << "error: " << e.what() << " (see --help)\n";
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << "error: " << e.what_without_backtrace() << "\n";
    return 1;
  } catch (...) {
    return report_error();
  }
}
