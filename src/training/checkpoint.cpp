// Checkpoints and the training log of pnp_train (checkpoint.hpp).
#include "checkpoint.hpp"

#include <ATen/ATen.h>

#include <sstream>

namespace pnp::training {
namespace fs = std::filesystem;

std::string schedule_identity(const TrainConfig& c) {
  TrainConfig k = c;
  k.output = OutputConfig{};
  k.train.stop_after = 0;
  k.train.time_budget = 0;
  k.train.threads = 0;
  k.train.device = "auto";
  k.data.stack = c.data.stack.empty() ? "" : fs::path(c.data.stack).filename().string();
  std::string t = k.to_toml();
  return t.substr(0, t.find("[output]"));
}

namespace {
void write_curves(io::H5File& f, const State& s, const std::string& prefix) {
  if (!s.loss.empty()) {
    io::write<double>(f, prefix + "loss", s.loss.data(), {static_cast<int64_t>(s.loss.size())}, "1",
                      "training loss per step (mean over the batch and pixels)");
    io::write<double>(f, prefix + "lr", s.lr.data(), {static_cast<int64_t>(s.lr.size())}, "1", "learning rate per step");
  }
  if (!s.val_step.empty()) {
    const int64_t m = static_cast<int64_t>(s.val_step.size());
    io::write<int64_t>(f, prefix + "validation/step", s.val_step.data(), {m}, "1", "steps completed at each validation");
    io::write<double>(f, prefix + "validation/psnr", s.val_psnr.data(), {m}, "dB",
                      "mean PSNR (peak 1) of the denoised held-out phantoms");
  }
}

}  // namespace

torch::optim::AdamParamState& adam_state(torch::optim::Adam& opt, const at::Tensor& p) {
  auto& st = opt.state();
  auto it = st.find(p.unsafeGetTensorImpl());
  if (it == st.end()) {
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(0);
    s->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
    s->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    it = st.emplace(p.unsafeGetTensorImpl(), std::move(s)).first;
  }
  return static_cast<torch::optim::AdamParamState&>(*it->second);
}

void save_checkpoint(const fs::path& path, const TrainConfig& cfg, const TrainableModel& model, torch::optim::Adam& opt,
                     const State& s) {
  io::AtomicOutput out(path, /*overwrite=*/true);
  auto& f = out.file();
  const auto& g = model.graph();
  auto params = model.parameters();
  nn::Weights w = model.weights();
  size_t k = 0;
  int64_t adam_step = 0;
  for (const auto& n : g.nodes)
    for (const auto& p : n.params) {
      at::Tensor t = w.at(p.key).to(at::kFloat).contiguous();
      io::write<float>(f, "/weights/" + p.key, t.data_ptr<float>(), p.shape, "1", "weights at this checkpoint");
      if (!p.trainable) continue;
      auto& st = adam_state(opt, params[k++]);
      adam_step = st.step();
      at::Tensor m = st.exp_avg().detach().to(at::kCPU, at::kFloat).contiguous();
      at::Tensor v = st.exp_avg_sq().detach().to(at::kCPU, at::kFloat).contiguous();
      io::write<float>(f, "/adam/exp_avg/" + p.key, m.data_ptr<float>(), p.shape, "1", "Adam first moment");
      io::write<float>(f, "/adam/exp_avg_sq/" + p.key, v.data_ptr<float>(), p.shape, "1", "Adam second moment");
    }
  write_curves(f, s, "/log/");
  io::write_attr(f, "/", "format", std::string("pnp-train-checkpoint-1"));
  io::write_attr(f, "/", "step", s.step);
  io::write_attr(f, "/", "steps_planned", s.planned);
  io::write_attr(f, "/", "adam_step", adam_step);
  io::write_attr(f, "/", "seconds", s.seconds_before);
  io::write_attr(f, "/", "schedule", schedule_identity(cfg));
  io::write_attr(f, "/", "config", cfg.to_toml());
  io::write_attr(f, "/", "ir_hash", g.hash());
  io::write_provenance(f, basic_provenance("pnp_train"));
  out.commit();
}

void load_checkpoint(const fs::path& path, const TrainConfig& cfg, TrainableModel& model, torch::optim::Adam& opt,
                     State& s) {
  try {
    auto f = io::H5File::open(path);
    if (!io::has_attr(f, "/", "format") || io::read_attr_string(f, "/", "format") != "pnp-train-checkpoint-1")
      throw InputError("not a pnp_train checkpoint");
    std::string want = schedule_identity(cfg), have = io::read_attr_string(f, "/", "schedule");
    if (want != have) {
      std::istringstream a(want), b(have);
      std::string la, lb;
      while (std::getline(a, la) && std::getline(b, lb) && la == lb) {}
      throw InputError("it was written by a different training configuration (config: '" + la + "', checkpoint: '" + lb +
                       "'); resume needs the same model, data, noise, train and validation settings");
    }
    const auto& g = model.graph();
    model.load(nn::load_weights(path.string(), g));
    auto params = model.parameters();
    const int64_t adam_step = io::read_attr_int(f, "/", "adam_step");
    size_t k = 0;
    for (const auto& n : g.nodes)
      for (const auto& p : n.params) {
        if (!p.trainable) continue;
        auto& st = adam_state(opt, params[k]);
        auto m = io::read<float>(f, "/adam/exp_avg/" + p.key), v = io::read<float>(f, "/adam/exp_avg_sq/" + p.key);
        const auto fmt = params[k].suggest_memory_format();
        st.exp_avg(at::from_blob(m.data.data(), p.shape, at::kFloat).to(params[k].device()).contiguous(fmt).clone());
        st.exp_avg_sq(at::from_blob(v.data.data(), p.shape, at::kFloat).to(params[k].device()).contiguous(fmt).clone());
        st.step(adam_step);
        ++k;
      }
    s.step = io::read_attr_int(f, "/", "step");
    s.planned = io::read_attr_int(f, "/", "steps_planned");
    s.seconds_before = io::read_attr_double(f, "/", "seconds");
    if (io::exists(f, "/log/loss")) {
      s.loss = io::read<double>(f, "/log/loss").data;
      s.lr = io::read<double>(f, "/log/lr").data;
    }
    if (io::exists(f, "/log/validation/step")) {
      s.val_step = io::read<int64_t>(f, "/log/validation/step").data;
      s.val_psnr = io::read<double>(f, "/log/validation/psnr").data;
    }
    if (static_cast<int64_t>(s.loss.size()) != s.step) throw Error("loss curve length does not match the step");
  } catch (...) {
    rethrow_with_context("resuming from checkpoint " + path.string());
  }
}

void write_log(const fs::path& path, const TrainConfig& cfg, const State& s, const ValidationSet& vs,
               const std::string& data, const std::string& device, bool finished) {
  io::AtomicOutput out(path, /*overwrite=*/true);
  auto& f = out.file();
  write_curves(f, s, "/");
  if (!s.val_step.empty()) {
    std::vector<double> gain;
    for (double p : s.val_psnr) gain.push_back(p - vs.noisy_psnr);
    io::write<double>(f, "/validation/gain", gain.data(), {static_cast<int64_t>(gain.size())}, "dB",
                      "validation PSNR minus the PSNR of the noisy input");
  }
  io::write_provenance(f, basic_provenance("pnp_train"));
  io::write_attr(f, "/", "config", cfg.to_toml());
  io::write_attr(f, "/", "data", data);
  io::write_attr(f, "/", "device", device);
  io::write_attr(f, "/", "steps_done", s.step);
  io::write_attr(f, "/", "steps_planned", s.planned);
  io::write_attr(f, "/", "finished", static_cast<int64_t>(finished));
  io::write_attr(f, "/", "seconds", s.seconds_before);
  io::write_attr(f, "/", "validation_sigma", vs.sigma);
  io::write_attr(f, "/", "validation_noisy_psnr", vs.noisy_psnr);
  out.commit();
}

}  // namespace pnp::training
