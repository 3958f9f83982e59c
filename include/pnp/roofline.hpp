// Analytic roofline counts of a denoiser IR at a given input shape, and the GPU peak table.
//
// Study conventions (docs/design.md, "Roofline"), fields *_study:
//   FLOPs: conv and conv_transpose only, 2 * C_out * (C_in/groups * k^d) * output voxels.
//   Bytes: 4 * (inputs + output + weight) for every conv, conv_transpose, batch_norm and relu
//          leaf op, where "weight" is the module's .weight tensor (bias and running statistics
//          are not counted).
// Our corrected counts, fields without suffix:
//   FLOPs: as the study, except conv_transpose = 2 * C_in * (C_out/groups * k^d) * input voxels
//          (each input voxel meets each kernel tap once); the study's formula over-counts it by
//          stride^d.
//   Bytes: element_bytes * (inputs + output + every parameter and buffer) for every op that moves
//          data: also add, concat, max_pool, upsample, pad and the sigma map (written only);
//          crop is a view and costs nothing.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "pnp/nn/ir.hpp"

namespace pnp::roofline {

struct GpuPeak {
  std::string name;     // "A100", "H100", "H200" (SXM parts)
  double tf32_tflops;   // dense TF32 tensor-core peak, TFLOP/s (the study's compute roof)
  double fp32_tflops;   // non-tensor FP32 peak, TFLOP/s
  double bf16_tflops;   // dense BF16 tensor-core peak, TFLOP/s
  double hbm_tbps;      // HBM bandwidth, TB/s
  double fp8_tflops = 0;  // dense FP8 (e4m3) tensor-core peak, TFLOP/s (0: the GPU has none)
  double ridge() const { return tf32_tflops / hbm_tbps; }  // FLOP/byte where the roofs meet
};
const std::vector<GpuPeak>& peak_table();
// Finds the entry whose name occurs in `gpu` (case-insensitive, e.g. "NVIDIA H200");
// throws InputError listing the known GPUs.
const GpuPeak& peak_for(std::string_view gpu);
// min(peak, intensity * bandwidth), TFLOP/s.
double attainable_tflops(const GpuPeak& p, double intensity);
// Lower bound on the run time in seconds: max(flops / peak, bytes / bandwidth).
double roofline_seconds(const GpuPeak& p, double flops, double bytes);

struct OpCount {
  int node = 0;
  std::string name, op;
  std::vector<int64_t> output_shape;
  double flops_study = 0, flops = 0, bytes_study = 0, bytes = 0;
};

struct Counts {
  std::vector<int64_t> input_shape;
  double pixels = 0;  // input voxels over the batch: B * prod(spatial)
  double flops_study = 0, flops = 0, bytes_study = 0, bytes = 0;
  std::vector<OpCount> ops;  // one per IR node
  double intensity_study() const { return bytes_study > 0 ? flops_study / bytes_study : 0; }
  double intensity() const { return bytes > 0 ? flops / bytes : 0; }
  double macs_per_pixel_study() const { return flops_study / 2 / pixels; }
  double macs_per_pixel() const { return flops / 2 / pixels; }
};

// Throws InputError (from shape inference) for impossible shapes.
Counts count(const nn::Graph& g, const std::vector<int64_t>& input_shape, int64_t element_bytes = 4);

// Device memory of one forward: a liveness walk over the topological order. Each value gets its
// own buffer when its node runs, or shares its input's buffer, and a buffer is freed after the
// last reader of every value in it. The caller's input and the returned output count as live.
//   eager:  every op allocates, except crop (a view), pad with nothing to pad (the input), and
//           an in-place ReLU on the last use of a computed value (nn.ReLU(inplace=True));
//   native: also the fusion groups of pnp/nn/native.hpp write into the conv's buffer:
//           conv [-> BN] -> ReLU and conv [-> BN] -> add (the conv on either side) [-> ReLU],
//           each link on a single-reader value; the sigma map is a broadcast view.
// Convolution workspaces and allocator rounding are not included (pnp::plan_memory adds them).
enum class ExecutorStyle { eager, native };
struct ActivationMemory {
  double peak_bytes = 0;      // most bytes live at once
  std::string peak_node;      // the node during which the peak occurs
  double largest_bytes = 0;   // the largest single value
  double weights_bytes = 0;   // every parameter and buffer at element_bytes
  // The peak with a float32 buffer the size of each convolution's input or output (the larger)
  // beside the live values while it runs: the CPU's convolutions reorder one of them, and write a
  // float32 output before rounding it to bf16. At least peak_bytes.
  double conv_temp_peak_bytes = 0;
};
ActivationMemory activation_memory(const nn::Graph& g, const std::vector<int64_t>& input_shape,
                                   int64_t element_bytes, ExecutorStyle style);

// The floor of the native executor's forward pass, kernel by kernel. Each fusion group (a conv
// with the BN, add and ReLU it takes in, as activation_memory's native style; and an add whose one
// reader is a conv's input, summed as that conv loads it) is one kernel, and so is every other op
// that moves data (a transposed conv, an unfused add, concat, pooling, ...; views and the sigma
// map's broadcast cost nothing). A kernel's floor is the larger of its FLOPs
// at its precision's dense tensor-core peak (TF32 for 4-byte elements, BF16 for 2-byte ones, FP8
// for the convs in fp8_convs) and its bytes at the HBM bandwidth: every value it reads once and
// its output written once, no intermediate of a group stored. The kernels run one after another
// on one stream, so the network's floor is the sum of theirs: tighter than count()'s
// max(FLOPs / peak, bytes / bandwidth) over the whole network, where a memory-bound layer would
// hide behind a compute-bound one.
// FP8 convs read e4m3 input (1 byte) and weights (1 byte); a value read by FP8 convs only is
// stored in e4m3 alone, one read by an FP8 conv and by anything else in both (pnp's dual output,
// NativeOptions::fp8_dual_out); so this is the floor of an ideal FP8 executor, where every
// producer writes its reader's e4m3 (pnp's strided and transposed convs do not: quantising
// passes, not counted). element_bytes 2 or 4 (InputError otherwise); fp8_convs: conv node ids,
// with element_bytes 2 (nn::fp8_run_convs).
struct KernelFloor {
  int node = 0;           // the kernel's first node (the conv of a group)
  int last = 0;           // its last node: the value it writes
  std::string name, op;   // the first node's
  std::string precision;  // "tf32", "bf16" or "fp8" (the products'); of a kernel without products, its data's
  std::string fused;      // the ops after the first, e.g. "add relu"; "its input's add" (folded before it)
  double flops = 0, bytes = 0, compute_s = 0, memory_s = 0;
  double seconds() const { return compute_s > memory_s ? compute_s : memory_s; }
};
struct NativeFloor {
  std::string gpu;
  std::vector<KernelFloor> kernels;  // in the order they run
  double seconds = 0;                // the sum of the kernels' floors
  double compute_s = 0, memory_s = 0;  // the sums of their two terms
  double flops = 0, bytes = 0;
  int fp8_kernels = 0;  // the kernels that run in FP8 (fp8_convs less any with a folded add)
};
NativeFloor native_floor(const nn::Graph& g, const std::vector<int64_t>& input_shape, int64_t element_bytes,
                         const std::set<int>& fp8_convs, const GpuPeak& peak);

// A printable summary for one input shape (pnp_denoise --counts): FLOPs and bytes (ours and the
// study's), intensity, the roofline floor on every GPU of `peaks` (the TF32 roof for 4-byte
// elements, the BF16 roof for 2-byte ones, FP64 is not tabulated) and, for 2- and 4-byte elements,
// native_floor on each, and the activation memory of both executor styles; per_kernel: also
// native_floor's kernels on the last of `peaks`, those of one kind (op, fused ops, channels,
// output size, precision) on one line.
struct ReportOptions {
  std::set<int> fp8_convs;         // native_floor's
  std::vector<GpuPeak> peaks;      // empty: peak_table()
  bool per_kernel = false;
};
std::string report(const nn::Graph& g, const std::vector<int64_t>& input_shape, int64_t element_bytes,
                   const ReportOptions& options = {});

}  // namespace pnp::roofline
