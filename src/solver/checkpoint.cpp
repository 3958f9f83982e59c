#include "checkpoint.hpp"

#include "pnp/device.hpp"

#include <cmath>
#include <filesystem>

#include "pnp/io.hpp"
#include "pnp/messages.hpp"
#include "pnp/validate.hpp"

namespace pnp {

namespace {
constexpr const char* kFormat = "pnp-recon-checkpoint/1";

template <class T>
void require_finite(const std::vector<T>& v, const std::string& what, const std::string& path) {
  for (const T& x : v)
    if (!std::isfinite(static_cast<double>(x)))
      throw InputError("checkpoint " + path + ": " + what + " holds a non-finite value");
}
// The run id written into checkpoints: this process's, or the one of the checkpoint it resumed
// from (the segments of one run share it).
std::string& lineage() {
  static std::string id = run_id();
  return id;
}
// A checkpoint of pnp's format written before checkpoints carried a run id, which this process
// resumed from: it is this run's too, so the end of the run removes it.
std::string& resumed_without_id() {
  static std::string path;
  return path;
}
}  // namespace

std::string remove_own_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return "absent";
  std::string have;
  bool ours = false;
  try {
    auto f = io::H5File::open(path);
    ours = io::has_attr(f, "/", "format") && io::read_attr_string(f, "/", "format") == kFormat;
    if (ours && io::has_attr(f, "/", "run_id")) have = io::read_attr_string(f, "/", "run_id");
  } catch (const std::exception&) {
  }
  const bool resumed_legacy = ours && have.empty() && !resumed_without_id().empty() &&
                              validate::same_file(path, resumed_without_id());
  if (have != lineage() && !resumed_legacy) return "it is not a checkpoint this run wrote";
  if (!std::filesystem::remove(path, ec)) return ec ? ec.message() : "absent";
  return "";
}

const std::vector<std::string>& checkpoint_series() {
  static const std::vector<std::string> s = [] {
    std::vector<std::string> v = pnp_phases();
    v.insert(v.end(), {"wall", "region_gradient", "region_denoise", "bytes"});
    return v;
  }();
  return s;
}

std::string checkpoint_identity(const Config& cfg, int ranks) {
  Config c = cfg;
  c.output = OutputConfig{};
  return c.to_toml() + "ranks = " + std::to_string(ranks) + "\n";
}

void write_checkpoint(const std::string& path, const Checkpoint& c, const std::string& identity, int ranks) {
  io::AtomicOutput out(path, /*overwrite=*/true);
  auto& f = out.file();
  // float32 (a float64 run's, on a signal: it cannot resume, solver.precision = "fp64" refuses it)
  const at::Tensor img = c.image.to(at::kFloat).contiguous();
  const int64_t done = c.done;
  io::write(f, "/image", img.data_ptr<float>(), img.sizes().vec(), "attenuation per pixel",
            "the iterate after `done` iterations ([N, N], or a volume's [slices, N, N])");
  const std::vector<std::pair<const char*, const std::vector<double>*>> metrics = {
      {"psnr", &c.psnr}, {"ssim", &c.ssim}, {"residual", &c.residual}, {"sigma", &c.sigma}};
  for (const auto& [name, v] : metrics)
    io::write(f, std::string("/metrics/") + name, v->data(), {done}, "1", "per iteration so far (NaN where not computed)");
  for (size_t i = 0; i < checkpoint_series().size(); ++i)
    io::write(f, "/timings/" + checkpoint_series()[i], c.series[i].data(), {done, ranks}, "s or B",
              "per iteration and rank so far (as in the output file)");
  io::write_strings(f, "/segments", c.segments, "the runs that made these iterations");
  io::write_attr(f, "/", "format", std::string(kFormat));
  io::write_attr(f, "/", "done", done);
  io::write_attr(f, "/", "step", c.step);
  io::write_attr(f, "/", "first_iteration", c.first_iteration);
  io::write_attr(f, "/", "compile", c.compile);
  io::write_attr(f, "/", "ranks", int64_t{ranks});
  io::write_attr(f, "/", "identity", identity);
  io::write_attr(f, "/", "run_id", lineage());
  io::write_provenance(f, basic_provenance("pnp_recon"));
  out.commit();
}

Checkpoint read_checkpoint(const std::string& path, const std::string& identity, int ranks, int64_t n, int64_t iterations,
                           int64_t slices) {
  try {
    auto f = io::H5File::open(path);
    if (!io::has_attr(f, "/", "format") || io::read_attr_string(f, "/", "format") != kFormat)
      throw InputError("not a pnp_recon checkpoint");
    const std::string have = io::read_attr_string(f, "/", "identity");
    if (have != identity) {
      size_t a = 0;
      while (a < have.size() && a < identity.size() && have[a] == identity[a]) ++a;
      const auto line = [&](const std::string& t) {
        const size_t s = t.rfind('\n', a ? a - 1 : 0), e = t.find('\n', a);
        return t.substr(s == std::string::npos ? 0 : s + 1, e == std::string::npos ? std::string::npos : e - (s == std::string::npos ? 0 : s + 1));
      };
      throw InputError("it was written by another configuration (this run: '" + line(identity) + "', the checkpoint: '" +
                       line(have) + "'); a resumed run must use the configuration and rank count that wrote it");
    }
    Checkpoint c;
    c.done = io::read_attr_int(f, "/", "done");
    if (c.done < 1 || c.done >= iterations)
      throw InputError("it holds " + std::to_string(c.done) + " iterations of " + std::to_string(iterations) +
                       (c.done >= iterations ? " (the run had finished)" : ""));
    c.step = io::read_attr_double(f, "/", "step");
    c.first_iteration = io::read_attr_double(f, "/", "first_iteration");
    c.compile = io::read_attr_double(f, "/", "compile");
    const std::vector<int64_t> want = slices > 0 ? std::vector<int64_t>{slices, n, n} : std::vector<int64_t>{n, n};
    if (io::shape_of(f, "/image") != want) throw InputError("/image is not " + shape_string(want));
    auto img = io::read<float>(f, "/image");
    require_finite(img.data, "/image", path);
    // in host memory, apart from the device's (on a CPU device too: not counted as its memory)
    c.image = host_store(want, c10::Device(c10::kCPU));
    c.image.copy_(at::from_blob(img.data.data(), want, at::kFloat));
    const std::vector<std::pair<const char*, std::vector<double>*>> metrics = {
        {"psnr", &c.psnr}, {"ssim", &c.ssim}, {"residual", &c.residual}, {"sigma", &c.sigma}};
    for (const auto& [name, v] : metrics) {
      const std::string ds = std::string("/metrics/") + name;
      if (io::shape_of(f, ds) != std::vector<int64_t>{c.done}) throw InputError(ds + " has the wrong length");
      *v = io::read<double>(f, ds).data;
    }
    for (const auto& name : checkpoint_series()) {
      const std::string ds = "/timings/" + name;
      if (io::shape_of(f, ds) != std::vector<int64_t>{c.done, ranks}) throw InputError(ds + " has the wrong shape");
      c.series.push_back(io::read<double>(f, ds).data);
    }
    c.segments = io::read_strings(f, "/segments");
    if (io::has_attr(f, "/", "run_id"))
      lineage() = io::read_attr_string(f, "/", "run_id");
    else
      resumed_without_id() = path;
    return c;
  } catch (...) {
    rethrow_with_context("resuming from checkpoint " + path);
  }
}

}  // namespace pnp
