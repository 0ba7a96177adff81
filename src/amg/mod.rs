//! Smoothed-aggregation algebraic multigrid (Vaněk, Mandel and Brezina
//! 1996), a `Preconditioner` of the Krylov room: strength of connection,
//! aggregation, a tentative prolongator fitted to the near-null space
//! (constants, or the rigid-body modes of elasticity), Jacobi-smoothed
//! prolongation, Galerkin coarse operators and a dense coarsest solve,
//! applied as a V-cycle with Chebyshev, l1-Jacobi or symmetric
//! Gauss-Seidel smoothing.
//!
//! The hierarchy is set up on the host (`setup.rs`, over `host.rs`'s sparse
//! algebra) and kept; a values-only re-setup (`Hierarchy::refresh`, for
//! Newton and time loops) keeps the aggregates, the tentative prolongator
//! and every sparsity pattern, and redoes only the numbers (on the device,
//! `cuda::DeviceHierarchy::refresh`, when the solver runs there). On the
//! device the first setup is split the same way: the host builds the
//! structure from the pattern (`Hierarchy::structure`) and the device's
//! re-setup computes every number, so the values never leave the device;
//! the device also fits the tentative prolongators to the near-null space
//! and finds the finest level's product patterns, the largest parts of the
//! structure (`cuda::FinestProducts`). With the parallel aggregation
//! (`Aggregation::Parallel`) a scalar system's whole structure is the
//! device's (`device_structure.rs`), the host holding shapes and counts.
//! The V-cycle runs
//! on the host (`cpu.rs`, the reference) or on the device (`cuda.rs`, one
//! kernel per smoothing step, residual and transfer, replayed in the
//! solver's CUDA graph).

pub mod cpu;
pub mod cuda;
pub mod device_structure;
pub mod host;
mod setup;

pub use host::Mat;
pub use setup::{rigid_body_modes, DeviceProducts, StructureOnly};

use crate::array::Buffer;
use crate::error::Result;
use crate::gpu::{DeviceBuffer, Gpu};
use crate::krylov::Preconditioner;
use crate::sparse::DevicePattern;

/// The smoother of every level but a dense coarsest one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Smoother {
    /// A Chebyshev polynomial of this degree in D^-1 A over
    /// [1.1 rho / 5, 1.1 rho] (rho estimated by Lanczos): symmetric A.
    Chebyshev { degree: usize },
    /// Sweeps of l1-Jacobi (x += r / sum_j |a_ij|): convergent for any
    /// SPD A, and the choice for nonsymmetric A.
    L1Jacobi { sweeps: usize },
    /// Sweeps of symmetric Gauss-Seidel in the rows' order (a forward then
    /// a backward sweep, pyamg's smoother) on the finest level, for any
    /// matrix with a nonzero diagonal: there the sweeps follow the
    /// discretisation (along an upwind flow they nearly solve it). The
    /// coarse levels take twice as many l1-Jacobi sweeps: their Galerkin
    /// rows couple most earlier rows, so exact sweeps there would run row
    /// after row on the device. On the device each sweep is an exact
    /// triangular solve (the ILU(0) sweeps' kernels).
    GaussSeidel { sweeps: usize },
}

impl Smoother {
    /// The steps a smoother takes where the caller names none: one
    /// symmetric Gauss-Seidel sweep (itself two triangular solves), else two.
    pub fn default_steps(gauss_seidel: bool) -> usize {
        if gauss_seidel {
            1
        } else {
            2
        }
    }
    /// The smoother where the caller names none: Chebyshev for a symmetric
    /// matrix, l1-Jacobi otherwise.
    pub fn default_for(symmetric: bool) -> Smoother {
        match symmetric {
            true => Smoother::Chebyshev { degree: 2 },
            false => Smoother::L1Jacobi { sweeps: 2 },
        }
    }
    /// The most smoothing steps any level takes.
    pub fn steps(self) -> usize {
        match self {
            Smoother::Chebyshev { degree } => degree,
            Smoother::L1Jacobi { sweeps } => sweeps,
            Smoother::GaussSeidel { sweeps } => 2 * sweeps,
        }
    }
    /// What level `l` runs: Gauss-Seidel's coarse levels take l1-Jacobi.
    pub fn on_level(self, l: usize) -> Smoother {
        match self {
            Smoother::GaussSeidel { sweeps } if l > 0 => Smoother::L1Jacobi { sweeps: 2 * sweeps },
            s => s,
        }
    }
    pub fn name(self) -> String {
        match self {
            Smoother::Chebyshev { degree } => format!("Chebyshev degree {degree}"),
            Smoother::L1Jacobi { sweeps } => format!("l1-Jacobi x{sweeps}"),
            Smoother::GaussSeidel { sweeps } => {
                format!("symmetric Gauss-Seidel x{sweeps} (coarse levels: l1-Jacobi x{})", 2 * sweeps)
            }
        }
    }
}

/// How often a level visits the next coarser one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cycle {
    /// Once: each level's work once a cycle.
    V,
    /// Twice (the second visit from the first's residual), except a dense
    /// coarsest level, which the first solves exactly: level l runs 2^l times
    /// a cycle. Fewer iterations where the coarse levels are weak (layered
    /// high-contrast media), each dearer by the coarse levels' work; still
    /// symmetric for CG.
    W,
    /// The W-cycle's second visits only where they are cheap: on a level
    /// with at most a quarter of the nonzeros of the level above, so the
    /// visits below any level cost at most as much again as that level's
    /// own work (a geometric series of ratio 2 x 1/4; AGMG's K-cycle takes
    /// its second coarse iteration by a like rule); a level that coarsened
    /// less is visited once, as in the V-cycle. Where level 1 holds half
    /// the finest's nonzeros (layered media) this takes the W-cycle's
    /// strength on the cheap levels without doubling the dear one.
    Hybrid,
}

impl Cycle {
    pub fn name(self) -> &'static str {
        match self {
            Cycle::V => "V",
            Cycle::W => "W",
            Cycle::Hybrid => "hybrid V/W",
        }
    }

    /// Whether a cycle of this kind visits a coarse level of `nonzeros`
    /// twice, below a level of `above` nonzeros (a dense coarsest aside).
    pub fn twice(self, nonzeros: usize, above: usize) -> bool {
        match self {
            Cycle::V => false,
            Cycle::W => true,
            Cycle::Hybrid => 4 * nonzeros <= above,
        }
    }
}

/// How a level's nodes are grouped into aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    /// pyamg's standard aggregation, a sequential sweep in the nodes'
    /// order: the smallest aggregates and fewest iterations, on the host.
    Greedy,
    /// Roots at least three apart chosen in rounds (setup.rs
    /// `aggregate_parallel`), the same aggregates on the host and the
    /// device: on the device the whole structure of a scalar system is
    /// built there (no host phase, no upload), for a single solve from
    /// scratch; about a fifth fewer aggregates, a few more iterations.
    Parallel,
}

impl Aggregation {
    pub fn name(self) -> &'static str {
        match self {
            Aggregation::Greedy => "greedy",
            Aggregation::Parallel => "parallel",
        }
    }
}

/// Near-null-space vectors: `count` columns of n, column-major.
#[derive(Debug, Clone, PartialEq)]
pub struct NearNullSpace {
    pub vectors: Vec<f64>,
    pub count: usize,
}

/// What a user tunes. The defaults are pyamg's smoothed aggregation but for
/// the smoother (Chebyshev degree 2 for symmetric matrices, l1-Jacobi x2
/// otherwise) and the coarsest size (a dense inverse of up to 256 rows).
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// theta: j is a strong neighbour of i when |a_ij| >= theta sqrt(|a_ii a_jj|)
    /// (block norms for block_size > 1); 0 keeps every connection.
    pub strength: f64,
    /// None: chosen from the matrix's symmetry.
    pub smoother: Option<Smoother>,
    /// Stop coarsening at this many rows (the coarsest level is inverted densely).
    pub coarsest: usize,
    pub max_levels: usize,
    /// Jacobi-smoothed prolongation (smoothed aggregation); false: plain
    /// aggregation, P = the tentative prolongator.
    pub smooth_prolongator: bool,
    /// Unknowns per node, numbered node by node (3 for 3-D elasticity).
    pub block_size: usize,
    /// None: the constant per unknown of a node (block_size vectors; for
    /// elasticity the translations, the rigid-body modes less the rotations).
    pub near_null_space: Option<NearNullSpace>,
    /// The V-cycle reads its matrices' values rounded to f32 (A, P and R;
    /// a Gauss-Seidel level's A and the coarsest inverse stay f64): a third
    /// fewer bytes a nonzero, while the vectors, the sums, the setup and the
    /// Krylov method stay f64. The cycle is then the exact V-cycle of the
    /// rounded matrices, still symmetric for CG.
    pub f32_cycle: bool,
    pub cycle: Cycle,
    pub aggregation: Aggregation,
}

impl Options {
    /// The same options less the near-null space's vectors (a hierarchy
    /// keeps them in its tentative prolongators).
    fn without_vectors(&self) -> Options {
        let Options {
            strength,
            smoother,
            coarsest,
            max_levels,
            smooth_prolongator,
            block_size,
            near_null_space: _,
            f32_cycle,
            cycle,
            aggregation,
        } = self;
        Options {
            strength: *strength,
            smoother: *smoother,
            coarsest: *coarsest,
            max_levels: *max_levels,
            smooth_prolongator: *smooth_prolongator,
            block_size: *block_size,
            near_null_space: None,
            f32_cycle: *f32_cycle,
            cycle: *cycle,
            aggregation: *aggregation,
        }
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            strength: 0.0,
            smoother: None,
            coarsest: 256,
            max_levels: 20,
            smooth_prolongator: true,
            block_size: 1,
            near_null_space: None,
            f32_cycle: false,
            cycle: Cycle::V,
            aggregation: Aggregation::Greedy,
        }
    }
}

/// How a level passes to the next: the prolongator and restriction, and
/// what a values-only re-setup needs to redo them.
pub struct Transfer {
    /// The aggregate of each node (empty where the device built the
    /// structure: `cuda::HeldBlocks::aggregates` reads them there).
    pub aggregate: Vec<i32>,
    /// The tentative prolongator (its columns orthonormal per aggregate).
    pub tentative: Mat,
    /// The near-null space on the coarse level (T * coarse = fine, exactly).
    pub coarse_null_space: Vec<f64>,
    /// A T (pattern kept), and T's value at each of its entries (empty
    /// without prolongator smoothing).
    at: Mat,
    t_at: Vec<f64>,
    /// P = T - omega D^-1 A T (or T), R = P^T and which entry of P each came from.
    pub p: Mat,
    pub r: Mat,
    r_from: Vec<u32>,
    /// A P (pattern kept).
    ap: Mat,
    /// Where a structure-only setup left the patterns to the device.
    blocks: Option<TransferBlocks>,
}

/// A structure-only setup's smoothed transfer patterns, kept as block
/// patterns for the device to write out (cuda.rs); `at`, `p`, `r` and `ap`
/// then hold only their shapes, `t_at` and `r_from` nothing, until a host
/// re-setup writes them out (setup.rs `write_out`).
struct TransferBlocks {
    /// T's: each aggregated node's block in its aggregate's column.
    t: host::BlockPattern,
    /// A T's, which is P's.
    p: host::BlockPattern,
    r: host::BlockPattern,
    /// For each block of R, the block of P it mirrors.
    r_from: Vec<u32>,
    ap: host::BlockPattern,
    /// Each aggregate's nodes (pointers, nodes), where the device fits T's
    /// values (setup.rs `StructureOnly::fit_on_device`).
    members: Option<(Vec<i32>, Vec<i32>)>,
    /// The coarse level's block pattern, where the device computed it with
    /// A P's (setup.rs `DeviceProducts`; `ap` then has row pointers alone).
    coarse: Option<Mat>,
}

pub struct Level {
    pub a: Mat,
    /// The smoother's diagonal scaling (D^-1 or the l1 inverse).
    pub smoother_inverse: Vec<f64>,
    /// Per smoothing step (c1, c2): d = c1 d + c2 * inv * (b - A x); x += d.
    pub coefficients: Vec<[f64; 2]>,
    /// rho(D^-1 A) as estimated (0 where no estimate was needed).
    pub spectral_radius: f64,
    /// None on the coarsest level.
    pub transfer: Option<Transfer>,
    /// A coarse level's block pattern, where a structure-only setup built
    /// `a` from it (the device writes its pattern out from this).
    blocks: Option<host::BlockPattern>,
}

pub struct Hierarchy {
    pub levels: Vec<Level>,
    /// The coarsest matrix's inverse (row-major), or None when coarsening
    /// stalled above the dense limit and the coarsest level is smoothed.
    pub coarse_inverse: Option<Vec<f64>>,
    pub smoother: Smoother,
    /// Where the finest matrix is not symmetric: (i, j, a_ij, a_ji).
    pub asymmetry: Option<(usize, usize, f64, f64)>,
    /// Each finest entry's transposed entry, when the pattern is symmetric.
    mirror: Option<Vec<u32>>,
    pub options: Options,
    /// Seconds per phase of the last setup or re-setup (on the device when
    /// its solver runs there).
    pub phases: Vec<(std::borrow::Cow<'static, str>, f64)>,
    /// Built by `structure`: the numbers are zeros until the device's
    /// re-setup computes them.
    pub needs_numbers: bool,
    /// Where the device fits the tentative prolongators (the host has their
    /// patterns only): each finest near-null vector's multiplier (1 unless
    /// setup.rs `checked_vectors` scaled it).
    pub fit_scale: Option<Vec<f64>>,
}

impl Hierarchy {
    /// Sets up the hierarchy of `a` (square, every diagonal present and nonzero).
    pub fn new(a: Mat, options: &Options) -> Result<Hierarchy> {
        setup::build(a, options, None, None)
    }

    /// The hierarchy's structure alone, for a device to compute the numbers
    /// (`cuda::DeviceHierarchy::new` does, by its re-setup): the host reads
    /// the pattern only (`a.v` may be empty) and skips the value checks, the
    /// symmetry check, the products' values, the Lanczos estimates and the
    /// coarsest inverse. A strength threshold above 0 reads the coarse
    /// levels' values to coarsen them, so it is refused here: take `new`.
    /// `known.symmetric_pattern`: the caller found A's pattern symmetric (on
    /// the device, `cuda::finest_mirror`), so the strength graphs need no
    /// symmetrising. `known.node_blocks`: where the caller checked whether
    /// A's rows are nodes of `block_size` x `block_size` blocks (on the
    /// device, `cuda::finest_nodes_are_blocks`), what it found; None: checked
    /// here. `known.fit_on_device`: the device fits the tentative
    /// prolongators where every level keeps block patterns (`fit_scale` says
    /// whether it does); such a hierarchy re-sets up on the device only.
    /// `device`: where the device computes the finest level's products' patterns.
    pub fn structure(
        a: Mat,
        options: &Options,
        known: setup::StructureOnly,
        device: Option<&mut dyn setup::DeviceProducts>,
    ) -> Result<Hierarchy> {
        setup::build(a, options, Some(known), device)
    }

    /// The same aggregates and patterns with new values of the finest
    /// matrix (same pattern, `values` in its entry order).
    pub fn refresh(&mut self, values: &[f64]) -> Result<()> {
        setup::refresh(self, values)
    }

    /// Whether the cycle reads level `l`'s matrix as f32 (Options::f32_cycle;
    /// a Gauss-Seidel level keeps its factor's f64 values).
    pub fn single_on_level(&self, l: usize) -> bool {
        self.options.f32_cycle && !matches!(self.smoother.on_level(l), Smoother::GaussSeidel { .. })
    }

    /// Whether the cycle visits coarse level `l` a second time from the
    /// first visit's residual (a W-cycle's or, where the level is cheap, a
    /// hybrid cycle's; not the dense coarsest, which the first visit solves).
    pub fn visits_twice(&self, l: usize) -> bool {
        let dense = l + 1 == self.levels.len() && self.coarse_inverse.is_some();
        l >= 1 && !dense && self.options.cycle.twice(self.levels[l].a.nnz(), self.levels[l - 1].a.nnz())
    }

    /// Sum of the levels' nonzeros over the finest's.
    pub fn operator_complexity(&self) -> f64 {
        self.levels.iter().map(|l| l.a.nnz()).sum::<usize>() as f64 / self.levels[0].a.nnz().max(1) as f64
    }

    /// Levels, rows, nonzeros and complexity, a line each.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "AMG ({} {} aggregation), {} levels, operator complexity {:.3}, {}-cycle, smoother {}, coarsest {}{}\n",
            if self.options.smooth_prolongator { "smoothed" } else { "plain" },
            self.options.aggregation.name(),
            self.levels.len(),
            self.operator_complexity(),
            self.options.cycle.name(),
            self.smoother.name(),
            if self.coarse_inverse.is_some() { "dense inverse" } else { "smoothed" },
            if self.options.f32_cycle { ", cycle over f32 values" } else { "" },
        );
        s += "  last (re-)setup:";
        for (phase, secs) in &self.phases {
            s += &format!(" {phase} {:.1} ms,", secs * 1e3);
        }
        s.pop();
        s += "\n";
        for (l, lv) in self.levels.iter().enumerate() {
            s += &format!(
                "  level {l}: {:>10} rows {:>12} nonzeros {:>6.1} per row, rho(D^-1 A) {:.3}\n",
                lv.a.nrows,
                lv.a.nnz(),
                lv.a.nnz() as f64 / lv.a.nrows.max(1) as f64,
                lv.spectral_radius
            );
        }
        s
    }
}

/// The V-cycle as the Krylov methods' preconditioner. On the device the
/// finest matrix is the solver's own (`fine`), not a copy.
pub struct Amg<'a> {
    pub h: &'a Hierarchy,
    pub device: Option<&'a cuda::DeviceHierarchy>,
    pub fine: Option<(&'a DevicePattern, &'a Buffer<f64>)>,
}

impl Preconditioner for Amg<'_> {
    fn apply_host(&self, r: &[f64], z: &mut [f64]) -> Result<()> {
        cpu::vcycle(self.h, r, z);
        Ok(())
    }
    fn apply_device(&self, g: &Gpu, r: &DeviceBuffer<f64>, z: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        let (dh, (dp, values)) =
            (self.device.ok_or_else(crate::array::mixed_backends)?, self.fine.ok_or_else(crate::array::mixed_backends)?);
        cuda::vcycle(g, self.h, dh, dp, values.device()?, r, z, sc)
    }
}
