//! The solver object for a CSR matrix: a Krylov method of `crate::krylov`
//! over the matrix as an `Operator`, with no, Jacobi, ILU(0) or AMG
//! preconditioning (ILU(0) is a `Preconditioner` of this room: the
//! factorisation and both triangular solves follow the matrix's pattern;
//! AMG is `crate::amg`'s). The preconditioner is rebuilt when the matrix
//! values change (AMG: a values-only re-setup of the kept hierarchy).

use super::grid_walk::GridWalk;
use super::multicolour::{Colouring, DeviceColouring, Split, SplitMap};
use super::transpose::Transposed;
use super::{block, cpu, cuda, f64_buf, Csr, DevicePattern, Pattern};
use crate::amg;
use crate::array::{Array, Buffer};
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::{DeviceBuffer, Gpu, Graph};
use crate::krylov::cuda::{BlockCsr, BlockPrecond, CudaOps};
use crate::krylov::{cpu::CpuOps, GlobalSum, Identity, Jacobi, Operator, Preconditioner, Reduced, Slot, SLOTS};
pub use crate::krylov::{outcome_status, Method, Outcome};
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precond {
    None,
    Jacobi,
    /// ILU(0), the triangular solves exact (the CPU reference's iterations).
    Ilu0,
    /// ILU(0)'s factors, each triangular solve approximated by `sweeps`
    /// Jacobi sweeps (no dependency between rows; more iterations than ILU(0)).
    Ilu0Jacobi {
        sweeps: usize,
    },
    /// ILU(0) of the matrix reordered by a colouring of its graph
    /// (super::multicolour): a launch a colour per sweep; more iterations
    /// than ILU(0) in the caller's order. With `split`, applied split by
    /// Eisenstat's trick (no product with A an iteration), where ILU(0)
    /// leaves A's off-diagonal entries as they are (a graph without
    /// triangles, as a 7-point grid's) and with BiCGSTAB, CGS or GMRES.
    Ilu0Multicolour {
        split: bool,
    },
    Amg,
}

impl Precond {
    /// Sweeps a triangle of Precond::Ilu0Jacobi when the caller names none.
    pub const DEFAULT_JACOBI_SWEEPS: usize = 2;

    /// The preconditioner as a message names it.
    pub fn name(self) -> String {
        match self {
            Precond::None => "no preconditioner".into(),
            Precond::Jacobi => "Jacobi".into(),
            Precond::Ilu0 => "ILU(0)".into(),
            Precond::Ilu0Jacobi { sweeps } => format!("ILU(0), each triangle by {sweeps} Jacobi sweeps"),
            Precond::Ilu0Multicolour { split: false } => "multicolour ILU(0)".into(),
            Precond::Ilu0Multicolour { split: true } => "multicolour ILU(0) applied split (Eisenstat)".into(),
            Precond::Amg => "AMG".into(),
        }
    }

    /// Whether the preconditioner is built from ILU(0)'s factors.
    pub fn is_ilu(self) -> bool {
        matches!(self, Precond::Ilu0 | Precond::Ilu0Jacobi { .. })
    }
}

/// The preconditioner as `fegpu solve --precond` names it.
impl std::fmt::Display for Precond {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Precond::None => write!(f, "none"),
            Precond::Jacobi => write!(f, "jacobi"),
            Precond::Ilu0 => write!(f, "ilu0"),
            Precond::Ilu0Jacobi { sweeps } => write!(f, "ilu0-jacobi:{sweeps}"),
            Precond::Ilu0Multicolour { split: false } => write!(f, "ilu0-multicolour"),
            Precond::Ilu0Multicolour { split: true } => write!(f, "ilu0-multicolour-split"),
            Precond::Amg => write!(f, "amg"),
        }
    }
}

/// Up to this many rows a device solver factors ILU(0) on the host and
/// uploads the factors: sherman5 (3,312 rows, a few hundred levels) took
/// 1.3 ms level by level on the H100 against well under 0.1 ms on one CPU
/// core; 2M-row grids take 4.6 ms on the device (BENCHMARKS.md).
pub const HOST_FACTOR_ROWS: usize = 50_000;

/// What a solver's preconditioner is built with beyond its kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub ilu_sweeps: IluSweeps,
    /// A device solver factors ILU(0) on the host up to this many rows.
    pub host_factor_rows: usize,
    /// BiCGSTAB on the device (none, Jacobi or Jacobi-swept ILU(0)) runs up
    /// to `cluster_system_rows` as one thread-block cluster with the system in
    /// its shared memory, one launch for several iterations (sm_90 on, where
    /// it fits; 0: never; a BSR matrix too, without Jacobi, its blocks read
    /// from global memory, up to krylov::cuda::BSR_CLUSTER_ROWS at most);
    /// elsewhere up to `small_system_rows` as one block, one launch an
    /// iteration (0: never; CSR only).
    pub small_system_rows: usize,
    /// See `small_system_rows`.
    pub cluster_system_rows: usize,
    pub amg: amg::Options,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            ilu_sweeps: IluSweeps::default(),
            host_factor_rows: HOST_FACTOR_ROWS,
            small_system_rows: crate::krylov::cuda::SMALL_SYSTEM_ROWS,
            cluster_system_rows: crate::krylov::cuda::CLUSTER_SYSTEM_ROWS,
            amg: amg::Options::default(),
        }
    }
}

impl Settings {
    /// The defaults, with the ILU(0) sweeps as IluSweeps::from_env says.
    pub fn from_env() -> Settings {
        Settings { ilu_sweeps: IluSweeps::from_env(), ..Settings::default() }
    }
}

/// How the device runs ILU(0)'s two triangular solves. All but `Windows`
/// (and the default where it takes the windows) give the same numbers as
/// the CPU reference's serial sweeps, bit for bit (the sums in the same
/// order); the windows give them to rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IluSweeps {
    /// One launch per sweep, synchronisation-free, chunks of `rows`
    /// consecutive rows a block (None: cuda::sweep_chunk). The default:
    /// measured faster than a launch per level on every matrix benched.
    /// With `rows` None the grid walk is taken where sparse::grid_walk finds
    /// the matrix a box stencil's and picks it, and the plane pipeline in
    /// windows (`Windows`, runs picked) where the stencil is 7-point.
    SyncFree { rows: Option<usize> },
    /// The grid walk (sparse::grid_walk); refused where the pattern is not a
    /// box stencil's in natural order.
    GridWalk,
    /// The plane pipeline (sparse::grid_walk::GridWalk::pipeline): the
    /// grid walk's planes, several a block, for 7-point stencils; refused
    /// on other patterns.
    Pipeline,
    /// The plane pipeline in windows (kernels/sparse.cu sweep_pipe): the
    /// planes in runs, each run's blocks starting a window of planes early
    /// from zero values. After each factorisation the device picks the
    /// window whose error, by a proven bound, is below 2^-56 of the largest
    /// value, and the runs (`runs`, else as many as the multiprocessors
    /// hold: cuda::PipeRuns): ILU(0)'s numbers to rounding, not bit for bit
    /// (the one schedule that is not), and the exact pipeline where no
    /// window of at most cuda::WINDOW_MOST planes is that short. Refused
    /// where the pipeline is.
    Windows { runs: Option<usize> },
    /// One launch per dependency level.
    Levels,
}

impl Default for IluSweeps {
    fn default() -> IluSweeps {
        IluSweeps::SyncFree { rows: None }
    }
}

impl IluSweeps {
    /// The default, FEGPU_ILU_CHUNK rows a chunk when set, or
    /// FEGPU_ILU_SWEEP=levels for a launch per level, =grid for the grid
    /// walk, =pipe for the plane pipeline, =windows for its windows
    /// (FEGPU_ILU_RUNS runs when set).
    pub fn from_env() -> IluSweeps {
        match std::env::var("FEGPU_ILU_SWEEP").as_deref() {
            Ok("levels") => return IluSweeps::Levels,
            Ok("grid") => return IluSweeps::GridWalk,
            Ok("pipe") => return IluSweeps::Pipeline,
            Ok("windows") => {
                return IluSweeps::Windows { runs: std::env::var("FEGPU_ILU_RUNS").ok().and_then(|v| v.parse().ok()) }
            }
            _ => {}
        }
        IluSweeps::SyncFree { rows: std::env::var("FEGPU_ILU_CHUNK").ok().and_then(|v| v.parse().ok()) }
    }
}

/// Rows grouped into dependency levels for the triangular sweeps: a row's
/// lower (upper) neighbours are all in earlier levels.
pub struct Levels {
    pub lower_rows: Vec<i32>,
    pub lower_ptr: Vec<usize>,
    pub upper_rows: Vec<i32>,
    pub upper_ptr: Vec<usize>,
    /// Each row's level in the lower and the upper sweep.
    pub lower_level: Vec<usize>,
    pub upper_level: Vec<usize>,
}

fn group_by_level(level: &[usize]) -> (Vec<i32>, Vec<usize>) {
    let nlev = level.iter().copied().max().map_or(0, |m| m + 1);
    let mut ptr = vec![0usize; nlev + 1];
    for &l in level {
        ptr[l + 1] += 1;
    }
    for i in 0..nlev {
        ptr[i + 1] += ptr[i];
    }
    let mut fill = ptr.clone();
    let mut rows = vec![0i32; level.len()];
    for (r, &l) in level.iter().enumerate() {
        rows[fill[l]] = r as i32;
        fill[l] += 1;
    }
    (rows, ptr)
}

/// The dependency levels of a square CSR pattern with sorted columns and
/// every diagonal present (`diag`: its position in each row).
pub fn levels(row_ptr: &[i32], col: &[i32], diag: &[i32]) -> Levels {
    let csr = (row_ptr, col, diag);
    let (lower_level, upper_level) = (level_numbers(csr, false), level_numbers(csr, true));
    let (lower_rows, lower_ptr) = group_by_level(&lower_level);
    let (upper_rows, upper_ptr) = group_by_level(&upper_level);
    Levels { lower_rows, lower_ptr, upper_rows, upper_ptr, lower_level, upper_level }
}

/// Each row's dependency level in the lower (upper) sweep: one past its
/// deepest lower (upper) neighbour.
fn level_numbers((row_ptr, col, diag): (&[i32], &[i32], &[i32]), upper: bool) -> Vec<usize> {
    let n = diag.len();
    let mut level = vec![0usize; n];
    let mut set = |i: usize| {
        let (s, e) =
            if upper { (diag[i] as usize + 1, row_ptr[i + 1] as usize) } else { (row_ptr[i] as usize, diag[i] as usize) };
        level[i] = col[s..e].iter().map(|&k| level[k as usize] + 1).max().unwrap_or(0);
    };
    if upper {
        (0..n).rev().for_each(&mut set);
    } else {
        (0..n).for_each(&mut set);
    }
    level
}

/// The rows of one triangular sweep as the synchronisation-free device
/// sweep walks them: chunks of `chunk` consecutive rows (for the upper sweep
/// counted from the last row), each chunk's rows grouped by their global
/// dependency level, ascending inside a level. A row's neighbours then come
/// in an earlier chunk or at an earlier level of its own.
pub struct SweepOrder {
    pub chunk: usize,
    /// Rows, chunk by chunk, level by level.
    pub order: Vec<i32>,
    /// Where each level starts in `order` (all chunks' levels in turn, then the end).
    pub level_ptr: Vec<i32>,
    /// Where each chunk's first level is in `level_ptr` (then the level count).
    pub chunk_level: Vec<i32>,
}

impl SweepOrder {
    /// The most rows of one level in one chunk (the block needs no more threads).
    pub fn widest(&self) -> usize {
        self.level_ptr.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0)
    }
}

impl Levels {
    /// The lower (upper) sweep's order for chunks of `chunk` rows, from the
    /// level numbers already counted.
    pub fn sweep_order(&self, chunk: usize, upper: bool) -> SweepOrder {
        let level = if upper { &self.upper_level } else { &self.lower_level };
        let n = level.len();
        let chunk = chunk.clamp(1, n.max(1));
        let mut out = SweepOrder { chunk, order: Vec::with_capacity(n), level_ptr: vec![0], chunk_level: vec![0] };
        for c in 0..n.div_ceil(chunk) {
            let (lo, hi) =
                if upper { (n.saturating_sub((c + 1) * chunk), n - c * chunk) } else { (c * chunk, (c * chunk + chunk).min(n)) };
            let start = out.order.len();
            out.order.extend((lo..hi).map(|i| i as i32));
            out.order[start..].sort_by_key(|&i| (level[i as usize], i));
            for j in start + 1..out.order.len() {
                if level[out.order[j] as usize] != level[out.order[j - 1] as usize] {
                    out.level_ptr.push(j as i32);
                }
            }
            out.level_ptr.push(out.order.len() as i32);
            out.chunk_level.push(out.level_ptr.len() as i32 - 1);
        }
        out
    }
}

/// The Krylov work vectors, where the backend keeps them.
enum Vectors {
    Host(Vec<Vec<f64>>),
    Device(Vec<DeviceBuffer<f64>>),
}

/// What only a device solve keeps: reduction scratch, the scalars of the
/// device-driven iterations and the iteration captured on the first solve.
struct DeviceWork {
    reduce: crate::array::cuda::Reduce,
    scalars: DeviceBuffer<f64>,
    iteration: Option<Graph>,
}

/// BiCG's A^T and M^T: the transposed matrix, and for ILU(0) the factors
/// turned to its pattern with the sweeps over it (on the device).
struct TransposedState {
    t: Transposed,
    factors: Buffer<f64>,
    levels: Option<(cuda::DeviceLevels, cuda::DeviceSweeps)>,
}

struct State {
    vecs: Vectors,
    /// Jacobi's inverse diagonal or ILU(0)'s factors, where the matrix lives.
    factors: Buffer<f64>,
    /// ILU(0) on the device: the lower levels the factorisation walks, and the sweeps.
    levels: Option<(cuda::DeviceLevels, cuda::DeviceSweeps)>,
    /// Multicolour ILU(0)'s colouring, and its device copy on the CUDA backend.
    colouring: Option<(Colouring, Option<DeviceColouring>)>,
    /// Multicolour ILU(0) applied split: e = D - 2 D~, where the matrix lives.
    shift: Buffer<f64>,
    /// AMG's hierarchy, and its device copy on the CUDA backend.
    amg: Option<(amg::Hierarchy, Option<amg::cuda::DeviceHierarchy>)>,
    device: Option<DeviceWork>,
    /// BiCG only.
    transposed: Option<TransposedState>,
    /// The matrix values version the preconditioner was built from.
    built_for: Option<u64>,
    history: Vec<f64>,
}

/// What the preconditioner is built from, borrowed from the state field by
/// field (the work vectors stay free to borrow).
struct Built<'a> {
    factors: &'a Buffer<f64>,
    levels: Option<&'a (cuda::DeviceLevels, cuda::DeviceSweeps)>,
    colouring: Option<&'a (Colouring, Option<DeviceColouring>)>,
    amg: Option<&'a (amg::Hierarchy, Option<amg::cuda::DeviceHierarchy>)>,
}

macro_rules! built_of {
    ($st:expr) => {
        Built { factors: &$st.factors, levels: $st.levels.as_ref(), colouring: $st.colouring.as_ref(), amg: $st.amg.as_ref() }
    };
}

pub struct Solver {
    pub csr: Arc<Csr>,
    pub method: Method,
    pub precond: Precond,
    pub settings: Settings,
    state: Mutex<State>,
}

/// A rank's rows of a distributed matrix (`crate::dist`) as the operator of
/// a solve whose own matrix is the rank's diagonal block: the product is
/// built around that block's values, which the solver holds locked.
pub trait RankProduct {
    fn product<'a>(&'a self, diagonal_block: &'a Buffer<f64>) -> Box<dyn Operator + 'a>;
}

/// A CSR (or, with `block` > 1, BSR) matrix as the Krylov methods' operator.
pub struct CsrOperator<'a> {
    pub p: &'a Pattern,
    pub block: usize,
    /// The device copy of the pattern (None on the CPU backend).
    pub dp: Option<&'a DevicePattern>,
    pub values: &'a Buffer<f64>,
}

impl CsrOperator<'_> {
    fn device_pattern(&self) -> Result<&DevicePattern> {
        self.dp.ok_or_else(crate::array::mixed_backends)
    }
}

impl Operator for CsrOperator<'_> {
    fn apply_host(&self, x: &[f64], y: &mut [f64]) -> Result<()> {
        block::cpu::spmv(self.p, self.block, self.values.host()?, 1.0, x, 0.0, y);
        Ok(())
    }
    fn apply_device(&self, g: &Gpu, x: &DeviceBuffer<f64>, y: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        block::cuda::spmv(g, self.device_pattern()?, self.p.nrows, self.block, self.values.device()?, 1.0, x, 0.0, y, sc)
    }
    fn block_csr(&self) -> Option<BlockCsr<'_>> {
        Some(block_csr(self.p, self.block, self.dp?, self.values.device().ok()?))
    }
    /// Short rows (few threads per row): the product and p.q in one kernel.
    fn apply_pq_device(
        &self,
        g: &Gpu,
        p: &DeviceBuffer<f64>,
        q: &DeviceBuffer<f64>,
        reduce: &crate::array::cuda::Reduce,
        sc: &DeviceBuffer<f64>,
    ) -> Option<Result<()>> {
        let dp = self.dp.filter(|dp| self.block == 1 && dp.threads_per_row <= cuda::FUSED_PQ_MAX_TPR)?;
        Some(self.values.device().and_then(|v| cuda::spmv_pq(g, dp, self.p.nrows, v, p, q, reduce, sc, None)))
    }
}

/// The pattern's device copy with `values`, as the small-system iteration reads them.
fn block_csr<'a>(p: &'a Pattern, block: usize, dp: &'a DevicePattern, values: &'a DeviceBuffer<f64>) -> BlockCsr<'a> {
    BlockCsr { block, host_row_ptr: &p.row_ptr, row_ptr: &dp.row_ptr, col: &dp.col, diag: &dp.diag, values }
}

/// ILU(0): z = U^-1 L^-1 r with the factors in the matrix's pattern, the
/// triangular solves level by level on the device, or with `jacobi`, each
/// approximated by that many Jacobi sweeps. With `block` > 1, block ILU(0)
/// (super::block), level by level.
pub struct Ilu0<'a> {
    pub p: &'a Pattern,
    pub block: usize,
    pub dp: Option<&'a DevicePattern>,
    pub lu: &'a Buffer<f64>,
    pub levels: Option<&'a (cuda::DeviceLevels, cuda::DeviceSweeps)>,
    pub jacobi: Option<usize>,
}

impl Preconditioner for Ilu0<'_> {
    fn apply_host(&self, r: &[f64], z: &mut [f64]) -> Result<()> {
        match self.jacobi {
            None if self.block > 1 => block::cpu::ilu0_apply(self.p, self.block, self.lu.host()?, r, z),
            None => cpu::ilu0_apply(self.p, self.lu.host()?, r, z),
            Some(sweeps) if self.block > 1 => block::cpu::ilu0_apply_jacobi(self.p, self.block, self.lu.host()?, sweeps, r, z),
            Some(sweeps) => cpu::ilu0_apply_jacobi(self.p, self.lu.host()?, sweeps, r, z),
        }
        Ok(())
    }
    fn apply_device(&self, g: &Gpu, r: &DeviceBuffer<f64>, z: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        let (dp, (lower, sweeps)) =
            (self.dp.ok_or_else(crate::array::mixed_backends)?, self.levels.ok_or_else(crate::array::mixed_backends)?);
        match sweeps {
            cuda::DeviceSweeps::Levels { upper } if self.block > 1 => {
                block::cuda::ilu0_apply(g, dp, self.block, (lower, upper), self.lu.device()?, r, z, sc)
            }
            cuda::DeviceSweeps::BlockJacobi { sweeps, scratch: (a, b) } => {
                block::cuda::ilu0_apply_jacobi(g, dp, self.p.nrows, self.block, *sweeps, (a, b), self.lu.device()?, r, z, sc)
            }
            _ => cuda::ilu0_apply(g, dp, self.p.nrows, lower, sweeps, self.lu.device()?, r, z, sc),
        }
    }
    /// The Jacobi-swept forms only (of scalar or block triangles): the exact
    /// sweeps walk levels, which one block or cluster cannot hurry.
    fn block_form(&self) -> Option<BlockPrecond<'_>> {
        let (dp, (_, sweeps)) = (self.dp?, self.levels?);
        use cuda::DeviceSweeps::{BlockJacobi, Jacobi};
        let (Jacobi { sweeps, scratch: (a, b), .. } | BlockJacobi { sweeps, scratch: (a, b) }) = sweeps else { return None };
        let factors = block_csr(self.p, self.block, dp, self.lu.device().ok()?);
        Some(BlockPrecond::IluSweeps { factors, sweeps: *sweeps, scratch: (a, b) })
    }
}

/// Multicolour ILU(0) (super::multicolour): the factors of P A P^T.
pub struct Ilu0Multicolour<'a> {
    pub c: &'a Colouring,
    pub device: Option<&'a DeviceColouring>,
    pub lu: &'a Buffer<f64>,
}

impl Preconditioner for Ilu0Multicolour<'_> {
    fn apply_host(&self, r: &[f64], z: &mut [f64]) -> Result<()> {
        self.c.apply(self.lu.host()?, r, z);
        Ok(())
    }
    fn apply_device(&self, g: &Gpu, r: &DeviceBuffer<f64>, z: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        let d = self.device.ok_or_else(crate::array::mixed_backends)?;
        d.passes(g, self.c, self.lu.device()?, r, z, cuda::ColourPasses::Apply, sc)
    }
}

impl Solver {
    /// Structural setup (diagonal check, levels, workspace) and the first
    /// factorisation, with the default settings (Settings::from_env).
    pub fn new(csr: Arc<Csr>, method: Method, precond: Precond) -> Result<Solver> {
        Solver::with_settings(csr, method, precond, Settings::from_env())
    }

    /// As `new`, with the ILU(0) sweeps and AMG options chosen by the caller.
    pub fn with_settings(csr: Arc<Csr>, method: Method, precond: Precond, settings: Settings) -> Result<Solver> {
        let sweeps = settings.ilu_sweeps;
        let p = &csr.pattern;
        if p.nrows != p.ncols {
            return Err(Error::size(format!("A is {} x {}: the solvers need a square matrix", p.nrows, p.ncols)));
        }
        if let Precond::Ilu0Jacobi { sweeps: 0 } = precond {
            return Err(Error::invalid("ILU(0) with Jacobi-swept triangular solves: sweeps = 0, must be at least 1"));
        }
        let k = csr.block;
        if k > 1 {
            let refused = match precond {
                Precond::Amg => Some("AMG (give it the CSR form with the AMG option block_size)"),
                Precond::Ilu0Multicolour { .. } => Some("multicolour ILU(0) (block ILU(0) or block Jacobi take the blocks)"),
                _ if method.needs_transpose() => Some("BiCG (use BiCGSTAB, CGS or GMRES)"),
                _ => None,
            };
            if let Some(what) = refused {
                return Err(Error::unsupported(format!("a {k} x {k} block matrix: {what} takes a CSR matrix")));
            }
        }
        if precond != Precond::None {
            if let Some(r) = p.diag.iter().position(|&d| d < 0) {
                let what = match precond {
                    Precond::Ilu0 | Precond::Ilu0Jacobi { .. } | Precond::Ilu0Multicolour { .. } => "ILU(0)",
                    Precond::Amg => "AMG",
                    _ => "Jacobi",
                };
                let row = if k > 1 {
                    format!("{} has no diagonal block", block::block_row_name(r))
                } else {
                    format!("{} has no diagonal entry", cpu::row_name(r))
                };
                return Err(Error::new(ErrorKind::Breakdown, format!("{what}: {row} (a zero pivot)")));
            }
        }
        let n = csr.rows();
        let mut state = match csr.ctx.gpu() {
            None => State {
                vecs: Vectors::Host(vec![vec![0.0; n]; SLOTS]),
                factors: Buffer::Host(Vec::new()),
                levels: None,
                colouring: None,
                shift: Buffer::Host(Vec::new()),
                amg: None,
                device: None,
                transposed: None,
                built_for: None,
                history: Vec::new(),
            },
            Some(g) => {
                let levels = device_sweeps(g, p, k, precond, sweeps)?;
                let factors = match precond {
                    Precond::None | Precond::Amg => 1,
                    Precond::Jacobi => n * k,
                    Precond::Ilu0 | Precond::Ilu0Jacobi { .. } | Precond::Ilu0Multicolour { .. } => csr.stored_len(),
                };
                State {
                    vecs: Vectors::Device(crate::krylov::cuda::work_vectors(g, n)?),
                    factors: Buffer::Device(g.alloc(factors.max(1))?),
                    levels,
                    colouring: None,
                    shift: Buffer::Device(g.alloc(if precond == (Precond::Ilu0Multicolour { split: true }) {
                        n.max(1)
                    } else {
                        1
                    })?),
                    amg: None,
                    device: Some(DeviceWork {
                        reduce: crate::array::cuda::Reduce::new(g)?,
                        scalars: g.alloc(crate::krylov::cuda::Scalar::LEN)?,
                        iteration: None,
                    }),
                    transposed: None,
                    built_for: None,
                    history: Vec::new(),
                }
            }
        };
        if let Precond::Ilu0Multicolour { split } = precond {
            let c = Colouring::new(p);
            if split {
                refuse_split(&c, method)?;
            }
            let device = csr.ctx.gpu().map(|g| DeviceColouring::new(g, &c)).transpose()?;
            state.colouring = Some((c, device));
        }
        if method.needs_transpose() {
            let refused = match precond {
                Precond::Amg => Some("AMG's V-cycle"),
                Precond::Ilu0Multicolour { .. } => Some("multicolour ILU(0)"),
                _ => None,
            };
            if let Some(what) = refused {
                return Err(Error::unsupported(format!(
                    "BiCG needs M^-T, which {what} does not give here: use BiCGSTAB, CGS or GMRES with it"
                )));
            }
            let t = Transposed::new(&csr)?;
            let (levels, factors) = match csr.ctx.gpu() {
                Some(g) => (
                    device_sweeps(g, &t.csr.pattern, 1, precond, sweeps)?,
                    Buffer::Device(g.alloc(if precond.is_ilu() { p.nnz().max(1) } else { 1 })?),
                ),
                None => (None, Buffer::Host(Vec::new())),
            };
            state.transposed = Some(TransposedState { t, factors, levels });
        }
        let s = Solver { csr, method, precond, settings, state: Mutex::new(state) };
        s.refresh(&mut *s.lock()?)?;
        Ok(s)
    }

    /// Builds the preconditioner now if the values changed (a solve does so
    /// itself); returns the seconds spent. A distributed solve calls it first,
    /// so that every rank knows the others' blocks built before iterating.
    pub fn prepare(&self) -> Result<f64> {
        self.refresh(&mut *self.lock()?)
    }

    /// The solver's state; refused once a call that panicked holding it may
    /// have left it half-changed (`error::locked`).
    fn lock(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        crate::error::locked(&self.state, "the solver")
    }

    /// The state for reading a report (summary, history) even so.
    fn peek(&self) -> std::sync::MutexGuard<'_, State> {
        crate::error::peek(&self.state)
    }

    /// Rebuilds the preconditioner when the matrix values changed since the
    /// last build; returns the seconds spent (0 when the build was current).
    fn refresh(&self, st: &mut State) -> Result<f64> {
        let vals = self.csr.values()?;
        if st.built_for == Some(vals.version) {
            return Ok(0.0);
        }
        let t = std::time::Instant::now();
        let p = &self.csr.pattern;
        st.built_for = None; // a failed build leaves no stale factor in use
        match self.precond {
            Precond::None => {}
            Precond::Jacobi if self.csr.block > 1 => self.block_jacobi(&mut st.factors, &vals.data)?,
            Precond::Jacobi => {
                // the diagonal alone comes back once per refresh to be checked and inverted
                let d = jacobi_inverse(&self.csr.diagonal_of(&vals.data)?)?;
                match &mut st.factors {
                    Buffer::Host(f) => *f = d,
                    Buffer::Device(f) => self.csr.ctx.gpu().ok_or_else(crate::array::mixed_backends)?.upload(&d, f, 0)?,
                }
            }
            Precond::Ilu0 | Precond::Ilu0Jacobi { .. } | Precond::Ilu0Multicolour { .. } => {
                let colouring = st.colouring.as_ref();
                match (&mut st.factors, &vals.data) {
                    (Buffer::Host(f), Buffer::Host(v)) => *f = self.host_ilu0(colouring.map(|(c, _)| c), v)?,
                    (Buffer::Device(f), Buffer::Device(v)) => {
                        let g = self.csr.ctx.gpu().ok_or_else(crate::array::mixed_backends)?;
                        if self.csr.rows() <= self.settings.host_factor_rows {
                            // a launch per level costs more than the whole factorisation on the host
                            let lu = self.host_ilu0(colouring.map(|(c, _)| c), &self.csr.values_on_host(&vals.data)?)?;
                            g.upload(&lu, f, 0)?;
                        } else if let Some((c, dc)) = colouring {
                            // a launch a colour
                            let dc = dc.as_ref().ok_or_else(crate::array::mixed_backends)?;
                            dc.reorder_values(g, v, f)?;
                            cuda::ilu0(g, &dc.dp, &dc.lower, f, &c.pattern.diag, &|i| c.perm[i] as usize)?;
                        } else {
                            let dp = self.csr.device.as_ref().ok_or_else(crate::array::mixed_backends)?;
                            let (lower, _) = st.levels.as_ref().ok_or_else(crate::array::mixed_backends)?;
                            g.copy(v, f)?;
                            match self.csr.block {
                                1 => cuda::ilu0(g, dp, lower, f, &p.diag, &|i| i)?,
                                k => block::cuda::ilu0(g, dp, p.nrows, k, lower, f)?,
                            }
                        }
                    }
                    _ => return Err(crate::array::mixed_backends()),
                }
                if self.precond == (Precond::Ilu0Multicolour { split: true }) {
                    split_shift(st, &vals.data, self.csr.ctx.gpu())?;
                }
            }
            Precond::Amg => self.build_amg(st, &vals.data)?,
        }
        if let Some(ts) = &mut st.transposed {
            ts.t.refresh(&vals.data)?;
            if self.precond.is_ilu() {
                ts.t.ilu_factors(&self.csr, &st.factors, &mut ts.factors)?;
                split_refresh(&self.csr, ts.levels.as_ref(), &ts.factors)?;
            }
        }
        split_refresh(&self.csr, st.levels.as_ref(), &st.factors)?;
        st.built_for = Some(vals.version);
        Ok(t.elapsed().as_secs_f64())
    }

    /// Solves A x = b: `x` holds the initial guess on entry and the iterate on
    /// return. Returns the outcome (the caller turns it into a status with
    /// `outcome_status`), the true relative residual, and the seconds spent
    /// rebuilding the preconditioner first (0 when it was current).
    pub fn solve(&self, b: &Array, x: &Array, tol: f64, maxit: i64) -> Result<(Outcome, f64, f64)> {
        self.solve_over(b, x, tol, maxit, None)
    }

    /// As `solve`; with `distributed`, the rank's part of a distributed solve
    /// (`crate::dist`): the product is that one's (the rank's rows of the
    /// global matrix, halo exchange included), the reductions are summed
    /// over the ranks, and this solver's matrix is the rank's diagonal block,
    /// which the preconditioner is built from (block Jacobi over the ranks).
    pub fn solve_over(
        &self,
        b: &Array,
        x: &Array,
        tol: f64,
        maxit: i64,
        distributed: Option<(&dyn RankProduct, &dyn GlobalSum)>,
    ) -> Result<(Outcome, f64, f64)> {
        let n = self.csr.rows();
        super::check_vector(&self.csr, b, n, "b")?;
        super::check_vector(&self.csr, x, n, "x")?;
        if std::ptr::eq(b, x) {
            return Err(Error::invalid("b and x are the same array"));
        }
        crate::krylov::check_stopping(tol, maxit)?;
        let mut st = self.lock()?;
        let setup = self.refresh(&mut st)?;
        let vals = self.csr.values()?;
        let st = &mut *st;
        st.history.clear();
        let (mut gb, mut gx) = crate::array::lock_pair(b, x, "b", "x")?;
        let (bb, xb) = (f64_buf(&mut gb), f64_buf(&mut gx));
        let p = &self.csr.pattern;
        let dp = self.csr.device.as_ref();
        let op: Box<dyn Operator> = match distributed {
            None => Box::new(CsrOperator { p, block: self.csr.block, dp, values: &vals.data }),
            Some((rows, _)) => rows.product(&vals.data),
        };
        let op = &*op;
        let pc = self.preconditioner(built_of!(st), &vals.data);
        let pc: &dyn Preconditioner = &*pc;
        // multicolour ILU(0) applied split: the method's operator is L^-1 P A P^T U^-1, with no preconditioner
        let maps = match (self.precond, st.colouring.as_ref(), distributed) {
            (Precond::Ilu0Multicolour { split: true }, Some((c, device)), None) => {
                let (lu, shift) = (&st.factors, &st.shift);
                let map = |map| Split { c, device: device.as_ref(), lu, shift, map };
                Some(
                    [
                        SplitMap::Operator,
                        SplitMap::LowerInverse,
                        SplitMap::UpperTimes,
                        SplitMap::UpperInverse,
                        SplitMap::LowerTimes,
                    ]
                    .map(map),
                )
            }
            _ => None,
        };
        let split = maps.as_ref().map(|[_, left_inverse, right, right_inverse, left]| crate::krylov::Split {
            a: op,
            left_inverse,
            right,
            right_inverse,
            left,
        });
        let left = split.as_ref().map(|s| s.left);
        let (op, pc): (&dyn Operator, &dyn Preconditioner) = match &maps {
            Some([operator, ..]) => (operator, &Identity),
            None => (op, pc),
        };
        let bb: &Buffer<f64> = bb;
        // BiCG's A^T and M^T (a distributed solve has none: DistSolver refuses BiCG)
        let tvals =
            st.transposed.as_ref().filter(|_| distributed.is_none()).map(|ts| Ok((ts, ts.t.csr.values()?))).transpose()?;
        let t_parts = tvals.as_ref().map(|(ts, tv)| {
            let t = &ts.t.csr;
            let op = CsrOperator { p: &t.pattern, block: 1, dp: t.device.as_ref(), values: &tv.data };
            let pc: Box<dyn Preconditioner> = match self.precond {
                Precond::Ilu0 | Precond::Ilu0Jacobi { .. } => Box::new(Ilu0 {
                    p: &t.pattern,
                    block: 1,
                    dp: t.device.as_ref(),
                    lu: &ts.factors,
                    levels: ts.levels.as_ref(),
                    jacobi: self.jacobi_sweeps(),
                }),
                // Jacobi and the identity are their own transposes (the others are refused above)
                Precond::None => Box::new(Identity),
                _ => Box::new(Jacobi { inverse: &st.factors }),
            };
            (op, pc)
        });
        let transposed = t_parts.as_ref().map(|(op, pc)| (op as &dyn Operator, &**pc as &dyn Preconditioner));
        let (method, history) = (self.method, &mut st.history);
        let mut run = |ops: &mut dyn crate::krylov::Ops| match (distributed, &split) {
            (None, None) => crate::krylov::run(ops, method, tol, maxit, history),
            (None, Some(split)) => crate::krylov::run_split(ops, split, bb, method, tol, maxit, history),
            (Some((_, global)), _) => crate::krylov::run(&mut Reduced { inner: ops, global }, method, tol, maxit, history),
        };
        let (out, true_rel) = match (&mut st.vecs, &mut st.device, bb, xb) {
            (Vectors::Host(vecs), None, Buffer::Host(bh), Buffer::Host(xh)) => {
                vecs[Slot::B.index()].copy_from_slice(bh);
                vecs[Slot::X.index()].copy_from_slice(xh);
                let mut ops = CpuOps { op, pc, transposed, vecs, left };
                let result = run(&mut ops)?;
                xh.copy_from_slice(&ops.vecs[Slot::X.index()]);
                result
            }
            (Vectors::Device(vecs), Some(dw), Buffer::Device(bd), Buffer::Device(xd)) => {
                let g = self.csr.ctx.gpu().ok_or_else(crate::array::mixed_backends)?;
                g.copy(bd, &mut vecs[Slot::B.index()])?;
                g.copy(xd, &mut vecs[Slot::X.index()])?;
                let DeviceWork { reduce, scalars, iteration } = dw;
                // a distributed solve iterates on the host, which holds the global
                // scalars, unless its ranks form a team that sums them on the device
                let looping = (distributed.is_none() || op.device_team(g) != 0).then_some((scalars, iteration));
                let small_rows = (self.settings.small_system_rows, self.settings.cluster_system_rows);
                let mut ops = CudaOps { g, op, pc, transposed, n, vecs, reduce, looping, basis: None, small_rows, left };
                let result = run(&mut ops)?;
                g.copy(&ops.vecs[Slot::X.index()], xd)?;
                g.synchronize("solve")?;
                result
            }
            _ => return Err(crate::array::mixed_backends()),
        };
        Ok((out, true_rel, setup))
    }

    /// AMG's setup from the finest values (on the host), or its values-only
    /// re-setup when a hierarchy exists (on the device when the solver
    /// runs there: the values do not leave it). CG needs a symmetric
    /// matrix: a nonsymmetric one is refused, naming an entry.
    fn build_amg(&self, st: &mut State, values: &Buffer<f64>) -> Result<()> {
        // a failure below leaves no hierarchy: the next solve sets up anew
        let (h, device) = match (st.amg.take(), self.csr.ctx.gpu(), values) {
            (Some((mut h, Some(mut d))), Some(g), Buffer::Device(v)) => {
                let dp = self.csr.device.as_ref().ok_or_else(crate::array::mixed_backends)?;
                d.refresh(g, &mut h, dp, v)?;
                (h, Some(d))
            }
            (Some((mut h, None)), None, _) => {
                h.refresh(&self.csr.values_on_host(values)?)?;
                (h, None)
            }
            _ => {
                let p = &self.csr.pattern;
                // on the device the host builds the structure from the pattern and the
                // device computes the numbers, unless the coarsening reads values (strength > 0)
                let structure = match (self.csr.ctx.gpu(), values, &self.csr.device) {
                    // (not square: the host setup refuses it by name)
                    (Some(g), Buffer::Device(_), Some(dp)) if self.settings.amg.strength == 0.0 && p.nrows == p.ncols => {
                        Some((g, dp))
                    }
                    _ => None,
                };
                let v = if structure.is_some() { Vec::new() } else { self.csr.values_on_host(values)? };
                let clock = std::time::Instant::now();
                // the hierarchy's finest pattern is the matrix's own (shared, not copied)
                let a = amg::Mat { nrows: p.nrows, ncols: p.ncols, rp: p.row_ptr.clone(), ci: p.col.clone(), v };
                let (mut h, found) = match structure {
                    Some((g, dp)) => {
                        // the finest pattern's mirror on the device: whether the pattern is symmetric
                        let mirror = amg::cuda::finest_mirror(g, p.nrows, dp)?;
                        let mut laps: Vec<(std::borrow::Cow<'static, str>, f64)> =
                            vec![("device mirror".into(), clock.elapsed().as_secs_f64())];
                        let o = &self.settings.amg;
                        // parallel aggregation of a scalar system: the whole structure on the device
                        let on_device = match amg::device_structure::applies(o, mirror.is_some()) {
                            true => amg::device_structure::build(g, a.clone(), dp, o)?,
                            false => None,
                        };
                        let (mut h, found) = match on_device {
                            Some((h, found)) => (h, amg::cuda::FoundOnDevice { mirror, ..found }),
                            None => {
                                // whether its rows are nodes of blocks, which the host reads every row for
                                let before = clock.elapsed().as_secs_f64();
                                let blocks = amg::cuda::finest_nodes_are_blocks(g, p.nrows, o.block_size, dp)?;
                                laps.push(("device node blocks".into(), clock.elapsed().as_secs_f64() - before));
                                let known = amg::StructureOnly {
                                    symmetric_pattern: mirror.is_some(),
                                    node_blocks: Some(blocks),
                                    fit_on_device: true,
                                };
                                let mut products = amg::cuda::FinestProducts::new(g, dp, o.block_size);
                                // the near-null space the device fits T to goes up meanwhile
                                let (h, near_null_space) = std::thread::scope(|s| {
                                    let vectors = o.near_null_space.as_ref().filter(|_| known.device_fits(o));
                                    let up = vectors.map(|ns| s.spawn(move || cuda::upload(g, &ns.vectors)));
                                    let h = amg::Hierarchy::structure(a, o, known, Some(&mut products));
                                    let panicked =
                                        || Err(Error::new(ErrorKind::Internal, "the near-null space's upload panicked"));
                                    (h, up.map(|t| t.join().unwrap_or_else(|_| panicked())).transpose())
                                });
                                let (near_null_space, finest) = (near_null_space?, products.blocks.take());
                                (h?, amg::cuda::FoundOnDevice { mirror, near_null_space, held: vec![finest] })
                            }
                        };
                        h.phases.splice(0..0, laps);
                        (h, found)
                    }
                    None => (amg::Hierarchy::new(a, &self.settings.amg)?, amg::cuda::FoundOnDevice::default()),
                };
                let device = match (self.csr.ctx.gpu(), values) {
                    (Some(g), Buffer::Device(v)) => {
                        // new buffers: an iteration captured over the old ones is stale
                        if let Some(dw) = &mut st.device {
                            dw.iteration = None;
                        }
                        let dp = self.csr.device.as_ref().ok_or_else(crate::array::mixed_backends)?;
                        Some(amg::cuda::DeviceHierarchy::new(g, &mut h, (dp, v), found)?)
                    }
                    _ => None,
                };
                (h, device)
            }
        };
        if let (Method::Cg, Some((i, j, aij, aji))) = (self.method, h.asymmetry) {
            return Err(Error::invalid(format!(
                "CG needs a symmetric matrix: A({i},{j}) = {aij:e} but A({j},{i}) = {aji:e} (0-based); use BiCGSTAB"
            )));
        }
        st.amg = Some((h, device));
        Ok(())
    }

    /// The hierarchy's summary (levels, rows, nonzeros, complexity) after
    /// it has been built; None for the other preconditioners.
    pub fn amg_summary(&self) -> Option<String> {
        self.peek().amg.as_ref().map(|(h, _)| h.summary())
    }

    /// The preconditioner the solver was created with, over its built factors.
    fn preconditioner<'a>(&'a self, built: Built<'a>, values: &'a Buffer<f64>) -> Box<dyn Preconditioner + 'a> {
        let (p, dp) = (&self.csr.pattern, self.csr.device.as_ref());
        let Built { factors, levels, colouring, amg } = built;
        match self.precond {
            Precond::None => Box::new(Identity),
            Precond::Jacobi if self.csr.block > 1 => {
                Box::new(block::BlockJacobi { nb: p.nrows, block: self.csr.block, inverse: factors })
            }
            Precond::Jacobi => Box::new(Jacobi { inverse: factors }),
            Precond::Ilu0 | Precond::Ilu0Jacobi { .. } => {
                Box::new(Ilu0 { p, block: self.csr.block, dp, lu: factors, levels, jacobi: self.jacobi_sweeps() })
            }
            Precond::Ilu0Multicolour { .. } => {
                let (c, device) = colouring.expect("the solver was made with its colouring");
                Box::new(Ilu0Multicolour { c, device: device.as_ref(), lu: factors })
            }
            Precond::Amg => {
                let (h, device) = amg.expect("refresh built the hierarchy");
                Box::new(amg::Amg { h, device: device.as_ref(), fine: dp.map(|dp| (dp, values)) })
            }
        }
    }

    /// ILU(0)'s factors on the host from the stored values `v`: block ILU(0)
    /// for a block matrix, ILU(0) of P A P^T with multicolour ILU(0)'s `colouring`.
    fn host_ilu0(&self, colouring: Option<&Colouring>, v: &[f64]) -> Result<Vec<f64>> {
        if let Some(c) = colouring {
            let mut lu = c.reorder_values(v);
            c.factor(&mut lu)?;
            return Ok(lu);
        }
        let mut lu = v.to_vec();
        match self.csr.block {
            1 => cpu::ilu0(&self.csr.pattern, &mut lu)?,
            k => block::cpu::ilu0(&self.csr.pattern, k, &mut lu)?,
        }
        Ok(lu)
    }

    /// Block Jacobi's inverted diagonal blocks into `factors`, where the values are.
    fn block_jacobi(&self, factors: &mut Buffer<f64>, values: &Buffer<f64>) -> Result<()> {
        let (p, k) = (&self.csr.pattern, self.csr.block);
        match (factors, values) {
            (Buffer::Host(f), Buffer::Host(v)) => *f = block::cpu::diagonal_inverses(p, k, v)?,
            (Buffer::Device(f), Buffer::Device(v)) => {
                let dp = self.csr.device.as_ref().ok_or_else(crate::array::mixed_backends)?;
                block::cuda::diagonal_inverses(self.csr.ctx.device()?, dp, p.nrows, k, v, f)?
            }
            _ => return Err(crate::array::mixed_backends()),
        }
        Ok(())
    }

    fn jacobi_sweeps(&self) -> Option<usize> {
        match self.precond {
            Precond::Ilu0Jacobi { sweeps } => Some(sweeps),
            _ => None,
        }
    }

    pub fn history(&self) -> Vec<f64> {
        self.peek().history.clone()
    }

    /// z = M^-1 r: the preconditioner alone (rebuilt first if the values
    /// changed), as one iteration applies it. Returns the rebuild's seconds.
    pub fn precondition(&self, r: &Array, z: &Array) -> Result<f64> {
        self.apply_preconditioner(r, z, true)
    }

    /// The plane pipeline's plans (lower, upper sweep: {window in planes,
    /// runs, planes a run}; window -1: the exact schedule) as the last
    /// factorisation picked them (a solver factors when it is created and
    /// when the values change); None where the sweeps are not the
    /// pipeline's, or nothing is built.
    pub fn ilu_plans(&self) -> Result<Option<[[i32; 3]; 2]>> {
        let st = self.peek();
        match (&st.levels, st.built_for) {
            (Some((_, cuda::DeviceSweeps::SyncFree(sf))), Some(_)) => sf.plans(self.csr.ctx.device()?),
            _ => Ok(None),
        }
    }

    /// `ilu_plans` in words, or multicolour ILU(0)'s colours, a line (None
    /// where there are none).
    pub fn ilu_summary(&self) -> Option<String> {
        if let Some((c, _)) = &self.peek().colouring {
            return Some(format!(
                "ILU(0) in multicolour order: {} colours (rows {}), a pass a colour per triangular solve\n",
                c.colours,
                c.colour_rows().iter().map(|r| r.to_string()).collect::<Vec<_>>().join(" + ")
            ));
        }
        let plans = self.ilu_plans().ok().flatten()?;
        let sweep = |[window, runs, planes]: [i32; 3]| match window {
            -1 => "exact".to_string(),
            w => format!("{runs} runs of {planes} planes, each from a window of {w} planes before it"),
        };
        Some(format!("ILU(0) sweeps: the plane pipeline; lower: {}; upper: {}\n", sweep(plans[0]), sweep(plans[1])))
    }

    /// z = M^-1 r queued on the device without a wait, so that a CUDA graph
    /// can capture it (`Gpu::capture`), as a solve's captured iteration
    /// holds it: the preconditioner must be built for the current values (a
    /// `precondition` or a solve first); device arrays only.
    pub fn queue_precondition(&self, r: &Array, z: &Array) -> Result<()> {
        self.apply_preconditioner(r, z, false).map(|_| ())
    }

    /// `precondition` (`wait`: rebuilt first where needed, and waited for)
    /// or `queue_precondition`.
    fn apply_preconditioner(&self, r: &Array, z: &Array, wait: bool) -> Result<f64> {
        let n = self.csr.rows();
        super::check_vector(&self.csr, r, n, "r")?;
        super::check_vector(&self.csr, z, n, "z")?;
        let mut st = self.lock()?;
        let setup = match wait {
            true => self.refresh(&mut st)?,
            false if st.built_for == Some(self.csr.values()?.version) => 0.0,
            false => return Err(Error::invalid(
                "queue_precondition: the preconditioner is not built for the current values: call precondition or solve first",
            )),
        };
        let (mut gr, mut gz) = crate::array::lock_pair(r, z, "r", "z")?;
        let (rb, zb) = (f64_buf(&mut gr), f64_buf(&mut gz));
        let vals = self.csr.values()?;
        let pc = self.preconditioner(built_of!(st), &vals.data);
        match (rb, zb) {
            (Buffer::Host(_), Buffer::Host(_)) if !wait => {
                return Err(Error::invalid("queue_precondition: r and z are host arrays: there is nothing to queue"))
            }
            (Buffer::Host(r), Buffer::Host(z)) => pc.apply_host(r, z)?,
            (Buffer::Device(r), Buffer::Device(z)) => {
                let g = self.csr.ctx.device()?;
                if pc.is_identity() {
                    g.copy(r, z)?;
                } else {
                    pc.apply_device(g, r, z, None)?;
                }
                if wait {
                    g.synchronize("precondition")?;
                }
            }
            _ => return Err(crate::array::mixed_backends()),
        }
        Ok(setup)
    }
}

/// ILU(0)'s device sweeps over pattern `p` of `block`-sized blocks (None
/// unless `precond` is an ILU(0)): the lower levels (which the factorisation
/// walks too), and the two triangular solves as `sweeps` says, or Jacobi-swept.
fn device_sweeps(
    g: &Gpu,
    p: &Pattern,
    block: usize,
    precond: Precond,
    sweeps: IluSweeps,
) -> Result<Option<(cuda::DeviceLevels, cuda::DeviceSweeps)>> {
    if !precond.is_ilu() {
        return Ok(None);
    }
    let lv = levels(&p.row_ptr, &p.col, &p.diag);
    let factor = cuda::DeviceLevels::new(g, &lv.lower_rows, &lv.lower_ptr)?;
    if block > 1 {
        // block rows sweep level by level or Jacobi-swept (the synchronisation-free sweeps are the CSR path's)
        let rows = (p.nrows * block).max(1);
        return Ok(Some((
            factor,
            match precond {
                Precond::Ilu0Jacobi { sweeps } => {
                    cuda::DeviceSweeps::BlockJacobi { sweeps, scratch: (g.alloc(rows)?, g.alloc(rows)?) }
                }
                _ => cuda::DeviceSweeps::Levels { upper: cuda::DeviceLevels::new(g, &lv.upper_rows, &lv.upper_ptr)? },
            },
        )));
    }
    if let Precond::Ilu0Jacobi { sweeps } = precond {
        let scratch = (g.alloc(p.nrows.max(1))?, g.alloc(p.nrows.max(1))?);
        let split = Box::new(cuda::SplitFactors::new(g, p)?);
        return Ok(Some((factor, cuda::DeviceSweeps::Jacobi { sweeps, scratch, split })));
    }
    let sweeps = match sweeps {
        IluSweeps::Levels => cuda::DeviceSweeps::Levels { upper: cuda::DeviceLevels::new(g, &lv.upper_rows, &lv.upper_ptr)? },
        IluSweeps::SyncFree { .. } | IluSweeps::GridWalk | IluSweeps::Pipeline | IluSweeps::Windows { .. } => {
            // the walk (the pipeline where both triangles take it) where it is picked (rows unset), or asked for
            let csr = (&p.row_ptr[..], &p.col[..], &p.diag[..]);
            let found = || {
                GridWalk::find(csr.0, csr.1, csr.2).ok_or_else(|| {
                    Error::invalid(
                        "ILU(0) sweeps: the grid walk needs a stencil on a box, rows numbered x fastest (sparse::grid_walk)",
                    )
                })
            };
            let (rows, boxed) = match sweeps {
                IluSweeps::SyncFree { rows } => {
                    let walk = rows.is_none().then(|| GridWalk::pick(csr.0, csr.1, csr.2)).flatten();
                    let boxed = walk.map(|w| match w.pipelines(csr.0, csr.1, csr.2) {
                        Some(layouts) => cuda::BoxSweeps::Pipeline(w, layouts, cuda::PipeRuns::new(g, &w, true, None)),
                        None => cuda::BoxSweeps::Walk(w, csr),
                    });
                    (rows, boxed)
                }
                IluSweeps::Pipeline | IluSweeps::Windows { .. } => {
                    let w = found()?;
                    let layouts = w.pipelines(csr.0, csr.1, csr.2).ok_or_else(|| {
                        Error::invalid(
                            "ILU(0) plane pipeline: needs a 7-point stencil on a box (the point, line and plane before; lines of at most 512 points, nx + ny at most 2048)",
                        )
                    })?;
                    let runs = match sweeps {
                        IluSweeps::Windows { runs } => cuda::PipeRuns::new(g, &w, true, runs),
                        _ => cuda::PipeRuns::new(g, &w, false, None),
                    };
                    (None, Some(cuda::BoxSweeps::Pipeline(w, layouts, runs)))
                }
                _ => (None, Some(cuda::BoxSweeps::Walk(found()?, csr))),
            };
            cuda::DeviceSweeps::SyncFree(Box::new(cuda::SyncFreeSweeps::new(g, &lv, p.nrows, rows, boxed)?))
        }
    };
    Ok(Some((factor, sweeps)))
}

/// Multicolour ILU(0) applied split takes a method that needs neither a
/// symmetric operator nor the transpose, and factors that leave A's
/// off-diagonal entries as they are (Eisenstat's form).
fn refuse_split(c: &Colouring, method: Method) -> Result<()> {
    if matches!(method, Method::Cg | Method::Bicg) {
        return Err(Error::unsupported(format!(
            "{method} with multicolour ILU(0) applied split: its operator L^-1 A U^-1 is not symmetric and has no \
             transpose here: use BiCGSTAB, CGS or GMRES, or ilu0-multicolour (FEGPU_PRECOND_ILU0_MULTICOLOUR)"
        )));
    }
    if let Some([i, k, j]) = c.triangle() {
        return Err(Error::unsupported(format!(
            "multicolour ILU(0) applied split: rows {i}, {k} and {j} (0-based) are coupled each to each, so ILU(0) \
             changes A's entry ({i}, {j}) and Eisenstat's split form does not hold: use ilu0-multicolour \
             (FEGPU_PRECOND_ILU0_MULTICOLOUR)"
        )));
    }
    Ok(())
}

/// Multicolour ILU(0) applied split: e = D - 2 D~ from A's stored `values`
/// and the factors just made, where they live.
fn split_shift(st: &mut State, values: &Buffer<f64>, g: Option<&Gpu>) -> Result<()> {
    let (c, device) = st.colouring.as_mut().ok_or_else(crate::array::mixed_backends)?;
    match (&mut st.shift, &st.factors, values, device, g) {
        (Buffer::Host(e), Buffer::Host(lu), Buffer::Host(a), _, _) => *e = c.split_shift(a, lu),
        (Buffer::Device(e), Buffer::Device(lu), Buffer::Device(a), Some(d), Some(g)) => d.split_shift(g, c, a, lu, e)?,
        _ => return Err(crate::array::mixed_backends()),
    }
    Ok(())
}

/// The Jacobi-swept sweeps' split triangles, or the grid walk's layout, from
/// freshly built `factors` (nothing for the other preconditioners and the
/// CPU backend).
fn split_refresh(a: &Csr, levels: Option<&(cuda::DeviceLevels, cuda::DeviceSweeps)>, factors: &Buffer<f64>) -> Result<()> {
    match (levels, factors) {
        (Some((_, cuda::DeviceSweeps::Jacobi { split, .. })), Buffer::Device(lu)) => {
            split.refresh(a.ctx.device()?, a.pattern.nrows, lu)
        }
        (Some((_, cuda::DeviceSweeps::SyncFree(sf))), Buffer::Device(lu)) => sf.refresh(a.ctx.device()?, lu),
        _ => Ok(()),
    }
}

fn jacobi_inverse(diagonal: &[f64]) -> Result<Vec<f64>> {
    diagonal
        .iter()
        .enumerate()
        .map(|(r, &d)| {
            if d == 0.0 {
                Err(Error::new(ErrorKind::Breakdown, format!("Jacobi: zero diagonal at {}", cpu::row_name(r))))
            } else {
                Ok(1.0 / d)
            }
        })
        .collect()
}
