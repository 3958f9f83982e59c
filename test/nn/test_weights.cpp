// Seeded initialisation and the HDF5 weights format.
#include <ATen/ATen.h>
#include "pnp_test.hpp"

#include "pnp/io.hpp"
#include "pnp/nn/models.hpp"
#include "pnp/nn/weights.hpp"
#include "test_util.hpp"

using namespace pnp;
using namespace pnp::nn;

namespace {
Graph small(std::string arch) {
  DenoiserSpec s;
  s.architecture = arch;
  s.features = arch == "drunet" ? std::vector<int64_t>{4, 6, 8, 10} : arch == "unet" ? std::vector<int64_t>{4, 6}
                                                                                       : std::vector<int64_t>{6};
  s.blocks = arch == "unet" ? -1 : arch == "drunet" ? 1 : 4;
  return build(s);
}
bool same(const Weights& a, const Weights& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [k, v] : a)
    if (!b.count(k) || !at::equal(v, b.at(k))) return false;
  return true;
}
}  // namespace

TEST_CASE("initialisation is seeded, deterministic and follows deepinv's schemes") {
  for (std::string arch : {"dncnn", "drunet", "unet"}) {
    INFO(arch);
    Graph g = small(arch);
    Weights a = init_weights(g, 42), b = init_weights(g, 42), c = init_weights(g, 43);
    CHECK(same(a, b));
    CHECK_FALSE(same(a, c));
    CHECK(a.size() == g.params().size());
    for (const auto* p : g.params()) {
      CHECK(a.at(p->key).sizes().vec() == p->shape);
      CHECK((a.at(p->key).scalar_type() == at::kFloat));
    }
  }
  // DRUNet: orthogonal rows with gain 0.2 (rows <= cols): W W^T = 0.04 I.
  Weights w = init_weights(small("drunet"), 1);
  at::Tensor m = w.at("m_down1.0.res.0.weight").reshape({4, -1});
  CHECK((at::mm(m, m.t()) - 0.04 * at::eye(4)).abs().max().item<double>() < 1e-6);
  // UNet batch norm starts as PyTorch's: weight 1, bias 0, mean 0, var 1.
  Weights u = init_weights(small("unet"), 1);
  CHECK(at::equal(u.at("Conv1.1.running_var"), at::ones({4})));
  CHECK(at::equal(u.at("Conv1.1.bias"), at::zeros({4})));
  // DnCNN: Kaiming normal, std sqrt(2 / fan_in) = sqrt(2 / 54) for a 6->6 3x3 conv.
  Graph big;
  {
    DenoiserSpec s;
    s.architecture = "dncnn";
    big = build(s);
  }
  Weights d = init_weights(big, 3);
  const double sd = d.at("conv_list.5.weight").std().item<double>();
  CHECK(sd == doctest::Approx(std::sqrt(2.0 / 576)).epsilon(0.02));
}

TEST_CASE("weights round trip through HDF5") {
  auto dir = pnp::test::scratch_dir("nn_weights");
  for (std::string arch : {"dncnn", "drunet", "unet"}) {
    INFO(arch);
    Graph g = small(arch);
    Weights w = init_weights(g, 5);
    for (auto& [k, v] : w) v = v + 0.001 * at::arange(v.numel()).reshape(v.sizes());  // no all-ones / zeros
    const std::string path = (dir / (arch + ".h5")).string();
    save_weights(path, g, w);
    Weights r = load_weights(path, g);
    CHECK(same(w, r));
    auto f = io::H5File::open(path);
    CHECK(io::read_attr_string(f, "/", "architecture") == arch);
    CHECK(io::read_attr_string(f, "/", "ir_hash") == g.hash());
    CHECK(io::read_attr_int(f, "/", "parameter_count") == g.parameter_count());
    CHECK(io::list_datasets(f, "/weights").size() == g.params().size());
  }
}

TEST_CASE("the loader lists missing, unexpected and mis-shaped keys") {
  auto dir = pnp::test::scratch_dir("nn_weights_bad");
  Graph g = small("unet");
  Weights w = init_weights(g, 6);
  const std::string path = (dir / "bad.h5").string();
  {
    auto f = io::H5File::create(path);
    for (const auto* p : g.params()) {
      if (p->key == "Conv2.3.bias") continue;  // missing
      auto t = w.at(p->key);
      if (p->key == "Up2.1.weight") t = at::ones({4, 6, 3, 1});  // mis-shaped
      io::write<float>(f, "/weights/" + p->key, t.contiguous().data_ptr<float>(), t.sizes().vec(), "1", "test");
    }
    float one = 1.0f;
    io::write<float>(f, "/weights/Conv9.0.weight", &one, {1}, "1", "unexpected");
    io::write<float>(f, "/weights/Conv1.1.num_batches_tracked", &one, {1}, "1", "ignored");
    io::write_attr(f, "/", "architecture", std::string("unet"));
  }
  std::string msg;
  try {
    load_weights(path, g);
  } catch (const InputError& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK(msg.find("missing keys (1): Conv2.3.bias") != std::string::npos);
  CHECK(msg.find("unexpected keys (1): Conv9.0.weight") != std::string::npos);
  CHECK(msg.find("mis-shaped keys (1): Up2.1.weight [4, 6, 3, 1] (expected [4, 6, 3, 3])") != std::string::npos);
  CHECK(msg.find(path) != std::string::npos);
  CHECK(msg.find("num_batches_tracked") == std::string::npos);

  const std::string empty = (dir / "empty.h5").string();
  { auto f = io::H5File::create(empty); }
  CHECK_THROWS_WITH_AS(load_weights(empty, g), doctest::Contains("no /weights group"), InputError);
  // Loading into another architecture names every key.
  save_weights((dir / "dncnn.h5").string(), small("dncnn"), init_weights(small("dncnn"), 1));
  CHECK_THROWS_WITH_AS(load_weights((dir / "dncnn.h5").string(), g), doctest::Contains("(architecture 'dncnn')"),
                       InputError);
}
