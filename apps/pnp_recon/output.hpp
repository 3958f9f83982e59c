// pnp_recon's output: the HDF5 file of docs/output_schema.md, and the --dry-run plan.
#pragma once

#include <string>
#include <vector>

#include "pnp/solver.hpp"

namespace pnp::recon {

// The plan of a run, as --dry-run prints it: problem, solver, denoiser, compile, ranks, tiles
// and every rank's memory estimate.
std::string plan_text(const ReconstructionPlan& plan, int ranks, const std::string& comm_kind);

// Whether cuDNN's strict-float32 convolutions choose within the memory plan (holds_to_plan), in
// words; empty where their workspaces are bounded anyway (cudnn_workspaces_unbounded).
std::string hold_note(const Config& cfg, at::Device dev);

// Rank 0: writes cfg.output.file (temporary file, renamed on success); of `prob`, the angles'
// source (root attribute `angles`) and, for a volume of raw counts, what normalising it clipped
// (root attributes `clipped_transmissions` and `dead_bins`).
// `denoiser_notes`: what rank 0's denoiser compile chose (Denoiser::report), kept as
// /provenance/denoiser_compile.
void write_output(const Config& cfg, const Decomposition& d, const Communicator& comm,
                  const PnpRecord& rec, const GatheredRecord& g, at::Device dev, const Problem& prob,
                  const std::vector<std::string>& denoiser_notes);

}  // namespace pnp::recon
