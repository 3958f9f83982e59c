// pnp_train: train a denoiser on synthetic CT-like images (see pnp_train --help, docs/training.md).
#include "pnp/train.hpp"

int main(int argc, char** argv) { return pnp::train::train_main(argc, argv); }
