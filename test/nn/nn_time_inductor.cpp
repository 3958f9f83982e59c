// Times the inductor backend against eager and native (a measuring program, not a test):
// seeded weights, random input; cold compile (empty cache: the exporter runs), warm compile (a
// second make_inductor: load only), 5 warm-up and N timed calls each (device events on CUDA),
// stable = mean of the last 5; relative difference to eager; on CUDA, one capture of the
// inductor forward in a CUDA graph, replayed and compared (what post/fused do).
//   nn_time_inductor ARCH CHANNELS SHAPE [DEVICE=cuda] [MODE=default] [CACHE=.pnp_cache_time] [TIMED=20]
#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <sstream>

#ifdef PNP_HAVE_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include "pnp/nn/inductor.hpp"
#include "pnp/nn/native.hpp"
#include "pnp/nn/nn.hpp"

using namespace pnp;
namespace fs = std::filesystem;

int main(int argc, char** argv) {
  try {
    if (argc < 4) {
      std::cerr << "usage: nn_time_inductor ARCH CHANNELS SHAPE [DEVICE=cuda] [MODE=default] [CACHE=dir] [TIMED=20]\n";
      return 2;
    }
    nn::DenoiserSpec s;
    s.architecture = argv[1];
    s.in_channels = s.out_channels = std::stoi(argv[2]);
    std::vector<int64_t> shape{1, s.in_channels};
    std::stringstream ss(argv[3]);
    for (std::string t; std::getline(ss, t, 'x');) shape.push_back(std::stoll(t));
    s.dim = static_cast<int>(shape.size()) - 2;
    const std::string dev = argc > 4 ? argv[4] : "cuda";
    const at::Device device = dev == "cpu" ? at::Device(at::kCPU) : at::Device(at::kCUDA, 0);
    nn::InductorOptions io;
    io.mode = argc > 5 ? argv[5] : "default";
    io.cache_dir = argc > 6 ? argv[6] : ".pnp_cache_time";
    const int timed = argc > 7 ? std::stoi(argv[7]) : 20;
    auto g = nn::build(s);
    auto w = nn::init_weights(g, 1);
    at::Tensor x = at::rand(shape, at::TensorOptions().device(device));
    auto* impl = device.is_cuda() ? c10::impl::getDeviceGuardImpl(device.type()) : nullptr;
    auto sync = [&] {
      if (impl) impl->synchronizeDevice(device.index());
    };
    const std::string pkg = nn::inductor_package_path(g, shape, at::kFloat, device, io);
    for (const auto& ext : {"", ".json", ".log", ".ir.json"}) fs::remove(pkg + ext);  // cold
    at::Tensor ref;
    for (std::string arm : {"eager", "native", "inductor-cold", "inductor-warm"}) {
      sync();
      const auto t0 = std::chrono::steady_clock::now();
      std::unique_ptr<nn::Executor> ex;
      double compile = 0;
      std::string info;
      if (arm == "eager") {
        ex = nn::make_eager(g, w, device, at::kFloat);
      } else if (arm == "native") {
        auto n = nn::make_native(g, w, device, at::kFloat, shape);
        compile = n->compile_seconds();
        ex = std::move(n);
      } else {
        auto n = nn::make_inductor(g, w, device, at::kFloat, shape, io);
        compile = n->compile_seconds();
        info = std::string(n->compiled_here() ? "compiled" : "cache hit") + ", exporter " +
               std::to_string(n->exporter_seconds()) + " s, load " + std::to_string(n->load_seconds()) + " s";
        ex = std::move(n);
      }
      at::Tensor y = ex->forward(x, 0.1);
      sync();
      const double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (arm == "eager") ref = y.clone();
      const double err = (y - ref).norm().item<double>() / ref.norm().item<double>();
      const double maxerr = (y - ref).abs().max().item<double>();
      for (int i = 1; i < 5; ++i) ex->forward(x, 0.1);
      std::vector<double> t;
      for (int i = 0; i < timed; ++i) {
        sync();
        if (impl) {
          c10::Event a(device.type(), c10::EventFlag::BACKEND_DEFAULT), b(device.type(), c10::EventFlag::BACKEND_DEFAULT);
          a.record(impl->getStream(device));
          ex->forward(x, 0.1);
          b.record(impl->getStream(device));
          b.synchronize();
          t.push_back(a.elapsedTime(b) * 1e-3);
        } else {
          const auto h0 = std::chrono::steady_clock::now();
          ex->forward(x, 0.1);
          t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - h0).count());
        }
      }
      double stable = 0;
      for (size_t i = t.size() - 5; i < t.size(); ++i) stable += t[i] / 5;
      std::cout << "nn_time_inductor " << g.architecture << " " << nn::shape_string(shape) << " " << dev << " " << arm
                << (arm.rfind("inductor", 0) == 0 ? " (" + io.mode + ")" : "") << ": first " << first
                << " s (compile " << compile << " s), stable " << stable * 1e3 << " ms, rel. diff to eager " << err
                << ", max abs diff " << maxerr << (info.empty() ? "" : ", ") << info << std::endl;
#ifdef PNP_HAVE_CUDA
      if (arm == "inductor-warm" && device.is_cuda()) {  // capturable, as post/fused need
        at::cuda::CUDAStream side = c10::cuda::getStreamFromPool(false, device.index());
        at::cuda::CUDAGraph graph;
        at::Tensor yg;
        side.synchronize();
        sync();
        {
          c10::cuda::CUDAStreamGuard sg(side);
          graph.capture_begin();
          yg = ex->forward(x, 0.1);
          graph.capture_end();
        }
        sync();
        graph.replay();
        sync();
        std::cout << "nn_time_inductor capture: CUDA graph replay rel. diff to eager "
                  << ((yg - ref).norm().item<double>() / ref.norm().item<double>()) << std::endl;
      }
#endif
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
