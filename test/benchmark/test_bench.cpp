// pnp_bench: the sweep TOML (the study's grid, errors naming key and line, round trip), an
// in-process tiny sweep (rows, skipped backends, roofline counts) and the program's exit codes.
#include "pnp_test.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "pnp/benchmark.hpp"
#include "pnp/core.hpp"
#include "pnp/io.hpp"

using namespace pnp;
using namespace pnp::benchmark;

TEST_CASE("input/sweep.toml is the study's grid") {
  SweepConfig c = load_sweep(PNP_SOURCE_DIR "/input/sweep.toml");
  CHECK(c.architectures == std::vector<std::string>{"dncnn", "drunet", "unet"});
  CHECK(c.channels == 3);
  CHECK(c.batch == 1);
  CHECK(c.shapes == std::vector<std::vector<int64_t>>{{512, 512}, {1024, 1024}, {2048, 2048}, {128, 128, 128},
                                                      {8, 512, 512}, {16, 512, 512}});
  CHECK(c.backends == std::vector<std::string>{"eager", "native", "inductor", "torch_compile", "torch_compile_max_autotune"});
  CHECK(c.torch_compile_timeout_s == 300);
  CHECK(c.inductor.mode == "max-autotune");
  CHECK(c.compile_jobs == 18);
  CHECK(c.warmup == 5);
  CHECK(c.timed == 10);
  CHECK(c.stable == 5);
  CHECK(c.sigma == 0.1);
  CHECK(c.device == "cuda");
  CHECK(c.native.cuda_graph);
  CHECK(c.models.empty());
}

TEST_CASE("sweep TOML errors name the key and the line") {
  auto err = [](const std::string& text) {
    try {
      parse_sweep(text, "s.toml");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(err("[sweep]\nchannels = 3\nfoo = 1\n").find("s.toml:3: sweep.foo: unknown key") == 0);
  CHECK(err("[sweep]\n\nchannels = \"3\"\n").find("s.toml:3: sweep.channels: must be an integer") == 0);
  CHECK(err("[sweep]\nchannels = 0\n").find("s.toml:2: sweep.channels: 0 is out of range") == 0);
  CHECK(err("[sweep]\nshapes = [[512, 512, 2, 2]]\n").find("s.toml:2: sweep.shapes: has 4 entries") == 0);
  CHECK(err("[sweep]\nshapes = [[512, 0]]\n").find("sweep.shapes: element 0 is out of range") != std::string::npos);
  CHECK(err("[sweep]\narchitectures = [\"resnet\"]\n").find("s.toml:2: sweep.architectures: \"resnet\" is not one of") == 0);
  CHECK(err("[sweep]\ntimed = 4\nstable = 5\n").find("sweep.stable: 5 is larger than sweep.timed = 4") != std::string::npos);
  CHECK(err("[sweep]\ndevice = \"gpu\"\n").find("s.toml:2: sweep.device") == 0);
  CHECK(err("[sweep]\ndtype = \"half\"\n").find("s.toml:2: sweep.dtype") == 0);
  CHECK(err("[solver]\niterations = 3\n").find("s.toml:1: solver: unknown section") == 0);
  CHECK(err("[native]\nfuse = 1\n").find("s.toml:2: native.fuse: must be true or false") == 0);
  CHECK(err("[models.resnet]\nblocks = 2\n").find("models.resnet: unknown architecture") != std::string::npos);
  CHECK(err("[models.dncnn]\ndepth = 2\n").find("s.toml:2: models.dncnn.depth: unknown key") == 0);
  CHECK(err("[sweep\n").find("s.toml:1: TOML syntax error") == 0);
  CHECK(err("[sweep]\nbackends = []\n").find("sweep.backends: must not be empty") != std::string::npos);
  CHECK_THROWS_AS(load_sweep("/nonexistent/sweep.toml"), InputError);
}

TEST_CASE("sweep TOML round trip") {
  SweepConfig c = parse_sweep(
      "[sweep]\narchitectures = [\"unet\"]\nchannels = 1\nshapes = [[64, 32], [8, 8, 8]]\nbackends = [\"native\"]\n"
      "warmup = 2\ntimed = 3\nstable = 2\ndevice = \"cpu\"\ndtype = \"float64\"\nsigma = 0.05\nseed = 7\n"
      "[native]\nfuse = false\ncuda_graph = false\ncudnn_fused_bf16 = false\ncudnn_benchmark = false\nparallel_plan_builds = false\nplan_cache = true\n[inductor]\nmode = \"default\"\n"
      "cache_dir = \"/tmp/c\"\ncompile_jobs = 3\n[models.unet]\nfeatures = [4, 8]\n[output]\nfile = \"a.h5\"\nforce = true\n",
      "t.toml");
  SweepConfig d = parse_sweep(c.to_toml(), "again.toml");
  CHECK(d.to_toml() == c.to_toml());
  CHECK(d.shapes == c.shapes);
  CHECK(d.models.at("unet").features == std::vector<int64_t>{4, 8});
  CHECK_FALSE(d.native.fuse);
  CHECK_FALSE(d.native.cudnn_fused_bf16);
  CHECK_FALSE(d.native.cudnn_benchmark);
  CHECK_FALSE(d.native.parallel_plan_builds);
  CHECK(d.native_plan_cache);
  CHECK_FALSE(SweepConfig{}.native_plan_cache);  // off by default
  CHECK(d.inductor.mode == "default");
  CHECK(d.inductor.cache_dir == "/tmp/c");
  CHECK(d.compile_jobs == 3);
  CHECK(d.native.channels_last);
  CHECK(d.output == "a.h5");
  CHECK(d.force);
}

TEST_CASE("a tiny sweep in process: rows, skipped backends, roofline counts") {
  SweepConfig c;
  c.architectures = {"dncnn", "unet"};
  c.channels = 3;
  c.shapes = {{16, 16}};
  c.backends = {"eager", "native", "inductor", "bogus"};
  c.warmup = 2;
  c.timed = 3;
  c.stable = 2;
  c.device = "cpu";
  c.models["dncnn"] = {{4}, 3};
  c.models["unet"] = {{4, 8}, -1};
  std::ostringstream progress;
  auto rows = run_sweep(c, progress);
  REQUIRE(rows.size() == 8);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    CAPTURE(r.backend);
    CHECK(r.shape == "1x3x16x16");
    CHECK(r.dim == 2);
    CHECK(r.gpu == "cpu");
    CHECK(r.flops > 0);
    CHECK(r.bytes > 0);
    CHECK(r.intensity == doctest::Approx(r.flops / r.bytes));
    CHECK_FALSE(r.failed);
    if (r.backend == "eager" || r.backend == "native") {
      CHECK(r.status == "ok");
      CHECK(r.reason.empty());
      CHECK(r.stable_s > 0);
      CHECK(r.first_call_s > 0);
      CHECK(r.mode == (r.backend == "eager" ? "none" : "pre"));
      if (r.backend == "native") CHECK(r.compile_s > 0);
      // what the native backend chose is on its row (its fusions at least); eager has no notes
      if (r.backend == "native") CHECK(r.notes.find("fusion") != std::string::npos);
      if (r.backend == "eager") CHECK(r.notes.empty());
    } else {
      CHECK(r.status == "skipped");
      CHECK(r.notes.empty());
      CHECK_FALSE(r.reason.empty());
      CHECK(r.mode == "pre");
    }
  }
  CHECK(rows[2].reason.find("inductor") != std::string::npos);
  CHECK(rows[3].reason.find("unknown backend 'bogus'") != std::string::npos);
  CHECK(progress.str().find("[8/8] unet 1x3x16x16 bogus: skipped") != std::string::npos);
}

TEST_CASE("ceilings: every kernel measured, checked against float64, written with provenance") {
  CeilingOptions o;
  o.device = "cpu";
  o.quick = true;
  o.warmup = 1;
  o.timed = 3;
  std::ostringstream progress;
  const auto rows = measure_ceilings(o, progress);
  // On a CPU the TF32 rows are left out (a tensor-core mode).
  std::vector<std::string> names;
  for (const auto& r : rows) names.push_back(r.name);
  CHECK(names == std::vector<std::string>{"copy", "matmul_fp32", "matmul_bf16", "conv3x3_fp32", "conv3x3_bf16"});
  for (const auto& r : rows) {
    CAPTURE(r.name);
    CHECK(r.seconds > 0);
    CHECK(std::isfinite(r.rate));
    CHECK(r.rate > 0);
    CHECK(r.unit == (r.name == "copy" ? "GB/s" : "TFLOP/s"));
    CHECK(r.error < (r.name.find("bf16") != std::string::npos ? 1e-2 : 1e-5));
    if (r.name.find("bf16") != std::string::npos) CHECK(r.error > 0);  // really bf16
  }
  CHECK(progress.str().find("ceiling matmul_bf16 256x256x256") != std::string::npos);

  const auto dir = std::filesystem::temp_directory_path() / ("pnp_ceilings_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "c.h5").string();
  write_ceilings(path, rows, "cpu", false);
  auto f = io::H5File::open(path);
  CHECK(io::read<double>(f, "/ceilings/rate").data.size() == rows.size());
  CHECK(io::read_attr_string(f, "/", "program") == "pnp_bench");
  CHECK_THROWS_AS(write_ceilings(path, rows, "cpu", false), InputError);  // no silent overwrite
  std::filesystem::remove(path);  // (not remove_all: libtorch.so exports its own copy, which crashes)
  std::filesystem::remove(dir);

  o.timed = 0;
  CHECK_THROWS_AS(measure_ceilings(o, progress), InputError);
}
