// The native backend: compiles an IR graph for one fixed input shape, device and dtype into an
// Executor, in C++ only (docs/design.md, "Compile placement and backend").
//
// What compile does (planned by src/nn/native/plan.cpp, a pure function of the IR and the shapes;
// carried out by src/nn/native/native.cpp and the files beside it, one a job, src/nn/native/impl.hpp):
//  - Folds every inference batch norm into the convolution before it (when the BN is the
//    conv's only reader), in float64, then casts the weights to the executor's dtype.
//  - Fuses, by pattern over the IR, never changing the function:
//      conv(+bias)(+folded BN) -> relu              "conv+bias+relu" / "conv+relu" / "conv+bn+relu"
//                                                   CUDA float32: at::cudnn_convolution_relu
//      conv(+bias) -> add(., z) -> relu             "conv+add+relu" (+bias/+bn variants)
//                                                   CUDA float32: at::cudnn_convolution_add_relu
//      conv(+bias) -> add(., z), no ReLU after      "conv+add" (+bias/+bn variants): the add is
//                                                   done in place into the conv's output (an
//                                                   epilogue; cuDNN exposes no identity-activation
//                                                   conv+add through ATen).
//    Each pattern needs the intermediate result to have exactly one reader. DRUNet's ResBlock
//    (x + conv(relu(conv(x))), no ReLU after the add) therefore gets conv+relu and conv+add, and
//    none of the three reference architectures has an add followed by a ReLU. On CPU (and for
//    float64 on CUDA) the same plan runs with generic ops: conv, then relu_ / add_ in place.
//  - Channels-last activations and weights (ChannelsLast / ChannelsLast3d).
//  - Preallocated activation buffers: a liveness pass over the topological order assigns every
//    value that an op with a true `out=` kernel writes (add, concat, upsample, pad, standalone
//    ReLU) to a slot, reusing slots whose values are dead; slots are allocated once at compile
//    time. Convolutions write where cuDNN puts them (ATen's `.out` overloads of the fused cuDNN
//    ops are generated wrappers that copy), and every value is released right after its last
//    reader. With the CUDA graph, all of this is captured once: the graph's private memory pool
//    holds every activation at a fixed address, reused on every replay.
//  - Autotuning at compile time, in a warm-up run (CUDA): every convolution may run as a cuDNN
//    graph with its epilogue (bias, residual add, ReLU) in one kernel, built with the cuDNN
//    frontend; per layout, cuDNN's first three plans are built in parallel and timed, and the
//    fastest against the generic ops (NativeOptions::cudnn_epilogues, cudnn_graph_convs). With
//    cudnn_benchmark, ATen's cuDNN benchmark mode also picks the generic ops' algorithms
//    (at::globalContext().benchmarkCuDNN(), restored afterwards).
//  - A persistent plan cache (NativeOptions::plan_cache_dir) of those choices and plans; with
//    the network's whole list in it (and no ATen benchmark), a compile loads every plan and
//    captures the forward with no warm-up run.
//  - Optional CUDA graph of the whole forward (at::cuda::CUDAGraph, captured on a side stream).
//    forward() copies x into a static input buffer and writes sigma into a one-element device
//    buffer (no host sync; the σ map is an expanded view of it, so a replay sees the new σ),
//    replays, and returns a fresh contiguous (NCHW / NCDHW) clone of the static output: the
//    result is never overwritten by a later call.
//  - TF32: PyTorch's defaults are kept (cuDNN may use TF32 for float32 convolutions, as the
//    eager executor does); compiled and eager therefore agree to TF32 rounding on the GPU.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include "pnp/nn/executor.hpp"

namespace pnp::nn {

// Whether pnp's sm_90-only kernels are on by default: false when the environment variable
// PNP_KERNELS is "portable" (the path an A100 takes, on any GPU: scripts/gpu_check.sh runs the
// check tier both ways), true when it is unset, empty or "hopper"; InputError for another value.
bool hopper_kernels_default();

struct NativeOptions {
  bool channels_last = true;
  bool fuse = true;        // pattern fusions (BN folding is always done; src/nn/native/plan.hpp lists them)
  bool autotune = true;    // measured choices in the compile warm-up (CUDA): cuDNN benchmark mode, epilogues
  bool cuda_graph = true;  // capture the whole forward as one CUDA graph (CUDA)
  int warmup_calls = 1;    // compile-time warm-up runs (autotuning, validation) before capture
  // The warm-up runs in the first forward instead, on its input, and returns that output; the
  // graph is captured after it. The first call is then the warm-up rather than one more
  // forward: pnp_recon sets it (study_4096 at 4096²: one DRUNet forward, about 0.3 s, less in
  // the first iteration). compile_seconds() counts make_native and the capture only.
  bool warm_up_on_first_call = false;
  // bf16 on CUDA: also use cuDNN's fused conv+ReLU / conv+add+ReLU (float32 always does). An
  // op cuDNN rejects falls back to generic ops during the warm-up (see notes()). On by default:
  // DRUNet 4096² bf16 153 ms fused against 166 ms generic, same accuracy (H200, docs/performance.md#native-kernels).
  bool cudnn_fused_bf16 = true;
  // CUDA, float32 and bf16 (with cudnn_fused_bf16), with autotune: a convolution followed by
  // a residual add and no ReLU (a residual block's second convolution) may run as one cuDNN
  // graph built with the cuDNN frontend, the add in the convolution's epilogue, instead of the
  // convolution, then add_. Chosen per layout by timing in the warm-up: the fastest of cuDNN's
  // first three plans against the two ops (notes() gives both times). Only in builds that found
  // the frontend's headers (native_has_cudnn_epilogues()). Without autotune it is not used:
  // cuDNN's first plan was slower than the two ops for DRUNet 4096² in fp32 (298.8 against
  // 291.0 ms, H200, docs/performance.md#native-kernels). cudnn_epilogues_forced: that first plan
  // wherever cuDNN has one, untimed, also without autotune (tests, measurements).
  bool cudnn_epilogues = true;
  bool cudnn_epilogues_forced = false;
  // With cudnn_epilogues: every convolution (groups 1) may run as a cuDNN graph too, conv +
  // bias (+ residual add) (+ ReLU) in one kernel, chosen per layout as above against what runs
  // otherwise (cuDNN's fused conv + bias + ReLU op, or the convolution then add_ / relu_). Every
  // convolution then has its choice and plan in pnp's hands, and so in the plan cache: with
  // cudnn_benchmark off, a compile whose choices all come from the cache times nothing and runs
  // nothing before its capture (NativeExecutor: "compiled from the plan cache").
  bool cudnn_graph_convs = true;
  // Beside cuDNN's first three plans of each layout, this many more from further down its order
  // whose engines are precompiled (they build in milliseconds; the first three are mostly
  // runtime-compiled ones, 0.2-0.7 s each). Tried because ATen's benchmark beat the first three
  // on some of DRUNet's conv + ReLU layouts; with 4 or 8 of them no DRUNet 4096² layout chose
  // one (H200, docs/performance.md#compile-time-and-the-plan-cache), so none by default (nn_time --precompiled N).
  int cudnn_graph_precompiled = 0;
  // A persistent cache of those per-layout choices and of the chosen cuDNN plans, serialised
  // (src/nn/native/plan_cache.hpp): a later process loads them instead of building and timing
  // three plans per layout. Empty: none. Keyed by the layout, the GPU, cuDNN, the frontend,
  // torch, the dtype and TF32; a damaged or foreign entry is chosen again (notes() says so).
  std::string plan_cache_dir;
  // With autotune: ATen's cuDNN benchmark mode for the generic ops (what a graph is timed
  // against, the transposed convolutions): their choice lives in ATen's process-local cache,
  // which no cache of pnp's can hold. Off (the default): those run on cuDNN's heuristics, and a
  // compile whose choices all come from the plan cache times nothing and captures at once.
  // DRUNet 1 ch 4096², H200s (docs/performance.md#compile-time-and-the-plan-cache): on, a cold
  // compile took 3.84-4.49 s (fp32) / 2.79-4.50 s (bf16) and a cached one 1.70-1.98 s /
  // 0.89-1.12 s; off, 1.88-2.62 s / 1.41-1.96 s cold and 0.30-0.35 s / 0.22-0.26 s from the
  // network's list: 1.3-3.1 s more per cold compile, 0.7-1.7 s per cached one, for 0.3-2.5 %
  // (fp32: 277.5-278.5 against 279.4-284.5 ms on one machine) and under 1 % in bf16.
  bool cudnn_benchmark = false;
  // With it: how many of cuDNN's algorithms ATen's benchmark mode tries per convolution (0: all
  // of them; -1: ATen's own setting, 10 unless changed), for the warm-up only. DRUNet 1 ch
  // 4096² on H200s (docs/performance.md#compile-time-and-the-plan-cache): on one machine 1 / 3 / all compiled in
  // 5.29 / 2.13 s / over 100 s (fp32) and 4.01 / 1.74 / 63.1 s (bf16, 145.4 ms against
  // 147.4 ms at 3); ATen's 10 was measured on other machines only (fp32 3.26 / 3.45 s), and 3
  // on a third gave 3.19-3.95 s: no same-machine comparison with 10, so ATen's own stays.
  int cudnn_benchmark_limit = -1;
  // The epilogue graphs' candidate plans built on threads, each in a graph of its own, while
  // the warm-up runs the two ops in their place; they are timed when built (at the latest in one
  // more warm-up run). Where the warm-up meets a layout it waits for its builds, up to half a
  // second in all, so that precompiled plans (milliseconds) run at once and the two ops' own
  // outputs do not raise the compile's peak memory. Off: built one after the other where each
  // layout is first met, the warm-up waiting (most of a cold build is cuDNN compiling kernels
  // on the CPU).
  bool parallel_plan_builds = true;
  // Runs the halo nodes of a graph from with_layer_halos (kept by reference; it must outlive
  // the executor). Every warm-up call exchanges too, so all ranks compile together.
  HaloExchanger* exchanger = nullptr;
  // Halo nodes deferred into their conv / max_pool: the op on the bare tile, then the rows
  // next to each neighbour recomputed (native/plan.hpp). Off: every halo node grows a copy of
  // its tile (nn::apply_halo), as the eager executor does. Copy-free only where the tile holds
  // copy_free_min_bytes per neighbour side (0: everywhere). DRUNet 4096², one H200, one rank's
  // call with halos filled locally (docs/layer-halo.md): 2 slabs 169.7 ms with copies, 142.7 ms
  // copy-free everywhere; 64 slabs 6.4 ms with copies, 15.8 ms copy-free everywhere.
  bool copy_free_halo = true;
  int64_t copy_free_min_bytes = int64_t{128} << 20;
  // With fuse: a ×2 nearest upsample whose only reader is a 3×3 convolution (UNet's Up steps)
  // runs with it as one transposed convolution (kernel 4, stride 2) on the upsample's input,
  // weights derived in float64 (src/nn/native/upsample_conv.hpp): no upsampled tensor, 16
  // multiply-adds per input pixel and channel pair in 2D instead of 36. Off: the upsample is a
  // step of its own (a broadcast copy) and the convolution reads its output.
  bool upsample_conv = true;
  // CUDA, 2D, float32 and bf16, channels-last: pnp's memory-bound NHWC kernels
  // (src/nn/native/nhwc_ops.hpp). The folded upsample convolution runs as one forward
  // convolution of its four output phases (a 2×2 kernel to 4 C_out channels, as cuDNN's choice or
  // a graph like any convolution), then one pass writes each phase to its pixel with the bias and
  // ReLU and the concat reading it (UNet's skip) around it, where cuDNN's transposed convolution
  // is a dgrad kernel followed by ATen's bias add, ReLU and concat. The 2×2, stride-2 max pool
  // runs as pnp's kernel. A 2×2, stride-2 transposed convolution without bias or epilogue
  // (DRUNet's upsampling) runs as two strided-batched cuBLAS products written straight into its
  // output (src/nn/native/transposed_gemm.hpp), where cuDNN runs a dgrad kernel. Off: cuDNN's
  // transposed convolution, ATen's ops and max pool.
  bool nhwc_kernels = true;
  // CUDA, 2D, float32 and bf16, channels-last: a convolution with one output channel (a gray
  // network's last, 1x1 or 3x3, stride 1) runs as pnp's own direct kernel
  // (src/nn/native/narrow_conv.hpp) instead of cuDNN's, whose implicit-GEMM tile is mostly
  // padding there: DRUNet 1 ch 4096²'s tail 3.81 ms against 7.43, H200; float32 FMA
  // accumulation, so no TF32 rounding in it (from 64 inputs with a 3x3 kernel: the tail kernel
  // down rows). With autotune and the cuDNN graphs, a 3x3 convolution with 1 to 4 input channels
  // and a multiple of 64 outputs (a network's head) or with 64 inputs and 2 to 4 outputs (a
  // colour network's tail) is also timed as pnp's head or tail kernel against cuDNN's choice,
  // and the faster kept. Off: cuDNN (or a graph).
  bool narrow_convs = true;
  // CUDA on compute capability 9.0 (Hopper), 2D, bf16 or float32 with TF32 allowed,
  // channels-last: a stride-1 convolution with C_out a multiple of 64 and C_in of 32 (float32)
  // or 64 (bf16) may run as pnp's own implicit GEMMs (src/nn/native/wgmma_conv.hpp), the
  // weights as wgmma's 64-row operand and output pixels as the wide one, bias, residual and
  // ReLU in the epilogue; as accurate as cuDNN's TF32 convolutions: the persistent rows kernel
  // for the 3x3, padding-1 layers of 64 (float32) or 64-128 (bf16) input channels, else the tile
  // kernel. With autotune and the cuDNN graphs each layout is timed against cuDNN's choice and
  // the faster kept (and stored in the plan cache); without them the kernel always runs. Builds
  // with the nvidia-cutlass headers only. On by default since 2026-12-03 (timed, it can only
  // win: DnCNN 3 ch 2048² 24.996 -> 22.784 ms, DRUNet 1 ch 4096² 282.5 -> 274.7 ms fp32 and
  // 149.6 -> 142.4 ms bf16 with the first rows kernel, H200, docs/performance.md#native-kernels).
  // The environment's PNP_KERNELS=portable turns it off by default (hopper_kernels_default):
  // the path an A100 takes, run on a Hopper GPU.
  bool wgmma_convs = hopper_kernels_default();
  // FP8 (denoiser.precision = "fp8"), bf16 executors with wgmma_convs only: these convolution
  // nodes run on pnp's FP8 tile kernel (src/nn/native/wgmma_conv.hpp, wgmma_conv_fp8) where it
  // takes them (stride 1, C_in a multiple of 64, C_out of 64; the others stay bf16): weights in
  // e4m3 with a scale per output channel, the input in e4m3 with one scale per tensor (amax / 448,
  // pnp/nn/fp8.hpp), float32 accumulation, the bias and residual in bf16. The activation scales are
  // calibrated on the warm-up's first run, and the warm-up runs again with them fixed, so the
  // output it returns is what later calls compute (a compile from the plan cache's list, which
  // has no warm-up run, is not used). A convolution whose output only one such convolution reads
  // writes it in e4m3 with that reader's scale. One whose output one such convolution reads as
  // its input and others in bf16 (a residual block's input: the next block's first convolution
  // and its residual add) writes bf16 and, in the same epilogue, the e4m3 copy for that reader
  // (fp8_dual_out; bit for bit what the reader's quantising pass would make). The others write
  // bf16, quantised by their readers in one pass (nhwc_ops.hpp). Empty: none (bf16 throughout).
  // fp8_conv_candidates names the candidates.
  std::vector<int> fp8_convs;
  bool fp8_dual_out = true;  // off: the readers quantise (for tests and A/B)
};

// The convolution nodes of g that pnp's FP8 tile kernel may take (conv, 2D, stride 1, groups 1,
// dilation-free, C_in a multiple of 64, C_out of 64, kernel at most 9 x 9): the candidates for
// NativeOptions::fp8_convs, before the kernel's own checks on the tensors.
std::vector<int> fp8_conv_candidates(const Graph& g);

// Whether NativeOptions::fp8_convs can run on this device with these options: a build with
// pnp's Hopper kernels, a GPU of compute capability 9.0, wgmma_convs and channels-last on.
bool native_has_fp8(at::Device device, const NativeOptions& opt);

// Whether this build has the cuDNN graphs of NativeOptions::cudnn_epilogues.
bool native_has_cudnn_epilogues();

class NativeExecutor : public Executor {
 public:
  // Host seconds spent in make_native: planning, weight folding and upload, warm-up /
  // autotuning and graph capture (device synchronised).
  virtual double compile_seconds() const = 0;
  // One entry per fusion made, "pattern:node", e.g. "conv+bias+relu:conv_list.0",
  // "conv+add:m_down1.0.res.2". BN folds show up in the pattern ("conv+bn+relu").
  virtual std::vector<std::string> fusions() const = 0;
  // True when the forward runs as a captured CUDA graph.
  virtual bool graph_captured() const = 0;
  // Notes on what was not applied and why (e.g. a capture that failed and fell back).
  virtual std::vector<std::string> notes() const = 0;
  // The input shape this executor was compiled for.
  virtual const std::vector<int64_t>& input_shape() const = 0;
  // Bytes of the preallocated slot buffers (the liveness plan), and their count.
  virtual int64_t slot_bytes() const = 0;
  virtual int slot_count() const = 0;
};

// The bytes of the slot buffers the native executor with default NativeOptions preallocates for
// this input shape and element size (its liveness plan, made on the IR alone: no device).
int64_t native_slot_bytes(const Graph& g, const std::vector<int64_t>& input_shape, int64_t element_bytes);

// Compiles g for exactly this input shape ([B,C,H,W] or [B,C,D,H,W]) on device/dtype (kFloat or
// kDouble). Throws InputError for an impossible shape or dtype, and for weights not matching g.
// forward() throws InputError when called with any other shape.
std::unique_ptr<NativeExecutor> make_native(const Graph& g, const Weights& w, at::Device device,
                                            at::ScalarType dtype, std::vector<int64_t> input_shape,
                                            NativeOptions opt = {});

}  // namespace pnp::nn
