// pnp_bench --ceilings: the device's measured copy bandwidth and matrix-product and
// convolution rates (include/pnp/benchmark.hpp, measure_ceilings).
#include <ATen/ATen.h>
#include <ATen/Context.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>

#include "pnp/benchmark.hpp"
#include "pnp/io.hpp"
#include "pnp/timing.hpp"

namespace pnp::benchmark {

namespace {

// Restores PyTorch's TF32 switches on scope exit.
struct Tf32Switch {
  bool cublas, cudnn;
  explicit Tf32Switch(bool on) : cublas(at::globalContext().allowTF32CuBLAS()), cudnn(at::globalContext().allowTF32CuDNN()) {
    at::globalContext().setAllowTF32CuBLAS(on);
    at::globalContext().setAllowTF32CuDNN(on);
  }
  ~Tf32Switch() {
    at::globalContext().setAllowTF32CuBLAS(cublas);
    at::globalContext().setAllowTF32CuDNN(cudnn);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double rel_err(const at::Tensor& a, const at::Tensor& ref) {
  const at::Tensor d = a.to(at::kCPU, at::kDouble) - ref;
  return d.norm().item<double>() / std::max(ref.norm().item<double>(), 1e-300);
}

}  // namespace

std::vector<Ceiling> measure_ceilings(const CeilingOptions& o, std::ostream& progress) {
  if (o.device != "cpu" && !at::hasCUDA()) throw InputError("--device " + o.device + ": no CUDA device is available");
  const at::Device dev = concrete_device(o.device == "cpu" ? at::Device(at::kCPU) : at::Device(o.device));
  if (o.warmup < 0 || o.timed < 1) throw InputError("ceilings: warmup must be >= 0 and timed >= 1");
  const bool gpu = dev.is_cuda();
  const CallTimer timer(dev);
  const auto opts = at::TensorOptions().device(dev);
  at::manual_seed(1);
  std::vector<Ceiling> rows;

  // Times `call`, then `check` returns the relative error of (a sample of) its output.
  auto run = [&](Ceiling c, const std::function<void()>& call, double work, const std::function<double()>& check) {
    for (int i = 0; i < o.warmup; ++i) call();
    std::vector<double> t;
    for (int i = 0; i < o.timed; ++i) t.push_back(timer.time(call));
    c.seconds = median(t);
    c.rate = work / c.seconds / (c.unit == "GB/s" ? 1e9 : 1e12);
    c.error = check();
    progress << "ceiling " << c.name << " " << c.shape << ": " << c.seconds * 1e3 << " ms, " << c.rate << " " << c.unit
             << ", checked sample error " << c.error << std::endl;
    if (!std::isfinite(c.error) || c.error > 2e-2)
      throw Error("ceilings: the " + c.name + " result differs from float64 by " + std::to_string(c.error));
    rows.push_back(c);
  };

  {  // copy: read n floats, write n floats
    const int64_t n = o.quick ? (int64_t{8} << 20) : gpu ? (int64_t{512} << 20) : (int64_t{128} << 20);
    at::Tensor src = at::rand({n}, opts), dst = at::full({n}, NAN, opts);
    run({"copy", std::to_string(n), 0, 0, "GB/s", 0}, [&] { dst.copy_(src); }, 2.0 * 4.0 * static_cast<double>(n),
        [&] { return at::equal(dst, src) ? 0.0 : NAN; });
  }

  const int64_t m = o.quick ? 256 : gpu ? 8192 : 2048;
  for (const auto& [name, dtype, tf32] : std::vector<std::tuple<std::string, at::ScalarType, bool>>{
           {"matmul_tf32", at::kFloat, true}, {"matmul_fp32", at::kFloat, false}, {"matmul_bf16", at::kBFloat16, false}}) {
    if (!gpu && name == "matmul_tf32") continue;  // TF32 is a tensor-core mode
    Tf32Switch sw(tf32);
    at::Tensor a = at::randn({m, m}, opts).to(dtype), b = at::randn({m, m}, opts).to(dtype);
    at::Tensor c = at::full({m, m}, NAN, opts.dtype(dtype));
    run({name, std::to_string(m) + "x" + std::to_string(m) + "x" + std::to_string(m), 0, 0, "TFLOP/s", 0},
        [&] { at::mm_out(c, a, b); }, 2.0 * std::pow(static_cast<double>(m), 3), [&] {
          // 8 rows of the product against float64 on the (rounded) inputs.
          const at::Tensor ref = at::mm(a.narrow(0, 0, 8).to(at::kCPU, at::kDouble), b.to(at::kCPU, at::kDouble));
          return rel_err(c.narrow(0, 0, 8), ref);
        });
  }

  if (gpu) {  // FP8 (e4m3) products through cuBLASLt (ATen's _scaled_mm): unit scales, bf16 out, fast accumulation
    at::Tensor a = at::randn({m, m}, opts).to(at::kFloat8_e4m3fn);
    at::Tensor b = at::randn({m, m}, opts).to(at::kFloat8_e4m3fn).t().contiguous().t();  // column-major, as it asks
    const at::Tensor one = at::ones({}, opts);
    at::Tensor c = at::full({m, m}, NAN, opts.dtype(at::kBFloat16));
    run({"matmul_fp8", std::to_string(m) + "x" + std::to_string(m) + "x" + std::to_string(m), 0, 0, "TFLOP/s", 0},
        [&] { c = at::_scaled_mm(a, b, one, one, {}, {}, at::kBFloat16, true); }, 2.0 * std::pow(static_cast<double>(m), 3),
        [&] {
          const at::Tensor ref = at::mm(a.narrow(0, 0, 8).to(at::kCPU, at::kDouble), b.to(at::kCPU, at::kDouble));
          return rel_err(c.narrow(0, 0, 8), ref);
        });
  }

  const int64_t hw = o.quick ? 32 : gpu ? 4096 : 256, ch = o.quick ? 16 : 64;
  for (const auto& [name, dtype, tf32] : std::vector<std::tuple<std::string, at::ScalarType, bool>>{
           {"conv3x3_tf32", at::kFloat, true}, {"conv3x3_fp32", at::kFloat, false}, {"conv3x3_bf16", at::kBFloat16, false}}) {
    if (!gpu && name == "conv3x3_tf32") continue;
    Tf32Switch sw(tf32);
    at::Tensor x = at::rand({1, ch, hw, hw}, opts).to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor w = (at::randn({ch, ch, 3, 3}, opts) * (1.0 / std::sqrt(9.0 * ch)))
                       .to(dtype)
                       .contiguous(at::MemoryFormat::ChannelsLast);
    at::Tensor y;
    run({name, "1x" + std::to_string(ch) + "x" + std::to_string(hw) + "x" + std::to_string(hw), 0, 0, "TFLOP/s", 0},
        [&] { y = at::conv2d(x, w, {}, 1, 1); }, 2.0 * ch * ch * 9 * static_cast<double>(hw * hw), [&] {
          // The first 8 output rows against float64 (they read input rows 0..8).
          const at::Tensor xb = x.narrow(2, 0, 9).to(at::kCPU, at::kDouble).contiguous();
          const at::Tensor ref = at::conv2d(xb, w.to(at::kCPU, at::kDouble).contiguous(), {}, 1, 1).narrow(2, 0, 8);
          return rel_err(y.narrow(2, 0, 8), ref);
        });
  }
  return rows;
}

void write_ceilings(const std::string& path, const std::vector<Ceiling>& rows, const std::string& device,
                    bool overwrite) {
  io::AtomicOutput out(path, overwrite);
  auto& f = out.file();
  io::write_provenance(f, bench_provenance());
  const at::Device dev = device == "cpu" ? at::Device(at::kCPU) : at::Device(device);
  io::write_attr(f, "/", "gpu_names", device_name(dev));
  auto col = [&](const char* name, auto get, const char* units, const char* desc) {
    io::write_column(f, std::string("/ceilings/") + name, rows, get, units, desc);
  };
  col("name", [](const Ceiling& r) { return r.name; }, "", "kernel: copy, matmul_{tf32,fp32,bf16,fp8}, conv3x3_{tf32,fp32,bf16}");
  col("shape", [](const Ceiling& r) { return r.shape; }, "",
      "elements (copy), m x n x k (matmul), input B x C x H x W (conv)");
  col("unit", [](const Ceiling& r) { return r.unit; }, "", "unit of rate");
  col("seconds", [](const Ceiling& r) { return r.seconds; }, "s", "median of the timed calls");
  col("rate", [](const Ceiling& r) { return r.rate; }, "see unit",
      "GB/s (copy: bytes read + written) or TFLOP/s (2 m n k; 2 C_out C_in 9 H W)");
  col("error", [](const Ceiling& r) { return r.error; }, "1", "relative error of a checked sample against float64");
  out.commit();
}

}  // namespace pnp::benchmark
