// The cuDNN graph of a convolution and its epilogue (cudnn_epilogue.hpp).
#include "cudnn_epilogue.hpp"

#include "pnp/core.hpp"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cudnn/Handle.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <semaphore>
#include <thread>

namespace pnp::nn::native {

namespace {

namespace fe = cudnn_frontend;
using TensorPtr = std::shared_ptr<fe::graph::Tensor_attributes>;

fe::DataType_t fe_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return fe::DataType_t::FLOAT;
    case at::kBFloat16: return fe::DataType_t::BFLOAT16;
    case at::kHalf: return fe::DataType_t::HALF;
    case at::kFloat8_e4m3fn: return fe::DataType_t::FP8_E4M3;
    default: throw Error(std::string("cuDNN epilogue: unsupported dtype ") + c10::toString(t));
  }
}

void check(fe::error_t e, const char* step) {
  if (e.is_bad()) throw Error(std::string("cuDNN graph (conv + epilogue): ") + step + ": " + e.get_message());
}

cudnnHandle_t handle_on_current_stream() {
  cudnnHandle_t h = at::native::getCudnnHandle();
  if (cudnnSetStream(h, at::cuda::getCurrentCUDAStream()) != CUDNN_STATUS_SUCCESS)
    throw Error("cuDNN graph (conv + epilogue): cudnnSetStream failed");
  return h;
}

// Fixed tensor uids: a plan serialised in one process is executed with these in another.
enum Uid : int64_t { kX = 1, kW, kZ, kB, kY, kDescale };

class Impl final : public EpilogueConv {
 public:
  struct Probe {};  // the graph and cuDNN's heuristic order only, no plan built (candidate_indices)

  Impl(const EpilogueSpec& s, Probe) : has_bias_(s.b.defined()), has_z_(s.z.defined()), fp8_(s.descale.defined()) {
    define(s, handle_on_current_stream());
  }

  explicit Impl(const EpilogueSpec& s) : has_bias_(s.b.defined()), has_z_(s.z.defined()), fp8_(s.descale.defined()) {
    if (s.plan) {  // a serialised plan: no graph to build, no plans to time
      cudnnHandle_t h = handle_on_current_stream();
      check(g_.deserialize(h, *s.plan), "deserialize (plan cache)");
      check(g_.get_workspace_size(workspace_), "get_workspace_size");
      deserialized_ = true;
      if (g_.get_plan_name_at_index(0, engine_).is_bad()) engine_ = "(from the plan cache)";
      return;
    }
    cudnnHandle_t h = handle_on_current_stream();
    const int64_t count = define(s, h);
    if (s.index >= 0) {  // that plan only (a candidate, or the plan cache's choice if it is still the same one)
      if (s.index >= count)
        throw Error("cuDNN graph (conv + epilogue): no plan " + std::to_string(s.index) + " in cuDNN's heuristic order (" +
                    std::to_string(count) + " plans)");
      check(g_.build_plan_at_index(h, s.index), ("build plan " + std::to_string(s.index)).c_str());
      check(g_.get_plan_name_at_index(s.index, engine_), "get_plan_name");
      if (!s.engine.empty() && engine_ != s.engine)
        throw Error("cuDNN graph (conv + epilogue): plan " + std::to_string(s.index) + " is now " + engine_ + ", not " + s.engine);
      index_ = s.index;
      check(g_.get_workspace_size_plan_at_index(index_, workspace_), "get_workspace_size");
      if (workspace_ > workspace_cap(s))
        throw Error("cuDNN graph (conv + epilogue): plan " + std::to_string(s.index) + " (" + engine_ + ") wants " +
                    std::to_string(workspace_) + " bytes of workspace, over the cap of " + std::to_string(workspace_cap(s)));
      return;
    }
    // the first plans of the heuristic order that build, and precompiled ones further on,
    // then (with several) the fastest
    std::vector<int64_t> built;
    std::string why;
    // built, and within the workspace cap
    auto builds = [&](int64_t i) {
      fe::error_t e = g_.build_plan_at_index(h, i);
      int64_t bytes = 0;
      if (e.is_good()) e = g_.get_workspace_size_plan_at_index(i, bytes);
      if (e.is_good() && bytes <= workspace_cap(s)) return true;
      if (why.empty()) why = e.is_bad() ? e.get_message() : "workspace " + std::to_string(bytes) + " bytes over the cap";
      return false;
    };
    int64_t i = 0;
    for (; i < count && static_cast<int>(built.size()) < std::max(1, s.candidates); ++i)
      if (builds(i)) built.push_back(i);
    for (int64_t j : precompiled_from(i, s.precompiled))
      if (builds(j)) built.push_back(j);
    if (built.empty()) throw Error("cuDNN graph (conv + epilogue): no plan of " + std::to_string(count) + " builds: " + why);
    index_ = built[0];
    if (built.size() > 1) {
      int64_t most = 0;
      for (int64_t b : built) {
        int64_t bytes = 0;
        check(g_.get_workspace_size_plan_at_index(b, bytes), "get_workspace_size");
        most = std::max(most, bytes);
      }
      at::Tensor ws = at::empty({std::max<int64_t>(most, 1)}, s.x.options().dtype(at::kByte));
      auto pack = variant_pack(s.x, s.w, s.z, has_bias_ ? &s.b : nullptr, s.y, fp8_ ? &s.descale : nullptr);
      double best = std::numeric_limits<double>::infinity();
      for (int64_t b : built) {
        const double ms = time_on_stream_ms([&] { check(g_.execute_plan_at_index(h, pack, ws.data_ptr(), b), "execute"); });
        if (ms < best) best = ms, index_ = b;
      }
    }
    check(g_.get_workspace_size_plan_at_index(index_, workspace_), "get_workspace_size");
    check(g_.get_plan_name_at_index(index_, engine_), "get_plan_name");
    // the chosen plan as the graph's candidate (what serialize writes): already built, so this
    // only selects it
    check(g_.build_plan_at_index(h, index_), "select the chosen plan");
  }

  // The positions a parallel build tries: 0 .. k-1, then the first `precompiled` from k on.
  std::vector<int64_t> candidates(int k, int precompiled) const {
    const int64_t count = g_.get_execution_plan_count();
    std::vector<int64_t> r;
    for (int64_t i = 0; i < std::min<int64_t>(count, std::max(1, k)); ++i) r.push_back(i);
    for (int64_t j : precompiled_from(static_cast<int64_t>(r.size()), precompiled)) r.push_back(j);
    return r;
  }

 private:
  // Up to n positions from `from` on whose engines cuDNN does not compile at run time: they
  // build in milliseconds (the runtime-compiled ones, which head the order for most fused
  // graphs, take 0.2-0.7 s each), and ATen's benchmark found such engines faster for some of
  // DRUNet's conv + ReLU layouts (docs/performance.md#compile-time-and-the-plan-cache).
  std::vector<int64_t> precompiled_from(int64_t from, int n) const {
    std::vector<int64_t> r;
    const int64_t count = g_.get_execution_plan_count();
    for (int64_t i = from; i < count && static_cast<int>(r.size()) < n; ++i) {
      std::vector<fe::BehaviorNote_t> notes;
      if (g_.get_behavior_notes_for_plan_at_index(i, notes).is_bad()) continue;
      if (std::find(notes.begin(), notes.end(), fe::BehaviorNote_t::RUNTIME_COMPILATION) == notes.end()) r.push_back(i);
    }
    return r;
  }

  // The graph of the spec, its heuristic order (cuDNN's plans) and their support checked;
  // returns how many plans the order holds.
  int64_t define(const EpilogueSpec& s, cudnnHandle_t h) {
    // (FP8: the inputs carry their own type, and the rest is y's)
    const fe::DataType_t io = fe_type(fp8_ ? s.y.scalar_type() : s.x.scalar_type());
    if (fp8_ && (s.x.scalar_type() != at::kFloat8_e4m3fn || s.w.scalar_type() != at::kFloat8_e4m3fn ||
                 s.descale.scalar_type() != at::kFloat || s.descale.numel() != s.w.size(0)))
      throw Error("cuDNN graph (conv + epilogue): FP8 wants x and w in float8_e4m3fn and a float32 descale per output channel");
    g_.set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
    auto tensor = [&](const char* name, int64_t uid, const at::Tensor& t) {
      return g_.tensor(fe::graph::Tensor_attributes()
                           .set_name(name)
                           .set_uid(uid)
                           .set_dim(t.sizes().vec())
                           .set_stride(t.strides().vec())
                           .set_data_type(fe_type(t.scalar_type())));
    };
    const TensorPtr X = tensor("x", kX, s.x), W = tensor("w", kW, s.w);
    const std::vector<int64_t> dilation(s.stride.size(), 1);
    TensorPtr cur = g_.conv_fprop(X, W,
                                  fe::graph::Conv_fprop_attributes()
                                      .set_name("conv")
                                      .set_padding(s.padding)
                                      .set_stride(s.stride)
                                      .set_dilation(dilation)
                                      .set_compute_data_type(fe::DataType_t::FLOAT));
    auto pointwise = [&](fe::PointwiseMode_t mode) {
      return fe::graph::Pointwise_attributes().set_mode(mode).set_compute_data_type(fe::DataType_t::FLOAT);
    };
    // a [K] tensor as [1, K, 1, ...], broadcast over the image
    auto per_channel = [&](const char* name, int64_t uid, const at::Tensor& t) {
      const int64_t k = t.numel();
      std::vector<int64_t> dim(static_cast<size_t>(s.x.dim()), 1), stride(static_cast<size_t>(s.x.dim()), k);
      dim[1] = k;
      stride[1] = 1;
      return g_.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride).set_data_type(
          fe_type(t.scalar_type())));
    };
    if (fp8_) cur = g_.pointwise(cur, per_channel("descale", kDescale, s.descale), pointwise(fe::PointwiseMode_t::MUL).set_name("descale"));
    if (has_z_) cur = g_.pointwise(cur, tensor("z", kZ, s.z), pointwise(fe::PointwiseMode_t::ADD).set_name("residual"));
    if (has_bias_) cur = g_.pointwise(cur, per_channel("b", kB, s.b), pointwise(fe::PointwiseMode_t::ADD).set_name("bias"));
    if (s.relu)
      cur = g_.pointwise(cur, fe::graph::Pointwise_attributes()
                                  .set_name("relu")
                                  .set_mode(fe::PointwiseMode_t::RELU_FWD)
                                  .set_compute_data_type(fe::DataType_t::FLOAT));
    cur->set_output(true).set_uid(kY).set_dim(s.y.sizes().vec()).set_stride(s.y.strides().vec()).set_data_type(fe_type(s.y.scalar_type()));

    check(g_.validate(), "validate");
    check(g_.build_operation_graph(h), "build_operation_graph");
    check(g_.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK}), "create_execution_plans");
    // compile.tf32 = false: no engine that rounds float32 inputs (TF32 tensor cores)
    if (!fp8_ && io == fe::DataType_t::FLOAT && !s.tf32)
      g_.deselect_numeric_notes({fe::NumericalNote_t::TENSOR_CORE, fe::NumericalNote_t::DOWN_CONVERT_INPUTS});
    check(g_.check_support(h), "check_support");
    return g_.get_execution_plan_count();
  }

 public:
  int64_t workspace_bytes() const override { return workspace_; }
  std::string engine() const override { return engine_; }
  int64_t index() const override { return deserialized_ ? -1 : index_; }

  void run(const at::Tensor& x, const at::Tensor& w, const at::Tensor& z, const at::Tensor* b, at::Tensor& y,
           void* workspace, const at::Tensor* descale) override {
    // (a deserialised graph does not say what it has: cuDNN rejects a pack without its tensors)
    if (!deserialized_ && (has_bias_ != (b != nullptr) || has_z_ != z.defined() || fp8_ != (descale != nullptr)))
      throw Error("cuDNN graph (conv + epilogue): bias, residual or FP8 descale given where the graph has none, or not given");
    auto pack = variant_pack(x, w, z, b, y, descale);
    if (deserialized_)
      check(g_.execute(handle_on_current_stream(), pack, workspace), "execute");
    else
      check(g_.execute_plan_at_index(handle_on_current_stream(), pack, workspace, index_), "execute");
  }

  std::vector<uint8_t> serialize() const override {
    std::vector<uint8_t> data;
    if (g_.serialize(data, /*serialize_structure=*/false).is_bad()) data.clear();
    return data;
  }

 private:
  std::unordered_map<int64_t, void*> variant_pack(const at::Tensor& x, const at::Tensor& w, const at::Tensor& z,
                                                  const at::Tensor* b, const at::Tensor& y, const at::Tensor* descale) const {
    std::unordered_map<int64_t, void*> p{{kX, x.data_ptr()}, {kW, w.data_ptr()}, {kY, y.data_ptr()}};
    if (z.defined()) p.emplace(kZ, z.data_ptr());
    if (b) p.emplace(kB, b->data_ptr());
    if (descale) p.emplace(kDescale, descale->data_ptr());
    return p;
  }

  fe::graph::Graph g_;  // its tensors carry the fixed uids (Uid), which the variant pack uses
  bool has_bias_ = false, has_z_ = false, fp8_ = false, deserialized_ = false;
  int64_t index_ = 0;  // the plan run (built here; a deserialised graph runs its one plan)
  int64_t workspace_ = 0;
  std::string engine_;
};

// The builds running at once, over all calls: at most the machine's cores.
std::counting_semaphore<>& build_slots() {
  static std::counting_semaphore<> slots(std::max<std::ptrdiff_t>(1, std::thread::hardware_concurrency()));
  return slots;
}

at::Tensor meta_like(const at::Tensor& t) {
  return t.defined() ? at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kMeta)) : at::Tensor();
}

}  // namespace

std::unique_ptr<EpilogueConv> make_epilogue_conv(const EpilogueSpec& spec) { return std::make_unique<Impl>(spec); }

std::future<std::vector<EpilogueCandidate>> build_epilogue_candidates(const EpilogueSpec& spec, int device) {
  EpilogueSpec meta = spec;  // the layout only: the caller's tensors stay the caller's
  meta.x = meta_like(spec.x), meta.w = meta_like(spec.w), meta.z = meta_like(spec.z), meta.b = meta_like(spec.b),
  meta.y = meta_like(spec.y), meta.descale = meta_like(spec.descale);
  meta.plan = nullptr, meta.engine.clear();
  if (device < 0) device = at::cuda::current_device();
  // one candidate's build, in a slot
  auto build = [device](EpilogueSpec one, int64_t i) {
    EpilogueCandidate c;
    c.index = i;
    build_slots().acquire();
    const auto t0 = std::chrono::steady_clock::now();
    try {
      const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
      one.index = i, one.candidates = 1, one.precompiled = 0;
      c.conv = make_epilogue_conv(one);
    } catch (const std::exception& e) {
      const std::string msg = e.what();
      c.why = msg.substr(0, msg.find('\n'));
    }
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    build_slots().release();
    return c;
  };
  return std::async(std::launch::async, [meta, device, build]() {
    // which positions (holding a slot), then their builds (this thread waits outside the slots)
    std::vector<int64_t> indices;
    std::vector<EpilogueCandidate> out;
    build_slots().acquire();
    try {
      const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
      indices = Impl(meta, Impl::Probe{}).candidates(meta.candidates, meta.precompiled);
    } catch (const std::exception& e) {
      EpilogueCandidate c;
      const std::string msg = e.what();
      c.why = msg.substr(0, msg.find('\n'));
      out.push_back(std::move(c));
    }
    build_slots().release();
    std::vector<std::future<EpilogueCandidate>> builds;
    for (int64_t i : indices) builds.push_back(std::async(std::launch::async, build, meta, i));
    for (auto& f : builds) out.push_back(f.get());
    return out;
  });
}

std::string epilogue_environment(int device) {
  const cudaDeviceProp* p = at::cuda::getDeviceProperties(device < 0 ? at::cuda::current_device() : device);
  return std::string("gpu=") + p->name + " sm" + std::to_string(p->major * 10 + p->minor) +
         " cudnn=" + std::to_string(cudnnGetVersion()) + " cudnn_frontend=" + std::to_string(CUDNN_FRONTEND_VERSION);
}

std::vector<double> time_on_stream_ms(const std::vector<std::function<void()>>& fns, int reps) {
  for (const auto& fn : fns) fn();
  at::cuda::CUDAEvent start(cudaEventDefault), stop(cudaEventDefault);
  std::vector<double> best(fns.size(), std::numeric_limits<double>::infinity());
  for (int r = 0; r < std::max(1, reps); ++r)
    for (size_t k = 0; k < fns.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(r)) % fns.size();  // each round from the next one
      start.record();
      fns[i]();
      stop.record();
      stop.synchronize();
      best[i] = std::min(best[i], static_cast<double>(start.elapsed_time(stop)));
    }
  return best;
}

double time_on_stream_ms(const std::function<void()>& fn, int reps) { return time_on_stream_ms(std::vector{fn}, reps)[0]; }

}  // namespace pnp::nn::native
