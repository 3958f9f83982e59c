// Times the eager executor (a measuring program, not a test): builds a denoiser with seeded
// weights, runs 5 warm-up calls and N timed calls on a random input, prints first-call and
// stable (mean of the last 5) seconds, achieved TFLOP/s against the roofline counts, and the
// CUDA peak memory.
//   nn_time_eager ARCH CHANNELS SHAPE(e.g. 4096x4096) [DEVICE=cuda] [DTYPE=float32] [TIMED=10]
#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <chrono>
#include <iostream>
#include <sstream>

#ifdef PNP_HAVE_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "pnp/nn/nn.hpp"
#include "pnp/roofline.hpp"

using namespace pnp;

int main(int argc, char** argv) {
  try {
    if (argc < 4) {
      std::cerr << "usage: nn_time_eager ARCH CHANNELS SHAPE [DEVICE=cuda] [DTYPE=float32] [TIMED=10]\n";
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
    const at::ScalarType dtype = (argc > 5 && std::string(argv[5]) == "float64") ? at::kDouble : at::kFloat;
    const int timed = argc > 6 ? std::stoi(argv[6]) : 10;
    auto g = nn::build(s);
    auto ex = nn::make_eager(g, nn::init_weights(g, 1), device, dtype);
    at::Tensor x = at::rand(shape, at::TensorOptions().dtype(dtype).device(device));
    auto sync = [&] {
      if (device.is_cuda()) torch::cuda::synchronize();
    };
    std::vector<double> t;
    for (int i = 0; i < 5 + timed; ++i) {
      sync();
      const auto t0 = std::chrono::steady_clock::now();
      at::Tensor y = ex->forward(x, 0.1);
      sync();
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    double stable = 0;
    for (size_t i = t.size() - 5; i < t.size(); ++i) stable += t[i] / 5;
    auto c = roofline::count(g, shape);
    std::cout << "nn_time_eager " << g.architecture << " " << nn::shape_string(shape) << " " << dev << " "
              << c10::toString(dtype) << ": first " << t[0] << " s, stable " << stable << " s, "
              << c.flops / stable / 1e12 << " TFLOP/s (corrected FLOPs " << c.flops << ", MAC/px "
              << c.macs_per_pixel() << ")";
#ifdef PNP_HAVE_CUDA
    if (device.is_cuda()) {
      auto st = c10::cuda::CUDACachingAllocator::getDeviceStats(0);
      std::cout << ", peak allocated "
                << st.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak / 1e9
                << " GB";
    }
#endif
    std::cout << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
