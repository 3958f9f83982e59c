// pnp_train's persistent state (not a public header): the training state a checkpoint holds,
// the checkpoint itself (weights, Adam moments, curves; replaced atomically) and the HDF5 log.
#pragma once

#include <torch/optim/adam.h>

#include <filesystem>
#include <string>
#include <vector>

#include "pnp/io.hpp"
#include "pnp/training.hpp"

namespace pnp::training {

struct State {
  int64_t step = 0;  // steps completed
  int64_t planned = 0;
  double seconds_before = 0;
  std::vector<double> loss, lr, val_psnr;
  std::vector<int64_t> val_step;
};

// The part of the config that defines the loss curve: what a checkpoint must agree with.
std::string schedule_identity(const TrainConfig& c);
// Adam's state of parameter p (created empty when absent).
torch::optim::AdamParamState& adam_state(torch::optim::Adam& opt, const at::Tensor& p);
void save_checkpoint(const std::filesystem::path& path, const TrainConfig& cfg, const TrainableModel& model,
                     torch::optim::Adam& opt, const State& s);
// Restores model, optimiser and state; InputError when the checkpoint is another schedule's.
void load_checkpoint(const std::filesystem::path& path, const TrainConfig& cfg, TrainableModel& model,
                     torch::optim::Adam& opt, State& s);
void write_log(const std::filesystem::path& path, const TrainConfig& cfg, const State& s, const ValidationSet& vs,
               const std::string& data, const std::string& device, bool finished);

}  // namespace pnp::training
