// The native backend's planner: what the executor (impl.hpp) will run, decided on the IR
// and its inferred shapes alone, with no tensors and no device, so it can be tested directly.
//
// It decides:
//  - the fusion groups: every batch norm that is a conv's only reader folds into it (always);
//    with fuse on, conv[+bn] -> relu and conv[+bn] -> add(., z) [-> relu] become one step
//    (each link needs the intermediate value to have exactly one reader, and z must exist
//    before the conv). Patterns are named "conv+bias+relu:node" etc. (NativeExecutor::fusions);
//  - with fuse and upsample_conv on, a ×2 nearest upsample whose only reader is a 3×3 conv
//    (stride 1, padding 1, groups 1) folds into that conv: the pair is one transposed
//    convolution (kernel 4, stride 2, padding 1) on the upsample's input, with weights derived
//    from the conv's (PlanStep::from_upsample; upsample_conv.hpp). Pattern "upsample+conv...";
//    With that fold, a concat that is the upsample conv's only reader folds in too
//    (PlanStep::cat_other);
//  - with fuse on, an add of two values whose only reader is a conv (the conv's input, not via
//    a halo) folds into that conv: the conv reads the sum (PlanStep::x2). Pattern "add+conv...".
//    DRUNet's last skip add (x + x1 before its tail) is one; on CUDA pnp's tail kernel adds the
//    two as it loads them (narrow_conv.hpp), elsewhere the executor adds them first;
//  - the step list (one per group or unfused node) with the param keys each step needs;
//  - liveness: the step of each value's last reader, and what each step releases after it;
//  - in-place reuse: a ReLU or add may overwrite an input (relu_, add_) only when that value
//    dies at this step, owns its buffer (not the graph input, not a view: crop, no-op pad,
//    sigma) and shares its buffer with no value still live (a view of it read here or later);
//  - slots: the values written by ops with a true out= kernel (add, concat, upsample, real
//    pad, standalone ReLU, an upsample conv with its concat) get preallocated slots, reused
//    once every value in them is dead (a view counts as a user of its source's slot); sizes in
//    bytes for the element size.
//  - copy-free halos: a halo node whose only reader is a conv or max_pool with the op's own
//    padding equal to the halo (lo = padding, hi = kernel - stride - padding, kernel - stride
//    <= 2 padding < kernel: the same output shape on the bare tile) is deferred into it when
//    its tile holds at least copy_free_min_bytes per neighbour side. Ranks may decide
//    differently: both ways send the same messages in the same order.
// Convolutions, pooling, BN and halo nodes (nn::apply_halo) write where ATen puts them (no slot). Why: the executor then
// only materialises weights and buffers and runs the list; the memory plan is checkable here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pnp/nn/ir.hpp"

namespace pnp::nn::native {

enum class StepKind { sigma, conv, conv_transpose, batch_norm, relu, add, concat, max_pool, upsample, pad, crop, halo };

// The keys of a batch norm's tensors (a standalone step, or folded into a conv) and its eps.
struct BatchNormKeys {
  std::string weight, bias, mean, var;
  double eps = 1e-5;
};

struct PlanStep {
  StepKind kind = StepKind::conv;
  int head = 0;                // the IR node this step starts from (the conv of a fused group)
  int out = 0;                 // the node whose value this step produces (the tail of a group)
  std::string name;            // the head's IR name
  std::vector<int> in;         // values read (node ids): the head's inputs, then z
  std::vector<int64_t> shape;  // output shape
  // conv / conv_transpose: param keys (bias_key empty when absent)
  std::string weight_key, bias_key;
  int bn = -1;                 // conv: the batch-norm node folded into it (-1: none)
  BatchNormKeys bn_keys;       // conv with bn >= 0, and standalone batch_norm steps
  int z = -1;                  // conv: residual added to the conv output (conv+add[+relu])
  bool relu = false;           // conv: ReLU after the conv (after the add when z >= 0)
  int64_t out_channels = 0;
  std::vector<int64_t> stride, padding, output_padding, kernel;
  int64_t groups = 1;
  // conv_transpose: the step is a ×2 nearest upsample and the 3×3 conv reading it (weight_key,
  // bn, relu, z: the conv's), run as one transposed convolution (kernel 4, stride 2, padding 1)
  // on the upsample's input; weights from upsample_conv_weight (upsample_conv.hpp)
  bool from_upsample = false;
  // ... and when the conv's value (after its BN and ReLU) is read only by a concat of two
  // values, the other one made before this step (UNet's skip), the concat is absorbed too: the
  // step's value is the concat's (in a slot), cat_other its other input, cat_first whether the
  // conv's part comes first. Pattern "upsample+conv...+concat". Why: on CUDA the executor writes
  // the conv's output and the other part into the concat in one pass (nhwc_ops.hpp).
  int cat_other = -1;
  bool cat_first = true;
  // conv: an add folded in before it (in = the add's two inputs): the conv reads in[0] + x2
  int x2 = -1;
  std::vector<double> scales;  // upsample
  std::vector<int64_t> pads;   // pad: replication pad, last axis first, (0, p) pairs
  // memory
  bool alias = false;          // the output is a view (crop, no-op pad, sigma view)
  int inplace = -1;            // relu / add: the value whose buffer this step overwrites
  int slot = -1;               // slot the output is written to (-1: none or inherited)
  std::vector<int> release;    // values dead after this step (in first-read order)
  // layer halo, copy-free (PlanOptions::copy_free_halo): a halo step with `deferred` set
  // makes no grown tensor (its value is the tile itself, an alias); its one reader, a conv or
  // max_pool step with `halo` = that node, runs on the tile with `tile_padding` (the op's own
  // padding) and then recomputes the output rows next to each neighbour from small boxes of
  // the grown tensor (nn::halo_box_into over HaloExchanger::exchange_strips).
  bool deferred = false;
  int halo = -1;
  std::vector<int64_t> tile_padding;
};

struct PlanOptions {
  bool fuse = true;           // pattern fusions (BN folding is always done)
  int64_t element_bytes = 4;  // bytes per activation element (slot sizes)
  bool copy_free_halo = true;  // defer halo nodes into their conv / max_pool reader (see PlanStep)
  // ... only where the tile's bytes reach this per neighbour side: below it the boxes' fixed
  // cost (about eight to ten small kernels per side, counted in the code) exceeds the copy's (0: always).
  int64_t copy_free_min_bytes = int64_t{128} << 20;
  bool upsample_conv = true;  // with fuse: fold a ×2 nearest upsample into its 3×3 conv (above)
};

struct Plan {
  std::vector<PlanStep> steps;
  std::vector<std::string> fusions;  // "pattern:node", in step order
  std::vector<int> step_of;          // per node: the step that produces it (-1: input, or inside a group)
  std::vector<int> last_use;         // per node: step of its last reader (steps.size(): lives on;
                                     // -1: never read, or absorbed into a group)
  std::vector<int> buffer_of;        // per node: the node whose storage holds it (a view or an
                                     // in-place result names its source's; -1: not materialised)
  std::vector<int> slot_of;          // per node: its slot, -1 when none
  std::vector<int64_t> slot_bytes;   // per slot
  bool uses_sigma = false;

  int64_t total_slot_bytes() const;
};

// Plans g for these node shapes (infer_shapes(g, input_shape)).
Plan make_plan(const Graph& g, const std::vector<std::vector<int64_t>>& shapes, const PlanOptions& opt = {});

}  // namespace pnp::nn::native
