// Times the native backend against the eager executor (a measuring program, not a test):
// seeded weights, random input, 5 warm-up calls (the first includes the compile) and N timed
// calls each timed with device events (host clock on CPU); stable = mean of the last 5.
//   nn_time_native ARCH CHANNELS SHAPE(e.g. 2048x2048) [DEVICE=cuda] [TIMED=10] [OPTS=clfag]
// OPTS letters switch native options on: c channels-last, f fuse, a autotune, g CUDA graph.
#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <iostream>
#include <sstream>

#include "pnp/nn/native.hpp"
#include "pnp/nn/nn.hpp"
#include "pnp/roofline.hpp"

using namespace pnp;

int main(int argc, char** argv) {
  try {
    if (argc < 4) {
      std::cerr << "usage: nn_time_native ARCH CHANNELS SHAPE [DEVICE=cuda] [TIMED=10] [OPTS=cfag]\n";
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
    const int timed = argc > 5 ? std::stoi(argv[5]) : 10;
    const std::string o = argc > 6 ? argv[6] : "cfag";
    nn::NativeOptions opt;
    opt.channels_last = o.find('c') != std::string::npos;
    opt.fuse = o.find('f') != std::string::npos;
    opt.autotune = o.find('a') != std::string::npos;
    opt.cuda_graph = o.find('g') != std::string::npos;
    auto g = nn::build(s);
    auto w = nn::init_weights(g, 1);
    at::Tensor x = at::rand(shape, at::TensorOptions().device(device));
    auto c = roofline::count(g, shape);
    auto* impl = device.is_cuda() ? c10::impl::getDeviceGuardImpl(device.type()) : nullptr;
    auto sync = [&] {
      if (impl) impl->synchronizeDevice(device.index());
    };
    at::Tensor ref;
    for (std::string arm : {"eager", "native"}) {
      sync();
      const auto t0 = std::chrono::steady_clock::now();
      std::unique_ptr<nn::Executor> ex;
      double compile = 0;
      std::string fus;
      if (arm == "eager") {
        ex = nn::make_eager(g, w, device, at::kFloat);
      } else {
        auto n = nn::make_native(g, w, device, at::kFloat, shape, opt);
        compile = n->compile_seconds();
        fus = std::to_string(n->fusions().size()) + " fusions, graph " + (n->graph_captured() ? "yes" : "no");
        for (const auto& note : n->notes()) fus += "; " + note;
        ex = std::move(n);
      }
      at::Tensor y = ex->forward(x, 0.1);
      sync();
      const double first = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (arm == "eager") ref = y;
      const double err = (y - ref).norm().item<double>() / ref.norm().item<double>();
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
      std::cout << "nn_time_native " << g.architecture << " " << nn::shape_string(shape) << " " << dev << " " << arm
                << ": first " << first << " s (compile " << compile << " s), stable " << stable * 1e3 << " ms, "
                << c.flops / stable / 1e12 << " TFLOP/s, rel. diff to eager " << err << (fus.empty() ? "" : ", ")
                << fus << "\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
