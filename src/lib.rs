//! fegpu: GPU kernels and solvers whose data stays on the device between
//! calls, for legacy Fortran simulation codes (C ABI in `ffi`, Fortran module
//! in `fortran/`). See README.md for the call sequences and DESIGN notes.

// Numerical loops that index several arrays at once (element matrices,
// quadrature, stencils) read closer to their formulas with the index.
#![allow(clippy::needless_range_loop)]

pub mod amg;
pub mod array;
pub mod context;
pub mod dense;
pub mod dist;
pub mod error;
pub mod fem;
pub mod ffi;
pub mod gpu;
pub mod krylov;
pub mod lbm;
pub mod pipeline;
pub mod profile;
pub mod radfields;
pub mod sparse;

pub use error::*;
pub use ffi::context::{FEGPU_BACKEND_AUTO, FEGPU_BACKEND_CPU, FEGPU_BACKEND_CUDA};
pub use ffi::dense::{FEGPU_VARIANT_AUTO, FEGPU_VARIANT_NAIVE, FEGPU_VARIANT_PADDED, FEGPU_VARIANT_TILE};
pub use ffi::fem::{
    FEGPU_ELEMENT_HEX8, FEGPU_ELEMENT_QUAD4, FEGPU_ELEMENT_TET4, FEGPU_ELEMENT_TRI3, FEGPU_INTEGRATION_AUTO,
    FEGPU_INTEGRATION_BLOCKED, FEGPU_INTEGRATION_ELEMENT, FEGPU_INTEGRATION_POINT, FEGPU_PROBLEM_ELASTIC_3D, FEGPU_PROBLEM_HEAT,
    FEGPU_PROBLEM_PLANE_STRAIN, FEGPU_PROBLEM_PLANE_STRESS,
};
pub use ffi::lbm::{FEGPU_FLUID, FEGPU_MOVING_WALL, FEGPU_PERIODIC_X, FEGPU_PERIODIC_Y, FEGPU_PERIODIC_Z, FEGPU_WALL};
pub use ffi::pipeline::{FEGPU_PIPELINE_AUTO, FEGPU_PIPELINE_PER_CHUNK, FEGPU_PIPELINE_SERIAL, FEGPU_PIPELINE_STAGED};
pub use ffi::radfields::{FEGPU_RADFIELDS_AUTO, FEGPU_RADFIELDS_DIRECT, FEGPU_RADFIELDS_TILED};
pub use ffi::sparse::{
    FEGPU_AGGREGATION_GREEDY, FEGPU_AGGREGATION_PARALLEL, FEGPU_CYCLE_HYBRID, FEGPU_CYCLE_V, FEGPU_CYCLE_W, FEGPU_METHOD_BICG,
    FEGPU_METHOD_BICGSTAB, FEGPU_METHOD_CG, FEGPU_METHOD_CGS, FEGPU_METHOD_GMRES, FEGPU_PRECOND_AMG, FEGPU_PRECOND_ILU0,
    FEGPU_PRECOND_ILU0_JACOBI, FEGPU_PRECOND_JACOBI, FEGPU_PRECOND_NONE, FEGPU_SMOOTHER_AUTO, FEGPU_SMOOTHER_CHEBYSHEV,
    FEGPU_SMOOTHER_GAUSS_SEIDEL, FEGPU_SMOOTHER_L1_JACOBI,
};
pub use ffi::status::*;

/// Every CUDA source file (module name, text), for NVRTC compile checks.
pub const KERNEL_SOURCES: &[(&str, &str)] = &[
    ("dense", dense::cuda::SOURCE),
    ("vector", array::cuda::SOURCE),
    ("krylov", krylov::cuda::SOURCE),
    ("sparse", sparse::cuda::SOURCE),
    ("lbm", lbm::cuda::SOURCE),
    ("radfields", radfields::cuda::SOURCE),
    ("pipeline", pipeline::cuda::SOURCE),
    ("fem", fem::cuda::SOURCE),
    ("fem_quadratic", fem::cuda::QUADRATIC_SOURCE),
    ("amg", amg::cuda::SOURCE),
    ("block", sparse::block::cuda::SOURCE),
];

/// The kernel files whose kernels compile one at a time (`Gpu::kernel`):
/// a job compiles the kernels it launches, `fegpu warm` each of them. Not
/// amg.cu: a setup launches some 20 of its 77 kernels, and 20 compiled alone
/// (about 0.19 s each on one core) cost what the whole file does (4.4 s).
pub const ONE_KERNEL_AT_A_TIME: &[&str] = &["lbm", "block", "fem", "fem_quadratic", "sparse", "krylov", "dense"];
