#include "pnp_test.hpp"

#include <fstream>

#include "pnp/config.hpp"
#include "pnp/core.hpp"
#include "test_util.hpp"

using pnp::Config;
using pnp::InputError;
using pnp::parse_config;

namespace {
std::string error_of(const std::string& toml) {
  try {
    parse_config(toml, "t.toml", ".");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
std::string override_error(const std::string& assignment) {
  Config c;
  try {
    pnp::apply_override(c, assignment);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("defaults and typed values") {
  Config c = parse_config("[problem]\nsize = 512\nangles = 100\n[solver]\nstep = 2\n[distributed]\ngrid = [2, 3]\n"
                          "[compile]\nmode = \"pre\"\ncuda_graphs = false\n",
                          "t.toml", ".");
  CHECK(c.problem.size == 512);
  CHECK(c.problem.angles == 100);
  CHECK(c.solver.step == 2.0);  // integer accepted for a float key
  CHECK(c.distributed.grid == std::vector<int64_t>{2, 3});
  CHECK(c.compile.mode == pnp::CompileMode::pre);
  CHECK_FALSE(c.compile.cuda_graphs);
  CHECK(c.denoiser.architecture == "drunet");  // untouched default
  CHECK(c.solver.step_scale == doctest::Approx(0.99));
}

TEST_CASE("unknown key names the line and suggests the closest key") {
  std::string e = error_of("[problem]\nsize = 64\nangels = 10\n");
  CHECK(e == "t.toml:3: unknown key 'problem.angels' (did you mean 'problem.angles'?)");
  CHECK(error_of("[solver]\nzzzzzzzz = 1\n") == "t.toml:2: unknown key 'solver.zzzzzzzz'");
}

TEST_CASE("unknown section suggests the closest section") {
  std::string e = error_of("[problm]\nsize = 64\n");
  CHECK(e.rfind("t.toml:1: unknown section [problm] (did you mean [problem]?)", 0) == 0);
}

TEST_CASE("wrong types name key, line and what was given") {
  CHECK(error_of("[problem]\n\nsize = \"big\"\n") == "t.toml:3: problem.size: must be an integer, got string 'big'");
  CHECK(error_of("[problem]\nsize = 1.5\n") == "t.toml:2: problem.size: must be an integer, got floating-point 1.5");
  CHECK(error_of("[compile]\ncuda_graphs = 1\n") ==
        "t.toml:2: compile.cuda_graphs: must be true or false, got integer 1");
  CHECK(error_of("[solver]\nstep = \"x\"\n") == "t.toml:2: solver.step: must be a number, got string 'x'");
  CHECK(error_of("[distributed]\ngrid = 4\n") ==
        "t.toml:2: distributed.grid: must be an array of integers, got integer 4");
  CHECK(error_of("[compile]\nmode = 3\n") == "t.toml:2: compile.mode: must be a string, got integer 3");
}

TEST_CASE("values out of range and bad choices") {
  CHECK(error_of("[problem]\nsize = 4\n") == "t.toml:2: problem.size: 4 is out of range: must be in [8, 65536]");
  CHECK(error_of("[solver]\nrelaxation = 1.5\n") ==
        "t.toml:2: solver.relaxation: 1.5 is out of range: must be in [0, 1]");
  CHECK(error_of("[compile]\nmode = \"fuse\"\n") ==
        "t.toml:2: compile.mode: \"fuse\" is not one of: none, pre, post, fused (did you mean \"fused\"?)");
  CHECK(error_of("[distributed]\ngrid = [1, 2, 3]\n") ==
        "t.toml:2: distributed.grid: has 3 entries: 2 to 2 entries in [0, 65536]");
  CHECK(error_of("[solver]\nclamp = \"fixed\"\nclamp_min = 2.0\nclamp_max = 1.0\n") ==
        "t.toml: solver.clamp_min must be below solver.clamp_max with clamp = \"fixed\"");
}

TEST_CASE("missing files name the key and the resolved path") {
  std::string e = error_of("[problem]\nsinogram = \"nope/missing.h5\"\n");
  CHECK(e == "t.toml:2: problem.sinogram: file not found: nope/missing.h5");
  CHECK(error_of("[denoiser]\nweights = \"w/none.h5\"\n") == "t.toml:2: denoiser.weights: file not found: w/none.h5");
  // A bare name is a shipped model name, resolved later.
  CHECK(error_of("[denoiser]\nweights = \"dncnn_ct\"\n").empty());
}

TEST_CASE("TOML syntax errors carry the line") {
  std::string e = error_of("[problem]\nsize = = 3\n");
  CHECK(e.rfind("t.toml:2: TOML syntax error:", 0) == 0);
}

TEST_CASE("--set overrides with the same validation") {
  Config c;
  pnp::apply_override(c, "compile.mode=fused");  // bare word
  CHECK(c.compile.mode == pnp::CompileMode::fused);
  pnp::apply_override(c, "problem.size = 1024");
  CHECK(c.problem.size == 1024);
  pnp::apply_override(c, "distributed.grid=[2,2]");
  CHECK(c.distributed.grid == std::vector<int64_t>{2, 2});
  pnp::apply_override(c, "output.file=\"a b.h5\"");
  CHECK(c.output.file == "a b.h5");
  pnp::apply_override(c, "compile.cuda_graphs=false");
  CHECK_FALSE(c.compile.cuda_graphs);
  CHECK(override_error("problem.size=abc") == "--set problem.size=abc: problem.size: must be an integer, got string 'abc'");
  CHECK(override_error("problem.sise=3") == "--set problem.sise=3: unknown key 'problem.sise' (did you mean 'problem.size'?)");
  CHECK(override_error("compile.mode=fast") ==
        "--set compile.mode=fast: compile.mode: \"fast\" is not one of: none, pre, post, fused");
  CHECK(override_error("nodot=3") == "--set nodot=3: expected section.key=value");
}

TEST_CASE("load_config checks the cross-key rules once, after every --set: their order does not matter") {
  const auto path = pnp::test::scratch_dir("config_order") / "c.toml";
  std::ofstream(path) << "[problem]\nsize = 64\n[distributed]\ndevice = \"cuda\"\n";
  // fp8 needs a compiled mode; the default is "none": either order of the two --set is one config
  const Config a = pnp::load_config(path, {"denoiser.precision=fp8", "compile.mode=pre"});
  const Config b = pnp::load_config(path, {"compile.mode=pre", "denoiser.precision=fp8"});
  CHECK(a.denoiser.precision == "fp8");
  CHECK(a.to_toml() == b.to_toml());
  // a combination still refused names the file and every override; a bad key or value names its --set
  try {
    pnp::load_config(path, {"denoiser.precision=fp8", "problem.angles=90"});
    FAIL("fp8 without a compiled mode was accepted");
  } catch (const InputError& e) {
    const std::string m = e.what();
    CHECK(m.rfind(path.string() + " with --set denoiser.precision=fp8 --set problem.angles=90: denoiser.precision", 0) == 0);
  }
  CHECK_THROWS_WITH_AS(pnp::load_config(path, {"compile.mode=pre", "problem.size=abc"}),
                       "--set problem.size=abc: problem.size: must be an integer, got string 'abc'", InputError);
}

TEST_CASE("printing the effective config and parsing it back is the identity") {
  Config c = parse_config("[problem]\nsize = 300\n[denoiser]\nfeatures = [32, 64]\nsigma = 0.05\n[output]\nfile = \"x.h5\"\n",
                          "t.toml", ".");
  std::string text = c.to_toml();
  CHECK(text.find("[problem]\nsize = 300\n") != std::string::npos);
  CHECK(text.find("features = [ 32, 64 ]") != std::string::npos);
  Config back = parse_config(text, "printed", ".");
  CHECK(back.to_toml() == text);
  CHECK(back.denoiser.sigma == doctest::Approx(0.05));
  CHECK(back.output.file == "x.h5");
}

TEST_CASE("load_config resolves paths against the config's directory and applies overrides") {
  auto dir = pnp::test::scratch_dir("config");
  { std::ofstream(dir / "sino.h5") << "x"; }
  { std::ofstream(dir / "c.toml") << "[problem]\nsinogram = \"sino.h5\"\nsize = 64\n"; }
  Config c = pnp::load_config(dir / "c.toml", {"problem.size=128"});
  CHECK(c.problem.sinogram == (dir / "sino.h5").lexically_normal().string());
  CHECK(c.problem.size == 128);
  CHECK_THROWS_WITH_AS(pnp::load_config(dir / "absent.toml"),
                       ("cannot read config file " + (dir / "absent.toml").string() + ": file not found").c_str(),
                       InputError);
}

TEST_CASE("the shipped inputs parse") {
  for (const char* name : {"demo.toml", "study_4096.toml", "sweep.toml"}) {
    auto p = pnp::test::source_dir() / "input" / name;
    if (!std::filesystem::exists(p)) continue;
    if (std::string(name) == "sweep.toml") continue;  // pnp_bench's own schema
    CAPTURE(name);
    CHECK_NOTHROW(pnp::load_config(p));
  }
}

TEST_CASE("reference lists every section and key") {
  std::string ref = pnp::config_reference();
  for (const char* s : {"[problem]", "[solver]", "[denoiser]", "[compile]", "[distributed]", "[output]"})
    CHECK(ref.find(s) != std::string::npos);
  CHECK(ref.find("halo = 0") != std::string::npos);
  CHECK(pnp::closest_match("drunnet", {"drunet", "dncnn", "unet"}) == "drunet");
}

TEST_CASE("modes and backends are enums, read and printed by their names") {
  using pnp::CompileBackend;
  using pnp::CompileMode;
  using pnp::HaloMode;
  CHECK(pnp::to_string(CompileMode::none) == "none");
  CHECK(pnp::to_string(CompileMode::fused) == "fused");
  CHECK(pnp::to_string(CompileBackend::inductor) == "inductor");
  CHECK(pnp::to_string(HaloMode::layer) == "layer");
  CHECK(pnp::parse_enum<CompileMode>("post") == CompileMode::post);
  CHECK(pnp::parse_enum<HaloMode>("input") == HaloMode::input);
  CHECK_FALSE(pnp::parse_enum<CompileBackend>("eager").has_value());
  const Config c = parse_config("[compile]\nmode = \"post\"\nbackend = \"inductor\"\n", "t.toml", ".");
  CHECK(c.compile.mode == CompileMode::post);
  CHECK(c.compile.backend == CompileBackend::inductor);
  CHECK(c.to_toml().find("[compile]\nmode = 'post'\nbackend = 'inductor'\n") != std::string::npos);
  const Config l = parse_config("[distributed]\nhalo_mode = \"layer\"\n", "t.toml", ".");
  CHECK(l.distributed.halo_mode == HaloMode::layer);
  CHECK(l.to_toml().find("halo_mode = 'layer'\n") != std::string::npos);
  CHECK(parse_config(l.to_toml(), "printed", ".").distributed.halo_mode == HaloMode::layer);
  CHECK(pnp::config_reference().find("  halo_mode = 'input'\n") != std::string::npos);
  CHECK(error_of("[distributed]\nhalo_mode = \"layers\"\n") ==
        "t.toml:2: distributed.halo_mode: \"layers\" is not one of: input, layer (did you mean \"layer\"?)");
  // The cross-key rule, on the enums: the layer halo has no place inside an inductor package.
  CHECK(error_of("[compile]\nmode = \"pre\"\nbackend = \"inductor\"\n[distributed]\nhalo_mode = \"layer\"\n")
            .find("distributed.halo_mode = \"layer\" needs compile.backend = \"native\"") != std::string::npos);
}

TEST_CASE("denoiser.precision = \"fp8\": the native executor on one GPU, the whole 2D image in one call") {
  const std::string gpu = "[compile]\nmode = \"pre\"\n[distributed]\ndevice = \"cuda\"\n";
  const std::string ok = gpu + "[denoiser]\nprecision = \"fp8\"\n";
  CHECK(error_of(ok).empty());
  CHECK(parse_config(ok, "t.toml", ".").denoiser.precision == "fp8");
  // each refusal names what to change, and the emulation as the reference on any device
  auto refused = [&](const std::string& toml, const std::string& why) {
    const std::string e = error_of(toml);
    INFO(toml << " -> " << e);
    CHECK(e.find("denoiser.precision = \"fp8\" runs pnp's FP8 convolutions on a Hopper GPU") != std::string::npos);
    CHECK(e.find(why) != std::string::npos);
    CHECK(e.find("fp8_emulated") != std::string::npos);
  };
  const std::string fp8 = "[denoiser]\nprecision = \"fp8\"\n";
  refused(fp8 + "[compile]\nmode = \"none\"\n[distributed]\ndevice = \"cuda\"\n", "in the native executor");
  refused(fp8 + "[compile]\nmode = \"pre\"\nbackend = \"inductor\"\n[distributed]\ndevice = \"cuda\"\n",
          "in the native executor");
  refused(fp8 + "[compile]\nmode = \"pre\"\n[distributed]\ndevice = \"cpu\"\n", "distributed.device = \"cuda\"");
  refused(ok + "patch_size = 256\n", "the whole image in one denoiser call");
  refused(ok + "memory_limit_gb = 16\n", "unset denoiser.patch_size and denoiser.memory_limit_gb");
  refused(fp8 + "[compile]\nmode = \"fused\"\n[distributed]\ndevice = \"cuda\"\nhalo_mode = \"layer\"\n",
          "distributed.halo_mode = \"input\"");
}
