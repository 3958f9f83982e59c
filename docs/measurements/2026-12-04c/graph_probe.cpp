// 2026-12-04c probe 2: which cuDNN graph (frontend v1) of conv + residual add reaches the
// precompiled xmma kernel that cudnnConvolutionBiasActivationForward ran with its z input
// (beta_probe.cu), rather than the runtime-compiled engine 4 that pnp's graph gets today?
// For each graph form: cuDNN's heuristic order (modes A and FALLBACK), each plan's engine and
// whether cuDNN compiles it at run time; the precompiled plans (and the order's first) built and
// timed, median of 3 rounds of 10, the output checked against conv then add.
//   g++ -O2 -std=c++20 -I$FE -I$CUDNN/include -I$CUDA/include graph_probe.cpp -L$CUDNN/lib -l:libcudnn.so.9 -lcudart
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cudnn_frontend.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

namespace fe = cudnn_frontend;

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

template <class T>
static void fill_host(std::vector<T>& v, unsigned seed, float scale) {
  unsigned s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = T((float((s >> 8) & 0xffff) / 32768.f - 1.f) * scale);
  }
}

enum { kX = 1, kW, kZ, kB, kY };

template <class T>
static void run(cudnnHandle_t h, int C, int H, fe::DataType_t io, const char* dname) {
  const size_t n = size_t(C) * H * H, nw = size_t(C) * C * 9;
  std::vector<T> hx(n), hw(nw), hz(n), hb(C, T(0.f));
  fill_host(hx, 1, 1.f), fill_host(hw, 2, 1.f / std::sqrt(9.f * C)), fill_host(hz, 3, 1.f);
  T *x, *w, *z, *b, *y, *ref;
  CK(cudaMalloc(&x, n * sizeof(T)));
  CK(cudaMalloc(&w, nw * sizeof(T)));
  CK(cudaMalloc(&z, n * sizeof(T)));
  CK(cudaMalloc(&b, C * sizeof(T)));
  CK(cudaMalloc(&y, n * sizeof(T)));
  CK(cudaMalloc(&ref, n * sizeof(T)));
  CK(cudaMemcpy(x, hx.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(w, hw.data(), nw * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(z, hz.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, hb.data(), C * sizeof(T), cudaMemcpyHostToDevice));
  void* ws = nullptr;
  const int64_t ws_max = int64_t(1) << 30;
  CK(cudaMalloc(&ws, ws_max));
  const double tflop = 2.0 * C * C * 9 * double(H) * H / 1e12;
  std::printf("== %s C=%d %dx%d\n", dname, C, H, H);

  // forms: residual add only; + zero bias; + zero bias + identity; + zero bias + relu; bias before z; z + relu
  const char* forms[] = {"conv>z", "conv>z>bias", "conv>z>bias>identity", "conv>z>bias>relu", "conv>bias>z", "conv>z>relu",
                         "conv only"};
  const size_t ns = std::min(n, size_t(1) << 24);  // the checked prefix
  std::vector<T> hy(ns), href(ns);
  bool have_ref = false;
  for (int f : {6, 0, 1, 2, 3, 4, 5}) {
    fe::graph::Graph g;
    g.set_io_data_type(io).set_intermediate_data_type(fe::DataType_t::FLOAT).set_compute_data_type(fe::DataType_t::FLOAT);
    auto T4 = [&](const char* name, int64_t uid, std::vector<int64_t> dim, std::vector<int64_t> stride) {
      return g.tensor(fe::graph::Tensor_attributes().set_name(name).set_uid(uid).set_dim(dim).set_stride(stride).set_data_type(io));
    };
    const std::vector<int64_t> dimx{1, C, H, H}, strx{int64_t(C) * H * H, 1, int64_t(C) * H, C};
    auto X = T4("x", kX, dimx, strx);
    auto W = T4("w", kW, {C, C, 3, 3}, {int64_t(C) * 9, 1, int64_t(C) * 3, C});
    auto add = [] { return fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::ADD).set_compute_data_type(fe::DataType_t::FLOAT); };
    auto cur = g.conv_fprop(X, W,
                            fe::graph::Conv_fprop_attributes().set_padding({1, 1}).set_stride({1, 1}).set_dilation({1, 1}).set_compute_data_type(
                                fe::DataType_t::FLOAT));
    auto Z = [&] { return T4("z", kZ, dimx, strx); };
    auto B = [&] { return T4("b", kB, {1, C, 1, 1}, {C, 1, C, C}); };
    const bool uses_b = f >= 1 && f <= 4;
    switch (f) {
      case 0: cur = g.pointwise(cur, Z(), add()); break;
      case 1: cur = g.pointwise(g.pointwise(cur, Z(), add()), B(), add()); break;
      case 2:
        cur = g.pointwise(g.pointwise(g.pointwise(cur, Z(), add()), B(), add()),
                          fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::IDENTITY).set_compute_data_type(fe::DataType_t::FLOAT));
        break;
      case 3:
        cur = g.pointwise(g.pointwise(g.pointwise(cur, Z(), add()), B(), add()),
                          fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD).set_compute_data_type(fe::DataType_t::FLOAT));
        break;
      case 4: cur = g.pointwise(g.pointwise(cur, B(), add()), Z(), add()); break;
      case 5:
        cur = g.pointwise(g.pointwise(cur, Z(), add()),
                          fe::graph::Pointwise_attributes().set_mode(fe::PointwiseMode_t::RELU_FWD).set_compute_data_type(fe::DataType_t::FLOAT));
        break;
      case 6: break;
    }
    cur->set_output(true).set_uid(kY).set_dim(dimx).set_stride(strx).set_data_type(io);
    auto e = g.validate();
    if (e.is_good()) e = g.build_operation_graph(h);
    if (e.is_good()) e = g.create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK});
    if (e.is_good()) e = g.check_support(h);
    if (e.is_bad()) {
      std::printf("%s %s: %s\n", dname, forms[f], e.get_message().c_str());
      continue;
    }
    const int64_t count = g.get_execution_plan_count();
    std::printf("%s %s: %lld plans:", dname, forms[f], (long long)count);
    std::vector<int64_t> try_;
    for (int64_t i = 0; i < count; ++i) {
      std::string name;
      g.get_plan_name_at_index(i, name);
      std::vector<fe::BehaviorNote_t> notes;
      g.get_behavior_notes_for_plan_at_index(i, notes);
      const bool rtc = std::find(notes.begin(), notes.end(), fe::BehaviorNote_t::RUNTIME_COMPILATION) != notes.end();
      std::printf(" [%lld %s%s]", (long long)i, name.c_str(), rtc ? " rtc" : "");
      if ((!rtc || i == 0) && try_.size() < 6) try_.push_back(i);
    }
    std::printf("\n");
    std::unordered_map<int64_t, void*> pack{{kX, x}, {kW, w}, {kY, y}};
    if (f != 6) pack.emplace(kZ, z);
    if (uses_b) pack.emplace(kB, b);
    for (int64_t i : try_) {
      std::string name;
      g.get_plan_name_at_index(i, name);
      const auto t0 = std::chrono::steady_clock::now();
      auto be = g.build_plan_at_index(h, i);
      const double build_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (be.is_bad()) {
        std::printf("  plan %lld %s: build failed (%.3f s): %s\n", (long long)i, name.c_str(), build_s, be.get_message().c_str());
        continue;
      }
      int64_t wsb = 0;
      g.get_workspace_size_plan_at_index(i, wsb);
      if (wsb > ws_max) {
        std::printf("  plan %lld %s: workspace %lld too large\n", (long long)i, name.c_str(), (long long)wsb);
        continue;
      }
      CK(cudaMemset(y, 0xff, n * sizeof(T)));  // poison
      auto ee = g.execute_plan_at_index(h, pack, ws, i);
      CK(cudaDeviceSynchronize());
      if (ee.is_bad()) {
        std::printf("  plan %lld %s: execute failed: %s\n", (long long)i, name.c_str(), ee.get_message().c_str());
        continue;
      }
      // check: f == 6 (conv only) is the reference conv; the others against ref + z (relu where the form has one)
      CK(cudaMemcpy(hy.data(), y, ns * sizeof(T), cudaMemcpyDeviceToHost));
      double worst = 0;
      if (f == 6 && !have_ref) href = hy, have_ref = true;
      if (have_ref)
        for (size_t k = 0; k < ns; k += 97) {
          double want = f == 6 ? double(float(href[k])) : double(float(href[k])) + double(float(hz[k]));
          if (f == 3 || f == 5) want = std::max(want, 0.0);
          worst = std::max(worst, std::fabs(double(float(hy[k])) - want) / std::max(1.0, std::fabs(want)));
        }
      cudaEvent_t a, bb;
      cudaEventCreate(&a), cudaEventCreate(&bb);
      std::vector<float> t;
      for (int r = 0; r < 3; ++r) {
        g.execute_plan_at_index(h, pack, ws, i);
        cudaEventRecord(a);
        for (int k = 0; k < 10; ++k) g.execute_plan_at_index(h, pack, ws, i);
        cudaEventRecord(bb);
        cudaEventSynchronize(bb);
        float ms;
        cudaEventElapsedTime(&ms, a, bb);
        t.push_back(ms / 10);
      }
      std::sort(t.begin(), t.end());
      std::printf("  plan %lld %s: built in %.3f s, %.3f ms (%.0f TFLOP/s), ws %.1f MB, rel diff %s\n", (long long)i,
                  name.c_str(), build_s, t[1], tflop / t[1] * 1e3, wsb / 1e6,
                  have_ref ? std::to_string(worst).c_str() : "(no reference yet)");
      std::fflush(stdout);
    }
  }
  cudaFree(x), cudaFree(w), cudaFree(z), cudaFree(b), cudaFree(y), cudaFree(ref), cudaFree(ws);
}

int main() {
  cudnnHandle_t h;
  cudnnCreate(&h);
  std::printf("cuDNN %zu, frontend %d\n", cudnnGetVersion(), CUDNN_FRONTEND_VERSION);
  const int shapes[4][2] = {{128, 2048}, {256, 1024}, {512, 512}, {64, 4096}};
  for (auto& s : shapes) run<float>(h, s[0], s[1], fe::DataType_t::FLOAT, "fp32");
  for (auto& s : shapes) run<__nv_bfloat16>(h, s[0], s[1], fe::DataType_t::BFLOAT16, "bf16");
  cudnnDestroy(h);
}
