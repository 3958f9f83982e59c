// The differentiable forward: the IR graph run node by node through nn::apply_node (the eager
// executor's op dispatch) on leaf weight tensors that require grad, so autograd records it.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include "pnp/nn/executor.hpp"
#include "pnp/training.hpp"

namespace pnp::training {

TrainableModel::TrainableModel(nn::Graph g, const nn::Weights& w, at::Device device, bool channels_last)
    : g_(std::move(g)), channels_last_(channels_last && g_.dim == 2) {
  nn::check_weights(g_, w, "initial weights");
  params_.resize(g_.nodes.size());
  for (const auto& n : g_.nodes)
    for (const auto& p : n.params) {
      at::Tensor t = w.at(p.key).detach().to(device, at::kFloat).contiguous().clone();
      if (channels_last_ && t.dim() == 4) t = t.contiguous(at::MemoryFormat::ChannelsLast);
      if (p.trainable) t.set_requires_grad(true);
      params_[n.id].push_back(t);
    }
  last_use_.assign(g_.nodes.size(), -1);
  for (const auto& n : g_.nodes)
    for (int i : n.inputs) last_use_[i] = std::max(last_use_[i], n.id);
  last_use_[g_.output()] = static_cast<int>(g_.nodes.size());
}

at::Tensor TrainableModel::forward(const at::Tensor& x, const at::Tensor& sigma, bool training) {
  nn::infer_shapes(g_, x.sizes().vec());
  std::vector<at::Tensor> v(g_.nodes.size());
  v[0] = channels_last_ ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
  for (size_t id = 1; id < g_.nodes.size(); ++id) {
    const nn::Node& n = g_.nodes[id];
    std::vector<at::Tensor> ins;
    ins.reserve(n.inputs.size());
    for (int i : n.inputs) ins.push_back(v[i]);
    v[id] = nn::apply_node(n, g_.dim, ins, params_[id], 0.0, sigma, training);
    for (int i : n.inputs)
      if (last_use_[i] == static_cast<int>(id)) v[i] = at::Tensor();  // autograd keeps what it needs
  }
  // Row-major out, whatever the layout inside: the loss and the caller see NCHW.
  return v[g_.output()].contiguous();
}

std::vector<at::Tensor> TrainableModel::parameters() const {
  std::vector<at::Tensor> out;
  for (const auto& n : g_.nodes)
    for (size_t k = 0; k < n.params.size(); ++k)
      if (n.params[k].trainable) out.push_back(params_[n.id][k]);
  return out;
}

nn::Weights TrainableModel::weights() const {
  nn::Weights w;
  for (const auto& n : g_.nodes)
    for (size_t k = 0; k < n.params.size(); ++k)
      w[n.params[k].key] = params_[n.id][k].detach().to(at::kCPU).contiguous().clone();
  return w;
}

void TrainableModel::load(const nn::Weights& w) {
  nn::check_weights(g_, w, "loaded weights");
  at::NoGradGuard no_grad;
  for (const auto& n : g_.nodes)
    for (size_t k = 0; k < n.params.size(); ++k) params_[n.id][k].copy_(w.at(n.params[k].key));
}

}  // namespace pnp::training
