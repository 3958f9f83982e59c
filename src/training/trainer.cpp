// The training loop: Adam (torch::optim) under a warm-up + cosine learning-rate schedule, the
// loss kept on the device and fetched only every progress_every steps (no per-step host sync),
// validation on held-out random-ellipse phantoms, atomic checkpoints (weights, Adam moments,
// curves) and resume, the HDF5 log, and at the end the weights with a JSON sidecar.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/optim/adam.h>
#include <torch/version.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <ostream>
#include <sstream>

#include "pnp/io.hpp"
#include "checkpoint.hpp"
#include "pnp/training.hpp"

namespace pnp::training {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

double learning_rate(const TrainSettings& t, int64_t step, int64_t total) {
  if (step < t.warmup) return t.lr * static_cast<double>(step + 1) / static_cast<double>(t.warmup);
  const double span = static_cast<double>(std::max<int64_t>(1, total - t.warmup));
  const double p = std::min(1.0, static_cast<double>(step - t.warmup) / span);
  return t.lr_min + 0.5 * (t.lr - t.lr_min) * (1.0 + std::cos(std::numbers::pi * p));
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(ch));
          o += buf;
        } else {
          o += ch;
        }
    }
  }
  return "\"" + o + "\"";
}
std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string commit_of_build() { return basic_provenance("pnp_train").git_commit; }

// bf16 autocast over one forward pass and its loss (train.precision = "bf16"): convolutions
// run in bf16 from fp32 weights; the cast weights are dropped when the scope closes.
class AutocastScope {
 public:
  AutocastScope(at::DeviceType type, bool on) : type_(type), on_(on) {
    if (!on_) return;
    was_enabled_ = at::autocast::is_autocast_enabled(type_);
    was_dtype_ = at::autocast::get_autocast_dtype(type_);
    at::autocast::set_autocast_dtype(type_, at::kBFloat16);
    at::autocast::set_autocast_enabled(type_, true);
    at::autocast::increment_nesting();
  }
  ~AutocastScope() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(type_, was_enabled_);
    at::autocast::set_autocast_dtype(type_, was_dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  at::DeviceType type_;
  bool on_, was_enabled_ = false;
  at::ScalarType was_dtype_ = at::kFloat;
};
// The device train.device asks for (auto: CUDA when there is one), after train.threads.
at::Device training_device(const TrainSettings& T) {
  if (T.threads > 0) at::set_num_threads(static_cast<int>(T.threads));
  const bool cuda_ok = torch::cuda::is_available();
  if (T.device == "cuda" && !cuda_ok) throw InputError("train.device = \"cuda\" but no CUDA device is available");
  const at::Device device = (T.device == "cuda" || (T.device == "auto" && cuda_ok)) ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  if (device.is_cuda()) at::globalContext().setBenchmarkCuDNN(true);  // fixed shapes: autotune once
  return device;
}

// Whether this run resumes output.checkpoint; a fresh run first checks that it may write its
// outputs.
bool resumes(const TrainConfig& cfg) {
  const fs::path ckpt = cfg.output.checkpoint;
  const bool resuming = cfg.output.resume && fs::exists(ckpt);
  if (!resuming) {
    if (fs::exists(ckpt) && !cfg.output.force)
      throw InputError("output.checkpoint " + ckpt.string() +
                       " exists: set output.resume = true to continue it, or output.force = true to start over");
    io::check_output_path(cfg.output.weights, cfg.output.force);
    io::check_output_path(cfg.output.log, cfg.output.force);
  }
  return resuming;
}

// The model's outputs for `noisy` at `sigma` ([B]; both on the model's device), without
// gradients, four images at a time, on the CPU.
at::Tensor denoise_in_chunks(TrainableModel& model, const at::Tensor& noisy, const at::Tensor& sigma) {
  at::NoGradGuard ng;
  std::vector<at::Tensor> outs;
  const int64_t chunk = 4;
  for (int64_t i = 0; i < noisy.size(0); i += chunk) {
    const int64_t len = std::min(chunk, noisy.size(0) - i);
    outs.push_back(model.forward(noisy.narrow(0, i, len), sigma.narrow(0, i, len), false).to(at::kCPU));
  }
  return at::cat(outs, 0);
}

// The run's first lines: model, device, precision, schedule, data and validation set.
void print_header(std::ostream& out, const TrainConfig& cfg, const nn::Graph& g, const TrainResult& r, bool bf16,
                  bool cuda, bool resuming, const State& s, const std::string& data, const ValidationSet& vs) {
  out << "pnp_train: " << g.architecture << " (" << r.parameter_count << " parameters) on " << r.device << " in "
      << (bf16 ? "bf16 autocast" : cuda ? "fp32 (TF32 convolutions)" : "fp32") << ", "
      << (resuming ? "resuming at step " + std::to_string(s.step) + " of " : std::string("")) << s.planned << " steps\n"
      << "  data: " << data << "\n"
      << "  validation: " << cfg.validation.images << (cfg.model.dim == 3 ? " random-ellipsoid volumes " : " random-ellipse phantoms ")
      << cfg.validation.size << (cfg.model.dim == 3 ? "^3" : "^2") << ", sigma "
      << vs.sigma << ", noisy PSNR " << fmt("%.2f", vs.noisy_psnr) << " dB\n";
  out.flush();
}

// The training loop over a set-up run: the steps from s.step to s.planned (or train.stop_after),
// the time-budget cut, validation, progress and checkpoints.
struct TrainLoop {
  const TrainConfig& cfg;
  std::ostream& out;
  Clock::time_point t_start;
  at::Device device;
  bool resuming, bf16;
  TrainableModel& model;
  std::vector<at::Tensor>& params;
  torch::optim::Adam& opt;
  State& s;
  const BatchSource& source;
  const ValidationSet& vs;
  const at::Tensor& val_noisy;
  const at::Tensor& val_sigma;
  const std::string& data;
  const std::string& device_name;

  std::vector<at::Tensor> pending{};  // per-step losses still on the device
  Clock::time_point t_loop = Clock::now();
  int64_t step0 = s.step;
  double last_val = s.val_psnr.empty() ? NAN : s.val_psnr.back();
  Clock::time_point t_rate = t_loop;
  bool stopped = false;

  double elapsed_total() const { return s.seconds_before + since(t_loop); }

  // Runs the steps; the losses are on the host after it.
  void run() {
    while (s.step < s.planned)
      if (!step()) break;
    flush();
  }

  // One step with what follows it; false when train.stop_after stops the run here.
  bool step() {
    const int64_t t = s.step;
    const double lr = learning_rate(cfg.train, t, s.planned);
    train_step(t, lr);
    cut_to_budget();
    const bool last = s.step == s.planned;
    const bool do_val = last || (cfg.validation.every > 0 && s.step % cfg.validation.every == 0);
    if (do_val) {
      last_val = mean_psnr(denoise_in_chunks(model, val_noisy, val_sigma), vs.clean);
      s.val_step.push_back(s.step);
      s.val_psnr.push_back(last_val);
    }
    const bool do_progress = cfg.output.progress && (last || s.step % cfg.output.progress_every == 0);
    if (last || s.step % cfg.output.progress_every == 0) flush();
    if (do_progress) print_step(lr);
    const bool stop = cfg.train.stop_after > 0 && s.step == cfg.train.stop_after && !last;
    if (stop || (cfg.output.checkpoint_every > 0 && s.step % cfg.output.checkpoint_every == 0) || last) checkpoint();
    if (!stop) return true;
    stopped = true;
    if (cfg.output.progress) out << "stopped after step " << s.step << " (train.stop_after); continue with output.resume = true\n";
    return false;
  }

  // Step t at learning rate lr: batch, forward, loss, backward, clipping, Adam.
  void train_step(int64_t t, double lr) {
    const auto& T = cfg.train;
    Batch b = source.batch(t);
    at::Tensor clean = b.clean, noisy = b.noisy, sigma = b.sigma;
    if (device.is_cuda()) {
      clean = clean.pin_memory().to(device, /*non_blocking=*/true);
      noisy = noisy.pin_memory().to(device, true);
      sigma = sigma.pin_memory().to(device, true);
    }
    for (auto& group : opt.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    opt.zero_grad();
    at::Tensor loss;
    {
      AutocastScope autocast(device.type(), bf16);
      at::Tensor y = model.forward(noisy, sigma, true).to(at::kFloat);
      loss = T.loss == "l1" ? at::l1_loss(y, clean) : at::mse_loss(y, clean);
    }
    loss.backward();
    if (T.grad_clip > 0) {  // global-norm clipping without a host sync
      at::NoGradGuard ng;
      std::vector<at::Tensor> norms;
      for (auto& p : params) norms.push_back(p.grad().square().sum());
      at::Tensor coef = (T.grad_clip / (at::stack(norms).sum().sqrt() + 1e-6)).clamp_max(1.0);
      for (auto& p : params) p.mutable_grad().mul_(coef);
    }
    opt.step();
    pending.push_back(loss.detach());
    s.lr.push_back(lr);
    s.step = t + 1;
  }

  // A time budget cuts the schedule once, at the end of the warm-up (the learning rate so far
  // does not depend on the schedule's length, so the cut run equals one planned that long).
  // The rate is measured over the warm-up's second half: its first steps include cuDNN's
  // autotuning and allocator warm-up, and would cut the schedule too short.
  void cut_to_budget() {
    const auto& T = cfg.train;
    const int64_t plan_at = std::max<int64_t>(T.warmup, 20);
    if (T.time_budget > 0 && !resuming && s.step == plan_at / 2) {
      flush();  // synchronises
      t_rate = Clock::now();
    }
    if (T.time_budget > 0 && !resuming && s.step == plan_at && s.step < s.planned) {
      flush();
      const double per_step = since(t_rate) / static_cast<double>(plan_at - plan_at / 2);
      const double left = T.time_budget * 0.9 - since(t_start);
      const int64_t fit = s.step + std::max<int64_t>(0, static_cast<int64_t>(left / per_step));
      if (fit < s.planned) {
        if (cfg.output.progress)
          out << "  time budget " << T.time_budget << " s: " << fmt("%.2f", 1e3 * per_step) << " ms/step, schedule cut from "
              << s.planned << " to " << fit << " steps\n";
        s.planned = fit;
      }
    }
  }

  void print_step(double lr) {
    const double el = since(t_loop), rate = static_cast<double>(s.step - step0) / std::max(el, 1e-9);
    out << "step " << s.step << "/" << s.planned << "  loss " << fmt("%.3e", s.loss.back()) << "  lr " << fmt("%.2e", lr);
    if (!std::isnan(last_val))
      out << "  val PSNR " << fmt("%.2f", last_val) << " dB (" << fmt("%+.2f", last_val - vs.noisy_psnr) << ")";
    out << "  " << fmt("%.1f", rate) << " step/s  ETA " << human_seconds(static_cast<double>(s.planned - s.step) / rate)
        << "\n";
    out.flush();
  }

  // The pending losses to the host (checked finite) into s.loss.
  void flush() {
    if (pending.empty()) return;
    at::Tensor l = at::stack(pending).to(at::kCPU, at::kDouble).contiguous();
    const int64_t first = static_cast<int64_t>(s.loss.size());
    pending.clear();
    for (int64_t i = 0; i < l.size(0); ++i) {
      double v = l[i].item<double>();
      if (!std::isfinite(v)) throw Error("training diverged: loss is " + std::to_string(v) + " at step " + std::to_string(first + i + 1) +
                                         " (lower train.lr or set train.grad_clip)");
      s.loss.push_back(v);
    }
  }

  void checkpoint() {
    flush();
    State c = s;
    c.seconds_before = elapsed_total();
    save_checkpoint(cfg.output.checkpoint, cfg, model, opt, c);
    write_log(cfg.output.log, cfg, c, vs, data, device_name, false);
  }
};

// The validation PSNRs of the final weights.
struct FinalValidation {
  double trained = NAN;  // of the trained weights, before encoding
  double stored = NAN;   // of the weights as stored (decoded again when the encoding is lossy)
  double second = NAN, second_noisy = NAN;  // at validation.sigma_second, when set
};

// The stored weights evaluated again: on the validation set when the encoding is lossy, and at
// validation.sigma_second.
FinalValidation validate_stored(const TrainConfig& cfg, const nn::Graph& g, at::Device device, const ValidationSet& vs,
                                double trained_psnr, nn::WeightEncoding encoding) {
  FinalValidation v;
  v.trained = v.stored = trained_psnr;
  TrainableModel stored(g, nn::load_weights(cfg.output.weights, g), device, device.is_cuda());
  auto eval = [&](const at::Tensor& noisy, const at::Tensor& clean, double sigma) {
    const at::Tensor nz = noisy.to(device), sg = at::full({noisy.size(0)}, sigma, at::kFloat).to(device);
    return mean_psnr(denoise_in_chunks(stored, nz, sg), clean);
  };
  if (encoding != nn::WeightEncoding::float32) v.stored = eval(vs.noisy, vs.clean, vs.sigma);
  if (cfg.validation.sigma_second > 0) {
    ValidationConfig v2 = cfg.validation;
    v2.sigma = cfg.validation.sigma_second;
    const ValidationSet vs2 = make_validation_set(v2, cfg.model.channels, cfg.model.dim);
    v.second = eval(vs2.noisy, vs2.clean, vs2.sigma);
    v.second_noisy = vs2.noisy_psnr;
  }
  return v;
}

// The training attributes of the weights file.
void write_training_attrs(const TrainConfig& cfg, const State& s, const std::string& data, const ValidationSet& vs,
                          const FinalValidation& v, const std::string& commit) {
  auto f = io::H5File::open(cfg.output.weights, /*writable=*/true);
  io::write_attr(f, "/", "trained_by", std::string("pnp_train"));
  io::write_attr(f, "/", "training_config", cfg.to_toml());
  io::write_attr(f, "/", "training_steps", s.step);
  io::write_attr(f, "/", "training_data", data);
  io::write_attr(f, "/", "validation_psnr", v.stored);
  io::write_attr(f, "/", "validation_noisy_psnr", vs.noisy_psnr);
  io::write_attr(f, "/", "validation_sigma", vs.sigma);
  io::write_attr(f, "/", "validation_psnr_before_encoding", v.trained);
  if (cfg.validation.sigma_second > 0) {
    io::write_attr(f, "/", "validation_second_sigma", cfg.validation.sigma_second);
    io::write_attr(f, "/", "validation_second_psnr", v.second);
    io::write_attr(f, "/", "validation_second_noisy_psnr", v.second_noisy);
  }
  io::write_attr(f, "/", "git_commit", commit);
}

// The JSON sidecar of the weights.
std::string sidecar_json(const TrainConfig& cfg, const nn::Graph& g, const State& s, const TrainResult& r,
                         const std::string& data, const ValidationSet& vs, const FinalValidation& v,
                         const std::string& commit) {
  std::ostringstream js;
  js << "{\n"
     << "  \"model\": " << json_escape(fs::path(cfg.output.weights).stem().string()) << ",\n"
     << "  \"weights\": " << json_escape(fs::path(cfg.output.weights).filename().string()) << ",\n"
     << "  \"architecture\": " << json_escape(g.architecture) << ",\n"
     << "  \"dim\": " << cfg.model.dim << ",\n"
     << "  \"features\": [";
  for (size_t i = 0; i < cfg.model.features.size(); ++i) js << (i ? ", " : "") << cfg.model.features[i];
  js << "],\n"
     << "  \"blocks\": " << cfg.model.blocks << ",\n"
     << "  \"channels\": " << cfg.model.channels << ",\n"
     << "  \"parameter_count\": " << r.parameter_count << ",\n"
     << "  \"ir_hash\": " << json_escape(g.hash()) << ",\n"
     << "  \"steps\": " << s.step << ",\n"
     << "  \"steps_requested\": " << cfg.train.steps << ",\n"
     << "  \"batch\": " << cfg.data.batch << ",\n"
     << "  \"patch\": " << cfg.data.patch << ",\n"
     << "  \"data\": " << json_escape(data) << ",\n"
     << "  \"noise_sigma_range\": [" << jnum(cfg.noise.sigma_min) << ", " << jnum(cfg.noise.sigma_max) << "],\n"
     << "  \"final_loss\": " << jnum(s.loss.empty() ? NAN : s.loss.back()) << ",\n"
     << "  \"validation\": {\"phantoms\": " << (cfg.model.dim == 3 ? "\"random_ellipsoid_volume\"" : "\"random_ellipse_image\"") << ", \"images\": " << cfg.validation.images
     << ", \"size\": " << cfg.validation.size << ", \"ellipses\": " << cfg.validation.ellipses << ", \"seed\": "
     << cfg.validation.seed << ", \"sigma\": " << jnum(vs.sigma) << ", \"noisy_psnr_db\": " << jnum(vs.noisy_psnr)
     << ", \"psnr_db\": " << jnum(v.stored) << ", \"gain_db\": " << jnum(v.stored - vs.noisy_psnr)
     << ", \"psnr_db_before_encoding\": " << jnum(v.trained) << ", \"second_sigma\": " << jnum(cfg.validation.sigma_second)
     << ", \"second_noisy_psnr_db\": " << jnum(v.second_noisy) << ", \"second_psnr_db\": " << jnum(v.second)
     << ", \"second_gain_db\": " << jnum(v.second - v.second_noisy) << "},\n"
     << "  \"encoding\": " << json_escape(cfg.output.encoding) << ",\n"
     << "  \"precision\": " << json_escape(cfg.train.precision) << ",\n"
     << "  \"train_seconds\": " << jnum(r.total_seconds) << ",\n"
     << "  \"device\": " << json_escape(r.device) << ",\n"
     << "  \"torch_version\": " << json_escape(TORCH_VERSION) << ",\n"
     << "  \"git_commit\": " << json_escape(commit) << ",\n"
     << "  \"date_utc\": " << json_escape(iso8601_utc_now()) << ",\n"
     << "  \"config\": " << json_escape(cfg.to_toml()) << "\n"
     << "}\n";
  return js.str();
}

// The sidecar `text` into `path` through a temporary file renamed over it.
void write_sidecar(const fs::path& path, const std::string& text) {
  fs::path tmp = path;
  tmp += ".tmp";
  std::ofstream o(tmp);
  o << text;
  o.close();
  if (!o) throw Error("cannot write the sidecar " + path.string());
  fs::rename(tmp, path);
}

void print_done(std::ostream& out, const TrainConfig& cfg, const State& s, const TrainResult& r, const ValidationSet& vs,
                const FinalValidation& v, nn::WeightEncoding encoding, const fs::path& sidecar) {
  out << "done: " << s.step << " steps in " << human_seconds(r.total_seconds) << ", validation PSNR "
      << fmt("%.2f", v.stored) << " dB (noisy " << fmt("%.2f", vs.noisy_psnr) << " dB, gain "
      << fmt("%+.2f", v.stored - vs.noisy_psnr) << " dB";
  if (encoding != nn::WeightEncoding::float32)
    out << ", stored as " << cfg.output.encoding << "; " << fmt("%.2f", v.trained) << " dB before encoding";
  out << ")\n";
  if (cfg.validation.sigma_second > 0)
    out << "  at sigma " << cfg.validation.sigma_second << ": validation PSNR " << fmt("%.2f", v.second) << " dB (noisy "
        << fmt("%.2f", v.second_noisy) << " dB, gain " << fmt("%+.2f", v.second - v.second_noisy) << " dB)\n";
  out << "wrote " << cfg.output.weights << ", " << sidecar.string() << ", " << cfg.output.log << "\n";
}

// Final outputs: weights (+ training attributes), log, sidecar. The recorded validation is
// that of the weights as stored: a lossy encoding is decoded and evaluated again.
void write_outputs(const TrainConfig& cfg, std::ostream& out, const nn::Graph& g, const TrainableModel& model,
                   at::Device device, const State& s, const TrainResult& r, const std::string& data,
                   const ValidationSet& vs) {
  const fs::path sidecar = cfg.output.sidecar.empty() ? fs::path(cfg.output.weights).replace_extension(".json")
                                                      : fs::path(cfg.output.sidecar);
  const std::string commit = commit_of_build();
  const double trained_psnr = s.val_psnr.empty() ? NAN : s.val_psnr.back();
  const nn::WeightEncoding encoding = nn::parse_weight_encoding(cfg.output.encoding);
  nn::save_weights(cfg.output.weights, g, model.weights(), encoding);
  const FinalValidation v = validate_stored(cfg, g, device, vs, trained_psnr, encoding);
  write_training_attrs(cfg, s, data, vs, v, commit);
  write_log(cfg.output.log, cfg, s, vs, data, r.device, true);
  write_sidecar(sidecar, sidecar_json(cfg, g, s, r, data, vs, v, commit));
  if (cfg.output.progress) print_done(out, cfg, s, r, vs, v, encoding, sidecar);
}

}  // namespace

TrainResult run_training(const TrainConfig& cfg, std::ostream& out) {
  const auto t_start = Clock::now();
  const auto& T = cfg.train;
  const at::Device device = training_device(T);
  const bool resuming = resumes(cfg);

  nn::Graph g = nn::build(model_spec(cfg.model));
  // On CUDA the activations are channels-last (NHWC), the layout of cuDNN's tensor-core kernels.
  TrainableModel model(g, nn::init_weights(g, T.seed), device, /*channels_last=*/device.is_cuda());
  const bool bf16 = T.precision == "bf16";
  auto params = model.parameters();
  torch::optim::Adam opt(params, torch::optim::AdamOptions(T.lr).betas({T.beta1, T.beta2}).weight_decay(T.weight_decay));
  State s;
  s.planned = T.steps;
  if (resuming) load_checkpoint(cfg.output.checkpoint, cfg, model, opt, s);

  BatchSource source(cfg);
  const ValidationSet vs = make_validation_set(cfg.validation, cfg.model.channels, cfg.model.dim);
  const at::Tensor val_noisy = vs.noisy.to(device), val_sigma = at::full({vs.noisy.size(0)}, vs.sigma, at::kFloat).to(device);
  const std::string data = source.describe();
  TrainResult r;
  r.device = device.is_cuda() ? "cuda" : "cpu";
  r.parameter_count = g.parameter_count();
  r.noisy_psnr = vs.noisy_psnr;
  if (cfg.output.progress) print_header(out, cfg, g, r, bf16, device.is_cuda(), resuming, s, data, vs);

  TrainLoop loop{cfg, out, t_start, device, resuming, bf16, model, params, opt, s, source, vs, val_noisy, val_sigma, data, r.device};
  loop.run();
  r.seconds = since(loop.t_loop);
  r.total_seconds = loop.elapsed_total();
  s.seconds_before = r.total_seconds;
  r.steps_done = s.step;
  r.steps_planned = s.planned;
  r.finished = !loop.stopped && s.step == s.planned;
  r.loss = s.loss;
  r.lr = s.lr;
  r.val_step = s.val_step;
  r.val_psnr = s.val_psnr;
  if (r.finished) write_outputs(cfg, out, g, model, device, s, r, data, vs);
  return r;
}

}  // namespace pnp::training
