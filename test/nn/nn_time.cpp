// Times denoiser executors side by side (a measuring program, not a test; pnp_bench is the
// sweep that writes HDF5). Seeded weights, a random input; per backend arm: the first call
// (incl. compile), 5 warm-up calls, N timed calls each synchronised and timed alone (device
// events on CUDA, host clock on CPU), stable = mean of the last 5; achieved TFLOP/s against
// the roofline count at the run's element size; relative difference to the first arm; CUDA
// peak memory. The inductor backend runs twice: cold (its cache entry removed, the exporter
// runs) and warm (load only); on CUDA the warm forward is also captured in a CUDA graph and
// replayed, as the post and fused placements do. The native arm on a GPU of the roofline's peak
// table also prints the native executor's floor on that GPU's data sheet (roofline::native_floor,
// FP8 where --native 8 puts it) and the stable time's share of it.
//   nn_time ARCH CHANNELS SHAPE [--device cuda] [--dtype float32|bfloat16|float64]
//           [--backends eager,native,inductor] [--timed 10] [--native cfag] [--mode default]
//           [--cache DIR] [--warm-only] [--profile N] [--benchmark-limit N] [--precompiled N]
// --native letters switch native options on: c channels-last, f fuse, a autotune, g CUDA graph,
// b cuDNN's fused ops in bf16, e conv + residual add as cuDNN graphs where timed faster (with
// a; cudnn_epilogues), E wherever cuDNN has a plan (cudnn_epilogues_forced), p the persistent
// plan cache in <--cache>/native (plan_cache_dir: run twice, the second run loads), G every
// convolution a cuDNN graph where timed faster (with e; cudnn_graph_convs), B ATen's
// cuDNN benchmark mode in the autotune (cudnn_benchmark; until 2026-12-02c the default, and n
// turned it off: n still does), --precompiled N (cudnn_graph_precompiled), s the epilogue plans built one after
// the other (parallel_plan_builds off), u the ×2 nearest upsample before a 3×3 convolution as a
// step of its own (upsample_conv off), k cuDNN for convolutions with one output channel, and no head kernel timed (narrow_convs off), w pnp's
// Hopper kernels for the convolutions they take, timed against cuDNN per layout (wgmma_convs; in the
// default letters since 2026-12-03: a string without w turns them off, as PNP_KERNELS=portable does), d cuDNN's transposed convolutions, ATen's
// concat and max pool instead of pnp's NHWC kernels and cuBLAS products (nhwc_kernels off).
// --warm-only keeps an inductor package already in the cache (no cold run). --profile N records N more calls per arm with the Kineto profiler and prints the
// longest device kernels (names, calls per forward, time per forward) and the kernel-busy time.
#include <ATen/ATen.h>
#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <set>
#include <sstream>

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "pnp/device.hpp"
#include "pnp/nn/fp8.hpp"
#include "pnp/nn/inductor.hpp"
#include "pnp/nn/native.hpp"
#include "pnp/nn/nn.hpp"
#include "pnp/roofline.hpp"
#include "pnp/timing.hpp"

using namespace pnp;
namespace fs = std::filesystem;
namespace po = boost::program_options;

namespace {
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, sep);) out.push_back(t);
  return out;
}

// --native's letters as the native backend's options (the list above).
nn::NativeOptions native_options(const std::string& native_s, const std::string& cache_dir, int benchmark_limit,
                                 int precompiled) {
  nn::NativeOptions nopt;
  nopt.channels_last = native_s.find('c') != std::string::npos;
  nopt.fuse = native_s.find('f') != std::string::npos;
  nopt.autotune = native_s.find('a') != std::string::npos;
  nopt.cuda_graph = native_s.find('g') != std::string::npos;
  nopt.cudnn_fused_bf16 = native_s.find('b') != std::string::npos;
  nopt.cudnn_epilogues = native_s.find_first_of("eE") != std::string::npos;
  nopt.cudnn_epilogues_forced = native_s.find('E') != std::string::npos;
  nopt.cudnn_graph_convs = native_s.find('G') != std::string::npos;
  if (native_s.find('p') != std::string::npos) nopt.plan_cache_dir = (fs::path(cache_dir) / "native").string();
  nopt.cudnn_benchmark = native_s.find('B') != std::string::npos && native_s.find('n') == std::string::npos;
  nopt.parallel_plan_builds = native_s.find('s') == std::string::npos;
  nopt.upsample_conv = native_s.find('u') == std::string::npos;
  nopt.narrow_convs = native_s.find('k') == std::string::npos;
  // (PNP_KERNELS=portable turns them off whatever the letters say: the path an A100 takes)
  nopt.wgmma_convs = native_s.find('w') != std::string::npos && nn::hopper_kernels_default();
  nopt.nhwc_kernels = native_s.find('d') == std::string::npos;
  nopt.cudnn_benchmark_limit = benchmark_limit;
  nopt.cudnn_graph_precompiled = precompiled;
  return nopt;
}

// --backends as arms (inductor: cold and warm, its cached package removed for the cold one; warm
// only with --warm-only).
std::vector<std::string> arms_of(const std::string& backends_s, bool warm_only, const nn::Graph& g,
                                 const std::vector<int64_t>& shape, at::ScalarType dtype, const at::Device& device,
                                 const nn::InductorOptions& io) {
  std::vector<std::string> arms;
  for (const auto& b : split(backends_s, ','))
    if (b == "inductor") {
      if (warm_only) {
        arms.push_back("inductor-warm");
        continue;
      }
      arms.insert(arms.end(), {"inductor-cold", "inductor-warm"});
      const std::string pkg = nn::inductor_package_path(g, shape, dtype, device, io);
      for (const auto& ext : {"", ".json", ".log", ".ir.json"}) fs::remove(pkg + ext);
    } else if (b == "eager" || b == "native") {
      arms.push_back(b);
    } else {
      throw InputError("--backends: unknown backend '" + b + "' (eager, native, inductor)");
    }
  return arms;
}

// The native executor's floor on this GPU's data sheet (roofline::native_floor) and the stable
// time's share of it; nothing where the GPU or the dtype has no entry.
void print_floor(const nn::Graph& g, const std::vector<int64_t>& shape, at::ScalarType dtype,
                 const std::vector<int>& fp8_convs, const at::Device& device, double stable) {
  const std::string name = device_name(device);
  try {
    const auto& peak = roofline::peak_for(name);
    const auto f = roofline::native_floor(g, shape, at::elementSize(dtype),
                                          std::set<int>(fp8_convs.begin(), fp8_convs.end()), peak);
    std::cout << "nn_time native floor on the " << peak.name << " data sheet: " << f.seconds * 1e3 << " ms (compute "
              << f.compute_s * 1e3 << ", memory " << f.memory_s * 1e3 << "); stable at " << 100 * f.seconds / stable
              << " % of it" << std::endl;
  } catch (const InputError& e) {
    std::cout << "nn_time native floor: none for " << name << " (" << e.what() << ")" << std::endl;
  }
}

// --profile N: N more calls of the arm with the Kineto profiler, its longest device kernels.
void print_profile(const at::Device& device, nn::Executor& ex, const at::Tensor& x, const std::string& arm, int profile,
                   double stable) {
  const KernelProfile kp = profile_kernels(device, [&] { ex.forward(x, 0.1); }, profile);
  std::cout << "nn_time profile " << arm << ": " << kp.kernels.size() << " distinct kernels, kernel-busy "
            << kp.busy_seconds / profile * 1e3 << " ms per forward (stable " << stable * 1e3 << " ms)\n";
  for (size_t i = 0; i < std::min<size_t>(kp.kernels.size(), 15); ++i) {
    const auto& k = kp.kernels[i];
    std::cout << "  " << k.seconds / profile * 1e3 << " ms  " << 100 * k.seconds / kp.busy_seconds << " %  "
              << static_cast<double>(k.count) / profile << " x  " << k.name.substr(0, 110) << "\n";
  }
  std::cout.flush();
}

#ifdef PNP_HAVE_CUDA
// The warm inductor forward captured in a CUDA graph and replayed (capturable, as the solver's
// graph placements need), its difference to the first arm's output.
void check_capture(const at::Device& device, const CallTimer& timer, nn::Executor& ex, const at::Tensor& x,
                   const at::Tensor& ref, const std::string& first_arm) {
  at::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device.index());
  at::cuda::CUDAGraph graph;
  at::Tensor yg;
  timer.sync();
  {
    c10::cuda::CUDAStreamGuard sg(side);
    graph.capture_begin();
    yg = ex.forward(x, 0.1);
    graph.capture_end();
  }
  timer.sync();
  graph.replay();
  timer.sync();
  std::cout << "nn_time inductor capture: CUDA graph replay rel. diff to " << first_arm << " "
            << ((yg.to(at::kFloat) - ref).norm().item<double>() / ref.norm().item<double>()) << std::endl;
}
#endif
}  // namespace

int main(int argc, char** argv) {
  try {
    std::string arch, shape_s, dev_s, dtype_s, backends_s, native_s, fp8_keep;
    int channels = 1, timed = 10, profile = 0, benchmark_limit = -1, precompiled = nn::NativeOptions{}.cudnn_graph_precompiled;
    bool warm_only = false;
    nn::InductorOptions io;
    po::options_description opts("nn_time ARCH CHANNELS SHAPE(e.g. 4096x4096) [options]");
    opts.add_options()("help,h", "print this help")("device", po::value(&dev_s)->default_value("cuda"), "cpu or cuda")(
        "dtype", po::value(&dtype_s)->default_value("float32"), "float32, bfloat16 or float64")(
        "backends", po::value(&backends_s)->default_value("eager,native"), "comma-separated: eager, native, inductor")(
        "timed", po::value(&timed)->default_value(10), "timed calls per arm (>= 5)")(
        "native", po::value(&native_s)->default_value("cfagbeGw"), "native options on: c channels-last, f fuse, a autotune, g graph, b cuDNN fused ops in bf16, e conv + residual add as cuDNN graphs where faster (with a), E always, G every convolution a cuDNN graph where faster (with e or E), p plan cache in <cache>/native, B ATen's benchmark mode (until 2026-12-02c on unless n), s serial plan builds, u no upsample folded into its 3x3 conv, k no narrow kernel (cuDNN for 1-output convolutions), w pnp's Hopper kernels for the 64-channel and wider convolutions, chosen per layout by timing with a and G (on by default since 2026-12-03); in any string, 8 runs the 64- to 512-channel stride-1 convolutions in FP8 on pnp's Hopper kernel (denoiser.precision = fp8; --dtype bfloat16, with w), d turns off pnp's NHWC kernels and the 2x2 transposed convolutions' cuBLAS products (cuDNN and ATen instead)")(
        "fp8-keep", po::value(&fp8_keep)->default_value("native"),
        "with 8: the convolutions kept out of FP8, as denoiser.fp8_keep (native: FP8 on every candidate; native_wide: on "
        "those of 128 channels and more; native_deep: of 256 and more; none, head, tail, head_tail)")(
        "warm-only", po::bool_switch(&warm_only), "inductor: use a package already in the cache (no cold run)")(
        "profile", po::value(&profile)->default_value(0), "profile N more calls per arm: the longest kernels")(
        "precompiled", po::value(&precompiled)->default_value(precompiled),
        "native autotune: precompiled cuDNN plans tried per graph layout beside the first three (cudnn_graph_precompiled)")(
        "benchmark-limit", po::value(&benchmark_limit)->default_value(-1),
        "native autotune: cuDNN algorithms ATen's benchmark mode tries per convolution (0 all, -1 ATen's 10)")(
        "mode", po::value(&io.mode)->default_value("default"), "inductor mode: default or max-autotune")(
        "cache", po::value(&io.cache_dir)->default_value(".pnp_cache_time"), "inductor (and native plan) cache directory");
    po::options_description hidden;
    hidden.add_options()("arch", po::value(&arch))("channels", po::value(&channels))("shape", po::value(&shape_s));
    po::positional_options_description pos;
    pos.add("arch", 1).add("channels", 1).add("shape", 1);
    po::options_description all;
    all.add(opts).add(hidden);
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help") || shape_s.empty()) {
      std::cout << opts << "\n";
      return vm.count("help") ? 0 : 2;
    }
    if (timed < 5) throw InputError("--timed must be >= 5 (stable = mean of the last 5)");
    nn::DenoiserSpec s;
    s.architecture = arch;
    s.in_channels = s.out_channels = channels;
    std::vector<int64_t> shape{1, channels};
    for (const auto& t : split(shape_s, 'x')) shape.push_back(std::stoll(t));
    s.dim = static_cast<int>(shape.size()) - 2;
    const at::Device device = concrete_device(dev_s == "cpu" ? at::Device(at::kCPU) : at::Device(dev_s));
    const at::ScalarType dtype = nn::parse_dtype(dtype_s, "--dtype");
    nn::NativeOptions nopt = native_options(native_s, io.cache_dir, benchmark_limit, precompiled);

    const auto g = nn::build(s);
    if (native_s.find('8') != std::string::npos) {
      if (dtype != at::kBFloat16) throw InputError("--native 8 (FP8) runs with --dtype bfloat16");
      nopt.fp8_convs = nn::fp8_run_convs(g, fp8_keep);
    }
    const auto w = nn::init_weights(g, 1);
    const at::Tensor x = at::rand(shape, at::TensorOptions().device(device));
    const auto c = roofline::count(g, shape, at::elementSize(dtype));
    const CallTimer timer(device);
    const std::vector<std::string> arms = arms_of(backends_s, warm_only, g, shape, dtype, device, io);
    at::Tensor ref;
    for (const auto& arm : arms) {
      reset_device_peak(device);
      timer.sync();
      const auto t0 = std::chrono::steady_clock::now();
      std::unique_ptr<nn::Executor> ex;
      double compile = 0;
      std::string info;
      if (arm == "eager") {
        ex = nn::make_eager(g, w, device, dtype);
      } else if (arm == "native") {
        auto n = nn::make_native(g, w, device, dtype, shape, nopt);
        compile = n->compile_seconds();
        info = std::to_string(n->fusions().size()) + " fusions, graph " + (n->graph_captured() ? "yes" : "no");
        for (const auto& note : n->notes()) info += "; " + note;
        ex = std::move(n);
      } else {
        auto n = nn::make_inductor(g, w, device, dtype, shape, io);
        compile = n->compile_seconds();
        info = std::string(n->compiled_here() ? "compiled" : "cache hit") + " (" + io.mode + "), exporter " +
               std::to_string(n->exporter_seconds()) + " s, load " + std::to_string(n->load_seconds()) + " s";
        ex = std::move(n);
      }
      at::Tensor y = ex->forward(x, 0.1).to(at::kFloat).clone();
      timer.sync();
      const double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!ref.defined()) ref = y;
      const double err = (y - ref).norm().item<double>() / ref.norm().item<double>();
      for (int i = 1; i < 5; ++i) ex->forward(x, 0.1);
      std::vector<double> t;
      for (int i = 0; i < timed; ++i) t.push_back(timer.time([&] { ex->forward(x, 0.1); }));
      double stable = 0;
      for (size_t i = t.size() - 5; i < t.size(); ++i) stable += t[i] / 5;
      std::cout << "nn_time " << g.architecture << " " << nn::shape_string(shape) << " " << device.str() << " "
                << dtype_s << " " << arm << ": first " << first << " s (compile " << compile << " s), stable "
                << stable * 1e3 << " ms, " << c.flops / stable / 1e12 << " TFLOP/s, rel. diff to " << arms.front()
                << " " << err << ", peak " << device_peak_bytes(device) / 1e9 << " GB" << (info.empty() ? "" : ", ")
                << info << std::endl;
      if (arm == "native" && device.is_cuda()) print_floor(g, shape, dtype, nopt.fp8_convs, device, stable);
      if (profile > 0) print_profile(device, *ex, x, arm, profile, stable);
#ifdef PNP_HAVE_CUDA
      if (arm == "inductor-warm" && device.is_cuda()) check_capture(device, timer, *ex, x, ref, arms.front());
#endif
    }
    return 0;
  } catch (...) {
    return report_error();
  }
}
