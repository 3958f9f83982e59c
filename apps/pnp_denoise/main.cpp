// pnp_denoise: apply a denoiser (DnCNN, DRUNet, UNet or identity; 2D or 3D) to an image or
// volume stored in HDF5, or print a network's roofline counts. The command line and the output
// file; the denoising is pnp::nn's (denoise_patched, network_shape).
#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <boost/program_options.hpp>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "pnp/device.hpp"
#include "pnp/io.hpp"
#include "pnp/messages.hpp"
#include "pnp/nn/fp8.hpp"
#include "pnp/nn/nn.hpp"
#include "pnp/roofline.hpp"
#include "pnp/validate.hpp"

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

// --rates NAME=TF32,BF16,FP8,HBM: a GPU's dense tensor-core peaks (TFLOP/s) and HBM bandwidth (TB/s).
roofline::GpuPeak parse_rates(const std::string& s) {
  const auto eq = s.find('=');
  std::vector<double> v;
  std::stringstream ss(eq == std::string::npos ? "" : s.substr(eq + 1));
  std::string item;
  bool ok = eq != std::string::npos && eq > 0;
  while (ok && std::getline(ss, item, ',')) {
    try {
      size_t pos = 0;
      v.push_back(std::stod(item, &pos));
      ok = pos == item.size() && std::isfinite(v.back()) && v.back() >= 0;
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || v.size() != 4 || v[0] <= 0 || v[1] <= 0 || v[3] <= 0)
    throw InputError("--rates: expected NAME=TF32,BF16,FP8,HBM (TFLOP/s, TB/s; FP8 may be 0, the others > 0), got '" +
                     clip_value(s) + "'");
  roofline::GpuPeak p;
  p.name = s.substr(0, eq);
  p.tf32_tflops = v[0], p.bf16_tflops = v[1], p.fp8_tflops = v[2], p.hbm_tbps = v[3];
  return p;
}

// The command line.
struct Options {
  std::string input, dataset, output, out_dataset, weights, save_weights, dump_ir, device, dtype, backend, features,
      counts, fp8_keep;
  std::vector<std::string> rates;
  nn::DenoiserSpec spec;
  double sigma = 0.1;
  int64_t patch = 0, overlap = -1;
  uint64_t seed = 0;
  bool overwrite = false, no_pad = false, help = false, per_kernel = false;
};

po::options_description describe(Options& o) {
  po::options_description opts(
      "pnp_denoise: apply a denoiser to an image or volume in HDF5\n\n"
      "Usage: pnp_denoise --input IN.h5 --output OUT.h5 [--arch drunet] [--weights W.h5] [options]\n\n"
      "The input dataset may be [H, W] or [D, H, W] (one channel), [C, ...] (channels first),\n"
      "[B, C, ...], or for a 2D denoiser with one channel a stack [N, H, W] of slices.\n"
      "The output has the input's shape (out-channels may differ) and is float32.\n"
      "Every value of the input must be finite; exit codes: 0 done, 2 bad input, 1 other failure.\n\nOptions");
  nn::DenoiserSpec& spec = o.spec;
  opts.add_options()
      ("help,h", "print this help and exit")
      ("input,i", po::value(&o.input), "input HDF5 file (required)")
      ("dataset,d", po::value(&o.dataset), "dataset to denoise in the input; default: the file's only dataset")
      ("output,o", po::value(&o.output), "output HDF5 file (required); written atomically")
      ("output-dataset", po::value(&o.out_dataset)->default_value("/denoised"), "dataset name in the output")
      ("force", po::bool_switch(&o.overwrite), "replace an existing output file")
      ("arch,a", po::value(&spec.architecture)->default_value("drunet"), "architecture: dncnn, drunet, unet or identity")
      ("dim", po::value(&spec.dim)->default_value(2), "spatial dimensions of the denoiser: 2 or 3")
      ("channels,c", po::value(&spec.in_channels)->default_value(1), "image channels (in = out)")
      ("features", po::value(&o.features),
       "comma-separated feature counts; default per architecture: drunet 64,128,256,512; dncnn 64; "
       "unet 64,128,256,512")
      ("blocks", po::value(&spec.blocks)->default_value(-1),
       "drunet: ResBlocks per stage (4); dncnn: depth (20); -1 = default")
      ("no-pad", po::bool_switch(&o.no_pad), "build without pad-then-crop: sizes must be multiples of the alignment")
      ("weights,w", po::value(&o.weights), "weights HDF5 (/weights/<deepinv key>; see deepinv_convert.py); "
                                           "without it, seeded random weights are used")
      ("seed", po::value(&o.seed)->default_value(0), "seed of the random weights when --weights is not given")
      ("sigma,s", po::value(&o.sigma)->default_value(0.1), "noise level passed to the denoiser (used by drunet)")
      ("backend,b", po::value(&o.backend)->default_value("eager"), "executor: eager (plain ATen, op by op)")
      ("device", po::value(&o.device)->default_value("cpu"), "cpu, cuda or cuda:N")
      ("dtype", po::value(&o.dtype)->default_value("float32"), "compute precision: float32, float64 or bfloat16 (bf16 activations and weights, fp32 accumulation)")
      ("patch", po::value(&o.patch)->default_value(0), "patch size in pixels along every axis; 0 = whole input")
      ("overlap", po::value(&o.overlap)->default_value(-1),
       "patch overlap in pixels; -1 = the receptive radius (result equals the un-patched one)")
      ("counts", po::value(&o.counts),
       "print the roofline counts (FLOPs, bytes, floors on A100/H100/H200) and the activation memory "
       "of this comma-separated input shape (e.g. 1,1,4096,4096) at --dtype, and exit; needs no input. "
       "The native floor sums each kernel's floor: the larger of its FLOPs at the tensor-core peak of its "
       "precision and its bytes at the HBM bandwidth, fusions as the native executor makes them")
      ("fp8-keep", po::value(&o.fp8_keep),
       "with --counts and --dtype bfloat16: the native floor with denoiser.precision = \"fp8\" and this "
       "denoiser.fp8_keep (none, head, tail, head_tail, native, native_wide, native_deep)")
      ("rates", po::value(&o.rates)->composing(),
       "with --counts: the floors on this GPU instead of the data sheets' A100, H100 and H200, as "
       "NAME=TF32,BF16,FP8,HBM (TFLOP/s dense, TB/s; e.g. measured ones, pnp_bench --ceilings); repeatable")
      ("per-kernel", po::bool_switch(&o.per_kernel),
       "with --counts: also the native floor per kind of kernel, on the last GPU listed")
      ("dump-ir", po::value(&o.dump_ir), "also write the denoiser IR as JSON to this file")
      ("save-weights", po::value(&o.save_weights), "also write the weights used to this HDF5 file");
  return opts;
}

Options parse_options(int argc, char** argv) {
  Options o;
  const po::options_description opts = describe(o);
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, opts), vm);
  if (vm.count("help")) {
    std::cout << opts << "\n";
    o.help = true;
    return o;
  }
  po::notify(vm);
  o.spec.out_channels = o.spec.in_channels;
  o.spec.pad = !o.no_pad;
  if (!o.features.empty()) o.spec.features = parse_list(o.features, "features");
  return o;
}

// The checks before any work (the shared ones of pnp/validate.hpp): option ranges, and no file
// written that is another written file or an input.
void check_options(const Options& o) {
  if (o.input.empty()) throw InputError("--input is required (see --help)");
  if (o.output.empty()) throw InputError("--output is required (see --help)");
  if (o.backend != "eager")
    throw InputError("--backend " + clip_value(o.backend) + " is not available in this build (available: eager)");
  validate::require_in_range("--sigma", o.sigma, 0, 1e6);
  if (o.patch < 0) throw InputError("--patch must be >= 0, got " + std::to_string(o.patch));
  if (o.overlap < -1) throw InputError("--overlap must be >= -1, got " + std::to_string(o.overlap));
  validate::require_distinct({{"--output", o.output}, {"--save-weights", o.save_weights}, {"--dump-ir", o.dump_ir}},
                             {{"--input", o.input}, {"--weights", o.weights}});
  io::check_output_path(o.output, o.overwrite, {o.input});
}

// The input's dataset (io::read_image): its declared shape checked against the network and the
// memory this process may use before it is read; every value must be finite.
io::Array<float> read_input(Options& o, const nn::Graph& g, const at::ScalarType dtype, const at::Device device) {
  return io::read_image(o.input, o.dataset, [&](const std::vector<int64_t>& declared) {
    // The host must hold the input, the output and the denoiser's activations.
    const auto dshape = nn::network_shape(declared, o.spec.dim, o.spec.in_channels);
    nn::infer_output_shape(g, dshape);
    double activations = 0;  // of the whole image; with --patch, of a patch (not counted: small)
    if (o.patch == 0) {
      std::vector<int64_t> one = dshape;
      one[0] = 1;
      activations = roofline::activation_memory(g, one, at::elementSize(dtype), roofline::ExecutorStyle::eager).peak_bytes;
    }
    double elements = 1;
    for (auto v : declared) elements *= static_cast<double>(v);
    if (device.is_cpu())
      validate::require_fits_memory(o.input + ":" + o.dataset + " declares " + nn::shape_string(declared) +
                                        ": denoising it needs",
                                    8.0 * elements + activations, "try --patch");
  });
}

void write_result(const Options& o, const nn::Graph& g, const nn::Executor& ex, const at::Tensor& y,
                  const std::vector<int64_t>& shape, const at::Device device, double seconds) {
  io::AtomicOutput out(o.output, o.overwrite);
  auto& f = out.file();
  io::write_provenance(f, basic_provenance("pnp_denoise"));
  io::write<float>(f, o.out_dataset, y.data_ptr<float>(), shape, "same as input",
                   "denoised " + o.dataset + " of " + o.input + " by " + g.architecture);
  io::write_attr(f, "/", "architecture", g.architecture);
  io::write_attr(f, "/", "dim", static_cast<int64_t>(g.dim));
  io::write_attr(f, "/", "ir_hash", g.hash());
  io::write_attr(f, "/", "weights", o.weights.empty() ? "random seed " + std::to_string(o.seed) : o.weights);
  io::write_attr(f, "/", "sigma", o.sigma);
  io::write_attr(f, "/", "backend", ex.name());
  io::write_attr(f, "/", "device", device.str());
  io::write_attr(f, "/", "dtype", o.dtype);
  io::write_attr(f, "/", "patch", o.patch);
  io::write_attr(f, "/", "overlap", o.overlap < 0 ? ex.receptive_radius() : o.overlap);
  io::write_attr(f, "/", "input", o.input + ":" + o.dataset);
  io::write_attr(f, "/", "seconds", seconds);
  out.commit();
}

int run(int argc, char** argv) {
  Options o = parse_options(argc, argv);
  if (o.help) return 0;
  if (!o.counts.empty()) {
    const nn::Graph g = nn::build(o.spec);
    const auto dtype = nn::parse_dtype(o.dtype, "--dtype");
    roofline::ReportOptions ro;
    ro.per_kernel = o.per_kernel;
    for (const auto& r : o.rates) ro.peaks.push_back(parse_rates(r));
    if (!o.fp8_keep.empty()) {
      if (dtype != at::kBFloat16) throw InputError("--fp8-keep: FP8 runs beside bf16 (--dtype bfloat16)");
      const auto convs = nn::fp8_run_convs(g, o.fp8_keep);  // InputError for an unknown choice
      ro.fp8_convs.insert(convs.begin(), convs.end());
    }
    std::cout << roofline::report(g, parse_list(o.counts, "counts"), at::elementSize(dtype), ro);
    return 0;
  }
  if (!o.fp8_keep.empty() || !o.rates.empty() || o.per_kernel)
    throw InputError("--fp8-keep, --rates and --per-kernel go with --counts");
  check_options(o);
  const at::Device device = parse_device(o.device, "--device");
  const at::ScalarType dtype = nn::parse_dtype(o.dtype, "--dtype");
  io::probe_hdf5({o.input, o.weights});

  const nn::Graph g = nn::build(o.spec);
  nn::Weights w = o.weights.empty() ? nn::init_weights(g, o.seed) : nn::load_weights(o.weights, g);
  io::Array<float> a = read_input(o, g, dtype, device);
  if (o.weights.empty())
    std::cerr << "pnp_denoise: no --weights given: using seeded random weights (seed " << o.seed
              << "); this is not a trained denoiser\n";
  if (!o.dump_ir.empty()) {
    std::ofstream f(o.dump_ir);
    f << g.to_json();
    if (!f) throw InputError("cannot write --dump-ir file " + clip_value(o.dump_ir) + ": " + std::strerror(errno));
  }
  if (!o.save_weights.empty()) nn::save_weights(o.save_weights, g, w);

  const auto nshape = nn::network_shape(a.shape, o.spec.dim, o.spec.in_channels);
  nn::infer_output_shape(g, nshape);  // clear errors before any work
  at::Tensor x = at::from_blob(a.data.data(), nshape, at::kFloat).clone();
  auto ex = nn::make_eager(g, w, device, dtype);
  const auto t0 = std::chrono::steady_clock::now();
  at::Tensor y = nn::denoise_patched(*ex, x, o.sigma, o.patch, o.overlap);
  y = y.to(at::kCPU, at::kFloat).contiguous();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const std::vector<int64_t> oshape = o.spec.out_channels != o.spec.in_channels ? y.sizes().vec() : a.shape;
  write_result(o, g, *ex, y, oshape, device, seconds);
  std::cout << "pnp_denoise: " << g.architecture << " " << g.dim << "D on " << nn::shape_string(nshape) << " ("
            << device.str() << ", " << o.dtype << ") in " << seconds << " s -> " << o.output << ":" << o.out_dataset
            << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const po::error& e) {
    std::cerr << "error: " << error_line(e.what()) << " (see --help)\n";
    return 2;
  } catch (const c10::Error& e) {
    std::cerr << "error: " << error_line(e.what_without_backtrace()) << "\n";
    return 1;
  } catch (...) {
    return report_error();
  }
}
