// Shared by the communicator backends; not a public header.
#pragma once
#include <map>
#include <memory>

#include "pnp/comm.hpp"

namespace pnp {
// The view of global box `b` inside a tensor that holds global box `ext_box` in its last two dims.
at::Tensor box_view(const at::Tensor& ext, const Box& ext_box, const Box& b);
std::unique_ptr<Communicator> make_mpi_communicator(MPI_Comm comm);
#ifdef PNP_HAVE_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(MPI_Comm comm, at::Device device, double timeout_s);
#endif
}  // namespace pnp
