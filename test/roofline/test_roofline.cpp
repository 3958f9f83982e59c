// Roofline counts at 2048^2 against independent hand counts, and the peak table.
#include "pnp_test.hpp"

#include <algorithm>
#include <set>

#include "pnp/nn/models.hpp"
#include "pnp/roofline.hpp"
#include "ir_graphs.hpp"

using namespace pnp;
using namespace pnp::nn;
using namespace pnp::roofline;

namespace {
Graph make(std::string arch, int dim, int ch) {
  DenoiserSpec s;
  s.architecture = std::move(arch);
  s.dim = dim;
  s.in_channels = s.out_channels = ch;
  return build(s);
}
}  // namespace

TEST_CASE("DRUNet MAC per pixel at 2048^2 (3 channels) equals the hand count") {
  // Per full-resolution pixel. A 3x3 conv c->c at scale 1/2^l costs 9 c^2 / 4^l; each ResBlock
  // has two; nb = 4 blocks in each of down_l and up_l (l = 0..2), 4 in the body (l = 3).
  const double level = 2 * 4 * 2 * 9.0;                    // down + up ResBlocks: 16 convs
  const double convs = level * 64 * 64 + level * 128 * 128 / 4 + level * 256 * 256 / 16 +
                       8 * 9.0 * 512 * 512 / 64;           // body: 8 convs
  const double head_tail = 9.0 * 4 * 64 + 9.0 * 64 * 3;     // (3 + sigma) -> 64, 64 -> 3
  // 2x2 stride-2 down conv c -> 2c: 4 c (2c) MAC per output pixel, at scale 1/4^(l+1).
  const double down = 4.0 * 64 * 128 / 4 + 4.0 * 128 * 256 / 16 + 4.0 * 256 * 512 / 64;
  // 2x2 stride-2 transposed conv 2c -> c: each INPUT pixel meets each tap once: 4 (2c) c per
  // input pixel at scale 1/4^(l+1); the study's formula counts per OUTPUT pixel (x4).
  const double up = 4.0 * 128 * 64 / 4 + 4.0 * 256 * 128 / 16 + 4.0 * 512 * 256 / 64;
  const double hand = convs + head_tail + down + up;
  CHECK(hand == 2'117'568.0);
  Counts c = count(make("drunet", 2, 3), {1, 3, 2048, 2048});
  CHECK(c.macs_per_pixel() == doctest::Approx(hand).epsilon(1e-12));
  CHECK(c.macs_per_pixel() == doctest::Approx(2.118e6).epsilon(1e-3));  // the figure
  CHECK(c.macs_per_pixel_study() == doctest::Approx(hand + 3 * up).epsilon(1e-12));  // over-count stride^d = 4
  CHECK(c.flops == doctest::Approx(2 * hand * 2048.0 * 2048.0).epsilon(1e-12));
}

TEST_CASE("DnCNN and UNet MAC per pixel at 2048^2 equal the hand counts") {
  // DnCNN, 3 channels: conv 3->64, 18 x conv 64->64, conv 64->3, all 3x3 at full resolution.
  const double dncnn = 9.0 * (3 * 64 + 18 * 64 * 64 + 64 * 3);
  CHECK(dncnn == 667'008.0);
  Counts d = count(make("dncnn", 2, 3), {1, 3, 2048, 2048});
  CHECK(d.macs_per_pixel() == doctest::Approx(dncnn).epsilon(1e-12));
  CHECK(d.macs_per_pixel() == doctest::Approx(0.667e6).epsilon(1e-3));
  CHECK(d.flops_study == d.flops);  // no transposed convs

  // UNet, 1 channel (deepinv's default): blocks (conv3-BN-ReLU) x 2, Up = nearest x2 + conv3.
  const double enc = 9.0 * (1 * 64 + 64 * 64) + 9.0 * (64 * 128 + 128 * 128) / 4 + 9.0 * (128 * 256 + 256 * 256) / 16 +
                     9.0 * (256 * 512 + 512 * 512) / 64;
  const double dec = (9.0 * 512 * 256 + 9.0 * (512 * 256 + 256 * 256)) / 16 +
                     (9.0 * 256 * 128 + 9.0 * (256 * 128 + 128 * 128)) / 4 + (9.0 * 128 * 64 + 9.0 * (128 * 64 + 64 * 64));
  const double unet = enc + dec + 64.0 * 1;  // 1x1 output conv
  CHECK(unet == 756'352.0);
  Counts u = count(make("unet", 2, 1), {1, 1, 2048, 2048});
  CHECK(u.macs_per_pixel() == doctest::Approx(unet).epsilon(1e-12));
  CHECK(u.macs_per_pixel() == doctest::Approx(0.756e6).epsilon(1e-3));

  // 3D DnCNN, 1 channel: 27-tap kernels.
  Counts d3 = count(make("dncnn", 3, 1), {1, 1, 64, 64, 64});
  CHECK(d3.macs_per_pixel() == doctest::Approx(27.0 * (64 + 18 * 64 * 64 + 64)).epsilon(1e-12));
}

TEST_CASE("bytes follow the study's convention and ours") {
  const double P = 2048.0 * 2048.0;
  Counts d = count(make("dncnn", 2, 3), {1, 3, 2048, 2048});
  // Study: 4 * (inputs + output + weight) per conv and ReLU (DnCNN has no BN).
  const double study = 4 * ((3 * P + 64 * P + 9 * 3 * 64) + 18 * (64 * P + 64 * P + 9 * 64 * 64) +
                            (64 * P + 3 * P + 9 * 64 * 3) + 19 * (2 * 64 * P));
  CHECK(d.bytes_study == doctest::Approx(study).epsilon(1e-12));
  // Ours adds the biases and the residual add (two reads, one write).
  const double ours = study + 4 * (64 + 18 * 64 + 3) + 4 * (3 * 3 * P);
  CHECK(d.bytes == doctest::Approx(ours).epsilon(1e-12));
  CHECK(d.intensity_study() == doctest::Approx(d.flops_study / study));
  // UNet: BN counted by the study with its weight only; ours with weight, bias, mean, var.
  Counts u = count(make("unet", 2, 1), {1, 1, 256, 256});
  const auto& bn = u.ops[build({"unet", 2, 1, 1}).node("Conv1.1").id];
  CHECK(bn.bytes_study == doctest::Approx(4 * (2 * 64 * 256.0 * 256 + 64)));
  CHECK(bn.bytes == doctest::Approx(4 * (2 * 64 * 256.0 * 256 + 4 * 64)));
  CHECK(bn.flops == 0);
  // Element size scales our bytes only.
  Counts d64 = count(make("dncnn", 2, 3), {1, 3, 2048, 2048}, 8);
  CHECK(d64.bytes == doctest::Approx(2 * ours));
  CHECK(d64.bytes_study == doctest::Approx(study));
}

TEST_CASE("peak table and ridge points") {
  CHECK(peak_for("NVIDIA H100 80GB HBM3").ridge() == doctest::Approx(494.0 / 3.35));
  CHECK(peak_for("H100").ridge() == doctest::Approx(147.46).epsilon(1e-3));
  CHECK(peak_for("NVIDIA A100-SXM4-80GB").ridge() == doctest::Approx(76.5).epsilon(1e-3));
  CHECK(peak_for("nvidia h200").ridge() == doctest::Approx(102.9).epsilon(1e-3));
  CHECK_THROWS_WITH_AS(peak_for("V100"), doctest::Contains("known: A100, H100, H200"), InputError);
  // FP8 (e4m3): twice BF16's rate on Hopper, dense; the A100 has no FP8 tensor cores
  CHECK(peak_for("H100").fp8_tflops == 1979.0);  // the data sheet: 3958 with sparsity
  CHECK(peak_for("H200").fp8_tflops == peak_for("H100").fp8_tflops);
  CHECK(peak_for("A100").fp8_tflops == 0);
  const auto& h = peak_for("H200");
  CHECK(attainable_tflops(h, 10.0) == doctest::Approx(48.0));
  CHECK(attainable_tflops(h, 1000.0) == doctest::Approx(494.0));
  CHECK(roofline_seconds(h, 494e12, 1.0) == doctest::Approx(1.0));
  // DnCNN at 2048^2 in the study's counts is compute-bound on A100, H100 and H200 alike?
  Counts d = count(make("dncnn", 2, 3), {1, 3, 2048, 2048});
  MESSAGE("DnCNN 2048^2 intensity (study) " << d.intensity_study() << " FLOP/B, ours " << d.intensity());
  CHECK(d.intensity_study() > 0);
}

TEST_CASE("activation memory: liveness hand counts, eager and native styles, bf16 halves it") {
  // DnCNN depth 3, 4 features, 8x8 float32: x (256 B) lives to the residual add; in_conv
  // (1024 B, ReLU in place) lives until conv_list.0 has read it, so during conv_list.0 x, its
  // input and its output (1024 B) are live: 2304 B. The add allocates 256 B in eager and
  // writes into out_conv's buffer in native; neither changes the peak.
  DenoiserSpec s;
  s.architecture = "dncnn";
  s.features = {4};
  s.blocks = 3;
  const Graph d = build(s);
  for (auto style : {ExecutorStyle::eager, ExecutorStyle::native}) {
    const auto m = activation_memory(d, {1, 1, 8, 8}, 4, style);
    CHECK(m.peak_bytes == 2304);
    CHECK(m.peak_node == "conv_list.0");
    CHECK(m.largest_bytes == 1024);
    CHECK(m.weights_bytes == 4.0 * double(d.parameter_count()));
  }
  // DRUNet (1 channel) at 512^2: a full-resolution ResBlock holds the head output (skip to the
  // tail), the block input, the conv1 output (ReLU in place) and the conv2 output: 4 x 64 x
  // H x W x 4 B, plus what the lower levels keep (at most a few percent more).
  const Graph g = make("drunet", 2, 1);
  const double full = 64.0 * 512 * 512 * 4;
  const auto e = activation_memory(g, {1, 1, 512, 512}, 4, ExecutorStyle::eager);
  const auto n = activation_memory(g, {1, 1, 512, 512}, 4, ExecutorStyle::native);
  CHECK(e.largest_bytes == full);
  CHECK(e.peak_bytes >= 4 * full);
  CHECK(e.peak_bytes < 4.1 * full);
  CHECK(n.peak_bytes <= e.peak_bytes);
  const auto e16 = activation_memory(g, {1, 1, 512, 512}, 2, ExecutorStyle::eager);
  CHECK(e16.peak_bytes == e.peak_bytes / 2);
  CHECK(e16.weights_bytes == e.weights_bytes / 2);
  CHECK_THROWS_AS(activation_memory(g, {1, 2, 64, 64}, 4, ExecutorStyle::eager), InputError);
}

TEST_CASE("activation memory: native fusion groups share the conv's buffer, the conv on either side of the add") {
  // x -> c1 -> sum = add(x, c1) -> r1 (not in place) -> c2 -> r2; every value 2x6x5 floats = 240 B.
  Graph g = nn::test::input_graph(2);
  const Attrs a = nn::test::conv3x3(2);
  g.add("c1", OpKind::conv, {0}, a, {{"weight", "c1.weight", {2, 2, 3, 3}, true}});
  g.add("sum", OpKind::add, {0, 1});
  g.add("r1", OpKind::relu, {2});
  g.add("c2", OpKind::conv, {3}, a, {{"weight", "c2.weight", {2, 2, 3, 3}, true}});
  g.add("r2", OpKind::relu, {4});
  // Eager: x, c1 and the sum are live together.
  const auto e = activation_memory(g, {1, 2, 6, 5}, 4, ExecutorStyle::eager);
  CHECK(e.peak_bytes == 720);
  CHECK(e.peak_node == "sum");
  // Native: conv+add+relu writes into c1's buffer, conv+relu into c2's: never more than two.
  const auto n = activation_memory(g, {1, 2, 6, 5}, 4, ExecutorStyle::native);
  CHECK(n.peak_bytes == 480);
  CHECK(n.peak_node == "c1");
}

namespace {
// Rates that make the floor's two terms readable: 1 FLOP/s and 0.1 B/s (compute_s = FLOPs,
// memory_s = 10 x bytes); FP8 twice BF16.
GpuPeak unit_rates() {
  GpuPeak p;
  p.name = "unit";
  p.tf32_tflops = 1e-12, p.bf16_tflops = 1e-12, p.fp8_tflops = 2e-12, p.hbm_tbps = 1e-13, p.fp32_tflops = 1e-12;
  return p;
}
Param weight(const std::string& name, int64_t c) { return {"weight", name + ".weight", {c, c, 3, 3}, true}; }
}  // namespace

TEST_CASE("native floor: each fusion group one kernel, its reads and its one write by hand") {
  // x -> c1 -> sum = add(x, c1) -> r1 -> c2 -> r2 (the fusion test's graph), 2 channels, 6x5:
  // every value 60 elements, each weight 36; each conv 2 * 2 * 18 * 30 = 2160 FLOPs.
  Graph g = nn::test::input_graph(2);
  const Attrs a = nn::test::conv3x3(2);
  g.add("c1", OpKind::conv, {0}, a, {weight("c1", 2)});
  g.add("sum", OpKind::add, {0, 1});
  g.add("r1", OpKind::relu, {2});
  g.add("c2", OpKind::conv, {3}, a, {weight("c2", 2)});
  g.add("r2", OpKind::relu, {4});
  const std::vector<int64_t> shape{1, 2, 6, 5};
  const NativeFloor f = native_floor(g, shape, 4, {}, unit_rates());
  REQUIRE(f.kernels.size() == 2);
  // conv + add + ReLU: x read by the conv and again by the add, the weight, r1 written once
  CHECK(f.kernels[0].node == 1);
  CHECK(f.kernels[0].last == 3);
  CHECK(f.kernels[0].fused == "add relu");
  CHECK(f.kernels[0].precision == "tf32");
  CHECK(f.kernels[0].bytes == 4 * (60 + 60 + 36 + 60));
  CHECK(f.kernels[0].flops == 2160);
  CHECK(f.kernels[1].fused == "relu");
  CHECK(f.kernels[1].bytes == 4 * (60 + 36 + 60));
  CHECK(f.kernels[0].memory_s == doctest::Approx(8640));
  CHECK(f.kernels[1].memory_s == doctest::Approx(6240));
  CHECK(f.kernels[0].compute_s == doctest::Approx(2160));
  CHECK(f.seconds == doctest::Approx(8640 + 6240));  // both memory-bound at these rates
  CHECK(f.compute_s == doctest::Approx(4320));
  CHECK(f.flops == count(g, shape).flops);
  CHECK(f.bytes < count(g, shape).bytes);  // the add's and the ReLUs' round trips are gone

  // bf16 with c2 in FP8: r1's one reader is c2's input, so r1 is written in e4m3 only; c2 reads
  // 1-byte input and weight and runs at the FP8 roof (twice BF16's)
  const NativeFloor q = native_floor(g, shape, 2, {4}, unit_rates());
  CHECK(q.kernels[0].bytes == 2 * (60 + 60 + 36) + 1 * 60);
  CHECK(q.kernels[0].precision == "bf16");
  CHECK(q.kernels[1].bytes == 1 * (60 + 36) + 2 * 60);
  CHECK(q.kernels[1].precision == "fp8");
  CHECK(q.kernels[1].compute_s == doctest::Approx(1080));
  CHECK(q.kernels[0].compute_s == doctest::Approx(2160));

  CHECK_THROWS_WITH_AS(native_floor(g, shape, 4, {4}, unit_rates()), doctest::Contains("beside bf16"), InputError);
  CHECK_THROWS_WITH_AS(native_floor(g, shape, 2, {2}, unit_rates()), doctest::Contains("not a convolution"), InputError);
  CHECK_THROWS_WITH_AS(native_floor(g, shape, 8, {}, unit_rates()), doctest::Contains("2- or 4-byte"), InputError);
  CHECK_THROWS_WITH_AS(native_floor(g, shape, 2, {4}, peak_for("A100")), doctest::Contains("no FP8"), InputError);
  CHECK_THROWS_AS(native_floor(g, {1, 3, 6, 5}, 4, {}, unit_rates()), InputError);
}

TEST_CASE("native floor: a value read by an FP8 conv and by an add is kept in both types") {
  // x -> c0 (bf16) = h -> c1 (FP8) -> r1 -> c2 (FP8) -> sum = add(h, c2): a DRUNet ResBlock behind
  // a bf16 conv. h is c1's input (e4m3) and the add's residual (bf16): c0 writes 3 bytes an element.
  Graph g = nn::test::input_graph(2);
  const Attrs a = nn::test::conv3x3(2);
  g.add("c0", OpKind::conv, {0}, a, {weight("c0", 2)});
  g.add("c1", OpKind::conv, {1}, a, {weight("c1", 2)});
  g.add("r1", OpKind::relu, {2});
  g.add("c2", OpKind::conv, {3}, a, {weight("c2", 2)});
  g.add("sum", OpKind::add, {1, 4});
  const std::vector<int64_t> shape{1, 2, 6, 5};
  const NativeFloor f = native_floor(g, shape, 2, {2, 4}, unit_rates());
  REQUIRE(f.kernels.size() == 3);
  CHECK(f.kernels[0].bytes == 2 * (60 + 36) + 3 * 60);  // c0: bf16 and its e4m3 copy
  CHECK(f.kernels[1].bytes == 1 * (60 + 36) + 1 * 60);  // c1 + ReLU: e4m3 in, e4m3 out for c2
  CHECK(f.kernels[1].fused == "relu");
  CHECK(f.kernels[2].bytes == 1 * (60 + 36) + 2 * 60 + 2 * 60);  // c2 + add: the residual in bf16, the output
  CHECK(f.kernels[2].fused == "add");
  // without FP8, every value once in bf16
  const NativeFloor b = native_floor(g, shape, 2, {}, unit_rates());
  CHECK(b.kernels[0].bytes == 2 * (60 + 36 + 60));
  CHECK(b.bytes == 2 * (3 * (60 + 36 + 60) + 60));
}

TEST_CASE("native floor: an add read only by a conv is summed as the conv loads it") {
  // x -> c0 -> r0; a = add(x, r0) -> c1: r0 ends its group (a ReLU), so the add is not c0's
  // epilogue; its one reader is c1's input, which reads x and r0 instead of their sum, in bf16
  // even where asked for FP8 (pnp's FP8 kernel takes no folded add)
  Graph g = nn::test::input_graph(2);
  const Attrs a = nn::test::conv3x3(2);
  g.add("c0", OpKind::conv, {0}, a, {weight("c0", 2)});
  g.add("r0", OpKind::relu, {1});
  g.add("a", OpKind::add, {0, 2});
  g.add("c1", OpKind::conv, {3}, a, {weight("c1", 2)});
  const std::vector<int64_t> shape{1, 2, 6, 5};
  const NativeFloor f = native_floor(g, shape, 2, {4}, unit_rates());
  REQUIRE(f.kernels.size() == 2);
  CHECK(f.kernels[1].node == 4);
  CHECK(f.kernels[1].fused == "its input's add");
  CHECK(f.kernels[1].precision == "bf16");
  CHECK(f.kernels[1].bytes == 2 * (60 + 60 + 36 + 60));
  CHECK(f.kernels[0].bytes == 2 * (60 + 36 + 60));
  CHECK(f.fp8_kernels == 0);  // asked for c1, which takes the folded add
  // with a second reader the sum is stored: an add kernel of its own
  g.add("c2", OpKind::conv, {3}, a, {weight("c2", 2)});
  const NativeFloor two = native_floor(g, shape, 2, {}, unit_rates());
  REQUIRE(two.kernels.size() == 4);
  CHECK(two.kernels[1].op == "add");
  CHECK(two.kernels[1].bytes == 2 * (60 + 60 + 60));
}

TEST_CASE("native floor: DRUNet 1 ch, its 68 kernels and a level-0 ResBlock by hand") {
  const Graph g = make("drunet", 2, 1);
  const std::vector<int64_t> shape{1, 1, 512, 512};
  const double P = 512.0 * 512;
  const NativeFloor f = native_floor(g, shape, 2, {}, peak_for("H200"));
  // the sigma concat, the head, 28 ResBlocks of two, 3 strided downs, 3 transposed ups, 3 skip
  // adds (a ResBlock's output ends its group, so the adds stay their own), the tail with the last
  // skip add summed as it loads its two inputs
  REQUIRE(f.kernels.size() == 68);
  int relu = 0, add = 0, alone = 0;
  for (const auto& k : f.kernels) {
    relu += k.fused == "relu";
    add += k.fused == "add";
    alone += k.op == "add" && k.fused.empty();
  }
  CHECK(relu == 28);
  CHECK(add == 28);
  CHECK(alone == 3);
  CHECK(f.kernels.back().fused == "its input's add");
  CHECK(f.kernels.back().bytes == 2 * (2 * 64 * P + 64 * 9 + P));
  // the first ResBlock: conv + ReLU reads and writes 64 x P in bf16 with its 64 x 64 x 9 weight;
  // conv + add reads its input and the residual, writes one
  const auto first = std::find_if(f.kernels.begin(), f.kernels.end(), [](const KernelFloor& k) { return k.fused == "relu"; });
  REQUIRE(first != f.kernels.end());
  CHECK(first->bytes == 2 * (2 * 64 * P + 64 * 64 * 9));
  CHECK(first->flops == 2 * 64 * 64 * 9 * P);
  CHECK((first + 1)->bytes == 2 * (3 * 64 * P + 64 * 64 * 9));
  CHECK(f.flops == doctest::Approx(count(g, shape, 2).flops));
  // FP8 on native_deep's 24 convolutions: the floor falls, and stays above FLOPs / FP8 peak
  // alone and the total bytes over the bandwidth alone
  std::set<int> deep;
  for (const auto& k : f.kernels)
    if ((k.fused == "relu" || k.fused == "add") && g.nodes[k.node].attrs.in_channels >= 256) deep.insert(k.node);
  CHECK(deep.size() == 24);
  const NativeFloor q = native_floor(g, shape, 2, deep, peak_for("H200"));
  CHECK(q.fp8_kernels == 24);
  CHECK(q.seconds < f.seconds);
  CHECK(q.seconds >= q.bytes / 4.8e12);
  CHECK(q.bytes < f.bytes);
}
