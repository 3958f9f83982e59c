// pnp_denoise end to end: a stack of 2D slices through a small DnCNN in patches equals the
// eager executor; bad input ends with one `error: ...` line and exit code 2.
#include <ATen/ATen.h>
#include "pnp_test.hpp"
#include <sys/wait.h>

#include <cstdlib>
#include <regex>
#include <fstream>
#include <sstream>

#include "pnp/io.hpp"
#include "pnp/nn/fp8.hpp"
#include "pnp/nn/nn.hpp"
#include "pnp/roofline.hpp"
#include "test_util.hpp"

using namespace pnp;

namespace {
int run(const std::string& args, const std::string& log) {
  const std::string cmd = std::string(PNP_DENOISE_EXE) + " " + args + " >" + log + " 2>&1";
  const int st = std::system(cmd.c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}
std::string slurp(const std::string& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("pnp_denoise applies a denoiser to an HDF5 stack, patched") {
  auto dir = pnp::test::scratch_dir("pnp_denoise");
  const std::string in = (dir / "in.h5").string(), out = (dir / "out.h5").string(), w = (dir / "w.h5").string(),
                    log = (dir / "log.txt").string();
  at::Tensor x = at::rand({3, 30, 27});
  {
    auto f = io::H5File::create(in);
    io::write<float>(f, "/exchange/ground_truth", x.data_ptr<float>(), {3, 30, 27}, "1", "test stack");
  }
  const std::string common = "--input " + in + " --arch dncnn --features 6 --blocks 5 --seed 7 --sigma 0.2 ";
  REQUIRE(run(common + "--output " + out + " --patch 16 --save-weights " + w, log) == 0);
  nn::DenoiserSpec s;
  s.architecture = "dncnn";
  s.features = {6};
  s.blocks = 5;
  auto g = nn::build(s);
  auto ex = nn::make_eager(g, nn::load_weights(w, g), at::kCPU, at::kFloat);
  at::Tensor ref = ex->forward(x.unsqueeze(1), 0.2).squeeze(1);
  auto f = io::H5File::open(out);
  auto y = io::read<float>(f, "/denoised");
  REQUIRE(y.shape == std::vector<int64_t>{3, 30, 27});
  at::Tensor yt = at::from_blob(y.data.data(), {3, 30, 27}, at::kFloat);
  CHECK((yt - ref).abs().max().item<double>() < 1e-5);
  CHECK((yt - x).abs().max().item<double>() > 1e-3);
  CHECK(io::read_attr_string(f, "/", "architecture") == "dncnn");
  CHECK(io::read_attr_int(f, "/", "overlap") == 5);  // default: the receptive radius

  // Existing output without --force, unknown architecture, bad dataset: exit 2, one error line.
  for (const std::string& bad : {common + "--output " + out, "--input " + in + " --output " + out + "x --arch resnet",
                                 common + "--output " + out + "y --dataset /nope"}) {
    INFO(bad);
    CHECK(run(bad, log) == 2);
    const std::string text = slurp(log);
    const auto pos = text.find("error: ");
    REQUIRE(pos != std::string::npos);
    CHECK(text.find('\n', pos) == text.size() - 1);
  }
}

TEST_CASE("pnp_denoise --counts: the native floor at the given rates, FP8 where fp8_keep puts it") {
  const std::string log = (pnp::test::scratch_dir("pnp_denoise_counts") / "counts.log").string();
  REQUIRE(run("--counts 1,1,64,64 --dtype bfloat16 --fp8-keep native_deep --rates M=100,200,400,0.5 --per-kernel", log) ==
          0);
  const std::string text = slurp(log);
  INFO(text);
  // the floor it prints is native_floor's on those rates, with fp8_run_convs's convolutions in FP8
  nn::DenoiserSpec s;
  const nn::Graph g = nn::build(s);
  const auto convs = nn::fp8_run_convs(g, "native_deep");
  roofline::GpuPeak m;
  m.name = "M", m.tf32_tflops = 100, m.bf16_tflops = 200, m.fp8_tflops = 400, m.hbm_tbps = 0.5;
  const auto f = roofline::native_floor(g, {1, 1, 64, 64}, 2, std::set<int>(convs.begin(), convs.end()), m);
  std::smatch hit;
  REQUIRE(std::regex_search(text, hit, std::regex(R"(native floor M +([0-9.e+-]+) ms, kernel by kernel \(68 kernels, 24 convolutions in FP8)")));
  CHECK(std::stod(hit[1]) == doctest::Approx(f.seconds * 1e3).epsilon(1e-3));
  CHECK(text.find("floor H100") == std::string::npos);  // --rates replaces the data sheets
  // per kind of kernel: the 256-channel ResBlocks' second convolutions, 8 of them, in FP8
  CHECK(std::regex_search(text, std::regex(R"(conv \+ add 256->256 ch at \[16, 16\], fp8 +8 )")));
  CHECK(std::regex_search(text, std::regex(R"(conv \+ relu 64->64 ch at \[64, 64\], bf16 +8 )")));

  // misuse: FP8 beside float32, an unknown choice, bad rates, the floor options without --counts
  for (const std::string& bad : {std::string("--counts 1,1,64,64 --fp8-keep native"),
                                 std::string("--counts 1,1,64,64 --dtype bfloat16 --fp8-keep most"),
                                 std::string("--counts 1,1,64,64 --rates M=1,2,3"),
                                 std::string("--counts 1,1,64,64 --rates M=1,2,3,0"),
                                 std::string("--input a.h5 --output b.h5 --per-kernel")}) {
    INFO(bad);
    CHECK(run(bad, log) == 2);
    CHECK(slurp(log).find("error: ") != std::string::npos);
  }
}
