// pnp_recon: distributed PnP CT reconstruction (see pnp_recon --help).
#include "pnp/solver.hpp"

int main(int argc, char** argv) { return pnp::recon_main(argc, argv); }
