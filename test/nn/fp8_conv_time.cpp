// Times DRUNet's 3×3 convolutions as cuDNN graphs in bf16 and in FP8 (a measuring program, not a
// test; issue 48's question: are cuDNN's FP8 convolutions fast enough, and at which levels).
// For each level l = 0..3 of DRUNet at SIZE² (64·2^l channels at (SIZE/2^l)²) and each layer of
// its residual blocks (conv + ReLU, then conv + residual add), as the native executor builds
// them (native/cudnn_epilogue.hpp: a zero bias, channels-last, the fastest of cuDNN's first 3
// plans and 2 precompiled ones):
//   * bf16: bf16 in, out and weights;
//   * fp8: e4m3 input and weights (pnp/nn/fp8.hpp's scales: one per tensor, one per output
//     channel), float32 accumulation, bf16 out;
//   * quantise: the pass that turns the bf16 input into e4m3 (pnp/nn/fp8.hpp, ATen's ops), which an
//     FP8 layer fed by a bf16 one pays on top;
//   * on a Hopper GPU, pnp's own kernels (native/wgmma_conv.hpp): wgmma_bf16 (the rows kernel where
//     it applies, else the tile kernel), and the tile kernel in FP8, bf16 out (wgmma_fp8) and e4m3
//     out (wgmma_fp8_e4m3: the output quantised in the epilogue for the next layer, no quantising
//     pass); level 0's 64 channels in 64-byte blocks; for conv + residual also wgmma_fp8_z_end,
//     the residual loaded in the epilogue instead of into the accumulators' start (A/B).
// Each: the fastest of --reps runs (CUDA events), TFLOP/s and its share of the GPU's dense peak,
// and the FP8 output's relative L2 difference to bf16's (a check that both computed the same
// convolution, not an accuracy figure: test_native holds that against float64). Then DRUNet's
// sum over its 3×3 residual layers (8 blocks at levels 0-2, 4 at level 3). Rows to --out.
//   fp8_conv_time [--size 4096] [--reps 10] [--out fp8_conv_time.csv]
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <boost/program_options.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>

#include "native/cudnn_epilogue.hpp"
#ifdef PNP_HAVE_WGMMA_CONV
#include "native/wgmma_conv.hpp"
#include "pnp/nn/native.hpp"
#endif
#include "pnp/core.hpp"
#include "pnp/nn/fp8.hpp"
#include "pnp/roofline.hpp"

using namespace pnp;
namespace po = boost::program_options;
namespace native = pnp::nn::native;

namespace {

struct Timed {
  double ms = std::numeric_limits<double>::quiet_NaN();
  std::string engine, why;
};

// One layer's graph built and timed (the executor's way: 3 candidates and 2 precompiled ones).
Timed time_graph(native::EpilogueSpec s, int reps) {
  Timed t;
  s.candidates = 3, s.precompiled = 2;
  std::unique_ptr<native::EpilogueConv> g;
  try {
    g = native::make_epilogue_conv(s);
  } catch (const std::exception& e) {
    const std::string m = e.what();
    t.why = m.substr(0, m.find('\n'));
    return t;
  }
  t.engine = g->engine();
  at::Tensor ws = at::empty({std::max<int64_t>(1, g->workspace_bytes())}, s.y.options().dtype(at::kByte));
  const at::Tensor* b = s.b.defined() ? &s.b : nullptr;
  const at::Tensor* d = s.descale.defined() ? &s.descale : nullptr;
  t.ms = native::time_on_stream_ms([&] { g->run(s.x, s.w, s.z, b, s.y, ws.data_ptr(), d); }, reps);
  return t;
}

double rel_l2(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor d = a.to(at::kDouble) - b.to(at::kDouble);
  return d.norm().item<double>() / b.to(at::kDouble).norm().item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int64_t size = 4096;
    int reps = 10;
    std::string out;
    po::options_description opts("fp8_conv_time [options]: DRUNet's 3x3 layers as cuDNN graphs, bf16 against FP8");
    opts.add_options()("help,h", "print this help")("size", po::value(&size)->default_value(4096),
                                                      "DRUNet's input size (level l: SIZE/2^l square)")(
        "reps", po::value(&reps)->default_value(10), "timed runs per graph (the fastest is kept)")(
        "out", po::value(&out)->default_value("fp8_conv_time.csv"), "CSV of the results (with provenance)");
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << opts << "\n";
      return 0;
    }
    if (size < 64 || size % 8 != 0) throw InputError("--size must be a multiple of 8, at least 64");
    if (!at::cuda::is_available()) throw InputError("fp8_conv_time needs a CUDA GPU");
    const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
    if (prop->major * 10 + prop->minor < 89)
      throw InputError(std::string("FP8 convolutions need compute capability 8.9 or later; this GPU is ") + prop->name);
    const roofline::GpuPeak& peak = roofline::peak_for(prop->name);
    const Provenance p = basic_provenance("fp8_conv_time");
    std::ofstream csv(out);
    if (!csv) throw InputError("cannot write " + out);
    csv << "# fp8_conv_time: " << native::epilogue_environment(-1) << ", commit " << p.git_commit << ", " << p.date_utc
        << ", size " << size << ", reps " << reps << "\n";
    csv << "level,channels,side,layer,precision,ms,tflops,share_of_peak,engine,rel_l2_to_bf16\n";
    const auto bf = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
    double total_bf16 = 0, total_fp8 = 0, total_quant = 0, total_wb = 0, total_wf = 0, total_we = 0, total_wz = 0;
    bool hopper = false;
#ifdef PNP_HAVE_WGMMA_CONV
    hopper = prop->major == 9 && nn::hopper_kernels_default();
#endif
    for (int l = 0; l < 4; ++l) {
      const int64_t c = 64 << l, side = size >> l, blocks = l < 3 ? 8 : 4;
      const double flops = 2.0 * c * c * 9 * side * side;
      at::manual_seed(48 + l);
      const auto cl = at::MemoryFormat::ChannelsLast;
      const at::Tensor x = at::randn({1, c, side, side}, bf).contiguous(cl);
      const at::Tensor z = at::randn({1, c, side, side}, bf).contiguous(cl);
      const at::Tensor w32 = at::randn({c, c, 3, 3}, bf.dtype(at::kFloat)) / std::sqrt(9.0 * c);
      const at::Tensor w = w32.to(at::kBFloat16).contiguous(cl);
      const at::Tensor zero_b = at::zeros({c}, bf);
      // FP8: the activation's scale from its amax, the weights' per output channel (from float32)
      const double sx = nn::e4m3_activation_scale(x);
      const nn::E4m3Weight wq = nn::quantize_weight_e4m3(w32, /*transposed=*/false);
      const at::Tensor xq = nn::e4m3_quantize(x, sx).contiguous(cl);
      const at::Tensor descale = (wq.scale * sx).to(at::kFloat).contiguous();
      for (bool residual : {false, true}) {
        const char* layer = residual ? "conv+residual" : "conv+relu";
        native::EpilogueSpec s;
        s.stride = {1, 1}, s.padding = {1, 1};
        s.relu = !residual;
        s.b = zero_b;
        if (residual) s.z = z;
        s.x = x, s.w = w;
        s.y = at::full_like(x, std::numeric_limits<double>::quiet_NaN());  // poisoned
        const Timed tb = time_graph(s, reps);
        const at::Tensor yb = s.y.clone();
        native::EpilogueSpec f = s;
        f.x = xq, f.w = wq.q.contiguous(cl), f.descale = descale;
        f.y = at::full_like(x, std::numeric_limits<double>::quiet_NaN());
        const Timed tf = time_graph(f, reps);
        const double diff = std::isnan(tf.ms) ? std::numeric_limits<double>::quiet_NaN() : rel_l2(f.y, yb);
        for (const auto& [prec, t, roof] : {std::tuple{"bf16", tb, peak.bf16_tflops}, std::tuple{"fp8", tf, peak.fp8_tflops}}) {
          const double tflops = flops / (t.ms * 1e-3) / 1e12;
          csv << l << "," << c << "," << side << "," << layer << "," << prec << "," << t.ms << "," << tflops << ","
              << (roof > 0 ? tflops / roof : 0) << "," << (t.why.empty() ? t.engine : "none: " + t.why) << ","
              << (std::string(prec) == "fp8" ? diff : 0.0) << "\n";
          std::printf("level %d %4lld ch %5lld² %-13s %-4s %8.3f ms %7.1f TFLOP/s %s\n", l, static_cast<long long>(c),
                      static_cast<long long>(side), layer, prec, t.ms, tflops,
                      t.why.empty() ? t.engine.c_str() : ("no plan: " + t.why).c_str());
        }
        if (!std::isnan(tf.ms)) std::printf("    fp8 against bf16: relative L2 %.3e\n", diff);
        total_bf16 += blocks * tb.ms;
        total_fp8 += blocks * tf.ms;
#ifdef PNP_HAVE_WGMMA_CONV
        if (hopper) {
          const at::Tensor* zp = residual ? &z : nullptr;
          at::Tensor yw = at::full_like(x, std::numeric_limits<double>::quiet_NaN());
          const double wb = native::time_on_stream_ms(
              [&] { native::wgmma_conv(x, w, &zero_b, zp, !residual, {1, 1}, {}, &yw); }, reps);
          const double ewb = rel_l2(yw, yb);
          double wf = std::numeric_limits<double>::quiet_NaN(), we = wf, ewf = wf, ewe = wf, wz = wf, ewz = wf;
          const at::Tensor wqc = wq.q.contiguous(cl);
          if (native::wgmma_conv_fp8_applies(xq, wqc, {1, 1}, zp)) {
            at::Tensor yf = at::full_like(x, std::numeric_limits<double>::quiet_NaN());
            wf = native::time_on_stream_ms(
                [&] { native::wgmma_conv_fp8(xq, wqc, descale, &zero_b, zp, !residual, {1, 1}, at::kBFloat16, 1.0, &yf); },
                reps);
            ewf = rel_l2(yf, yb);
            const double so = nn::e4m3_activation_scale(yb);
            at::Tensor ye = at::empty_like(x, x.options().dtype(at::kFloat8_e4m3fn));
            we = native::time_on_stream_ms(
                [&] { native::wgmma_conv_fp8(xq, wqc, descale, &zero_b, zp, !residual, {1, 1}, at::kFloat8_e4m3fn, so, &ye); },
                reps);
            ewe = rel_l2(ye.to(at::kFloat) * so, yb);
            if (residual) {  // A/B: the residual in the epilogue (WgmmaVariant::z_start off), bf16 out
              native::WgmmaVariant v;
              v.z_start = false;
              at::Tensor yz = at::full_like(x, std::numeric_limits<double>::quiet_NaN());
              wz = native::time_on_stream_ms(
                  [&] { native::wgmma_conv_fp8(xq, wqc, descale, &zero_b, zp, false, {1, 1}, at::kBFloat16, 1.0, &yz, v); },
                  reps);
              ewz = rel_l2(yz, yb);
            }
          }
          for (const auto& [prec, ms, err, roof] :
               {std::tuple{"wgmma_bf16", wb, ewb, peak.bf16_tflops}, std::tuple{"wgmma_fp8", wf, ewf, peak.fp8_tflops},
                std::tuple{"wgmma_fp8_e4m3", we, ewe, peak.fp8_tflops}, std::tuple{"wgmma_fp8_z_end", wz, ewz, peak.fp8_tflops}}) {
            if (!residual && std::string(prec) == "wgmma_fp8_z_end") continue;
            const double tflops = flops / (ms * 1e-3) / 1e12;
            csv << l << "," << c << "," << side << "," << layer << "," << prec << "," << ms << "," << tflops << ","
                << (roof > 0 ? tflops / roof : 0) << "," << (std::isnan(ms) ? "none: no FP8 kernel" : "pnp") << ","
                << err << "\n";
            std::printf("level %d %4lld ch %5lld² %-13s %-15s %8.3f ms %7.1f TFLOP/s, rel. L2 to cuDNN bf16 %.3e\n", l,
                        static_cast<long long>(c), static_cast<long long>(side), layer, prec, ms, tflops, err);
          }
          total_wb += blocks * wb;
          total_wf += blocks * wf;  // NaN where a layer has no FP8 kernel
          total_we += blocks * we;
          total_wz += blocks * (residual ? wz : wf);
        }
#endif
      }
      const double q = native::time_on_stream_ms([&] { (void)nn::e4m3_quantize(x, sx); }, reps);
      csv << l << "," << c << "," << side << ",quantise,bf16->fp8," << q << ",0,0,aten,0\n";
      std::printf("level %d quantise bf16 -> e4m3: %.3f ms\n", l, q);
      total_quant += 2 * blocks * q;  // both layers of a block read a bf16 input
      std::fflush(stdout);
    }
    csv << "all,,," << "drunet_3x3_residual_layers,bf16," << total_bf16 << ",,,,\n";
    csv << "all,,," << "drunet_3x3_residual_layers,fp8," << total_fp8 << ",,,,\n";
    csv << "all,,," << "drunet_3x3_residual_layers,fp8+quantise," << total_fp8 + total_quant << ",,,,\n";
    std::printf("DRUNet %lld², its 3x3 residual layers: bf16 %.2f ms, fp8 %.2f ms, fp8 with each input quantised %.2f ms\n",
                static_cast<long long>(size), total_bf16, total_fp8, total_fp8 + total_quant);
    if (hopper) {
      csv << "all,,," << "drunet_3x3_residual_layers,wgmma_bf16," << total_wb << ",,,,\n";
      csv << "all,,," << "drunet_3x3_residual_layers,wgmma_fp8," << total_wf << ",,,,\n";
      csv << "all,,," << "drunet_3x3_residual_layers,wgmma_fp8_e4m3," << total_we << ",,,,\n";
      csv << "all,,," << "drunet_3x3_residual_layers,wgmma_fp8_z_end," << total_wz << ",,,,\n";
      std::printf("pnp's kernels: wgmma bf16 %.2f ms; FP8: bf16 out %.2f ms, e4m3 out %.2f ms, the residual in the "
                  "epilogue %.2f ms\n", total_wb, total_wf, total_we, total_wz);
    }
    std::cout << "fp8_conv_time: wrote " << out << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "fp8_conv_time: error: " << e.what() << "\n";
    return 2;
  }
}
