// The denoiser module in one include: IR, builders, weights, executors, patching.
#pragma once
#include "pnp/nn/executor.hpp"
#include "pnp/nn/ir.hpp"
#include "pnp/nn/models.hpp"
#include "pnp/nn/patch.hpp"
#include "pnp/nn/weights.hpp"
