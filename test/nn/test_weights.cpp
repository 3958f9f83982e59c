// Seeded initialisation and the HDF5 weights format.
#include <ATen/ATen.h>
#include "pnp_test.hpp"

#include <limits>

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

TEST_CASE("float16 and int8 encodings: sizes, round trip error, and what the file records") {
  auto dir = pnp::test::scratch_dir("nn_weights_enc");
  DenoiserSpec s;
  s.architecture = "dncnn";  // 64-feature 3x3 convolutions: 36864 elements each, int8-eligible
  Graph g = build(s);
  Weights w = init_weights(g, 11);
  const std::string p32 = (dir / "w32.h5").string(), p16 = (dir / "w16.h5").string(), p8 = (dir / "w8.h5").string();
  save_weights(p32, g, w, WeightEncoding::float32);
  save_weights(p16, g, w, WeightEncoding::float16);
  save_weights(p8, g, w, WeightEncoding::int8);
  Weights r32 = load_weights(p32, g), r16 = load_weights(p16, g), r8 = load_weights(p8, g);
  CHECK(same(w, r32));
  for (const auto* p : g.params()) {
    INFO(p->key);
    const at::Tensor a = w.at(p->key);
    // float16: exactly the nearest binary16 of each value (ATen's conversion rounds to nearest even).
    CHECK(at::equal(r16.at(p->key), a.to(at::kHalf).to(at::kFloat)));
    // int8: each weight within half a step of its kernel's scale, max |w| / 127 (plus float16
    // rounding of the scale); small tensors stay float32.
    const at::Tensor d = (r8.at(p->key) - a).abs();
    if (p->numel() >= 4096 && p->shape.size() >= 3) {
      at::Tensor kmax = std::get<0>(a.view({p->shape[0], p->shape[1], -1}).abs().max(2, true));
      at::Tensor bound = kmax / 127.0 * 0.5 * (1 + 1e-3) + kmax * 1e-3;
      CHECK((d.view({p->shape[0], p->shape[1], -1}) <= bound).all().item<bool>());
      CHECK(d.max().item<double>() > 0);  // really quantised
    } else {
      CHECK(d.max().item<double>() == 0);
    }
  }
  auto f8 = io::H5File::open(p8);
  CHECK(io::read_attr_string(f8, "/", "encoding") == "int8");
  CHECK(io::read_attr_string(f8, "/weights/conv_list.3.weight", "encoding") == "int8_per_kernel");
  CHECK(io::read_attr_string(f8, "/weights/conv_list.3.bias", "encoding") == "float32");
  CHECK(io::shape_of(f8, "/weight_scales/conv_list.3.weight") == std::vector<int64_t>{64, 64});
  const auto size = [](const std::string& p) { return static_cast<double>(std::filesystem::file_size(p)); };
  CHECK(size(p16) < 0.55 * size(p32));
  CHECK(size(p8) < 0.40 * size(p32));
}

TEST_CASE("int8 codes must be stored as 8-bit integers") {
  auto dir = pnp::test::scratch_dir("nn_weights_int8_type");
  DenoiserSpec s;
  s.architecture = "dncnn";
  Graph g = build(s);
  const std::string path = (dir / "float_codes.h5").string();
  save_weights(path, g, init_weights(g, 3), WeightEncoding::float32);
  {  // a float32 tensor that claims to be int8 codes, with scales
    auto f = io::H5File::open(path, /*writable=*/true);
    io::write_attr(f, "/weights/conv_list.3.weight", "encoding", std::string("int8_per_kernel"));
    const std::vector<float> scales(64 * 64, 0.01f);
    io::write(f, "/weight_scales/conv_list.3.weight", scales.data(), {64, 64}, "1", "scales");
  }
  CHECK_THROWS_WITH_AS(load_weights(path, g), doctest::Contains("stored as 32-bit floats"), InputError);
}

TEST_CASE("the loader checks declared shapes before reading, and refuses non-finite weights") {
  auto dir = pnp::test::scratch_dir("nn_weights_hostile");
  Graph g = small("dncnn");
  Weights w = init_weights(g, 2);
  const std::string nan_path = (dir / "nan.h5").string();
  Weights bad = w;
  bad.begin()->second = bad.begin()->second.clone();
  bad.begin()->second.view(-1)[0] = std::numeric_limits<float>::quiet_NaN();
  save_weights(nan_path, g, bad);
  CHECK_THROWS_WITH_AS(load_weights(nan_path, g), doctest::Contains("non-finite"), InputError);
  Weights inf = w;
  inf.rbegin()->second = inf.rbegin()->second.clone().fill_(std::numeric_limits<float>::infinity());
  save_weights(nan_path, g, inf);
  CHECK_THROWS_WITH_AS(load_weights(nan_path, g), doctest::Contains(inf.rbegin()->first.c_str()), InputError);

  // A dataset that declares a huge extent but holds nothing (chunked, never written): refused by
  // its declared shape, before any allocation.
  const std::string huge = (dir / "huge.h5").string();
  save_weights(huge, g, w);
  {
    auto f = io::H5File::open(huge, true);
    const std::string key = g.params().front()->key;
    H5Ldelete(f.id(), ("/weights/" + key).c_str(), H5P_DEFAULT);
    hsize_t dims[4] = {1ull << 20, 1ull << 20, 3, 3}, chunk[4] = {1, 1, 3, 3};
    hid_t space = H5Screate_simple(4, dims, nullptr), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 4, chunk);
    hid_t ds = H5Dcreate2(f.id(), ("/weights/" + key).c_str(), H5T_NATIVE_FLOAT, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    REQUIRE(ds >= 0);
    H5Dclose(ds), H5Pclose(dcpl), H5Sclose(space);
  }
  CHECK_THROWS_WITH_AS(load_weights(huge, g), doctest::Contains("mis-shaped keys (1)"), InputError);

  // A group where a dataset should be.
  const std::string grp = (dir / "group.h5").string();
  save_weights(grp, g, w);
  {
    auto f = io::H5File::open(grp, true);
    const std::string key = g.params().back()->key;
    H5Ldelete(f.id(), ("/weights/" + key).c_str(), H5P_DEFAULT);
    hid_t gid = H5Gcreate2(f.id(), ("/weights/" + key).c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Gclose(gid);
    float one = 1;
    io::write<float>(f, "/weights/" + key + "/inner", &one, {1}, "1", "hostile");
  }
  CHECK_THROWS_AS(load_weights(grp, g), InputError);
}
