// A mutation fuzzer for every reader of user input: the TOML configurations (pnp_recon,
// pnp_train, pnp_bench) and the HDF5 readers (DXchange sinograms, denoiser weights, pnp_recon
// checkpoints). Each input runs in a forked child under an address-space cap and a time limit;
// the child may accept the input (exit 0) or refuse it with an input error (exit 2). Anything
// else fails the run: another exception (exit 3), an allocation failure (exit 4), a crash (a
// signal) or a hang (killed after the limit); the input is saved for replay.
//   pnp_fuzz TARGET --seconds S [--executions N] [--seed N] [--crashes DIR] [--replay FILE]
// It stops after S seconds or N executions, whichever comes first: with N, a run tries the same
// inputs on every machine (ctest uses both: N for the same inputs in CI, S as a backstop).
// TARGET: config, train_config, sweep_config, dxchange, weights, checkpoint.
// Seeds: the project's own input/*.toml and test configs, and valid HDF5 files written here by
// the project's own writers. Mutations: byte flips, inserted and deleted runs, interesting
// tokens (huge and negative numbers, nan, inf, brackets, quotes), line duplication, splicing
// of two seeds, truncation; for HDF5 also files generated through the HDF5 API with random
// shapes, element types, groups in place of datasets, non-finite values and huge declared
// extents (chunked, never written).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <hdf5.h>
#include <execinfo.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint.hpp"  // src/solver (the checkpoint reader is internal to the solver)
#include "pnp/benchmark.hpp"
#include "pnp/config.hpp"
#include "pnp/io.hpp"
#include "pnp/nn/models.hpp"
#include "pnp/nn/patch.hpp"
#include "pnp/nn/weights.hpp"
#include "pnp/training.hpp"
#include "pnp/usage.hpp"

namespace fs = std::filesystem;
using namespace pnp;

namespace {

constexpr char kUsage[] =
    "usage: pnp_fuzz TARGET [--seconds S] [--executions N] [--seed N] [--crashes DIR] [--replay FILE]\n"
    "Feeds one reader mutated and generated inputs, each in a forked child (3 GiB address space,\n"
    "10 s), until S seconds (default 10) or N inputs. TARGET: config, train_config, sweep_config\n"
    "(TOML parsers), dxchange, weights, checkpoint (HDF5 readers, pnp_h5probe first as the programs\n"
    "do). An input error (exit 2) is a pass; a crash, hang, other exception or allocation failure is\n"
    "a failure, saved to DIR (default fuzz_crashes/). --replay FILE runs one saved input.\n"
    "Exit 0: no failure; 1: failures; 2: bad usage.\n";

using Bytes = std::string;

Bytes read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
void write_file(const fs::path& p, const Bytes& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(b.data(), static_cast<std::streamsize>(b.size()));
}

// 24-feature 3x3 kernels (5184 elements): large enough for the int8 encoding.
nn::Graph small_graph() {
  nn::DenoiserSpec s;
  s.architecture = "dncnn";
  s.features = {24};
  s.blocks = 3;
  return nn::build(s);
}

// ---- targets: each reads one input; an InputError is a refusal (exit 2) ----
struct Target {
  bool hdf5;
  std::function<void(const fs::path&, const Bytes&)> run;
};

constexpr double kProbeSeconds = 5;  // within the child's 10 s limit

std::map<std::string, Target> targets(const fs::path& dir) {
  std::map<std::string, Target> t;
  t["config"] = {false, [dir](const fs::path&, const Bytes& b) { (void)parse_config(b, "fuzz.toml", dir); }};
  t["train_config"] = {false, [dir](const fs::path&, const Bytes& b) { (void)training::parse_train_config(b, "fuzz.toml", dir); }};
  t["sweep_config"] = {false, [](const fs::path&, const Bytes& b) { (void)benchmark::parse_sweep(b, "fuzz.toml"); }};
  // The HDF5 targets read as the programs do: pnp_h5probe first (io::probe_hdf5), then the reader.
  t["dxchange"] = {true, [](const fs::path& p, const Bytes&) {
                     io::probe_hdf5({p}, kProbeSeconds);
                     io::DxchangeExpect e;
                     e.max_bytes = 64e6;
                     (void)io::read_dxchange_shapes(p);
                     (void)io::read_dxchange(p, {}, e);
                   }};
  t["weights"] = {true, [](const fs::path& p, const Bytes&) {
                    io::probe_hdf5({p}, kProbeSeconds);
                    (void)nn::load_weights(p.string(), small_graph());
                  }};
  // pnp_denoise's input: the declared shape against the network and 64 MB, then the values.
  t["image"] = {true, [](const fs::path& p, const Bytes&) {
                  io::probe_hdf5({p}, kProbeSeconds);
                  std::string dataset;
                  (void)io::read_image(p, dataset, [](const std::vector<int64_t>& declared) {
                    (void)nn::infer_output_shape(small_graph(), nn::network_shape(declared, 2, 1));
                    double elements = 1;
                    for (auto v : declared) elements *= static_cast<double>(v);
                    if (8 * elements > 64e6) throw InputError("declares too much");
                  });
                }};
  t["checkpoint"] = {true, [](const fs::path& p, const Bytes&) {
                       io::probe_hdf5({p}, kProbeSeconds);
                       Config c;
                       c.problem.size = 16;
                       c.solver.iterations = 8;
                       (void)read_checkpoint(p.string(), checkpoint_identity(c, 1), 1, 16, 8);
                     }};
  return t;
}

// ---- seeds ----
std::vector<Bytes> text_seeds(const fs::path& src) {
  std::vector<Bytes> s;
  for (const auto& d : {src / "input", src / "test/solver", src / "test/benchmark"})
    if (fs::is_directory(d))
      for (const auto& e : fs::directory_iterator(d))
        if (e.path().extension() == ".toml") s.push_back(read_file(e.path()));
  s.push_back("");
  return s;
}

std::vector<Bytes> hdf5_seeds(const std::string& target, const fs::path& dir) {
  const fs::path p = dir / ("seed_" + target + ".h5");
  if (target == "dxchange") {
    io::Sinogram s;
    s.data.shape = {6, 23};
    s.data.data.assign(6 * 23, 0.5f);
    s.theta_deg = {0, 30, 60, 90, 120, 150};
    s.ground_truth = io::Array<float>{{16, 16}, std::vector<float>(256, 0.25f)};
    auto f = io::H5File::create(p);
    io::write_dxchange(f, s);
  } else if (target == "image") {
    std::vector<Bytes> out;
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{24, 24}, {2, 16, 16}, {1, 1, 12, 12}}) {
      const fs::path pi = dir / ("seed_image_" + std::to_string(shape.size()) + ".h5");
      int64_t count = 1;
      for (auto v : shape) count *= v;
      std::vector<float> v(static_cast<size_t>(count), 0.5f);
      auto f = io::H5File::create(pi);
      io::write(f, "/x", v.data(), shape, "1", "an image");
      f.close();
      out.push_back(read_file(pi));
    }
    return out;
  } else if (target == "weights") {
    nn::Graph g = small_graph();
    std::vector<Bytes> out;
    for (auto e : {nn::WeightEncoding::float32, nn::WeightEncoding::float16, nn::WeightEncoding::int8}) {
      const fs::path pe = dir / (std::string("seed_weights_") + nn::to_string(e) + ".h5");
      nn::save_weights(pe.string(), g, nn::init_weights(g, 1), e);
      out.push_back(read_file(pe));
    }
    return out;
  } else {
    Config c;
    c.problem.size = 16;
    c.solver.iterations = 8;
    Checkpoint k;
    k.done = 3;
    k.step = 0.1;
    k.image = at::rand({16, 16});
    k.psnr = k.ssim = k.residual = k.sigma = std::vector<double>(3, 0.5);
    for (size_t i = 0; i < checkpoint_series().size(); ++i) k.series.push_back(std::vector<double>(3, 0.01));
    k.segments = {"iterations 1-3"};
    write_checkpoint(p.string(), k, checkpoint_identity(c, 1), 1);
  }
  return {read_file(p)};
}

// ---- mutations ----
const std::vector<std::string> kTokens = {
    "=", "[", "]", "[[", "\"", "'", "\n", "#", ".", ",", "{", "}", "0", "-1", "1e309", "-1e309", "nan", "inf", "-inf",
    "9223372036854775807", "-9223372036854775808", "18446744073709551616", "1.5", "true", "false", "\"\"",
    "\"/dev/null\"", "\"/\"", "size", "sinogram", "weights", "[problem]", "[solver]", "\\u0000", "\xff\xfe", "\x00"};

Bytes mutate(Bytes b, std::mt19937_64& rng, const std::vector<Bytes>& seeds, bool binary) {
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds; ++r) {
    switch (rng() % (binary ? 6 : 7)) {
      case 0:  // flip a byte
        if (!b.empty()) b[pick(b.size())] ^= static_cast<char>(1 << (rng() % 8));
        break;
      case 1:  // overwrite a run with one value
        if (!b.empty()) {
          const size_t at = pick(b.size()), len = std::min<size_t>(b.size() - at, 1 + rng() % 16);
          std::memset(b.data() + at, binary ? static_cast<int>(rng() % 2 ? 0xff : 0x00) : static_cast<int>(rng() % 256),
                      len);
        }
        break;
      case 2:  // delete a run
        if (!b.empty()) {
          const size_t at = pick(b.size());
          b.erase(at, std::min<size_t>(b.size() - at, 1 + rng() % 64));
        }
        break;
      case 3:  // truncate
        if (!b.empty()) b.resize(pick(b.size()));
        break;
      case 4:  // splice with another seed
        if (!seeds.empty()) {
          const Bytes& o = seeds[pick(seeds.size())];
          const size_t at = pick(b.size() + 1), from = pick(o.size() + 1);
          b = b.substr(0, at) + o.substr(from, rng() % 256);
        }
        break;
      case 5:  // insert a token or random bytes
        b.insert(pick(b.size() + 1), binary ? Bytes(1 + rng() % 8, static_cast<char>(rng() % 256)) : kTokens[pick(kTokens.size())]);
        break;
      case 6: {  // duplicate a line
        const size_t at = pick(b.size() + 1), e = b.find('\n', at);
        b.insert(at, b.substr(at, e == Bytes::npos ? Bytes::npos : e - at + 1));
        break;
      }
    }
  }
  return b;
}

// An HDF5 file made through the API with hostile structure (what byte mutations rarely reach).
void generate_hdf5(const std::string& target, const fs::path& p, std::mt19937_64& rng) {
  hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  if (f < 0) return;
  const hid_t types[] = {H5T_NATIVE_FLOAT, H5T_NATIVE_DOUBLE, H5T_NATIVE_INT8, H5T_NATIVE_INT64, H5T_NATIVE_UINT16};
  auto dataset = [&](const std::string& path, std::vector<hsize_t> dims) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    if (rng() % 8 == 0) {  // a group where a dataset belongs
      H5Gclose(H5Gcreate2(f, path.c_str(), lcpl, H5P_DEFAULT, H5P_DEFAULT));
      H5Pclose(lcpl);
      return;
    }
    hsize_t total = 1;
    for (auto d : dims) total *= d;
    const bool huge = rng() % 6 == 0;
    if (huge)
      for (auto& d : dims) d *= 1 + rng() % 100000;
    hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    std::vector<hsize_t> chunk(dims.size(), 1);
    if (!dims.empty()) H5Pset_chunk(dcpl, static_cast<int>(dims.size()), chunk.data());
    const hid_t type = types[rng() % 5];
    hid_t ds = H5Dcreate2(f, path.c_str(), type, space, lcpl, huge ? dcpl : H5P_DEFAULT, H5P_DEFAULT);
    if (ds >= 0 && !huge && total < (1u << 20)) {
      std::vector<double> v(total);
      for (auto& x : v) x = (rng() % 50 == 0) ? (rng() % 2 ? NAN : INFINITY) : static_cast<double>(rng() % 1000) / 100.0;
      H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    }
    if (ds >= 0) H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    H5Pclose(lcpl);
  };
  auto dims = [&](int rank, hsize_t hi) {
    std::vector<hsize_t> d;
    for (int i = 0; i < rank; ++i) d.push_back(rng() % hi);
    return d;
  };
  if (target == "dxchange") {
    dataset("/exchange/data", dims(1 + static_cast<int>(rng() % 3), 40));
    if (rng() % 2) dataset("/exchange/theta", dims(1 + static_cast<int>(rng() % 2), 40));
    if (rng() % 2) dataset("/exchange/ground_truth", dims(1 + static_cast<int>(rng() % 3), 40));
  } else if (target == "image") {
    dataset("/x", dims(static_cast<int>(rng() % 6), 40));
    if (rng() % 4 == 0) dataset("/y", dims(2, 40));
  } else if (target == "weights") {
    const nn::Graph g = small_graph();  // (a temporary graph would leave params() dangling)
    for (const auto* prm : g.params())
      if (rng() % 10) {
        std::vector<hsize_t> d(prm->shape.begin(), prm->shape.end());
        if (rng() % 4 == 0) d = dims(static_cast<int>(d.size()), 10);
        dataset("/weights/" + prm->key, d);
      }
  } else {
    dataset("/image", dims(2, 20));
    for (const char* m : {"/metrics/psnr", "/metrics/ssim", "/metrics/residual", "/metrics/sigma"}) dataset(m, dims(1, 6));
    hid_t space = H5Screate(H5S_SCALAR);
    for (const char* a : {"done", "format", "identity", "step"}) {
      hid_t at = H5Acreate2(f, a, rng() % 2 ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT);
      int64_t v = static_cast<int64_t>(rng() % 20) - 5;
      if (at >= 0) {
        H5Awrite(at, H5T_NATIVE_INT64, &v);
        H5Aclose(at);
      }
    }
    H5Sclose(space);
  }
  H5Fclose(f);
}

// ---- one execution in a forked child ----
enum class Outcome { accepted, refused, failed };

// In the child: a crash prints its stack to stderr (where the failure happened), then dies by
// the same signal.
void crash_handler(int sig) {
  void* frames[48];
  const int n = backtrace(frames, 48);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

Outcome execute(const Target& t, const fs::path& file, const Bytes& bytes, double limit_s, std::string& why) {
  const pid_t pid = fork();
  if (pid == 0) {
    for (int sig : {SIGSEGV, SIGBUS, SIGABRT, SIGFPE}) signal(sig, crash_handler);
    rlimit rl{};
    rl.rlim_cur = rl.rlim_max = 3ull << 30;
    setrlimit(RLIMIT_AS, &rl);
    alarm(static_cast<unsigned>(limit_s) + 1);
    int code = 0;
    try {
      t.run(file, bytes);
    } catch (const InputError&) {
      code = 2;
    } catch (const std::bad_alloc&) {
      code = 4;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "not an input error: %s\n", e.what());
      code = 3;
    }
    std::fflush(stderr);
    _exit(code);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFEXITED(status)) {
    const int c = WEXITSTATUS(status);
    if (c == 0) return Outcome::accepted;
    if (c == 2) return Outcome::refused;
    why = c == 4 ? "an allocation failure" : c == 3 ? "an exception that is not an input error" : "exit " + std::to_string(c);
    return Outcome::failed;
  }
  why = WIFSIGNALED(status) ? (WTERMSIG(status) == SIGALRM ? std::string("a hang (time limit)")
                                                            : "a crash (signal " + std::to_string(WTERMSIG(status)) + ")")
                            : "unknown";
  return Outcome::failed;
}

}  // namespace

int main(int argc, char** argv) {
  if (const int usage = pnp::usage_exit_code(argc, argv, kUsage); usage >= 0) return usage;
  at::set_num_threads(1);  // no thread pool in the parent: the children are forked
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const std::string name = argv[1];
  double seconds = 10;
  uint64_t seed = 1;
  int64_t max_runs = -1;
  fs::path crashes = "fuzz_crashes", replay;
  for (int i = 2; i < argc; i += 2) {
    const std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "pnp_fuzz: %s needs a value (pnp_fuzz --help)\n", a.c_str());
      return 2;
    }
    if (a == "--seconds") seconds = std::stod(argv[i + 1]);
    else if (a == "--seed") seed = std::stoull(argv[i + 1]);
    else if (a == "--executions") max_runs = std::stoll(argv[i + 1]);
    else if (a == "--crashes") crashes = argv[i + 1];
    else if (a == "--replay") replay = argv[i + 1];
    else {
      std::fprintf(stderr, "pnp_fuzz: unknown option %s (pnp_fuzz --help)\n", a.c_str());
      return 2;
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("pnp_fuzz_" + name + "_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto all = targets(dir);
  if (!all.count(name)) {
    std::fprintf(stderr, "unknown target %s\n", name.c_str());
    return 2;
  }
  const Target& t = all.at(name);
  const fs::path file = dir / "input.h5";
  std::string why;
  if (!replay.empty()) {
    const Bytes b = read_file(replay);
    if (t.hdf5) write_file(file, b);
    const Outcome o = execute(t, file, b, 10, why);
    std::printf("%s: %s\n", replay.c_str(), o == Outcome::failed ? why.c_str() : o == Outcome::accepted ? "accepted" : "refused");
    return o == Outcome::failed ? 1 : 0;
  }
  const std::vector<Bytes> seeds = t.hdf5 ? hdf5_seeds(name, dir) : text_seeds(PNP_SOURCE_DIR);
  std::mt19937_64 rng(seed);
  int64_t runs = 0, accepted = 0, refused = 0, failed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  while (elapsed() < seconds && (max_runs < 0 || runs < max_runs)) {
    Bytes input;
    if (t.hdf5 && rng() % 3 == 0) {
      generate_hdf5(name, file, rng);
      input = read_file(file);
    } else {
      input = mutate(seeds[rng() % seeds.size()], rng, seeds, t.hdf5);
      if (t.hdf5) write_file(file, input);
    }
    const Outcome o = execute(t, file, input, 10, why);
    ++runs;
    if (o == Outcome::accepted) ++accepted;
    else if (o == Outcome::refused) ++refused;
    else {
      ++failed;
      fs::create_directories(crashes);
      const fs::path saved = crashes / (name + "-" + std::to_string(runs) + (t.hdf5 ? ".h5" : ".toml"));
      write_file(saved, input);
      std::printf("FAILURE %s on input %lld (%s), saved to %s\n", why.c_str(), (long long)runs, name.c_str(), saved.c_str());
    }
  }
  // Not fs::remove_all: libtorch.so exports its own copy, which crashes here.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) fs::remove(e.path(), ec);
  fs::remove(dir, ec);
  std::printf("pnp_fuzz %s: %lld executions in %.1f s (%lld accepted, %lld refused with an input error, %lld failures), "
              "seed %llu\n",
              name.c_str(), (long long)runs, elapsed(), (long long)accepted, (long long)refused, (long long)failed,
              (unsigned long long)seed);
  return failed ? 1 : 0;
}
