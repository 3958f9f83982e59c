// The inductor backend on CPU (Inductor's C++ code generator, default mode): compiled == eager
// for DnCNN, DRUNet and UNet in 2D and 3D with small channel counts; a cache hit loads in < 1 s
// without running the exporter; other weights through the same package; the multi-process
// protocol (waiting for another process's lock, rethrowing its failure); a damaged cached
// package (truncated, or of the right size but unloadable) removed and rebuilt; clear errors for a
// missing interpreter or torch. All cases share one cache directory, emptied once per run, so
// every run compiles each IR once (~40 s each on 2 cores).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include "pnp_test.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "pnp/nn/executor.hpp"
#include "pnp/nn/inductor.hpp"
#include "pnp/nn/models.hpp"
#include "nn_test_util.hpp"

using namespace pnp;
using namespace pnp::nn;
namespace fs = std::filesystem;

namespace {
using namespace test::names;  // make (same channels), random_weights

// One cache directory for the whole run, emptied on first use.
const std::string& cache_dir() {
  static const std::string d = [] {
    fs::path p = fs::path(PNP_BINARY_DIR) / "test_inductor_cache";
    // (not fs::remove_all: libtorch.so exports its own copy, which crashes here)
    fs::create_directories(p / "inductor");
    for (const auto& e : fs::directory_iterator(p / "inductor"))
      if (e.is_regular_file()) fs::remove(e.path());
    return p.string();
  }();
  return d;
}

InductorOptions options() {
  InductorOptions o;
  o.cache_dir = cache_dir();
  o.mode = "default";  // max-autotune on CPU only makes the tests slower
  return o;
}

Graph dncnn2() { return make("dncnn", 2, 1, {4}, 3); }
const std::vector<int64_t> kDncnnShape{1, 1, 12, 10};

void check_equal(const Graph& g, std::vector<int64_t> shape, double sigma = 0.07) {
  Weights w = random_weights(g, 3);
  auto eager = make_eager(g, w, at::kCPU, at::kFloat);
  auto ind = make_inductor(g, w, at::kCPU, at::kFloat, shape, options());
  CHECK(ind->name() == "inductor");
  CHECK(fs::exists(ind->package_path()));
  at::manual_seed(5);
  at::Tensor x = at::rand(shape);
  at::Tensor ye = eager->forward(x, sigma), yi = ind->forward(x, sigma);
  REQUIRE(yi.sizes() == ye.sizes());
  const double err = (yi - ye).abs().max().item<double>(), scale = ye.abs().max().item<double>();
  MESSAGE(g.architecture << " " << g.dim << "D " << shape_string(shape) << ": compile " << ind->compile_seconds()
                         << " s (exporter " << ind->exporter_seconds() << " s), max |inductor - eager| " << err);
  CHECK(err <= 1e-4 * std::max(1.0, scale));
  // A second call with another sigma and input reuses the static buffers correctly.
  at::Tensor x2 = at::rand(shape);
  CHECK((ind->forward(x2, 0.2) - eager->forward(x2, 0.2)).abs().max().item<double>() <= 1e-4 * std::max(1.0, scale));
}
}  // namespace

TEST_CASE("inductor == eager: DnCNN 2D, and the cache") {
  const Graph g = dncnn2();
  check_equal(g, kDncnnShape);

  SUBCASE("a hit loads in < 1 s and does not run the exporter") {
    Weights w = random_weights(g, 3);
    InductorOptions o = options();
    o.python = "/nonexistent/python-for-pnp-test";  // the exporter would fail if it were run
    const std::string pkg = inductor_package_path(g, kDncnnShape, at::kFloat, at::kCPU, o);
    const auto mtime = fs::last_write_time(pkg);
    auto ind = make_inductor(g, w, at::kCPU, at::kFloat, kDncnnShape, o);
    CHECK(ind->cache_hit());
    CHECK_FALSE(ind->compiled_here());
    CHECK(ind->exporter_seconds() == 0.0);
    CHECK(ind->compile_seconds() < 1.0);
    CHECK(fs::last_write_time(pkg) == mtime);
    MESSAGE("cache hit: " << ind->compile_seconds() << " s");
  }
  SUBCASE("other weights run through the same package") {
    Weights w = random_weights(g, 99);
    InductorOptions o = options();
    o.python = "/nonexistent/python-for-pnp-test";
    auto ind = make_inductor(g, w, at::kCPU, at::kFloat, kDncnnShape, o);
    auto eager = make_eager(g, w, at::kCPU, at::kFloat);
    at::Tensor x = at::rand(kDncnnShape);
    CHECK((ind->forward(x, 0.1) - eager->forward(x, 0.1)).abs().max().item<double>() < 1e-4);
    CHECK_THROWS_AS(ind->forward(at::rand({1, 1, 12, 12}), 0.1), InputError);
  }
  // The self-healing cache: each case damages the package the test case's first line built,
  // and the next make_inductor compiles it again (one compile each, ~20-40 s on 2 cores).
  SUBCASE("a truncated package (its size is not the recorded one) is removed and rebuilt") {
    Weights w = random_weights(g, 3);
    const std::string pkg = inductor_package_path(g, kDncnnShape, at::kFloat, at::kCPU, options());
    fs::resize_file(pkg, fs::file_size(pkg) / 2);
    auto ind = make_inductor(g, w, at::kCPU, at::kFloat, kDncnnShape, options());
    CHECK(ind->compiled_here());
    const std::vector<std::string> notes = ind->notes();  // notes() returns a copy: iterate one
    CHECK(std::any_of(notes.begin(), notes.end(),
                      [](const std::string& n) { return n.find("removed a damaged package") != std::string::npos; }));
    at::Tensor x = at::rand(kDncnnShape);
    CHECK((ind->forward(x, 0.1) - make_eager(g, w, at::kCPU, at::kFloat)->forward(x, 0.1)).abs().max().item<double>() <
          1e-4);
  }
  SUBCASE("a package of the recorded size that does not load is removed and rebuilt") {
    Weights w = random_weights(g, 3);
    const std::string pkg = inductor_package_path(g, kDncnnShape, at::kFloat, at::kCPU, options());
    const auto size = fs::file_size(pkg);
    { std::ofstream(pkg, std::ios::binary | std::ios::trunc) << std::string(size, 'x'); }
    REQUIRE(fs::file_size(pkg) == size);
    auto ind = make_inductor(g, w, at::kCPU, at::kFloat, kDncnnShape, options());
    CHECK(ind->compiled_here());
    const std::vector<std::string> notes = ind->notes();  // notes() returns a copy: iterate one
    CHECK(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
      return n.find("rebuilt after the cached package could not be used") != std::string::npos;
    }));
    at::Tensor x = at::rand(kDncnnShape);
    CHECK((ind->forward(x, 0.1) - make_eager(g, w, at::kCPU, at::kFloat)->forward(x, 0.1)).abs().max().item<double>() <
          1e-4);
  }
  SUBCASE("another process compiling: wait for its package, then load") {
    Weights w = random_weights(g, 3);
    InductorOptions o = options();
    o.python = "/nonexistent/python-for-pnp-test";
    const std::string pkg = inductor_package_path(g, kDncnnShape, at::kFloat, at::kCPU, o);
    fs::rename(pkg, pkg + ".elsewhere");
    std::ofstream(pkg + ".lock") << "otherhost 1\n";
    std::thread other([&] {  // the "other rank": finishes its compile after 1 s
      std::this_thread::sleep_for(std::chrono::seconds(1));
      fs::rename(pkg + ".elsewhere", pkg);
      fs::remove(pkg + ".lock");
    });
    auto ind = make_inductor(g, w, at::kCPU, at::kFloat, kDncnnShape, o);
    other.join();
    CHECK(ind->cache_hit());
    CHECK(ind->compile_seconds() >= 0.9);
    REQUIRE(ind->notes().size() == 1);
    CHECK(ind->notes()[0].find("waited") != std::string::npos);
  }
  SUBCASE("a lock left by a dead process of this host is taken over at once") {
    Weights w = random_weights(g, 3);
    InductorOptions o = options();
    o.python = "/nonexistent/python-for-pnp-test";
    const std::string pkg = inductor_package_path(g, kDncnnShape, at::kFloat, at::kCPU, o);
    const pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, nullptr, 0);
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    fs::rename(pkg, pkg + ".elsewhere");
    std::ofstream(pkg + ".lock") << host << " " << dead << "\n";
    // Taking the lock over means compiling here, which fails at once with this interpreter
    // (instead of waiting for the lock's timeout).
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH_AS(make_inductor(g, w, at::kCPU, at::kFloat, kDncnnShape, o),
                         doctest::Contains("cannot start the Python interpreter"), Error);
    CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < 5.0);
    CHECK_FALSE(fs::exists(pkg + ".lock"));
    fs::rename(pkg + ".elsewhere", pkg);
    fs::remove(pkg + ".failed");
  }
  SUBCASE("another process's compile failed: its message, no second attempt") {
    Weights w = random_weights(g, 3);
    InductorOptions o = options();
    o.python = "/nonexistent/python-for-pnp-test";
    const std::vector<int64_t> shape{1, 1, 8, 8};
    const std::string pkg = inductor_package_path(g, shape, at::kFloat, at::kCPU, o);
    std::ofstream(pkg + ".lock") << "otherhost 1\n";
    std::thread other([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      std::ofstream(pkg + ".failed") << "inductor backend: the other rank's failure";
      fs::remove(pkg + ".lock");
    });
    CHECK_THROWS_WITH_AS(make_inductor(g, w, at::kCPU, at::kFloat, shape, o),
                         doctest::Contains("the other rank's failure"), Error);
    other.join();
    fs::remove(pkg + ".failed");
  }
}

TEST_CASE("inductor in bf16 agrees with the float64 reference to bf16 rounding (DRUNet 2D)") {
  // bf16 weights and activations through Inductor's CPU code: the same tolerance as the
  // eager and native bf16 cases of test_native (relative L2 error < 1e-2).
  const Graph g = make("drunet", 2, 1, {4, 8, 8, 8}, 1);
  const std::vector<int64_t> shape{1, 1, 16, 16};
  Weights w = random_weights(g, 4);
  auto ind = make_inductor(g, w, at::kCPU, at::kBFloat16, shape, options());
  CHECK(ind->package_path().find("bfloat16") != std::string::npos);
  at::manual_seed(6);
  at::Tensor x = at::rand(shape, at::kDouble);
  at::Tensor ref = make_eager(g, w, at::kCPU, at::kDouble)->forward(x, 0.1);
  at::Tensor yi = ind->forward(x, 0.1);
  CHECK((yi.scalar_type() == at::kBFloat16));
  auto rel = [&](const at::Tensor& y) { return (y.to(at::kDouble) - ref).norm().item<double>() / ref.norm().item<double>(); };
  const double ei = rel(yi), ee = rel(make_eager(g, w, at::kCPU, at::kBFloat16)->forward(x, 0.1));
  MESSAGE("DRUNet 2D bf16: compile " << ind->compile_seconds() << " s, rel err inductor " << ei << ", eager " << ee);
  CHECK(ei > 0.0);
  CHECK(ei < 1e-2);
  CHECK(ee < 1e-2);
}

TEST_CASE("inductor == eager: DnCNN 3D") { check_equal(make("dncnn", 3, 1, {4}, 3), {1, 1, 6, 8, 5}); }
TEST_CASE("inductor == eager: DRUNet 2D (sigma map, pad and crop)") {
  check_equal(make("drunet", 2, 1, {4, 8, 8, 8}, 1), {1, 1, 12, 10});
}
TEST_CASE("inductor == eager: DRUNet 3D") { check_equal(make("drunet", 3, 1, {4, 8, 8, 8}, 1), {1, 1, 9, 8, 8}); }
TEST_CASE("inductor == eager: UNet 2D (batch norm, max pool)") { check_equal(make("unet", 2, 1, {4, 8}), {1, 1, 12, 10}); }
TEST_CASE("inductor == eager: UNet 3D") { check_equal(make("unet", 3, 1, {4, 8}), {1, 1, 8, 6, 6}); }

TEST_CASE("inductor: clear errors when Python or torch is missing") {
  const Graph g = make("dncnn", 2, 1, {4}, 2);  // never compiled: a miss
  Weights w = random_weights(g, 1);
  InductorOptions o = options();
  o.python = "/nonexistent/python-for-pnp-test";
  CHECK_THROWS_WITH_AS(make_inductor(g, w, at::kCPU, at::kFloat, {1, 1, 8, 8}, o),
                       doctest::Contains("cannot start the Python interpreter '/nonexistent/python-for-pnp-test'"),
                       Error);
  CHECK_THROWS_WITH_AS(probe_inductor(o), doctest::Contains("PNP_PYTHON"), Error);
  // An interpreter that runs but has no torch: `env -i` style, via a script that exits as the
  // exporter does when `import torch` fails.
  const fs::path fake = fs::path(cache_dir()) / "python-without-torch";
  std::ofstream(fake) << "#!/bin/sh\necho \"pnp_inductor: cannot import torch\" >&2\nexit 3\n";
  fs::permissions(fake, fs::perms::owner_all);
  o.python = fake.string();
  CHECK_THROWS_WITH_AS(make_inductor(g, w, at::kCPU, at::kFloat, {1, 1, 8, 8}, o), doctest::Contains("no usable torch"),
                       Error);
  // The real interpreter answers the probe.
  InductorOptions real = options();
  const std::string p = probe_inductor(real);
  MESSAGE("probe: " << p);
  CHECK(p.find("torch 2.") != std::string::npos);
}
