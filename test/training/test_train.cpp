// pnp_train's module: config schema, data determinism, the differentiable forward against the
// eager executor, seed reproducibility of the loss curve, and resume continuing the same curve.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include "pnp_test.hpp"

#include <fstream>
#include <sstream>

#include "pnp/io.hpp"
#include "pnp/nn/executor.hpp"
#include "pnp/training.hpp"
#include "test_util.hpp"

using namespace pnp;
using namespace pnp::training;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::string& text) {
  try {
    parse_train_config(text, "t.toml", ".");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// A tiny, fast CPU configuration writing into dir.
TrainConfig tiny(const fs::path& dir, const std::string& arch = "dncnn") {
  TrainConfig c;
  c.model.architecture = arch;
  if (arch == "dncnn") {
    c.model.features = {8};
    c.model.blocks = 4;
  } else {
    c.model.features = {4, 8, 8, 16};
    c.model.blocks = 1;
  }
  c.data.patch = 32;
  c.data.batch = 4;
  c.data.scale_min = 32;
  c.data.scale_max = 96;
  c.train.steps = 12;
  c.train.warmup = 3;
  c.train.lr = 1e-3;
  c.train.seed = 7;
  c.train.device = "cpu";
  c.validation.every = 4;
  c.validation.images = 2;
  c.validation.size = 32;
  c.output.weights = (dir / "w.h5").string();
  c.output.log = (dir / "log.h5").string();
  c.output.checkpoint = (dir / "ckpt.h5").string();
  c.output.checkpoint_every = 5;
  c.output.progress = false;
  return c;
}

}  // namespace

TEST_CASE("train config: defaults parse, unknown keys and bad values name key and line") {
  TrainConfig d = parse_train_config("", "t.toml", ".");
  CHECK(d.model.architecture == "dncnn");
  CHECK(parse_train_config(d.to_toml(), "t.toml", ".").to_toml() == d.to_toml());

  std::string e = error_of("[train]\nsteps = 10\nlearning_rate = 0.1\n");
  CHECK(e.find("t.toml:3") != std::string::npos);
  CHECK(e.find("train.learning_rate") != std::string::npos);
  e = error_of("[train]\nstep = 10\n");
  CHECK(e.find("did you mean 'train.steps'") != std::string::npos);
  e = error_of("[trian]\nsteps = 10\n");
  CHECK(e.find("unknown section [trian]") != std::string::npos);
  e = error_of("[model]\narchitecture = \"drunte\"\n");
  CHECK(e.find("t.toml:2: model.architecture") != std::string::npos);
  CHECK(e.find("did you mean \"drunet\"") != std::string::npos);
  e = error_of("[data]\n\nbatch = 0\n");
  CHECK(e.find("t.toml:3: data.batch: 0 is out of range") != std::string::npos);
  e = error_of("[noise]\nsigma_max = \"big\"\n");
  CHECK(e.find("noise.sigma_max: must be a number") != std::string::npos);
  e = error_of("[model]\narchitecture = \"drunet\"\n[data]\npatch = 36\nscale_min = 64\n");
  CHECK(e.find("data.patch = 36 must be a multiple of the network's alignment 8") != std::string::npos);
  e = error_of("[noise]\nsigma_min = 0.2\nsigma_max = 0.1\n");
  CHECK(e.find("noise.sigma_max must be at least noise.sigma_min") != std::string::npos);
  e = error_of("[data]\nstack = \"no_such_file.h5\"\n");
  CHECK(e.find("data.stack: file not found") != std::string::npos);

  TrainConfig c = parse_train_config("[train]\nsteps = 5\n", "t.toml", ".");
  apply_train_override(c, "train.device=cpu");
  CHECK(c.train.device == "cpu");
  CHECK_THROWS_WITH_AS(apply_train_override(c, "train.step=3"), doctest::Contains("did you mean 'train.steps'"), InputError);
}

TEST_CASE("batches are a pure function of (seed, step), whatever the thread count") {
  auto dir = test::scratch_dir("train_data");
  TrainConfig c = tiny(dir);
  c.data.batch = 6;
  c.noise.sigma_min = 0.02;
  c.noise.sigma_max = 0.2;
  BatchSource src(c);
  const int threads = at::get_num_threads();
  Batch a = src.batch(3);
  at::set_num_threads(1);
  Batch b = src.batch(3);
  at::set_num_threads(threads);
  CHECK(at::equal(a.clean, b.clean));
  CHECK(at::equal(a.noisy, b.noisy));
  CHECK(at::equal(a.sigma, b.sigma));
  CHECK_FALSE(at::equal(a.clean, src.batch(4).clean));
  CHECK(a.clean.sizes().vec() == std::vector<int64_t>{6, 1, 32, 32});
  CHECK(a.clean.min().item<float>() >= 0.0f);
  CHECK(a.clean.max().item<float>() <= 1.0f);
  CHECK(a.sigma.min().item<float>() >= 0.02f);
  CHECK(a.sigma.max().item<float>() <= 0.2f);
  // The noise of each sample has its sigma.
  Batch big = BatchSource([&] { auto k = c; k.data.patch = 64; k.data.scale_min = 64; return k; }()).batch(0);
  at::Tensor sd = (big.noisy - big.clean).reshape({6, -1}).std(1);
  for (int64_t i = 0; i < 6; ++i) CHECK(sd[i].item<double>() == doctest::Approx(big.sigma[i].item<double>()).epsilon(0.05));
  // Another seed, other data.
  TrainConfig c2 = c;
  c2.train.seed = 8;
  CHECK_FALSE(at::equal(a.clean, BatchSource(c2).batch(3).clean));
}

TEST_CASE("an HDF5 image stack feeds crops with random contrast") {
  auto dir = test::scratch_dir("train_stack");
  const int64_t M = 3, H = 40, W = 48;
  std::vector<float> imgs(static_cast<size_t>(M * H * W));
  for (size_t k = 0; k < imgs.size(); ++k) imgs[k] = static_cast<float>(100.0 + 50.0 * std::sin(0.01 * double(k)));
  {
    auto f = io::H5File::create(dir / "stack.h5");
    io::write<float>(f, "/images", imgs.data(), {M, H, W}, "1", "test stack");
  }
  TrainConfig c = tiny(dir);
  c.data.stack = (dir / "stack.h5").string();
  c.data.stack_fraction = 1.0;
  c.data.flips = false;
  c.noise.sigma_min = c.noise.sigma_max = 0.0;
  BatchSource src(c);
  CHECK(src.describe().find("3 images") != std::string::npos);
  Batch b = src.batch(0);
  CHECK(b.clean.min().item<float>() >= 0.0f);
  CHECK(b.clean.max().item<float>() <= 1.0f);
  CHECK(at::equal(b.clean, b.noisy));
  // A stack image smaller than the patch is an input error naming the file.
  c.data.patch = 64;
  c.data.scale_min = 64;
  CHECK_THROWS_WITH_AS(BatchSource{c}, doctest::Contains("stack.h5"), InputError);
}

TEST_CASE("the differentiable forward equals the eager executor, and every parameter gets a gradient") {
  for (std::string arch : {"dncnn", "drunet", "unet"}) {
    CAPTURE(arch);
    TrainConfig c = tiny(".", arch);
    if (arch == "unet") c.model.features = {4, 8}, c.model.blocks = -1;
    nn::Graph g = nn::build(model_spec(c.model));
    nn::Weights w = nn::init_weights(g, 3);
    TrainableModel m(g, w, at::kCPU);
    at::Tensor x = at::rand({2, 1, 32, 32}, at::kFloat);
    at::Tensor sigma = at::full({2}, 0.07, at::kFloat);
    at::Tensor y = m.forward(x, sigma, false);
    auto eager = nn::make_eager(g, w, at::kCPU);
    at::Tensor ref = eager->forward(x, 0.07);
    CHECK(at::allclose(y, ref, 1e-5, 1e-6));
    // Per-sample sigma: sample b sees sigma[b] (DRUNet's sigma map).
    if (arch == "drunet") {
      at::Tensor s2 = at::tensor({0.02f, 0.2f});
      at::Tensor y2 = m.forward(x, s2, false);
      CHECK(at::allclose(y2[0], eager->forward(x.narrow(0, 0, 1), 0.02)[0], 1e-5, 1e-6));
      CHECK(at::allclose(y2[1], eager->forward(x.narrow(0, 1, 1), 0.2)[0], 1e-5, 1e-6));
    }
    at::mse_loss(m.forward(x, sigma, true), x).backward();
    for (const auto& p : m.parameters()) {
      REQUIRE(p.grad().defined());
      CHECK(p.grad().abs().sum().item<double>() > 0);
    }
    CHECK(m.weights().size() == w.size());
  }
}

TEST_CASE("same seed, same loss curve; resuming a checkpoint continues it") {
  auto dir = test::scratch_dir("train_run");
  std::ostringstream log;
  TrainConfig c = tiny(dir / "a");
  fs::create_directories(dir / "a");
  TrainResult a = run_training(c, log);
  REQUIRE(a.finished);
  REQUIRE(a.loss.size() == 12);
  CHECK(a.loss.back() < a.loss.front());
  CHECK(a.val_step == std::vector<int64_t>{4, 8, 12});
  for (size_t i = 0; i < a.loss.size(); ++i) INFO(i << ": " << a.loss[i]);
  // Outputs: weights (loadable by the solver's loader), sidecar, log.
  nn::Graph g = nn::build(model_spec(c.model));
  CHECK_NOTHROW(nn::load_weights(c.output.weights, g));
  CHECK(fs::exists(dir / "a" / "w.json"));
  {
    auto f = io::H5File::open(c.output.log);
    CHECK(io::read<double>(f, "/loss").data == a.loss);
    CHECK(io::read<double>(f, "/validation/psnr").data == a.val_psnr);
    auto wf = io::H5File::open(c.output.weights);
    CHECK(io::read_attr_int(wf, "/", "training_steps") == 12);
  }

  // The same seed again: the same curve, bit for bit.
  fs::create_directories(dir / "b");
  TrainResult b = run_training(tiny(dir / "b"), log);
  CHECK(b.loss == a.loss);
  CHECK(b.val_psnr == a.val_psnr);
  // Another seed: another curve.
  TrainConfig c3 = tiny(dir / "c");
  c3.train.seed = 8;
  fs::create_directories(dir / "c");
  CHECK(run_training(c3, log).loss != a.loss);

  // Interrupted after step 7 (checkpoints at 5 and 7), then resumed: the same curve and weights.
  fs::create_directories(dir / "d");
  TrainConfig d = tiny(dir / "d");
  d.train.stop_after = 7;
  TrainResult d1 = run_training(d, log);
  CHECK_FALSE(d1.finished);
  CHECK(d1.steps_done == 7);
  CHECK_FALSE(fs::exists(d.output.weights));
  CHECK(fs::exists(d.output.checkpoint));
  d.train.stop_after = 0;
  // Without resume the existing checkpoint is refused.
  CHECK_THROWS_WITH_AS(run_training(d, log), doctest::Contains("output.resume"), InputError);
  d.output.resume = true;
  TrainResult d2 = run_training(d, log);
  CHECK(d2.finished);
  REQUIRE(d2.loss.size() == a.loss.size());
  for (size_t i = 0; i < a.loss.size(); ++i) CHECK(d2.loss[i] == a.loss[i]);
  CHECK(d2.val_psnr == a.val_psnr);
  nn::Weights wa = nn::load_weights(c.output.weights, g), wd = nn::load_weights(d.output.weights, g);
  for (const auto& [k, t] : wa) CHECK(at::equal(t, wd.at(k)));

  // Resuming under a different schedule is refused, naming the difference.
  TrainConfig e = d;
  e.train.lr = 5e-4;
  CHECK_THROWS_WITH_AS(run_training(e, log), doctest::Contains("lr = "), InputError);
}

TEST_CASE("validation set: held-out ellipse phantoms at the given sigma") {
  ValidationConfig v;
  v.images = 3;
  v.size = 64;
  v.sigma = 0.05;
  ValidationSet a = make_validation_set(v, 1), b = make_validation_set(v, 1);
  CHECK(at::equal(a.noisy, b.noisy));
  CHECK(a.noisy_psnr == doctest::Approx(-20 * std::log10(0.05)).epsilon(0.02));  // 26.0 dB
  CHECK(mean_psnr(a.clean, a.clean) > 150);
}

TEST_CASE("3D: patch^3 crops of random volumes, the 3D forward equals the eager executor, a 3D DnCNN trains and loads") {
  auto dir = test::scratch_dir("train_3d");
  TrainConfig c = tiny(dir);
  c.model.dim = 3;
  c.data.patch = 16;
  c.data.batch = 3;
  c.data.scale_min = 16;
  c.data.scale_max = 40;
  c.validation.size = 16;
  BatchSource src(c);
  Batch a = src.batch(2);
  CHECK(a.clean.sizes().vec() == std::vector<int64_t>{3, 1, 16, 16, 16});
  CHECK(at::equal(a.clean, BatchSource(c).batch(2).clean));
  CHECK_FALSE(at::equal(a.clean, src.batch(3).clean));
  CHECK(a.clean.min().item<float>() >= 0.0f);
  CHECK(a.clean.max().item<float>() <= 1.0f);
  // Volumes, not stacks of one image: the slices of a crop differ.
  CHECK((a.clean.select(2, 0) - a.clean.select(2, 15)).abs().max().item<float>() > 0.0f);
  CHECK(src.describe().find("random volumes") != std::string::npos);
  // The held-out set: random-ellipsoid volumes.
  ValidationSet vs = make_validation_set(c.validation, 1, 3);
  CHECK(vs.clean.sizes().vec() == std::vector<int64_t>{2, 1, 16, 16, 16});
  CHECK(vs.noisy_psnr == doctest::Approx(-20 * std::log10(c.validation.sigma)).epsilon(0.03));
  // The 3D forward against the eager executor, on a 3D graph.
  nn::Graph g = nn::build(model_spec(c.model));
  REQUIRE(g.dim == 3);
  nn::Weights w = nn::init_weights(g, 3);
  TrainableModel m(g, w, at::kCPU);
  at::Tensor x = at::rand({2, 1, 16, 16, 16}, at::kFloat), sigma = at::full({2}, 0.05, at::kFloat);
  CHECK(at::allclose(m.forward(x, sigma, false), nn::make_eager(g, w, at::kCPU)->forward(x, 0.05), 1e-5, 1e-6));
  // A short training: the loss falls, and the weights load into the graph pnp_recon builds for
  // denoiser.dim = 3.
  c.train.steps = 8;
  c.validation.every = 0;
  c.output.progress = true;
  std::ostringstream log;
  TrainResult r = run_training(c, log);
  REQUIRE(r.finished);
  CHECK(r.loss.back() < r.loss.front());
  CHECK(log.str().find("random-ellipsoid volumes 16^3") != std::string::npos);
  CHECK_NOTHROW(nn::load_weights(c.output.weights, g));
  // A 2D graph cannot take them.
  TrainConfig flat = c;
  flat.model.dim = 2;
  CHECK_THROWS_AS(nn::load_weights(c.output.weights, nn::build(model_spec(flat.model))), InputError);
  // 2D image stacks do not feed a 3D model.
  const std::string stack_error = error_of("[model]\ndim = 3\n[data]\nstack = \"" + c.output.weights + "\"\n");
  CAPTURE(stack_error);
  CHECK(stack_error.find("model.dim = 3") != std::string::npos);
}

TEST_CASE("a time budget cuts the schedule after the warm-up and the run finishes inside it") {
  auto dir = test::scratch_dir("train_budget");
  TrainConfig c = tiny(dir);
  c.train.steps = 100000;
  c.train.warmup = 6;
  c.train.time_budget = 1.0;
  c.validation.every = 0;
  c.output.progress = true;
  std::ostringstream log;
  TrainResult r = run_training(c, log);
  CHECK(r.finished);
  CHECK(r.steps_planned < 100000);
  CHECK(r.steps_planned >= 20);
  CHECK(r.steps_done == r.steps_planned);
  CHECK(r.val_step == std::vector<int64_t>{r.steps_done});
  CHECK(r.lr.back() == doctest::Approx(c.train.lr_min).epsilon(1e-3));  // the cut schedule annealed fully
  // The budget is what the schedule aims at; the bound leaves room for a loaded 2-core CI
  // machine (a run measured 4.3 s there beside a build) while still catching a schedule that
  // ignores the budget (100000 steps take minutes).
  CHECK(r.total_seconds < 10.0);
}

TEST_CASE("bf16 autocast trains, channels-last gives the same forward, and an int8 output records the stored PSNR") {
  auto dir = test::scratch_dir("train_bf16");
  // Channels-last (the CUDA layout) computes the same function as row-major.
  {
    TrainConfig c = tiny(".", "drunet");
    nn::Graph g = nn::build(model_spec(c.model));
    nn::Weights w = nn::init_weights(g, 3);
    TrainableModel a(g, w, at::kCPU, false), b(g, w, at::kCPU, true);
    at::Tensor x = at::rand({2, 1, 32, 32}, at::kFloat), s = at::full({2}, 0.05, at::kFloat);
    at::Tensor ya = a.forward(x, s, false), yb = b.forward(x, s, false);
    CHECK(yb.is_contiguous());
    CHECK(at::allclose(ya, yb, 1e-5, 1e-6));
    for (const auto& [k, t] : b.weights()) CHECK(t.is_contiguous());
  }
  TrainConfig c = tiny(dir, "drunet");
  c.train.precision = "bf16";
  c.output.encoding = "int8";
  c.model.features = {24, 24, 24, 24};  // 24x24 3x3 kernels: 5184 elements, stored as int8
  c.train.steps = 16;
  std::ostringstream log;
  c.output.progress = true;
  TrainResult r = run_training(c, log);
  INFO(log.str());
  REQUIRE(r.finished);
  CHECK(std::isfinite(r.loss.back()));
  CHECK(r.loss.back() < r.loss.front());
  CHECK(log.str().find("bf16 autocast") != std::string::npos);
  CHECK(log.str().find("stored as int8") != std::string::npos);
  CHECK(log.str().find("at sigma 0.01") != std::string::npos);
  // The recorded PSNR is that of the stored weights, recomputed from the file.
  nn::Graph g = nn::build(model_spec(c.model));
  TrainableModel stored(g, nn::load_weights(c.output.weights, g), at::kCPU);
  ValidationSet vs = make_validation_set(c.validation, 1);
  const double psnr = mean_psnr(stored.forward(vs.noisy, at::full({vs.noisy.size(0)}, vs.sigma, at::kFloat), false), vs.clean);
  auto f = io::H5File::open(c.output.weights);
  CHECK(io::read_attr_double(f, "/", "validation_psnr") == doctest::Approx(psnr).epsilon(1e-9));
  CHECK(io::has_attr(f, "/", "validation_psnr_before_encoding"));
  CHECK(io::read_attr_double(f, "/", "validation_second_sigma") == doctest::Approx(0.01));
  CHECK(io::read_attr_string(f, "/", "encoding") == "int8");
  // bf16 and fp32 are different schedules: a checkpoint of one does not resume the other.
  TrainConfig c2 = c;
  c2.train.precision = "fp32";
  c2.output.resume = true;
  CHECK_THROWS_WITH_AS(run_training(c2, log), doctest::Contains("precision"), InputError);
}
