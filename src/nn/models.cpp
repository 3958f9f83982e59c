// Builders matching deepinv 0.5 (deepinv/models/{dncnn,drunet,unet}.py): module structure,
// defaults and state-dict keys.
#include "pnp/nn/models.hpp"

#include <algorithm>
#include <cctype>

namespace pnp::nn {

namespace {

std::vector<int64_t> rep(int dim, int64_t v) { return std::vector<int64_t>(static_cast<size_t>(dim), v); }

std::vector<int64_t> kshape(int64_t a, int64_t b, int dim, int64_t k) {
  std::vector<int64_t> s{a, b};
  for (int d = 0; d < dim; ++d) s.push_back(k);
  return s;
}

// The attributes and parameters shared by nn.ConvNd and nn.ConvTransposeNd (weight shape
// [cout, cin, k...] for a convolution, [cin, cout, k...] for a transposed one).
int conv_node(Graph& g, OpKind op, const std::string& name, int x, int64_t cin, int64_t cout, int64_t k, int64_t s,
              int64_t p, bool bias) {
  Attrs a;
  a.in_channels = cin;
  a.out_channels = cout;
  a.kernel = rep(g.dim, k);
  a.stride = rep(g.dim, s);
  a.padding = rep(g.dim, p);
  if (op == OpKind::conv_transpose) a.output_padding = rep(g.dim, 0);
  a.bias = bias;
  const bool t = op == OpKind::conv_transpose;
  std::vector<Param> ps{{"weight", name + ".weight", kshape(t ? cin : cout, t ? cout : cin, g.dim, k), true}};
  if (bias) ps.push_back({"bias", name + ".bias", {cout}, true});
  return g.add(name, op, {x}, a, ps).id;
}

// nn.ConvNd(cin, cout, k, stride, padding, bias) registered as module `name`.
int conv(Graph& g, const std::string& name, int x, int64_t cin, int64_t cout, int64_t k, int64_t s, int64_t p,
         bool bias) {
  return conv_node(g, OpKind::conv, name, x, cin, cout, k, s, p, bias);
}

// nn.ConvTransposeNd(cin, cout, k, stride, padding 0, bias).
int conv_transpose(Graph& g, const std::string& name, int x, int64_t cin, int64_t cout, int64_t k, int64_t s,
                   bool bias) {
  return conv_node(g, OpKind::conv_transpose, name, x, cin, cout, k, s, 0, bias);
}

int batch_norm(Graph& g, const std::string& name, int x, int64_t c, double eps, double momentum) {
  Attrs a;
  a.in_channels = a.out_channels = c;
  a.eps = eps;
  a.momentum = momentum;
  return g
      .add(name, OpKind::batch_norm, {x}, a,
           {{"weight", name + ".weight", {c}, true},
            {"bias", name + ".bias", {c}, true},
            {"running_mean", name + ".running_mean", {c}, false},
            {"running_var", name + ".running_var", {c}, false}})
      .id;
}

int relu(Graph& g, const std::string& name, int x, bool inplace) {
  Attrs a;
  a.inplace = inplace;
  return g.add(name, OpKind::relu, {x}, a).id;
}

int add(Graph& g, const std::string& name, int a, int b) { return g.add(name, OpKind::add, {a, b}).id; }

int pad_node(Graph& g, int x, int64_t multiple) {
  Attrs a;
  a.multiple = multiple;
  a.mode = "replicate";
  return g.add("pad", OpKind::pad, {x}, a).id;
}

Graph start(const std::string& arch, int dim, int64_t cin, int64_t cout) {
  if (dim != 2 && dim != 3) throw InputError(arch + ": dim must be 2 or 3, got " + std::to_string(dim));
  if (cin < 1 || cout < 1)
    throw InputError(arch + ": in_channels and out_channels must be >= 1, got " + std::to_string(cin) + " and " +
                     std::to_string(cout));
  Graph g;
  g.architecture = arch;
  g.dim = dim;
  g.in_channels = cin;
  g.out_channels = cout;
  g.add("x", OpKind::input, {});
  return g;
}

void check_features(const std::string& arch, const std::vector<int64_t>& f) {
  for (auto c : f)
    if (c < 1) throw InputError(arch + ": features must be >= 1, got " + shape_string(f));
}

// DRUNet ResBlock: x + conv(relu(conv(x))), mode "CRC" (the ReLU is nn.ReLU(inplace=True)).
int res_block(Graph& g, const std::string& name, int x, int64_t c) {
  int h = conv(g, name + ".res.0", x, c, c, 3, 1, 1, false);
  h = relu(g, name + ".res.1", h, true);
  h = conv(g, name + ".res.2", h, c, c, 3, 1, 1, false);
  return add(g, name, x, h);
}

// UNet conv_block: (conv3 - BN - ReLU) x 2 as nn.Sequential indices 0..5.
int unet_block(Graph& g, const std::string& name, int x, int64_t cin, int64_t cout) {
  int h = conv(g, name + ".0", x, cin, cout, 3, 1, 1, true);
  h = batch_norm(g, name + ".1", h, cout, 1e-5, 0.1);
  h = relu(g, name + ".2", h, true);
  h = conv(g, name + ".3", h, cout, cout, 3, 1, 1, true);
  h = batch_norm(g, name + ".4", h, cout, 1e-5, 0.1);
  return relu(g, name + ".5", h, true);
}

}  // namespace

Graph build_dncnn(int dim, int in_channels, int out_channels, int64_t nf, int depth) {
  Graph g = start("dncnn", dim, in_channels, out_channels);
  if (in_channels != out_channels)
    throw InputError("dncnn: the residual output x + net(x) needs in_channels == out_channels, got " +
                     std::to_string(in_channels) + " and " + std::to_string(out_channels));
  if (depth < 2) throw InputError("dncnn: depth (blocks) must be >= 2, got " + std::to_string(depth));
  check_features("dncnn", {nf});
  int h = conv(g, "in_conv", 0, in_channels, nf, 3, 1, 1, true);
  h = relu(g, "nl_list.0", h, true);
  for (int i = 0; i < depth - 2; ++i) {
    h = conv(g, "conv_list." + std::to_string(i), h, nf, nf, 3, 1, 1, true);
    h = relu(g, "nl_list." + std::to_string(i + 1), h, true);
  }
  h = conv(g, "out_conv", h, nf, out_channels, 3, 1, 1, true);
  add(g, "residual", h, 0);
  return g;
}

Graph build_drunet(int dim, int in_channels, int out_channels, std::vector<int64_t> nc, int nb, bool pad) {
  Graph g = start("drunet", dim, in_channels, out_channels);
  if (nc.size() != 4) throw InputError("drunet: features (nc) must have exactly 4 entries, got " + shape_string(nc));
  check_features("drunet", nc);
  if (nb < 1) throw InputError("drunet: blocks (nb) must be >= 1, got " + std::to_string(nb));
  const int sigma = g.add("sigma", OpKind::sigma_channel, {0}).id;
  int h = g.add("cat_sigma", OpKind::concat, {0, sigma}).id;
  if (pad) h = pad_node(g, h, 8);
  const int x1 = conv(g, "m_head", h, in_channels + 1, nc[0], 3, 1, 1, false);
  std::vector<int> skips{x1};
  h = x1;
  for (int lvl = 0; lvl < 3; ++lvl) {
    const std::string m = "m_down" + std::to_string(lvl + 1);
    for (int i = 0; i < nb; ++i) h = res_block(g, m + "." + std::to_string(i), h, nc[lvl]);
    h = conv(g, m + "." + std::to_string(nb), h, nc[lvl], nc[lvl + 1], 2, 2, 0, false);
    skips.push_back(h);
  }
  // deepinv's B.sequential returns a lone module unwrapped: with nb = 1 the body is "m_body"
  // itself (m_body.res.0.weight), not "m_body.0" (the other stages hold 2 modules or more)
  for (int i = 0; i < nb; ++i) h = res_block(g, nb == 1 ? "m_body" : "m_body." + std::to_string(i), h, nc[3]);
  for (int lvl = 3; lvl >= 1; --lvl) {
    const std::string m = "m_up" + std::to_string(lvl);
    h = add(g, m + ".skip", h, skips[lvl]);
    h = conv_transpose(g, m + ".0", h, nc[lvl], nc[lvl - 1], 2, 2, false);
    for (int i = 0; i < nb; ++i) h = res_block(g, m + "." + std::to_string(i + 1), h, nc[lvl - 1]);
  }
  h = add(g, "m_tail.skip", h, skips[0]);
  h = conv(g, "m_tail", h, nc[0], out_channels, 3, 1, 1, false);
  if (pad) g.add("crop", OpKind::crop, {h, 0});
  return g;
}

Graph build_unet(int dim, int in_channels, int out_channels, std::vector<int64_t> cps, bool pad) {
  Graph g = start("unet", dim, in_channels, out_channels);
  if (cps.size() < 2)
    throw InputError("unet: features (channels_per_scale) need at least 2 scales, got " + shape_string(cps));
  check_features("unet", cps);
  const int scales = static_cast<int>(cps.size());
  int input = 0;
  if (pad) input = pad_node(g, 0, int64_t{1} << (scales - 1));
  std::vector<int> enc;
  int h = input;
  for (int i = 0; i < scales; ++i) {
    if (i > 0) {
      Attrs a;
      a.kernel = rep(dim, 2);
      a.stride = rep(dim, 2);
      a.padding = rep(dim, 0);
      h = g.add("Maxpool" + std::to_string(i + 1), OpKind::max_pool, {h}, a).id;
    }
    h = unet_block(g, "Conv" + std::to_string(i + 1), h, i == 0 ? in_channels : cps[i - 1], cps[i]);
    enc.push_back(h);
  }
  for (int i = 0; i < scales - 1; ++i) {
    const std::string lvl = std::to_string(scales - i);
    const int64_t cin = cps[scales - 1 - i], cout = cps[scales - 2 - i];
    Attrs up;
    up.scale = rep(dim, 2);
    h = g.add("Up" + lvl + ".0", OpKind::upsample_nearest, {h}, up).id;
    h = conv(g, "Up" + lvl + ".1", h, cin, cout, 3, 1, 1, true);
    h = batch_norm(g, "Up" + lvl + ".2", h, cout, 1e-5, 0.1);
    h = relu(g, "Up" + lvl + ".3", h, true);
    h = g.add("cat" + lvl, OpKind::concat, {enc[scales - 2 - i], h}).id;
    h = unet_block(g, "Up_conv" + lvl, h, 2 * cout, cout);
  }
  h = conv(g, "Conv_1x1", h, cps[0], out_channels, 1, 1, 0, true);
  if (in_channels == out_channels) h = add(g, "residual", h, input);
  if (pad) g.add("crop", OpKind::crop, {h, 0});
  return g;
}

Graph build_identity(int dim, int channels) { return start("identity", dim, channels, channels); }

Graph build(const DenoiserSpec& s) {
  std::string arch = s.architecture;
  std::transform(arch.begin(), arch.end(), arch.begin(), [](unsigned char c) { return std::tolower(c); });
  auto features_or = [&](std::vector<int64_t> def) { return s.features.empty() ? def : s.features; };
  if (arch == "dncnn") {
    if (s.features.size() > 1)
      throw InputError("dncnn: features takes one value (nf), got " + shape_string(s.features));
    return build_dncnn(s.dim, s.in_channels, s.out_channels, s.features.empty() ? 64 : s.features[0],
                       s.blocks < 0 ? 20 : s.blocks);
  }
  if (arch == "drunet")
    return build_drunet(s.dim, s.in_channels, s.out_channels, features_or({64, 128, 256, 512}),
                        s.blocks < 0 ? 4 : s.blocks, s.pad);
  if (arch == "unet") {
    if (s.blocks >= 0)
      throw InputError("unet: blocks is not used (the number of scales is the number of features); leave it unset");
    return build_unet(s.dim, s.in_channels, s.out_channels, features_or({64, 128, 256, 512}), s.pad);
  }
  if (arch == "identity") {
    if (s.in_channels != s.out_channels)
      throw InputError("identity: in_channels must equal out_channels, got " + std::to_string(s.in_channels) +
                       " and " + std::to_string(s.out_channels));
    return build_identity(s.dim, s.in_channels);
  }
  throw InputError("unknown denoiser architecture '" + s.architecture + "' (expected dncnn, drunet, unet or identity)");
}

}  // namespace pnp::nn
