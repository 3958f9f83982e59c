// pnp_denoise end to end: a stack of 2D slices through a small DnCNN in patches equals the
// eager executor; bad input ends with one `error: ...` line and exit code 2.
#include <ATen/ATen.h>
#include "pnp_test.hpp"
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "pnp/io.hpp"
#include "pnp/nn/nn.hpp"
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
