// The shipped models (models/*.h5): each loads into the graph its training config describes,
// and its held-out quality is recomputed here with the eager executor (the solver's path) on the
// validation phantoms its config names (random_ellipse_image, or for the 3D DnCNN dncnn3d_ct
// random_ellipsoid_volume; never in training): it must match
// the recorded validation PSNR (drunet_ct: of its int8-stored weights, decoded by the loader). At
// sigma 0.05 the demo's DnCNN must gain >= 6 dB over the noisy input, the study's DRUNet
// (drunet_ct) >= 11.8 dB and the 3D DnCNN >= 5 dB (trained on sigma <= 0.03, the levels PnP
// meets: 0.05 is beyond its range); the second noise level (0.01: the study's, and the 3D
// volume's) is recomputed too, where the 3D DnCNN must gain >= 5 dB.
#include <ATen/ATen.h>
#include "pnp_test.hpp"

#include <cmath>
#include <cstdio>

#include "pnp/io.hpp"
#include "pnp/nn/executor.hpp"
#include "pnp/training.hpp"
#include "test_util.hpp"

using namespace pnp;

TEST_CASE("shipped models: loadable, held-out PSNR as recorded, DnCNN >= 6 dB, DRUNet >= 11.8 dB and the 3D DnCNN >= 5 dB over the noisy input at sigma 0.05 (the 3D one also >= 5 dB at 0.01)") {
  for (std::string name : {"dncnn_ct", "drunet_ct", "dncnn3d_ct"}) {
    const double min_gain = name == "dncnn_ct" ? 6.0 : name == "drunet_ct" ? 11.8 : 5.0;
    CAPTURE(name);
    const auto path = test::source_dir() / "models" / (name + ".h5");
    REQUIRE(std::filesystem::exists(path));
    REQUIRE(std::filesystem::exists(test::source_dir() / "models" / (name + ".json")));
    std::string toml;
    double recorded = 0, recorded_noisy = 0;
    int64_t steps = 0;
    {
      auto f = io::H5File::open(path);
      toml = io::read_attr_string(f, "/", "training_config");
      recorded = io::read_attr_double(f, "/", "validation_psnr");
      recorded_noisy = io::read_attr_double(f, "/", "validation_noisy_psnr");
      steps = io::read_attr_int(f, "/", "training_steps");
      CHECK(io::read_attr_string(f, "/", "git_commit").size() >= 7);
    }
    CHECK(steps > 0);
    training::TrainConfig cfg = training::parse_train_config(toml, name + " training_config", ".");
    REQUIRE(cfg.validation.sigma == doctest::Approx(0.05));
    nn::Graph g = nn::build(training::model_spec(cfg.model));
    nn::Weights w = nn::load_weights(path.string(), g);
    auto ex = nn::make_eager(g, w, at::kCPU);
    training::ValidationSet vs = training::make_validation_set(cfg.validation, cfg.model.channels, cfg.model.dim);
    std::vector<at::Tensor> outs;
    for (int64_t i = 0; i < vs.noisy.size(0); ++i) outs.push_back(ex->forward(vs.noisy.narrow(0, i, 1), vs.sigma));
    const double psnr = training::mean_psnr(at::cat(outs, 0), vs.clean);
    std::printf("%s (%s, %lld parameters, %lld steps): held-out PSNR %.4f dB (recorded %.4f), noisy %.2f dB, gain %+.2f dB at sigma %.2f\n",
                name.c_str(), g.architecture.c_str(), (long long)g.parameter_count(), (long long)steps, psnr, recorded,
                vs.noisy_psnr, psnr - vs.noisy_psnr, vs.sigma);
    CHECK(vs.noisy_psnr == doctest::Approx(recorded_noisy).epsilon(1e-6));
    CHECK(psnr == doctest::Approx(recorded).epsilon(2e-3));  // GPU (TF32) training vs CPU fp32 here
    CHECK(psnr - vs.noisy_psnr >= min_gain);
    if (name != "dncnn_ct") {
      // The second noise level, as the trainer recorded it for the stored weights.
      auto f = io::H5File::open(path);
      training::ValidationConfig v2 = cfg.validation;
      v2.sigma = io::read_attr_double(f, "/", "validation_second_sigma");
      const double rec2 = io::read_attr_double(f, "/", "validation_second_psnr");
      CHECK(v2.sigma == doctest::Approx(0.01));
      training::ValidationSet vs2 = training::make_validation_set(v2, cfg.model.channels, cfg.model.dim);
      std::vector<at::Tensor> o2;
      for (int64_t i = 0; i < vs2.noisy.size(0); ++i) o2.push_back(ex->forward(vs2.noisy.narrow(0, i, 1), vs2.sigma));
      const double psnr2 = training::mean_psnr(at::cat(o2, 0), vs2.clean);
      std::printf("%s at sigma %.2f: held-out PSNR %.4f dB (recorded %.4f), noisy %.2f dB, gain %+.2f dB\n", name.c_str(),
                  v2.sigma, psnr2, rec2, vs2.noisy_psnr, psnr2 - vs2.noisy_psnr);
      CHECK(psnr2 == doctest::Approx(rec2).epsilon(2e-3));
      CHECK(psnr2 > vs2.noisy_psnr);
      if (name == "dncnn3d_ct") CHECK(psnr2 - vs2.noisy_psnr >= 5.0);
      if (name == "drunet_ct") CHECK(io::read_attr_string(f, "/", "encoding") == "int8");
    }
  }
}
