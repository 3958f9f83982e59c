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

// A printable summary for one input shape (pnp_denoise --counts): FLOPs and bytes (ours and the
// study's), intensity, the roofline floor on every GPU of peak_table() (the TF32 roof for 4-byte
// elements, the BF16 roof for 2-byte ones, FP64 is not tabulated), and the activation memory of
// both executor styles.
std::string report(const nn::Graph& g, const std::vector<int64_t>& input_shape, int64_t element_bytes);

}  // namespace pnp::roofline
