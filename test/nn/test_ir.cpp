// IR and builders: deepinv parameter counts and keys, shape inference, receptive radius.
#include "pnp_test.hpp"

#include <fstream>
#include <map>
#include <sstream>

#include "pnp/nn/models.hpp"
#include "nn_test_util.hpp"
#include "test_util.hpp"

using namespace pnp;
using namespace pnp::nn;

namespace {
using nn::test::make;
std::string dims(const std::vector<int64_t>& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) o += (i ? "x" : "") + std::to_string(s[i]);
  return o;
}
}  // namespace

TEST_CASE("parameter counts equal deepinv's") {
  // Values from deepinv 0.5: sum(p.numel() for p in model.parameters()).
  CHECK(make("drunet", 2, 1, 1).parameter_count() == 32'638'656);
  CHECK(make("drunet", 2, 3, 3).parameter_count() == 32'640'960);
  CHECK(make("dncnn", 2, 1, 1).parameter_count() == 665'921);
  CHECK(make("dncnn", 2, 3, 3).parameter_count() == 668'227);
  CHECK(make("unet", 2, 1, 1).parameter_count() == 8'562'881);  // "about 8.56 M"
  CHECK(make("unet", 2, 3, 3).parameter_count() == 8'564'163);
  CHECK(make("drunet", 3, 1, 1).parameter_count() == 96'539'712);
  CHECK(make("dncnn", 3, 1, 1).parameter_count() == 1'995'329);
  CHECK(make("unet", 3, 1, 1).parameter_count() == 25'668'929);
  CHECK(make("identity", 2, 3, 3).parameter_count() == 0);
  // By hand: DnCNN gray = conv(1->64) + 18 conv(64->64) + conv(64->1), 3x3, with bias.
  CHECK(make("dncnn", 2, 1, 1).parameter_count() == (9 * 64 + 64) + 18 * (9 * 64 * 64 + 64) + (9 * 64 + 1));
}

TEST_CASE("state-dict keys, order and shapes equal deepinv's (golden list)") {
  std::ifstream in(pnp::test::source_dir() / "test/nn/data/deepinv_keys.txt");
  REQUIRE(in.good());
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> golden;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string arch, dim, cin, cout, key, shape;
    ls >> arch >> dim >> cin >> cout >> key >> shape;
    golden[arch + " " + dim + " " + cin + " " + cout].push_back({key, shape});
  }
  REQUIRE(golden.size() == 5);
  for (const auto& [tag, keys] : golden) {
    std::istringstream ts(tag);
    std::string arch;
    int dim, cin, cout;
    ts >> arch >> dim >> cin >> cout;
    Graph g = make(arch, dim, cin, cout);
    auto ps = g.params();
    INFO(tag);
    REQUIRE(ps.size() == keys.size());
    for (size_t i = 0; i < ps.size(); ++i) {
      CHECK(ps[i]->key == keys[i].first);
      CHECK(dims(ps[i]->shape) == keys[i].second);
    }
  }
}

TEST_CASE("named nodes carry deepinv attributes") {
  Graph d = make("drunet", 2, 1, 1);
  const auto& down = d.node("m_down1.4");
  CHECK(down.op == OpKind::conv);
  CHECK(down.attrs.kernel == std::vector<int64_t>{2, 2});
  CHECK(down.attrs.stride == std::vector<int64_t>{2, 2});
  CHECK_FALSE(down.attrs.bias);
  const auto& up = d.node("m_up3.0");
  CHECK(up.op == OpKind::conv_transpose);
  CHECK(up.param("weight")->shape == std::vector<int64_t>{512, 256, 2, 2});
  CHECK(d.uses_sigma);
  CHECK(d.alignment() == 8);
  Graph u = make("unet", 3, 1, 1);
  CHECK(u.node("Conv2.1").op == OpKind::batch_norm);
  CHECK(u.node("Conv2.1").attrs.eps == doctest::Approx(1e-5));
  CHECK(u.node("Up4.0").op == OpKind::upsample_nearest);
  CHECK(u.node("Maxpool2").op == OpKind::max_pool);
  CHECK_FALSE(u.node("Conv2.1").param("running_mean")->trainable);
  CHECK_FALSE(u.uses_sigma);
  CHECK(u.alignment() == 8);
  CHECK(make("dncnn", 2, 1, 1).alignment() == 1);
  CHECK(make("unet", 2, 1, 1, {8, 8}).alignment() == 2);
}

TEST_CASE("builders reject bad specs with the field named") {
  auto msg = [](auto f) {
    try {
      f();
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(msg([] { make("resnet", 2, 1, 1); }).find("unknown denoiser architecture 'resnet'") != std::string::npos);
  CHECK(msg([] { make("drunet", 4, 1, 1); }).find("dim must be 2 or 3") != std::string::npos);
  CHECK(msg([] { make("drunet", 2, 1, 1, {8, 8}); }).find("exactly 4") != std::string::npos);
  CHECK(msg([] { make("dncnn", 2, 1, 3); }).find("in_channels == out_channels") != std::string::npos);
  CHECK(msg([] { make("unet", 2, 1, 1, {}, 3); }).find("blocks is not used") != std::string::npos);
  CHECK(msg([] { make("unet", 2, 1, 1, {8}); }).find("at least 2 scales") != std::string::npos);
}

TEST_CASE("output shapes in 2D and 3D, including sizes that need padding") {
  Graph d = make("drunet", 2, 1, 1);
  CHECK(infer_output_shape(d, {1, 1, 64, 64}) == std::vector<int64_t>{1, 1, 64, 64});
  CHECK(infer_output_shape(d, {2, 1, 37, 50}) == std::vector<int64_t>{2, 1, 37, 50});
  auto shapes = infer_shapes(d, {2, 1, 37, 50});
  CHECK(shapes[d.node("pad").id] == std::vector<int64_t>{2, 2, 40, 56});
  CHECK(shapes[d.node("m_down3.4").id] == std::vector<int64_t>{2, 512, 5, 7});
  CHECK(shapes[d.node("m_up1.0").id] == std::vector<int64_t>{2, 64, 40, 56});
  Graph d3 = make("drunet", 3, 1, 1);
  CHECK(infer_output_shape(d3, {1, 1, 9, 12, 17}) == std::vector<int64_t>{1, 1, 9, 12, 17});
  CHECK(infer_shapes(d3, {1, 1, 9, 12, 17})[d3.node("m_body.3").id] == std::vector<int64_t>{1, 512, 2, 2, 3});
  Graph c = make("drunet", 2, 3, 1);
  CHECK(infer_output_shape(c, {2, 3, 20, 21}) == std::vector<int64_t>{2, 1, 20, 21});
  Graph u3 = make("unet", 3, 2, 2);
  CHECK(infer_output_shape(u3, {1, 2, 5, 6, 7}) == std::vector<int64_t>{1, 2, 5, 6, 7});
  CHECK(infer_shapes(u3, {1, 2, 5, 6, 7})[u3.node("Conv4.5").id] == std::vector<int64_t>{1, 512, 1, 1, 1});
  Graph n3 = make("dncnn", 3, 1, 1);
  CHECK(infer_output_shape(n3, {1, 1, 3, 4, 5}) == std::vector<int64_t>{1, 1, 3, 4, 5});
  Graph id = make("identity", 3, 2, 2);
  CHECK(infer_output_shape(id, {1, 2, 3, 4, 5}) == std::vector<int64_t>{1, 2, 3, 4, 5});
}

TEST_CASE("shape inference rejects impossible shapes with a clear message") {
  Graph d = make("drunet", 2, 1, 1);
  CHECK_THROWS_WITH_AS(infer_output_shape(d, {1, 3, 64, 64}), doctest::Contains("needs 1 input channel(s), got 3"),
                       InputError);
  CHECK_THROWS_WITH_AS(infer_output_shape(d, {1, 1, 64}), doctest::Contains("needs a 4-d input"), InputError);
  CHECK_THROWS_WITH_AS(infer_output_shape(d, {1, 1, 0, 64}), doctest::Contains("empty input shape"), InputError);
  Graph np = make("drunet", 2, 1, 1, {}, -1, /*pad=*/false);
  CHECK_FALSE(np.pads_input());
  CHECK(infer_output_shape(np, {1, 1, 64, 48}) == std::vector<int64_t>{1, 1, 64, 48});
  CHECK_THROWS_WITH_AS(infer_output_shape(np, {1, 1, 64, 50}), doctest::Contains("multiples of 8"), InputError);
}

TEST_CASE("receptive radius") {
  // DnCNN: one pixel per 3x3 conv.
  CHECK(receptive_radius(make("dncnn", 2, 1, 1)) == 20);
  CHECK(receptive_radius(make("dncnn", 3, 1, 1, {4}, 7)) == 7);
  CHECK(receptive_radius(make("identity", 2, 1, 1)) == 0);
  // DRUNet by hand: 3x3 convs add 1 pixel per conv at each level's scale:
  // head 1 + 2*nb*(1+2+4) (down and up ResBlocks) + 2*nb*8 (body) + tail 1 = 178 for nb = 4,
  // plus up to (scale-1) per 2x2 down/up-sampling pair from the block alignment: 1+3+7 = 11.
  const int64_t r = receptive_radius(make("drunet", 2, 1, 1));
  CHECK(r >= 178);
  CHECK(r <= 178 + 11);
  // Channel counts do not change it.
  CHECK(receptive_radius(make("drunet", 2, 1, 1, {2, 2, 2, 2})) == r);
  MESSAGE("DRUNet receptive radius: " << r << ", UNet: " << receptive_radius(make("unet", 2, 1, 1)));
}

TEST_CASE("JSON dump and hash") {
  Graph a = make("drunet", 2, 1, 1, {2, 3, 4, 5}, 1);
  Graph b = make("drunet", 2, 1, 1, {2, 3, 4, 5}, 1);
  Graph c = make("drunet", 2, 1, 1, {2, 3, 4, 6}, 1);
  CHECK(a.hash() == b.hash());
  CHECK(a.hash() != c.hash());
  CHECK(a.hash().size() == 16);
  const std::string j = a.to_json();
  CHECK(j.find("\"format\": \"pnp-ir/1\"") != std::string::npos);
  CHECK(j.find("\"key\": \"m_down1.0.res.0.weight\"") != std::string::npos);
  CHECK(j.find("\"op\": \"conv_transpose\"") != std::string::npos);
  CHECK(j.find("\"hash\": \"" + a.hash() + "\"") != std::string::npos);
  for (const auto& n : a.nodes) {
    CHECK(n.id == &n - a.nodes.data());
    for (int i : n.inputs) CHECK(i < n.id);
    CHECK(op_from_string(to_string(n.op)) == n.op);
  }
}
