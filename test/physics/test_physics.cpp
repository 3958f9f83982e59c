// Physics: Joseph projector, exact adjoint, tiles, FBP, power method, custom ops.
#include "physics_test_util.hpp"

#include <ATen/core/stack.h>

#include <pnp/synthetic.hpp>

#include <ATen/core/dispatch/Dispatcher.h>
#include "pnp_test.hpp"

#include <barrier>
#include <cmath>
#include <numbers>
#include <thread>

using namespace pnp::physics;
using namespace pnp::physics::test;
using pnp::Box;

namespace {
const auto f64 = at::TensorOptions().dtype(at::kDouble);
const auto f32 = at::TensorOptions().dtype(at::kFloat);

// Supersampled (ss x ss) indicator of an ellipse with semi-axes A (along its x) and B,
// rotated by phi (degrees), centred at (xc, yc) in pixel units (image centre = origin).
at::Tensor ellipse_image(int64_t n, double A, double B, double phi, double xc, double yc, int ss = 8) {
  auto img = at::zeros({n, n}, f64);
  auto* p = img.data_ptr<double>();
  const double cp = std::cos(phi * std::numbers::pi / 180), sp = std::sin(phi * std::numbers::pi / 180);
  const double hn = 0.5 * static_cast<double>(n - 1);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int inside = 0;
      for (int a = 0; a < ss; ++a)
        for (int b = 0; b < ss; ++b) {
          const double x = static_cast<double>(j) - hn + (b + 0.5) / ss - 0.5 - xc;
          const double y = hn - static_cast<double>(i) + (a + 0.5) / ss - 0.5 - yc;
          const double u = x * cp + y * sp, v = -x * sp + y * cp;
          if ((u / A) * (u / A) + (v / B) * (v / B) <= 1.0) ++inside;
        }
      p[i * n + j] = static_cast<double>(inside) / (ss * ss);
    }
  return img;
}

// Max relative error of the projection of the ellipse against its analytic line integrals
// over the rays within `frac` of the half-width.
double ellipse_projection_error(const Geometry& g, double A, double B, double phi, double xc, double yc, double frac) {
  auto img = ellipse_image(g.n, A, B, phi, xc, yc);
  auto sino = forward(img, g, g.full_box());
  auto* sp = sino.data_ptr<double>();
  double worst = 0;
  int count = 0;
  for (int64_t k = 0; k < g.n_angles(); ++k) {
    double c, s;
    cos_sin_deg(g.angles_deg[static_cast<size_t>(k)], c, s);
    const double th = std::atan2(s, c), ph = phi * std::numbers::pi / 180;
    const double w2 = A * A * std::cos(th - ph) * std::cos(th - ph) + B * B * std::sin(th - ph) * std::sin(th - ph);
    const double tc = xc * c + yc * s;
    for (int64_t d = 0; d < g.n_det; ++d) {
      const double t = static_cast<double>(d) - 0.5 * static_cast<double>(g.n_det - 1);
      const double dt = t - tc;
      if (std::fabs(dt) > frac * std::sqrt(w2)) continue;
      const double chord = 2.0 * A * B * std::sqrt(w2 - dt * dt) / w2;
      worst = std::max(worst, std::fabs(sp[k * g.n_det + d] - chord) / chord);
      ++count;
    }
  }
  REQUIRE(count > 100);
  return worst;
}

double psnr(const at::Tensor& rec, const at::Tensor& ref) {
  const double mse = (rec.to(at::kDouble) - ref.to(at::kDouble)).square().mean().item<double>();
  const double range = ref.max().item<double>() - ref.min().item<double>();
  return 10.0 * std::log10(range * range / mse);
}

at::Tensor phantom(int64_t n) {
  auto v = pnp::shepp_logan(n);
  return at::from_blob(v.data(), {n, n}, at::kFloat).to(at::kDouble).clone();
}

// Runs operator_norm on every box concurrently (one thread per box) with an in-process
// allreduce: the sum over boxes, in box order, so every "rank" sees the same result.
std::vector<double> distributed_norms(const Geometry& g, const std::vector<Box>& boxes, const PowerOptions& po,
                                      at::Device dev, at::ScalarType dt) {
  const size_t R = boxes.size();
  std::vector<at::Tensor*> slot(R);
  std::vector<at::Tensor> result(R);
  std::barrier sync(static_cast<std::ptrdiff_t>(R));
  std::vector<double> norms(R);
  std::vector<std::thread> th;
  for (size_t r = 0; r < R; ++r)
    th.emplace_back([&, r] {
      auto allreduce = [&](at::Tensor& t) {
        slot[r] = &t;
        sync.arrive_and_wait();
        auto sum = slot[0]->clone();
        for (size_t q = 1; q < R; ++q) sum += *slot[q];
        sync.arrive_and_wait();
        t.copy_(sum);
      };
      norms[r] = operator_norm(g, boxes[r], allreduce, po, dev, dt);
    });
  for (auto& t : th) t.join();
  return norms;
}
}  // namespace

TEST_CASE("geometry: standard defaults and validation") {
  auto g = Geometry::standard(256, 180);
  CHECK(g.n_det == 363);  // ceil(sqrt(2) * 256) = ceil(362.04)
  CHECK(g.n_angles() == 180);
  CHECK(g.angles_deg[90] == doctest::Approx(90.0));
  CHECK(Geometry::standard(4096, 100).n_det == 5793);
  CHECK(Geometry::standard(10, 4, 7).n_det == 7);
  CHECK_THROWS_AS(Geometry::standard(0, 4), pnp::InputError);
  auto a = g.angles_tensor(at::kCPU);
  CHECK((a.scalar_type() == at::kDouble));
  CHECK(a.size(0) == 180);
  CHECK(a.data_ptr<double>() == g.angles_tensor(at::kCPU).data_ptr<double>());  // cached
  g.angles_deg[1] = 7.5;  // the cache follows a change of the angles
  CHECK(g.angles_tensor(at::kCPU)[1].item<double>() == 7.5);
  double c, s;
  cos_sin_deg(45.0, c, s);
  CHECK(c == s);
  cos_sin_deg(90.0, c, s);
  CHECK(c == 0.0);
  CHECK(s == 1.0);
  cos_sin_deg(-90.0, c, s);
  CHECK(s == -1.0);
}

TEST_CASE("forward: every matrix entry equals the closed form max(0, a - |t_d - t_ij|) / a^2") {
  for (int64_t n_det : {9, 10}) {
    const int64_t n = 6;
    auto g = make_geometry(n, n_det, {0, 30, 45, 60, 90, 120, 135, 170.3, 200, 271, -45});
    auto e = at::zeros({n, n}, f64);
    double worst = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        e.zero_();
        e[i][j] = 1.0;
        auto col = forward(e, g, g.full_box());
        for (int64_t k = 0; k < g.n_angles(); ++k) {
          double c, s;
          cos_sin_deg(g.angles_deg[static_cast<size_t>(k)], c, s);
          const double a = std::max(std::fabs(c), std::fabs(s));
          const double t = (j - 0.5 * (n - 1)) * c + (0.5 * (n - 1) - i) * s + 0.5 * (n_det - 1);
          for (int64_t d = 0; d < n_det; ++d) {
            const double w = std::max(0.0, a - std::fabs(d - t)) / (a * a);
            worst = std::max(worst, std::fabs(col[k][d].item<double>() - w));
          }
        }
      }
    CHECK(worst < 1e-13);
  }
}

TEST_CASE("adjointness in float64 on the CPU over many sizes and angles (< 1e-12)") {
  at::manual_seed(1);
  struct Case {
    int64_t n, K, n_det;
  };
  const std::vector<Case> cases{{1, 1, 1},   {2, 3, 3},   {3, 4, 2},    {7, 5, 11},  {8, 8, 0},   {16, 9, 0},
                                {17, 13, 24}, {33, 17, 0}, {31, 7, 45}, {64, 12, 91}, {50, 31, 60}, {45, 6, 101}};
  for (const auto& cs : cases) {
    Geometry g = Geometry::standard(cs.n, cs.K, cs.n_det);
    // add the exact special angles and some odd ones
    for (double a : {0.0, 45.0, 90.0, 135.0, 180.0, 225.0, 270.0, 315.0, -30.0, 12.345, 89.999, 44.9999999})
      g.angles_deg.push_back(a);
    for (const Box& box : {g.full_box(), Box{0, cs.n, cs.n / 3, cs.n}, Box{cs.n / 4, (3 * cs.n + 3) / 4, 0, (cs.n + 1) / 2}}) {
      if (box.empty()) continue;
      auto x = at::rand({box.rows(), box.cols()}, f64) - 0.5;
      auto y = at::rand({g.n_angles(), g.n_det}, f64) - 0.5;
      const double e = adjointness(x, y, g, box);
      INFO("n=" << cs.n << " K=" << g.n_angles() << " n_det=" << g.n_det << " box=" << pnp::to_string(box));
      CHECK(e < 1e-12);
    }
  }
  // float32 CPU: the same operator to float rounding
  auto g = Geometry::standard(40, 11);
  auto x = at::rand({40, 40}, f32), y = at::rand({11, g.n_det}, f32);
  CHECK(adjointness(x, y, g, g.full_box()) < 1e-6);
  CHECK(rel_err(forward(x, g, g.full_box()), forward(x.to(at::kDouble), g, g.full_box())) < 1e-6);
  CHECK(rel_err(adjoint(y, g, g.full_box()), adjoint(y.to(at::kDouble), g, g.full_box())) < 1e-6);
}

TEST_CASE("analytic line integrals of a disc and an ellipse (within 1% in the interior)") {
  Geometry g = Geometry::standard(256, 16);
  for (double a : {0.0, 45.0, 90.0, 135.0, 22.5, 67.5}) g.angles_deg.push_back(a);
  const double disc = ellipse_projection_error(g, 90, 90, 0, 7, -5, 0.9);
  const double ell = ellipse_projection_error(g, 110, 60, 30, -6, 9, 0.9);
  MESSAGE("max relative chord error: disc " << disc << ", ellipse " << ell);
  CHECK(disc < 0.01);
  CHECK(ell < 0.01);
  // a uniform image: the mass of every projection is the image's mass (to O(1/n))
  auto one = at::ones({256, 256}, f64);
  auto mass = forward(one, g, g.full_box()).sum(1);
  CHECK(((mass / (256.0 * 256.0) - 1.0).abs().max().item<double>() < 0.01));
}

TEST_CASE("tiles: partial projections of slabs and grids sum to the full projection; adjoint restricts exactly") {
  at::manual_seed(2);
  for (int64_t n : {37, 24}) {
    auto g = make_geometry(n, n + 18, {0, 45, 90, 135, 13.7, 77, 101.2, 160, 33.3, 180, 270});
    auto x = at::rand({n, n}, f64) - 0.3;
    auto y = at::rand({g.n_angles(), g.n_det}, f64);
    auto full = forward(x, g, g.full_box());
    auto fullT = adjoint(y, g, g.full_box());
    std::vector<std::vector<Box>> partitions;
    for (int s = 1; s <= 7; ++s) partitions.push_back(grid_boxes(n, s, 1));
    partitions.push_back(grid_boxes(n, 2, 2));
    partitions.push_back(grid_boxes(n, 3, 2));
    partitions.push_back(grid_boxes(n, 2, 3));
    for (const auto& boxes : partitions) {
      auto sum = at::zeros_like(full);
      auto sum32 = at::zeros_like(full);
      for (const Box& b : boxes) {
        sum += forward(slice_box(x, b), g, b);
        sum32 += forward(slice_box(x, b).to(at::kFloat), g, b).to(at::kDouble);
        auto part = adjoint(y, g, b);
        CHECK(max_rel(part, slice_box(fullT, b)) < 1e-14);
        auto part32 = adjoint(y.to(at::kFloat), g, b);
        CHECK(max_rel(part32, slice_box(fullT, b)) < 1e-6);
      }
      INFO("n=" << n << " boxes=" << boxes.size());
      CHECK(max_rel(sum, full) < 1e-13);
      CHECK(max_rel(sum32, full) < 1e-5);
    }
  }
}

TEST_CASE("strided views and _out variants: poisoned outputs are fully written, nothing else is touched") {
  at::manual_seed(3);
  const int64_t n = 29;
  auto g = Geometry::standard(n, 14);
  for (auto dt : {at::kDouble, at::kFloat}) {
    const Box b{5, 21, 3, 26};
    auto parent = at::rand({n + 4, n + 9}, at::TensorOptions().dtype(dt));
    auto view = parent.slice(0, 2, 2 + b.rows()).slice(1, 4, 4 + b.cols());
    REQUIRE(view.stride(0) == n + 9);
    REQUIRE(!view.is_contiguous());
    auto ref = forward(view.contiguous(), g, b);
    auto out = at::full({g.n_angles(), g.n_det}, NAN, at::TensorOptions().dtype(dt));
    forward_out(view, g, b, out);
    CHECK(at::isfinite(out).all().item<bool>());
    CHECK(max_rel(out, ref) == 0.0);
    CHECK(max_rel(forward(view, g, b), ref) == 0.0);

    auto y = at::rand({g.n_angles(), g.n_det}, at::TensorOptions().dtype(dt));
    auto big = at::full({n + 4, n + 9}, NAN, at::TensorOptions().dtype(dt));
    auto oview = big.slice(0, 1, 1 + b.rows()).slice(1, 2, 2 + b.cols());
    adjoint_out(y, g, b, oview);
    CHECK(at::isfinite(oview).all().item<bool>());
    CHECK(max_rel(oview, adjoint(y, g, b)) == 0.0);
    CHECK(at::isnan(big).sum().item<int64_t>() == big.numel() - b.size());  // outside untouched
  }
  // wrong shapes are pnp::Errors
  auto x = at::rand({4, 5}, f64);
  CHECK_THROWS_AS(forward(x, g, Box{0, 5, 0, 5}), pnp::Error);
  CHECK_THROWS_AS(forward(at::rand({4, 5}, f64), g, Box{0, 4, 26, 31}), pnp::Error);
  auto bad = at::empty({3, 3}, f64);
  CHECK_THROWS_AS(adjoint(bad, g, g.full_box()), pnp::Error);
  auto wrong = at::empty({g.n_angles(), g.n_det}, f32);
  CHECK_THROWS_AS(forward_out(x, g, Box{0, 4, 0, 5}, wrong), pnp::Error);
}

TEST_CASE("slice batches: each slice as its own problem, the batch's adjoint exact (float64 < 1e-12)") {
  at::manual_seed(11);
  const int64_t n = 26, S = 3;
  const auto g = Geometry::standard(n, 12);
  for (const Box& b : {g.full_box(), Box{3, 19, 5, 26}}) {
    for (auto dt : {at::kDouble, at::kFloat}) {
      const auto opts = at::TensorOptions().dtype(dt);
      const at::Tensor x = at::rand({S, b.rows(), b.cols()}, opts) + 0.1;  // content, never zeros
      at::Tensor sino = at::full({S, g.n_angles(), g.n_det}, NAN, opts);   // poisoned
      forward_slices_out(x, g, b, sino);
      CHECK(at::isfinite(sino).all().item<bool>());
      at::Tensor y = at::rand({S, g.n_angles(), g.n_det}, opts);
      at::Tensor back = at::full({S, b.rows(), b.cols()}, NAN, opts);
      adjoint_slices_out(y, g, b, back);
      CHECK(at::isfinite(back).all().item<bool>());
      for (int64_t s = 0; s < S; ++s) {  // bit for bit what one slice alone gives
        CHECK(max_rel(sino[s], forward(x[s].contiguous(), g, b)) == 0.0);
        CHECK(max_rel(back[s], adjoint(y[s].contiguous(), g, b)) == 0.0);
      }
      CHECK(max_rel(forward_slices(x, g, b), sino) == 0.0);
      if (dt == at::kDouble) {
        // <A X, Y> = <X, A^T Y> over the whole batch
        const double lhs = dot64(sino, y), rhs = dot64(x, back);
        CHECK(std::fabs(lhs - rhs) / (norm64(sino) * norm64(y)) < 1e-12);
        // slices do not interact: a change in slice 1 leaves slices 0 and 2 of A X unchanged
        at::Tensor x2 = x.clone();
        x2[1].mul_(3.0);
        const at::Tensor sino2 = forward_slices(x2, g, b);
        CHECK(max_rel(sino2[0], sino[0]) == 0.0);
        CHECK(max_rel(sino2[2], sino[2]) == 0.0);
        CHECK(max_rel(sino2[1], sino[1] * 3.0) < 1e-14);
      }
    }
  }
  if (at::hasCUDA()) {  // on a GPU each slice is what it is on the CPU, to float64 rounding
    const at::Tensor x = at::rand({S, n, n}, f64) + 0.1;
    const at::Tensor gpu = forward_slices(x.to(at::kCUDA), g, g.full_box());
    CHECK(max_rel(gpu, forward_slices(x, g, g.full_box())) < 1e-12);
    const at::Tensor y = at::rand({S, g.n_angles(), g.n_det}, f64);
    CHECK(max_rel(adjoint_slices(y.to(at::kCUDA), g, g.full_box()), adjoint_slices(y, g, g.full_box())) < 1e-12);
  }
  CHECK_THROWS_WITH_AS(forward_slices(at::rand({S, n}, f64), g, g.full_box()),
                       doctest::Contains("contiguous [slices, 26, 26] tensor, got [3, 26]"), pnp::InputError);
  at::Tensor wrong = at::empty({S + 1, g.n_angles(), g.n_det}, f64);
  CHECK_THROWS_AS(forward_slices_out(at::rand({S, n, n}, f64), g, g.full_box(), wrong), pnp::Error);
}

TEST_CASE("FBP of the 256^2 Shepp-Logan with 180 angles reaches PSNR >= 25 dB") {
  const int64_t n = 256;
  auto g = Geometry::standard(n, 180);
  auto ref = phantom(n);
  auto sino = forward(ref, g, g.full_box());
  const double p_ramp = psnr(fbp(sino, g, g.full_box(), FbpFilter::ramp), ref);
  const double p_sl = psnr(fbp(sino, g, g.full_box(), FbpFilter::shepp_logan), ref);
  const double p_cos = psnr(fbp(sino, g, g.full_box(), FbpFilter::cosine), ref);
  MESSAGE("FBP PSNR: ramp " << p_ramp << " dB, shepp_logan " << p_sl << " dB, cosine " << p_cos << " dB");
  CHECK(p_ramp >= 25.0);
  CHECK(p_sl >= 24.0);
  CHECK(p_cos >= 22.0);
  // FBP is tile-aware too, and float32 agrees
  const Box b{40, 130, 100, 256};
  CHECK(max_rel(fbp(sino, g, b), slice_box(fbp(sino, g, g.full_box()), b)) < 1e-12);
  CHECK(psnr(fbp(sino.to(at::kFloat), g, g.full_box()), ref) >= 25.0);
  CHECK(parse_fbp_filter("shepp-logan") == FbpFilter::shepp_logan);
  CHECK_THROWS_AS(parse_fbp_filter("hann"), pnp::InputError);
  // the ramp response: zero-frequency value ~0 and |H| rising to ~1 at Nyquist
  auto H = fbp_filter_response(64, FbpFilter::ramp);
  CHECK(std::fabs(H[0].item<double>()) < 0.02);
  CHECK(H[32].item<double>() == doctest::Approx(1.0).epsilon(0.01));
}

TEST_CASE("power method against a dense float64 reference on a tiny problem") {
  const int64_t n = 6;
  auto g = Geometry::standard(n, 5);
  const int64_t M = g.n_angles() * g.n_det;
  auto A = at::zeros({M, n * n}, f64);
  auto e = at::zeros({n, n}, f64);
  for (int64_t p = 0; p < n * n; ++p) {
    e.zero_();
    e.view({-1})[p] = 1.0;
    A.select(1, p).copy_(forward(e, g, g.full_box()).view({-1}));
  }
  const double ref = at::linalg_eigvalsh(A.t().mm(A)).max().item<double>();
  PowerOptions po;
  po.tol = 1e-13;
  po.max_iterations = 5000;
  auto identity = [](at::Tensor&) {};
  const PowerResult r = operator_norm_detailed(g, g.full_box(), identity, po, at::kCPU, at::kDouble);
  MESSAGE("dense " << ref << " power " << r.norm << " after " << r.iterations << " iterations");
  CHECK(r.converged);
  CHECK(std::fabs(r.norm - ref) / ref < 1e-9);
  po.tol = 1e-7;
  const double n32 = operator_norm(g, g.full_box(), identity, po, at::kCPU, at::kFloat);
  CHECK(std::fabs(n32 - ref) / ref < 1e-4);
  // deterministic for a seed; the start vector depends only on the global pixel index
  CHECK(operator_norm(g, g.full_box(), identity, po, at::kCPU, at::kDouble) ==
        operator_norm(g, g.full_box(), identity, po, at::kCPU, at::kDouble));
  auto s_full = power_start(g.full_box(), n, 7);
  auto s_box = power_start(Box{2, 5, 1, 4}, n, 7);
  CHECK(at::equal(s_box, slice_box(s_full, Box{2, 5, 1, 4})));
  CHECK(!at::equal(s_full, power_start(g.full_box(), n, 8)));
  CHECK(at::equal(power_start(g.full_box(), n, 7, at::kCPU, at::kFloat), s_full.to(at::kFloat)));
}

TEST_CASE("operator norm does not depend on the decomposition") {
  auto g = Geometry::standard(48, 20);
  PowerOptions po = tight_power_options(42);
  const double one = single_rank_norm(g, po);
  for (const auto& boxes : {grid_boxes(48, 3, 1), grid_boxes(48, 2, 2), grid_boxes(48, 3, 2)}) {
    auto norms = distributed_norms(g, boxes, po, at::kCPU, at::kDouble);
    for (double v : norms) CHECK(std::fabs(v - one) / one < 1e-9);
  }
  // the step of the study: 0.99 / ||A^T A||; ||A^T A|| is of the order of K * n for this geometry
  CHECK(one > 0.3 * 20 * 48);
  CHECK(one < 3.0 * 20 * 48);
}

TEST_CASE("custom ops: callable through the dispatcher, Meta kernels give the shapes") {
  at::manual_seed(4);
  auto g = Geometry::standard(21, 9);
  const Box b{3, 17, 2, 20};
  auto fwd = c10::Dispatcher::singleton()
                 .findSchemaOrThrow("pnp::radon_forward", "")
                 .typed<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t, int64_t)>();
  auto adj = c10::Dispatcher::singleton()
                 .findSchemaOrThrow("pnp::radon_adjoint", "")
                 .typed<at::Tensor(const at::Tensor&, const at::Tensor&, int64_t, int64_t, int64_t, int64_t, int64_t,
                                   int64_t)>();
  auto x = at::rand({b.rows(), b.cols()}, f64);
  auto y = at::rand({g.n_angles(), g.n_det}, f64);
  auto angles = g.angles_tensor(at::kCPU);
  CHECK(at::equal(fwd.call(x, angles, g.n, g.n_det, b.r0, b.c0), forward(x, g, b)));
  CHECK(at::equal(adj.call(y, angles, g.n, g.n_det, b.r0, b.r1, b.c0, b.c1), adjoint(y, g, b)));
  // float32 angles on the op are accepted (converted)
  CHECK(max_rel(fwd.call(x, angles.to(at::kFloat), g.n, g.n_det, b.r0, b.c0), forward(x, g, b)) < 1e-6);
  // boxed call (what an exported graph's interpreter does)
  const auto& handle = c10::Dispatcher::singleton().findSchemaOrThrow("pnp::radon_forward", "");
  torch::jit::Stack stack{x, angles, g.n, g.n_det, b.r0, b.c0};
  handle.callBoxed(&stack);
  REQUIRE(stack.size() == 1);
  CHECK(at::equal(stack[0].toTensor(), forward(x, g, b)));
  // Meta
  auto mx = at::empty({b.rows(), b.cols()}, at::TensorOptions().dtype(at::kFloat).device(at::kMeta));
  auto ma = at::empty({g.n_angles()}, at::TensorOptions().dtype(at::kDouble).device(at::kMeta));
  auto mo = fwd.call(mx, ma, g.n, g.n_det, b.r0, b.c0);
  CHECK(mo.is_meta());
  CHECK((mo.sizes() == at::IntArrayRef({g.n_angles(), g.n_det})));
  CHECK((mo.scalar_type() == at::kFloat));
  auto my = at::empty({g.n_angles(), g.n_det}, at::TensorOptions().dtype(at::kDouble).device(at::kMeta));
  auto mz = adj.call(my, ma, g.n, g.n_det, b.r0, b.r1, b.c0, b.c1);
  CHECK(mz.is_meta());
  CHECK((mz.sizes() == at::IntArrayRef({b.rows(), b.cols()})));
  CHECK((mz.scalar_type() == at::kDouble));
  // the op checks its box
  CHECK_THROWS(fwd.call(x, angles, g.n, g.n_det, 10, 10));
}

#ifdef PNP_HAVE_CUDA
TEST_CASE("CUDA: equals the CPU reference, adjointness, tiles, poison, ops, FBP, power method") {
  if (!at::hasCUDA()) {
    MESSAGE("no CUDA device: skipped");
    return;
  }
  at::manual_seed(5);
  const at::Device dev(at::kCUDA, 0);
  struct Case {
    int64_t n, K, n_det;
  };
  for (const Case& cs : std::vector<Case>{{1, 3, 2}, {5, 4, 0}, {37, 11, 0}, {64, 16, 91}, {129, 30, 0},
                                          {200, 7, 150}, {333, 45, 0}, {512, 90, 0}}) {
    Geometry g = Geometry::standard(cs.n, cs.K, cs.n_det);
    for (double a : {0.0, 45.0, 90.0, 135.0, 270.0, 44.99, -17.0}) g.angles_deg.push_back(a);
    for (const Box& b : {g.full_box(), Box{cs.n / 3, cs.n, 0, cs.n}, Box{cs.n / 5, (4 * cs.n) / 5, cs.n / 4, (cs.n * 2 + 2) / 3}}) {
      if (b.empty()) continue;
      INFO("n=" << cs.n << " K=" << g.n_angles() << " n_det=" << g.n_det << " box=" << pnp::to_string(b));
      auto x = at::rand({b.rows(), b.cols()}, f64) - 0.25;
      auto y = at::rand({g.n_angles(), g.n_det}, f64) - 0.25;
      auto fx = forward(x, g, b), ay = adjoint(y, g, b);
      // float32 CUDA vs float64 CPU
      CHECK(rel_err(forward(x.to(dev, at::kFloat), g, b), fx) < 1e-5);
      CHECK(rel_err(adjoint(y.to(dev, at::kFloat), g, b), ay) < 1e-5);
      CHECK(adjointness(x.to(dev, at::kFloat), y.to(dev, at::kFloat), g, b) < 1e-5);
      // float64 CUDA vs float64 CPU and adjointness
      CHECK(rel_err(forward(x.to(dev), g, b), fx) < 1e-12);
      CHECK(rel_err(adjoint(y.to(dev), g, b), ay) < 1e-12);
      CHECK(adjointness(x.to(dev), y.to(dev), g, b) < 1e-12);
      // poisoned _out into a strided view
      auto out = at::full({g.n_angles(), g.n_det}, NAN, at::TensorOptions().dtype(at::kFloat).device(dev));
      auto parent = at::full({b.rows() + 2, b.cols() + 5}, NAN, at::TensorOptions().dtype(at::kFloat).device(dev));
      auto xin = parent.slice(0, 1, 1 + b.rows()).slice(1, 3, 3 + b.cols());
      xin.copy_(x);
      forward_out(xin, g, b, out);
      CHECK(at::isfinite(out).all().item<bool>());
      CHECK(rel_err(out, fx) < 1e-5);
      auto big = at::full({b.rows() + 3, b.cols() + 7}, NAN, at::TensorOptions().dtype(at::kFloat).device(dev));
      auto ov = big.slice(0, 2, 2 + b.rows()).slice(1, 1, 1 + b.cols());
      adjoint_out(y.to(dev, at::kFloat), g, b, ov);
      CHECK(at::isfinite(ov).all().item<bool>());
      CHECK(at::isnan(big).sum().item<int64_t>() == big.numel() - b.size());
      CHECK(rel_err(ov, ay) < 1e-5);
    }
  }
  // tiles on the GPU
  {
    auto g = Geometry::standard(301, 24);
    auto x = at::rand({301, 301}, at::TensorOptions().dtype(at::kFloat).device(dev));
    auto y = at::rand({24, g.n_det}, at::TensorOptions().dtype(at::kFloat).device(dev));
    auto full = forward(x, g, g.full_box());
    auto fullT = adjoint(y, g, g.full_box());
    for (const auto& boxes : {grid_boxes(301, 7, 1), grid_boxes(301, 2, 2), grid_boxes(301, 3, 2)}) {
      auto sum = at::zeros_like(full);
      for (const Box& b : boxes) {
        sum += forward(slice_box(x, b), g, b);
        CHECK(max_rel(adjoint(y, g, b), slice_box(fullT, b)) < 1e-5);  // float32: the tile origin changes the rounding
      }
      CHECK(max_rel(sum, full) < 1e-5);
    }
  }
  // ops through the dispatcher on CUDA, FBP, power method
  {
    auto g = Geometry::standard(256, 180);
    auto ref = phantom(256);
    auto sino = forward(ref.to(dev, at::kFloat), g, g.full_box());
    CHECK(sino.is_cuda());
    auto rec = fbp(sino, g, g.full_box());
    CHECK(rec.is_cuda());
    CHECK(psnr(rec.cpu(), ref) >= 25.0);
    PowerOptions po;
    po.tol = 1e-7;
    auto id = [](at::Tensor&) {};
    const double cpu = operator_norm(g, g.full_box(), id, po, at::kCPU, at::kDouble);
    const double gpu = operator_norm(g, g.full_box(), id, po, dev, at::kFloat);
    CHECK(std::fabs(cpu - gpu) / cpu < 1e-4);
    auto norms = distributed_norms(g, grid_boxes(256, 2, 1), po, dev, at::kFloat);
    for (double v : norms) CHECK(std::fabs(v - gpu) / gpu < 1e-4);
    // the start vector made on the GPU equals the CPU's bit for bit, on a box and in both dtypes
    for (const Box& b : {g.full_box(), Box{37, 101, 5, 250}}) {
      for (auto dt : {at::kFloat, at::kDouble}) {
        const at::Tensor on_gpu = power_start(b, 256, 11, dev, dt);
        CHECK(on_gpu.is_cuda());
        CHECK((on_gpu.scalar_type() == dt));
        const at::Tensor cpu_ref = power_start(b, 256, 11, at::kCPU, dt);
        CHECK(cpu_ref.min().item<double>() < 0.01);  // spread over [0, 1), not a constant
        CHECK(cpu_ref.max().item<double>() > 0.99);
        CHECK(at::equal(on_gpu.cpu(), cpu_ref));
      }
    }
  }
}
#endif
