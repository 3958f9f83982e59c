// The layer halo under mpiexec (1 to 4 ranks): each rank runs only its own tile of DnCNN, DRUNet
// and UNet, exchanging each conv's halo with its neighbours, and its tile of the result must be
// the 1-rank result's (computed whole on every rank as the reference): to 1e-12 in float64 and
// 1e-6 relative in float32, for the eager and the native executor (growing copies, and copy-free
// over LayerExchange's strips and over the default strips), for row slabs and grids,
// on sizes that are not multiples of the networks' alignment. The exchange's counted traffic
// must be what the communicator sent, and the counted FLOPs must have no redundancy.
#include "pnp_test.hpp"

#include <ATen/ATen.h>

#include <cmath>

#include "pnp/layer_exchange.hpp"
#include "pnp/nn/models.hpp"
#include "pnp/nn/native.hpp"
#include "pnp/roofline.hpp"

using namespace pnp;

namespace {
int world_rank() { int r; MPI_Comm_rank(MPI_COMM_WORLD, &r); return r; }
int world_size() { int s; MPI_Comm_size(MPI_COMM_WORLD, &s); return s; }

nn::Graph small_net(const std::string& arch) {
  nn::DenoiserSpec s;
  s.architecture = arch;
  if (arch == "dncnn") s.features = {6}, s.blocks = 5;
  if (arch == "drunet") s.features = {4, 6, 8, 10}, s.blocks = 1;
  if (arch == "unet") s.features = {4, 6, 8};
  return nn::build(s);
}

// The decompositions of this rank count: row slabs, and every grid with more than one column.
std::vector<std::pair<std::string, std::vector<int64_t>>> layouts(int ranks) {
  std::vector<std::pair<std::string, std::vector<int64_t>>> l{{"slabs", {}}};
  for (int64_t c = 2; c <= ranks; ++c)
    if (ranks % c == 0) l.push_back({"grid", {ranks / c, c}});
  return l;
}

// An exchanger with exchange_strips() only: start_strips / finish_strips are HaloExchanger's
// defaults (nothing started, all of it in finish).
class StripsOnly final : public nn::HaloExchanger {
 public:
  explicit StripsOnly(LayerExchange& ex) : ex_(ex) {}
  nn::HaloStrips exchange_strips(const nn::Node& h, const at::Tensor& tile) override { return ex_.exchange_strips(h, tile); }

 private:
  LayerExchange& ex_;
};

double rel_max(const at::Tensor& a, const at::Tensor& ref) {
  return (a.to(at::kDouble) - ref.to(at::kDouble)).abs().max().item<double>() /
         ref.to(at::kDouble).abs().max().item<double>();
}
}  // namespace

TEST_CASE("layer halo: every rank's tile equals the 1-rank result (eager and native, float64 and float32)") {
  const int R = world_size(), me = world_rank();
  auto comm = make_communicator("mpi", MPI_COMM_WORLD, at::kCPU, 1, 0);
  for (const std::string arch : {"dncnn", "drunet", "unet"}) {
    const nn::Graph g = small_net(arch);
    const nn::Weights w = nn::init_weights(g, 7);
    for (const int64_t n : {44, 61}) {  // neither a multiple of 8
      at::Tensor x = at::rand({1, 1, n, n}, at::TensorOptions().dtype(at::kDouble)) * 0.8 + 0.1;
      MPI_Bcast(x.data_ptr(), static_cast<int>(x.numel()), MPI_DOUBLE, 0, MPI_COMM_WORLD);  // the same image on every rank
      for (const at::ScalarType dt : {at::kDouble, at::kFloat}) {
        const at::Tensor ref = nn::make_eager(g, w, at::kCPU, dt)->forward(x.to(dt), 0.05);
        REQUIRE(ref.std().item<double>() > 1e-3);  // an image with content, not a flat one
        for (const auto& [kind, grid] : layouts(R)) {
          const Decomposition d = plan_decomposition(n, R, kind, grid, 0, g.alignment(), true);
          const Box own = d.tile(me).own;
          CHECK(own.r0 % g.alignment() == 0);
          CHECK(own.c0 % g.alignment() == 0);
          LayerExchange ex(*comm, d);
          const nn::Graph gl = nn::with_layer_halos(g, ex.axes());
          if (R == 1) CHECK(gl.to_json() == g.to_json());  // one rank: the graph is unchanged
          const at::Tensor xt = x.narrow(2, own.r0, own.rows()).narrow(3, own.c0, own.cols()).to(dt).contiguous();
          const at::Tensor rt = ref.narrow(2, own.r0, own.rows()).narrow(3, own.c0, own.cols());
          StripsOnly strips_only(ex);
          // eager (HaloExchanger::exchange into the grown tensor); native growing a copy at every
          // halo node; native copy-free over LayerExchange's start_strips / finish_strips;
          // native copy-free over the default start_strips / finish_strips
          for (const int variant : {0, 1, 2, 3}) {
            CAPTURE(arch);
            CAPTURE(n);
            CAPTURE(kind);
            CAPTURE(d.grid_cols);
            CAPTURE(variant);
            CAPTURE(c10::toString(dt));
            std::unique_ptr<nn::Executor> e;
            if (variant > 0) {
              nn::NativeOptions o;
              o.exchanger = variant == 3 ? static_cast<nn::HaloExchanger*>(&strips_only) : &ex;
              o.copy_free_halo = variant >= 2;
              o.copy_free_min_bytes = 0;  // these tiles are small: copy-free at every halo
              e = nn::make_native(gl, w, at::kCPU, dt, xt.sizes().vec(), o);
            } else {
              e = nn::make_eager(gl, w, at::kCPU, dt, &ex);
            }
            const int64_t before = comm->bytes_sent();
            const at::Tensor y = e->forward(xt, 0.05);
            const int64_t sent = comm->bytes_sent() - before;
            REQUIRE(y.sizes() == rt.sizes());
            CHECK(rel_max(y, rt) <= (dt == at::kDouble ? 1e-12 : 1e-6));
            // What the counter says one forward sends is what the communicator sent.
            const auto traffic = nn::layer_halo_traffic(gl, nn::infer_shapes(gl, xt.sizes().vec()), at::elementSize(dt));
            CHECK(traffic.bytes == sent);
            if (R > 1) CHECK(traffic.messages > 0);
          }
          // No redundant work: the ranks' conv FLOPs add up to the 1-rank FLOPs, up to the pad
          // of the last tile on each axis (the same pad the whole image gets).
          const double mine = roofline::count(gl, {1, 1, own.rows(), own.cols()}).flops;
          double all = 0;
          MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
          const double whole = roofline::count(g, {1, 1, n, n}).flops;
          CHECK(all == doctest::Approx(whole).epsilon(1e-12));
        }
      }
    }
  }
}

TEST_CASE("layer halo: what it cannot split is refused with a clear error") {
  nn::Graph g = small_net("dncnn");
  for (auto& node : g.nodes)
    if (node.op == nn::OpKind::conv) node.attrs.padding = {0, 0}, node.attrs.kernel = {1, 1}, node.attrs.stride = {2, 2};
  CHECK_THROWS_AS(nn::with_layer_halos(g, {{true, true, false}, {false, false, false}}), InputError);
  // An axis that is not split keeps its padding; a split one moves it into the halo node.
  const nn::Graph d = small_net("dncnn");
  const nn::Graph l = nn::with_layer_halos(d, {{true, false, true}, {false, false, false}});
  int halos = 0;
  for (const auto& node : l.nodes) {
    if (node.op == nn::OpKind::halo) {
      ++halos;
      CHECK(node.attrs.halo_lo == std::vector<int64_t>{1, 0});
      CHECK(node.attrs.halo_peer_hi == std::vector<int64_t>{1, 0});
      CHECK(node.attrs.halo_peer_lo == std::vector<int64_t>{0, 0});
    }
    if (node.op == nn::OpKind::conv) CHECK(node.attrs.padding == std::vector<int64_t>{0, 1});
  }
  CHECK(halos == 5);  // one per 3x3 conv
}
