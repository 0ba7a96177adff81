//! Distributed runs over the caller's MPI job (cargo feature `mpi`): one
//! fegpu context per rank, each rank owning a contiguous range of global
//! rows. The caller's communicator is duplicated, so fegpu's messages never
//! meet the caller's; fegpu never initialises MPI itself. Every call here is
//! collective over that communicator, and fails on every rank or on none
//! (`Comm::agree`), so no rank is left waiting in a collective the others
//! have abandoned.
//!
//! - `matrix.rs`: the distributed CSR matrix (owned-column and halo-column
//!   blocks, the exchange plan), its product as a Krylov `Operator`;
//! - `solver.rs`: CG / BiCGSTAB over it, the preconditioner built from each
//!   rank's diagonal block (Jacobi, block-Jacobi ILU(0), per-rank AMG);
//! - `lattice.rs`: the D3Q19 lattice in z-slabs with ghost planes;
//! - `team.rs`: the matrix's device-direct path between the ranks of one
//!   node (CUDA IPC), its reductions summed on the device;
//! - `radfields.rs`: rad_fields with the S points split over the ranks;
//! - `ebe.rs`: element-by-element CG over the ranks' elements.

#[cfg(feature = "mpi")]
mod comm;
#[cfg(feature = "mpi")]
pub mod ebe;
#[cfg(feature = "mpi")]
pub mod lattice;
#[cfg(feature = "mpi")]
pub mod matrix;
#[cfg(feature = "mpi")]
pub mod radfields;
#[cfg(feature = "mpi")]
pub mod solver;
#[cfg(feature = "mpi")]
mod team;

#[cfg(feature = "mpi")]
pub use comm::{device_for, Comm};
#[cfg(feature = "mpi")]
pub use lattice::DistLattice;
#[cfg(feature = "mpi")]
pub use matrix::DistCsr;
#[cfg(feature = "mpi")]
pub use radfields::DistRadFields;
#[cfg(feature = "mpi")]
pub use solver::DistSolver;
