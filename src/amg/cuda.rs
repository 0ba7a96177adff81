//! The V-cycle on the device: every level's matrices, transfers, smoother
//! scalings and work vectors uploaded once (a values-only re-setup writes
//! new numbers into the same buffers, so a solver's captured CUDA graph
//! stays valid), then per level one kernel per smoothing step
//! (kernels/amg.cu; a Gauss-Seidel step: the residual, the two exact
//! sweeps and the correction), the residual, restriction and prolongation by SpMV,
//! and the coarsest solve as a dense product.
//!
//! The values-only re-setup also runs here (`refresh`): the finest values
//! stay on the device, and every level's numbers are redone on the kept
//! patterns by kernels (the diagonal, Lanczos through the device SpMV, the
//! Galerkin products by rows, blocks of rows or dense tiles, the coarsest
//! inverse); only a coarsest matrix above DEVICE_INVERSE_ROWS (a few
//! thousand rows at most) comes to the host to be inverted.
//!
//! An f32 cycle (Options::f32_cycle) reads f32 copies of the cycle's
//! matrices (`single`), rounded from the f64 values after each (re-)setup;
//! the re-setup itself computes in f64.

use super::setup::{
    asymmetry, check_finest, coarse_inverse, coefficients, needs_rho, singular_coarsest, Phases, CHEBYSHEV_RATIO, CHEBYSHEV_TOP,
    LANCZOS_STEPS,
};
use super::{host, Hierarchy, Mat, Options, Smoother, TransferBlocks};
use crate::array::cuda::{amax, exclusive_scan, gather, grid_for, update, Reduce, BLOCK};
use crate::error::{Error, Result};
use crate::gpu::{arg_or_null, view_or_null, DeviceBuffer, DeviceView, Gpu, Graph, KernelArg, Launch};
use crate::sparse::cuda::{spmv_blocks, spmv_with, syncfree_apply, threads_per_row, upload, SyncFreeSweeps};
use crate::sparse::DevicePattern;

/// kernels/amg.cu after the shared prelude and the CSR row product.
pub const SOURCE: &str = concat!(
    include_str!("../../kernels/common.cuh"),
    include_str!("../../kernels/csr.cuh"),
    include_str!("../../kernels/amg.cu")
);

/// The largest coarsest matrix the re-setup inverts on the device (one block
/// of kernels/amg.cu amg_dense_inverse); above, the host does.
const DEVICE_INVERSE_ROWS: usize = 1024;

/// The most smoothing steps a level takes (the coefficient table's stride).
const MAX_STEPS: usize = 16;

/// The slots of `DeviceHierarchy::first`: what a re-setup's checks found
/// (a first failing entry or row; i32::MAX: none), read once, at the end
/// of the checks or of the re-setup.
const ASYMMETRY: usize = 0;
const NOT_F32: usize = 1;
const FINEST_DIAGONAL: usize = 2;
/// (amg_dense_inverse's status: -1, or the column found singular)
const COARSEST: usize = 3;
const SLOTS: usize = 4;

/// FEGPU_AMG_PHASES=1: the re-setup synchronises after each phase, so its
/// laps time the device's work (otherwise the phases queue without a wait
/// and the laps time the queueing).
fn timed_phases() -> bool {
    static TIMED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TIMED.get_or_init(|| std::env::var("FEGPU_AMG_PHASES").is_ok_and(|v| v == "1"))
}

/// A CSR matrix on the device.
pub struct DeviceCsr {
    pattern: DevicePattern,
    values: DeviceBuffer<f64>,
    /// The values rounded to f32, where an f32 cycle reads the matrix.
    single: Option<DeviceBuffer<f32>>,
    nrows: usize,
}

impl DeviceCsr {
    /// `m` on the device; its values left at zero unless `values` (a
    /// structure-only setup's, which the re-setup computes).
    fn new(g: &Gpu, m: &Mat, values: bool) -> Result<DeviceCsr> {
        Ok(DeviceCsr {
            pattern: DevicePattern {
                row_ptr: upload(g, &m.rp)?,
                col: upload(g, &m.ci)?,
                diag: upload::<i32>(g, &[])?,
                threads_per_row: threads_per_row(m.nnz(), m.nrows),
                long_rows: None,
            },
            values: if values { upload(g, &m.v)? } else { g.zeros(m.nnz().max(1))? },
            single: None,
            nrows: m.nrows,
        })
    }

    /// A block pattern written out on the device (kernels/amg.cu
    /// `amg_expand`), its values zero; `on_device`: the block pattern
    /// (row pointers, columns) where the device holds it.
    fn expanded(g: &Gpu, bp: &host::BlockPattern, on_device: Option<&DeviceBlocks>) -> Result<DeviceCsr> {
        let (n, nnz) = (bp.nrows(), bp.nnz());
        if nnz > i32::MAX as usize {
            return Err(too_many_entries(nnz));
        }
        let uploaded;
        let (brp, bci) = match on_device {
            Some(DeviceBlocks(rp, ci)) => (rp, ci),
            None => {
                uploaded = (upload(g, &bp.blocks.rp)?, upload(g, &bp.blocks.ci)?);
                (&uploaded.0, &uploaded.1)
            }
        };
        let (rp, ci) = (g.alloc::<i32>(n + 1)?, g.alloc::<i32>(nnz.max(1))?);
        let f = g.kernel("amg", SOURCE, "amg_expand")?;
        let (nb, rows, run) = (bp.blocks.nrows as i32, bp.rows as i32, bp.run as i32);
        let mut l = g.launcher(&f);
        l.arg(&nb).arg(&rows).arg(&run).arg(brp).arg(bci).arg(&rp).arg(&ci);
        g.launch("amg_expand", l, (grid_for(n * 32), 1, 1), (BLOCK, 1, 1), 0)?;
        let pattern = DevicePattern {
            row_ptr: rp,
            col: ci,
            diag: upload::<i32>(g, &[])?,
            threads_per_row: threads_per_row(nnz, n),
            long_rows: None,
        };
        Ok(DeviceCsr { pattern, values: g.zeros(nnz.max(1))?, single: None, nrows: n })
    }

    /// A matrix of this one's pattern (copied on the device), values zero.
    fn same_pattern(&self, g: &Gpu) -> Result<DeviceCsr> {
        let p = &self.pattern;
        let (mut row_ptr, mut col) = (g.alloc::<i32>(p.row_ptr.len())?, g.alloc::<i32>(p.col.len())?);
        g.copy(&p.row_ptr, &mut row_ptr)?;
        g.copy(&p.col, &mut col)?;
        let pattern =
            DevicePattern { row_ptr, col, diag: upload::<i32>(g, &[])?, threads_per_row: p.threads_per_row, long_rows: None };
        Ok(DeviceCsr { pattern, values: g.zeros(self.values.len())?, single: None, nrows: self.nrows })
    }

    /// The pattern of `m`, or its block pattern written out on the device
    /// where a structure-only setup kept that (`kept`; `on_device`: where
    /// the device holds that block pattern).
    fn of(
        g: &Gpu,
        m: &Mat,
        kept: Option<&host::BlockPattern>,
        values: bool,
        on_device: Option<&DeviceBlocks>,
    ) -> Result<DeviceCsr> {
        match kept {
            Some(bp) => DeviceCsr::expanded(g, bp, on_device),
            None => DeviceCsr::new(g, m, values),
        }
    }

    /// The matrix with room for its f32 copy where `single` (filled by `round_levels`).
    fn cycled(mut self, g: &Gpu, single: bool) -> Result<DeviceCsr> {
        if single {
            self.single = Some(g.alloc(self.values.len())?);
        }
        Ok(self)
    }

    fn matrix(&self) -> LevelMatrix<'_> {
        LevelMatrix { pattern: &self.pattern, values: &self.values, single: self.single.as_ref() }
    }

    /// y = alpha M x + beta y.
    fn spmv(
        &self,
        g: &Gpu,
        x: &DeviceBuffer<f64>,
        beta: f64,
        y: &DeviceBuffer<f64>,
        sc: Option<&DeviceBuffer<f64>>,
    ) -> Result<()> {
        let (p, tpr, n) = (&self.pattern, self.pattern.threads_per_row, self.nrows);
        match &self.single {
            Some(v) => spmv_with(g, p, tpr, n, v, 1.0, x, beta, y, sc),
            None => spmv_with(g, p, tpr, n, &self.values, 1.0, x, beta, y, sc),
        }
    }
}

/// One level's device data. Level 0's matrix is the solver's own.
struct DeviceLevel {
    a: Option<DeviceCsr>,
    p: Option<DeviceCsr>,
    r: Option<DeviceCsr>,
    inverse: DeviceBuffer<f64>,
    /// Ping-pong iterates (level 0 uses the caller's z as the first), the
    /// right-hand side (level 0: the caller's r), the step d, the residual.
    x: [DeviceBuffer<f64>; 2],
    b: DeviceBuffer<f64>,
    d: DeviceBuffer<f64>,
    residual: DeviceBuffer<f64>,
    /// A level a W-cycle visits twice: the second visit's right-hand side
    /// (the first's residual) and its correction.
    second_visit: Option<[DeviceBuffer<f64>; 2]>,
    gauss_seidel: Option<GaussSeidel>,
}

/// Symmetric Gauss-Seidel on the device: a step is the ILU(0) sweeps over
/// the factor F of kernels/amg.cu `amg_gs_factor` (exact forward and
/// backward substitutions in the rows' order, so the steps equal the
/// host's in-place sweeps to rounding).
struct GaussSeidel {
    factor: DeviceBuffer<f64>,
    sweeps: SyncFreeSweeps,
}

impl GaussSeidel {
    fn new(g: &Gpu, m: &Mat) -> Result<GaussSeidel> {
        let diag = m.diagonal_positions();
        if let Some(i) = diag.iter().position(|&k| k < 0) {
            return Err(Error::invalid(format!("AMG Gauss-Seidel: a level's row {i} has no diagonal entry")));
        }
        let levels = crate::sparse::solver::levels(&m.rp, &m.ci, &diag);
        // the grid walk where the level is a box stencil's (the finest, on structured grids)
        let walk = crate::sparse::grid_walk::GridWalk::pick(&m.rp, &m.ci, &diag)
            .map(|w| crate::sparse::cuda::BoxSweeps::Walk(w, (&m.rp[..], &m.ci[..], &diag[..])));
        Ok(GaussSeidel { factor: g.alloc(m.nnz().max(1))?, sweeps: SyncFreeSweeps::new(g, &levels, m.nrows, None, walk)? })
    }

    /// F from the level matrix's current values.
    fn refresh(&self, g: &Gpu, n: usize, a: &LevelMatrix) -> Result<()> {
        let f = g.kernel("amg", SOURCE, "amg_gs_factor")?;
        let n32 = n as i32;
        let mut l = g.launcher(&f);
        l.arg(&n32).arg(&a.pattern.row_ptr).arg(&a.pattern.col).arg(&a.pattern.diag).arg(a.values).arg(&self.factor);
        g.launch("amg_gs_factor", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)?;
        self.sweeps.refresh(g, &self.factor) // the grid walk's layout of F
    }
}

/// What the re-setup on the device reads of a level beyond the V-cycle's data
/// (the level matrix's pattern carries its diagonal positions).
struct LevelNumbers {
    dinv: DeviceBuffer<f64>,
    /// Lanczos' scalars: 2 LANCZOS_STEPS + 1 of them where rho is needed.
    lanczos: DeviceBuffer<f64>,
    transfer: Option<TransferNumbers>,
}

/// A transfer's kept structure: T, A T and T's value at each of its
/// entries (with prolongator smoothing), R's source entries in P, A P.
struct TransferNumbers {
    smoothing: Option<Smoothing>,
    r_from: DeviceBuffer<i32>,
    ap: DeviceCsr,
    /// How A P and R (A P) are summed (A T: `Smoothing::plan`).
    plans: [Plan; 2],
}

/// What P = T - omega D^-1 A T is made from: T, A T (P's pattern), T's
/// values on that pattern, and how A T is summed.
struct Smoothing {
    t: DeviceCsr,
    at: DeviceCsr,
    t_at: DeviceBuffer<f64>,
    /// A warp a node where T's blocks allow (`Plan::Tentative`), else row by
    /// row: T's rows hold a few entries, too few loads of B to save for
    /// blocks of rows (on the H100, 5.5 against 8.7 ms at bench fem's 985k dofs).
    plan: Plan,
}

/// How the rows of a product C = A B are summed (kernels/amg.cu): one by
/// one, in blocks of rows whose patterns are alike (`alike` flags each
/// block; the others go row by row), or over dense tiles (S, K, J).
enum Plan {
    Rows,
    Blocks {
        rows: usize,
        alike: DeviceBuffer<u8>,
    },
    Tiles(usize, usize, usize),
    /// A T, a warp a node of S rows, T in S x K blocks (host::tentative_tiles)
    Tentative(usize, usize),
    /// A block a row of C, its warps over slices of A's row (few rows of C,
    /// long rows of A: a coarse level's R (A P)); `width`: C's longest row.
    Split {
        width: usize,
        warps: usize,
    },
}

/// C's most rows for which a product takes Plan::Split, and A's least mean
/// row length: below either, rows of C a group each keep the GPU busier.
pub(super) const SPLIT_ROWS: usize = 8192;
const SPLIT_ROW_LENGTH: usize = 32;
const SPLIT_TILED_ROWS: usize = 1024;
/// Plan::Split's shared memory: its warps' partial rows and C's columns.
const SPLIT_SHARED_BYTES: usize = 48 * 1024;

impl Plan {
    /// Over tiles where A, B and C are such block matrices (host::TILES).
    fn new(g: &Gpu, a: &Mat, b: &Mat, c: &Mat) -> Result<Plan> {
        if let Some((s, k, j)) = host::tiles(a, b, c) {
            return Ok(Plan::Tiles(s, k, j));
        }
        Ok(match host::row_blocks(a, c) {
            (1, _) => Plan::Rows,
            (rows, alike) => Plan::Blocks { rows, alike: upload(g, &alike)? },
        })
    }

    /// Plan::Split for C = A B (A with `a_entries` entries) where C has few
    /// rows and A's rows are long (a coarse level's R (A P), or its A T and
    /// A P), and C's rows fit the shared memory; where the product has
    /// `tiles`, only below SPLIT_TILED_ROWS rows of C (on the H100, bench
    /// fem's 3,072-row level 2 took 0.8 ms split against 0.5 over tiles, its
    /// 162-row level 3 0.1 against 0.3). C has `rows` rows, the longest
    /// `width` entries (None: C's pattern is not on the host).
    fn split(a_entries: usize, rows: usize, width: impl FnOnce() -> Option<usize>, tiles: bool) -> Option<Plan> {
        let few_long = rows <= SPLIT_ROWS && a_entries >= SPLIT_ROW_LENGTH * rows;
        if !few_long || (tiles && rows >= SPLIT_TILED_ROWS) {
            return None;
        }
        let (width, warps) = (width()?, if rows < 1024 { 32 } else { 8 });
        ((warps * 8 + 4) * width <= SPLIT_SHARED_BYTES).then_some(Plan::Split { width: width.max(1), warps })
    }
}

/// The longest row of a written-out pattern (None: a shape alone, as a
/// structure-only setup may keep).
fn widest(c: &Mat) -> Option<usize> {
    let width = || (0..c.nrows).map(|i| c.rp[i + 1] - c.rp[i]).max().unwrap_or(0) as usize;
    (c.rp.len() == c.nrows + 1).then(width)
}

/// The longest row of a block pattern, written out.
fn widest_blocks(c: &host::BlockPattern) -> Option<usize> {
    widest(&c.blocks).map(|blocks| blocks * c.run)
}

impl Plan {
    /// The plan for a product whose A and C are block matrices with blocks
    /// `rows` high (of `n` rows; their rows alike within each block): over
    /// `tiles` where one fits, else in blocks of the most rows of
    /// `host::ROW_BLOCKS` that divide `rows`, as `new` would find.
    fn of_blocks(g: &Gpu, rows: usize, n: usize, tiles: Option<(usize, usize, usize)>) -> Result<Plan> {
        if let Some((s, k, j)) = tiles {
            return Ok(Plan::Tiles(s, k, j));
        }
        Ok(match host::ROW_BLOCKS.into_iter().filter(|&s| rows.is_multiple_of(s)).max() {
            Some(s) => Plan::Blocks { rows: s, alike: upload(g, &vec![1u8; n / s])? },
            None => Plan::Rows,
        })
    }
}

/// T's value at each entry of `pattern` (kernels/amg.cu `amg_values_at`).
fn values_at(g: &Gpu, t: &DeviceCsr, pattern: &DeviceCsr) -> Result<DeviceBuffer<f64>> {
    let out = g.alloc::<f64>(pattern.values.len())?;
    let f = g.kernel("amg", SOURCE, "amg_values_at")?;
    let n = pattern.nrows as i32;
    let mut l = g.launcher(&f);
    l.arg(&n)
        .arg(&t.pattern.row_ptr)
        .arg(&t.pattern.col)
        .arg(&t.values)
        .arg(&pattern.pattern.row_ptr)
        .arg(&pattern.pattern.col)
        .arg(&out);
    g.launch("amg_values_at", l, (grid_for(pattern.nrows * 32), 1, 1), (BLOCK, 1, 1), 0)?;
    Ok(out)
}

/// What the device finds or keeps while the host builds a structure-only
/// hierarchy, for `DeviceHierarchy::new`.
#[derive(Default)]
pub struct FoundOnDevice {
    /// The finest pattern's mirror (`finest_mirror`), where it is symmetric.
    pub mirror: Option<DeviceBuffer<i32>>,
    /// Where the host left the tentative prolongators' fits to the device
    /// (`Hierarchy::fit_scale`): the finest near-null space the hierarchy
    /// was set up with, uploaded (None: the constants).
    pub near_null_space: Option<DeviceBuffer<f64>>,
    /// Each level's transfer's block patterns where the device holds them
    /// (the finest's from `FinestProducts`, every level's from a structure
    /// built on the device, device_structure.rs), by level.
    pub held: Vec<Option<HeldBlocks>>,
}

/// A block pattern on the device: row pointers, columns.
pub struct DeviceBlocks(pub(super) DeviceBuffer<i32>, pub(super) DeviceBuffer<i32>);

/// A transfer's block patterns on the device: P's and R's, which
/// `FinestProducts` uploaded, A P's and the coarse level's, which it found
/// (A P's columns are the device's alone). A structure built on the device
/// (device_structure.rs) holds T's, each aggregate's nodes and which entry
/// of P each of R's mirrors there too.
pub struct HeldBlocks {
    pub(super) p: DeviceBlocks,
    pub(super) r: DeviceBlocks,
    pub(super) ap: DeviceBlocks,
    pub(super) coarse: DeviceBlocks,
    pub(super) t: Option<DeviceBlocks>,
    pub(super) members: Option<DeviceBlocks>,
    pub(super) r_from: Option<DeviceBuffer<i32>>,
}

impl HeldBlocks {
    /// The coarse level's pattern, downloaded: row pointers, columns.
    pub fn coarse_pattern(&self, g: &Gpu) -> Result<(Vec<i32>, Vec<i32>)> {
        download_pattern(g, &self.coarse)
    }

    /// Each node's aggregate (-1: none), downloaded from T's pattern where
    /// the device holds it.
    pub fn aggregates(&self, g: &Gpu) -> Result<Option<Vec<i32>>> {
        let Some(t) = &self.t else { return Ok(None) };
        let (rp, ci) = download_pattern(g, t)?;
        Ok(Some(rp.windows(2).map(|w| if w[1] > w[0] { ci[w[0] as usize] } else { -1 }).collect()))
    }
}

/// Row pointers (or any ints) the device holds, downloaded.
pub(super) fn download_rows(g: &Gpu, rp: &DeviceBuffer<i32>) -> Result<Vec<i32>> {
    let mut host = vec![0i32; rp.len()];
    g.download(rp, 0, &mut host)?;
    Ok(host)
}

/// The host's copy of row pointers `rp` the device holds, of a pattern of
/// `total` entries: all of them where `all`, else `[0, total]` (`Mat::nnz`).
pub(super) fn host_row_pointers(g: &Gpu, rp: &DeviceBuffer<i32>, all: bool, total: usize) -> Result<Vec<i32>> {
    match all {
        true => download_rows(g, rp),
        false => Ok(vec![0, total as i32]),
    }
}

/// Entries per row, on average.
pub(super) fn mean_row(entries: usize, rows: usize) -> f64 {
    entries as f64 / rows.max(1) as f64
}

/// A pattern the device holds, downloaded: row pointers, columns.
fn download_pattern(g: &Gpu, DeviceBlocks(rp, ci): &DeviceBlocks) -> Result<(Vec<i32>, Vec<i32>)> {
    let host_rp = download_rows(g, rp)?;
    let mut host_ci = vec![0i32; *host_rp.last().unwrap_or(&0) as usize];
    g.download(ci, 0, &mut host_ci)?;
    Ok((host_rp, host_ci))
}

/// The finest level's symbolic products A P and R (A P) on the device
/// (setup.rs `DeviceProducts`), from its A (the solver's pattern, by nodes
/// of `bs` rows): a thread a row where the row's columns fit its list, else
/// a block of threads and a bitmap in shared memory (kernels/amg.cu
/// `amg_product_pattern_narrow`, `amg_product_pattern`). The host's
/// products take a coarse level's rows by the thousand; these, the finest
/// level's hundreds of thousands of nodes.
pub struct FinestProducts<'a> {
    g: &'a Gpu,
    finest: &'a DevicePattern,
    bs: usize,
    /// The finest transfer's block patterns, once found.
    pub blocks: Option<HeldBlocks>,
}

/// The largest bitmap of columns `amg_product_pattern` keeps in shared
/// memory: the 48 KiB a block may take without opting in, less its own
/// four counts.
pub(super) const BITMAP_BYTES: usize = 48 * 1024 - 64;

/// The columns a row's list holds in `amg_product_pattern_narrow` (its
/// NARROW_COLUMNS).
const NARROW_COLUMNS: usize = 64;

impl<'a> FinestProducts<'a> {
    pub fn new(g: &'a Gpu, finest: &'a DevicePattern, bs: usize) -> FinestProducts<'a> {
        FinestProducts { g, finest, bs, blocks: None }
    }
}

impl super::DeviceProducts for FinestProducts<'_> {
    fn products(&mut self, p: &host::BlockPattern, r: &host::BlockPattern) -> Result<Option<(Vec<i32>, Mat)>> {
        let (g, naggs, nodes) = (self.g, p.blocks.ncols, p.blocks.nrows);
        if r.blocks.nrows != naggs {
            return Ok(None);
        }
        // without room for the bitmap, the products are the device's only where every row is narrow
        let bitmap = naggs.div_ceil(32) * 4 <= BITMAP_BYTES;
        let (prp, pci) = (upload(g, &p.blocks.rp)?, upload(g, &p.blocks.ci)?);
        let finest = (&self.finest.row_ptr, &self.finest.col);
        // a row's candidates, on average: A's node row times B's row
        let a_row = mean_row(self.finest.col.len() / (self.bs * self.bs), nodes);
        let ap_candidates = a_row * mean_row(p.blocks.ci.len(), nodes);
        let Some((ap_rp, ap_drp, ap_ci)) =
            product_pattern(g, (nodes, self.bs), finest, (&prp, &pci), naggs, (bitmap, ap_candidates), true)?
        else {
            return Ok(None);
        };
        let (rrp, rci) = (upload(g, &r.blocks.rp)?, upload(g, &r.blocks.ci)?);
        let c_candidates = mean_row(r.blocks.ci.len(), naggs) * mean_row(*ap_rp.last().expect("row pointers") as usize, nodes);
        let Some((crp, dcrp, cci)) =
            product_pattern(g, (naggs, 1), (&rrp, &rci), (&ap_drp, &ap_ci), naggs, (bitmap, c_candidates), true)?
        else {
            return Ok(None);
        };
        let mut ci = vec![0i32; *crp.last().expect("row pointers") as usize];
        g.download(&cci, 0, &mut ci)?;
        let (p, r, ap) = (DeviceBlocks(prp, pci), DeviceBlocks(rrp, rci), DeviceBlocks(ap_drp, ap_ci));
        let coarse = DeviceBlocks(dcrp, cci);
        self.blocks = Some(HeldBlocks { p, r, ap, coarse, t: None, members: None, r_from: None });
        Ok(Some((ap_rp, Mat { nrows: naggs, ncols: naggs, rp: crp.into(), ci: ci.into(), v: Vec::new() })))
    }
}

fn too_many_entries(nnz: usize) -> Error {
    Error::size(format!("AMG: a level's pattern of {nnz} entries, beyond the 2^31 - 1 that 32-bit indices reach"))
}

/// A pattern's row pointers, on the host and the device, and its columns.
type DevicePatternParts = (Vec<i32>, DeviceBuffer<i32>, DeviceBuffer<i32>);

/// The pattern of C = A B of `nrows` rows and `ncols` columns, A's row i
/// the first of its `ra` rows, every ra-th entry (kernels/amg.cu
/// `amg_product_pattern_narrow`, then `amg_product_pattern` for the rows it
/// leaves; where a row's mean `candidates` (A's row times B's) would not fit
/// the narrow kernel's list, `amg_product_pattern` alone): its row pointers,
/// on the host (all of them where `host_rows`, else `[0, entries]`: see
/// `Mat::nnz`) and the device, and its columns; None where rows need the
/// bitmap and `bitmap` says it does not fit. The counts are summed on the
/// device: the host reads the total alone.
pub(super) fn product_pattern(
    g: &Gpu,
    (nrows, ra): (usize, usize),
    (arp, aci): (&DeviceBuffer<i32>, &DeviceBuffer<i32>),
    (brp, bci): (&DeviceBuffer<i32>, &DeviceBuffer<i32>),
    ncols: usize,
    (bitmap, candidates): (bool, f64),
    host_rows: bool,
) -> Result<Option<DevicePatternParts>> {
    // measured on the H200: the R (A P) rows of scalar systems (about 500
    // candidates) were slower through the narrow kernel's list than by the
    // bitmap, their A P rows (about 30) about 13 ms faster at 128^3
    let narrow_first = candidates <= NARROW_COLUMNS as f64;
    if !narrow_first && !bitmap {
        return Ok(None);
    }
    let (narrow, wide) =
        (g.kernel("amg", SOURCE, "amg_product_pattern_narrow")?, g.kernel("amg", SOURCE, "amg_product_pattern")?);
    let (n, ra32, nc) = (nrows as i32, ra as i32, ncols as i32);
    let any_wide = g.zeros::<i32>(1)?;
    let launch_narrow = |crp: Option<&DeviceBuffer<i32>>, out: &DeviceBuffer<i32>| -> Result<()> {
        let mut l = g.launcher(&narrow);
        l.arg(&n).arg(&ra32).arg(arp).arg(aci).arg(brp).arg(bci);
        arg_or_null(&mut l, crp);
        l.arg(out).arg(&any_wide);
        g.launch("amg_product_pattern_narrow", l, (grid_for(nrows), 1, 1), (BLOCK, 1, 1), 0)
    };
    // only: the narrow pass's counts, -1 marking the rows left to this one (None: every row)
    let launch_wide = |only: Option<&DeviceBuffer<i32>>, crp: Option<&DeviceBuffer<i32>>, out: &DeviceBuffer<i32>| {
        let mut l = g.launcher(&wide);
        l.arg(&n);
        arg_or_null(&mut l, only);
        l.arg(&ra32).arg(arp).arg(aci).arg(brp).arg(bci).arg(&nc);
        arg_or_null(&mut l, crp);
        l.arg(out);
        // enough blocks to fill any GPU a few times over; each strides over the rows
        let grid = (nrows.clamp(1, 2048) as u32, 1, 1);
        g.launch("amg_product_pattern", l, grid, (128, 1, 1), (ncols.div_ceil(32) * 4) as u32)
    };
    // the rows' counts (the narrow pass's -1: a wide row), summed and scanned on the device, then the columns
    let counts = g.zeros::<i32>(nrows + 1)?;
    let mut narrow_counts = None;
    let wide_rows = if narrow_first {
        launch_narrow(None, &counts)?;
        let mut found = [0i32];
        g.download(&any_wide, 0, &mut found)?;
        match (found[0] != 0, bitmap) {
            (false, _) => false,
            (true, false) => return Ok(None),
            (true, true) => {
                let mut only = g.alloc::<i32>(nrows + 1)?;
                g.copy(&counts, &mut only)?;
                launch_wide(Some(&only), None, &counts)?;
                narrow_counts = Some(only);
                true
            }
        }
    } else {
        launch_wide(None, None, &counts)?;
        true
    };
    let sum = g.zeros::<u64>(1)?;
    let f = g.kernel("amg", SOURCE, "amg_count_total")?;
    let mut l = g.launcher(&f);
    l.arg(&n).arg(&counts).arg(&sum);
    g.launch("amg_count_total", l, (grid_for(nrows).min(1024), 1, 1), (BLOCK, 1, 1), 0)?;
    let mut total = [0u64];
    g.download(&sum, 0, &mut total)?;
    let total = total[0] as usize;
    if total > i32::MAX as usize {
        return Err(too_many_entries(total));
    }
    exclusive_scan(g, nrows + 1, &counts)?;
    let rp = host_row_pointers(g, &counts, host_rows, total)?;
    let ci = g.alloc::<i32>(total.max(1))?;
    if narrow_first {
        launch_narrow(Some(&counts), &ci)?;
    }
    if wide_rows {
        launch_wide(narrow_counts.as_ref(), Some(&counts), &ci)?;
    }
    Ok(Some((rp, counts, ci)))
}

/// T's values fitted to this level's near-null space `b` (None: the
/// constants per unknown of a node) times `scale` (None: 1), for the
/// `(n, bs, k)` of the level (kernels/amg.cu `amg_fit`); returns the coarse
/// level's near-null space.
/// `members`: each aggregate's nodes (pointers, nodes) on the device.
fn fit(
    g: &Gpu,
    members: &DeviceBlocks,
    (n, bs, k): (usize, usize, usize),
    (b, scale): (Option<&DeviceBuffer<f64>>, Option<&DeviceBuffer<f64>>),
    t: &DeviceCsr,
) -> Result<DeviceBuffer<f64>> {
    let DeviceBlocks(dptr, dnodes) = members;
    let naggs = dptr.len() - 1;
    let coarse = g.alloc::<f64>((naggs * k * k).max(1))?;
    let f = g.kernel("amg", SOURCE, "amg_fit")?;
    let (na, bs, k, n) = (naggs as i32, bs as i32, k as i32, n as i32);
    let mut l = g.launcher(&f);
    l.arg(&na).arg(&bs).arg(&k).arg(&n).arg(dptr).arg(dnodes);
    arg_or_null(&mut l, b);
    arg_or_null(&mut l, scale);
    l.arg(&t.pattern.row_ptr).arg(&t.values).arg(&coarse);
    g.launch("amg_fit", l, (grid_for(naggs * 32), 1, 1), (BLOCK, 1, 1), 0)?;
    Ok(coarse)
}

/// For each entry of R = P^T, written out from the kept block patterns, the
/// entry of P it mirrors (kernels/amg.cu `amg_transpose_from`).
/// `on_device`: P's and R's block patterns where the device holds them;
/// `held_from`: the blocks' own `r_from` where the device holds that.
fn transpose_from(
    g: &Gpu,
    kept: &TransferBlocks,
    (p, r): (&DeviceCsr, &DeviceCsr),
    on_device: Option<(&DeviceBlocks, &DeviceBlocks)>,
    held_from: Option<&DeviceBuffer<i32>>,
) -> Result<DeviceBuffer<i32>> {
    let uploaded_from;
    let bfrom = match held_from {
        Some(from) => from,
        None => {
            uploaded_from = upload(g, &kept.r_from.iter().map(|&k| k as i32).collect::<Vec<_>>())?;
            &uploaded_from
        }
    };
    let uploaded;
    let (pbrp, DeviceBlocks(rbrp, rbci)) = match on_device {
        Some((pb, rb)) => (&pb.0, rb),
        None => {
            let (rb, pb) = (&kept.r.blocks, &kept.p.blocks);
            uploaded = (upload(g, &pb.rp)?, DeviceBlocks(upload(g, &rb.rp)?, upload(g, &rb.ci)?));
            (&uploaded.0, &uploaded.1)
        }
    };
    let from = g.alloc::<i32>(kept.r.nnz().max(1))?;
    let f = g.kernel("amg", SOURCE, "amg_transpose_from")?;
    let (nr, rows, run) = (r.nrows as i32, kept.p.rows as i32, kept.p.run as i32);
    let mut l = g.launcher(&f);
    l.arg(&nr).arg(&rows).arg(&run).arg(rbrp).arg(rbci).arg(bfrom).arg(pbrp).arg(&p.pattern.row_ptr);
    l.arg(&r.pattern.row_ptr).arg(&from);
    g.launch("amg_transpose_from", l, (grid_for(r.nrows * 32), 1, 1), (BLOCK, 1, 1), 0)?;
    Ok(from)
}

pub struct DeviceHierarchy {
    levels: Vec<DeviceLevel>,
    /// The finest values rounded to f32, for an f32 cycle.
    finest_single: Option<DeviceBuffer<f32>>,
    /// Every level's (c1, c2) per step, MAX_STEPS pairs a level.
    coefficients: DeviceBuffer<f64>,
    coarse_inverse: Option<DeviceBuffer<f64>>,
    /// The coarsest matrix, where the re-setup inverts it on the device and
    /// it does not fit in shared memory.
    inverse_scratch: DeviceBuffer<f64>,
    numbers: Vec<LevelNumbers>,
    /// The finest matrix's transposed entry of each entry (symmetric pattern).
    mirror: Option<DeviceBuffer<i32>>,
    reduce: Reduce,
    /// The Lanczos product's block sums (LANCZOS_BLOCKS at most).
    lanczos_partial: DeviceBuffer<f64>,
    /// Each level's (rho, omega), amg_level_numbers' (the host reads them
    /// at the end of a re-setup).
    scalars: DeviceBuffer<f64>,
    /// What the re-setup's checks report, a slot each (ASYMMETRY ...).
    first: DeviceBuffer<i32>,
    /// The re-setup's levels captured once, replayed while their shape holds.
    numbers_graph: Option<(NumbersShape, Graph)>,
}

/// What the launches of a re-setup's levels depend on beyond the
/// hierarchy's own buffers: a graph of them replays while these hold.
#[derive(PartialEq)]
struct NumbersShape {
    smoother: Smoother,
    symmetric: bool,
    /// The addresses of the finest values and pattern (the solver's).
    finest: [u64; 4],
}

fn coefficient_table(h: &Hierarchy) -> Vec<f64> {
    let mut t = vec![0.0; h.levels.len() * MAX_STEPS * 2];
    for (l, level) in h.levels.iter().enumerate() {
        for (s, c) in level.coefficients.iter().enumerate() {
            t[(l * MAX_STEPS + s) * 2..][..2].copy_from_slice(c);
        }
    }
    t
}

impl DeviceHierarchy {
    /// The hierarchy `h` on the device, over the finest matrix already
    /// there (`pattern`, `values`: the solver's own).
    /// `mirror`: the finest pattern's, where the caller found it on the
    /// device (`finest_mirror`); else the host's, if it has one.
    /// `found`: what the device found or kept while the host built `h`.
    pub fn new(
        g: &Gpu,
        h: &mut Hierarchy,
        (pattern, values): (&DevicePattern, &DeviceBuffer<f64>),
        found: FoundOnDevice,
    ) -> Result<DeviceHierarchy> {
        let FoundOnDevice { mirror, near_null_space, held: held_blocks } = found;
        // a level's transfer's block patterns, where the device holds them
        let held_level = |l: usize| held_blocks.get(l).and_then(Option::as_ref);
        let held = |l: usize, which: fn(&HeldBlocks) -> &DeviceBlocks| held_level(l).map(which);
        let mut clock = Phases::start();
        // values the host computed (else zeros until the re-setup below)
        let (computed, smooth) = (!h.needs_numbers, h.options.smooth_prolongator);
        let mut levels = Vec::with_capacity(h.levels.len());
        for (l, level) in h.levels.iter().enumerate() {
            let n = level.a.nrows;
            let tr = level.transfer.as_ref();
            levels.push(DeviceLevel {
                a: if l == 0 {
                    None
                } else {
                    // the re-setup inverts the diagonal (level 0: the solver's pattern has it)
                    // (level 1's block pattern: the device's R (A P))
                    let held = held(l - 1, |f| &f.coarse);
                    let mut a =
                        DeviceCsr::of(g, &level.a, level.blocks.as_ref(), computed, held)?.cycled(g, h.single_on_level(l))?;
                    // found where the pattern is (the device may hold it alone)
                    a.pattern.diag = diagonal_positions(g, n, &a.pattern)?;
                    Some(a)
                },
                // unsmoothed, P is T and R its transpose: the host's values
                p: tr
                    .map(|t| {
                        DeviceCsr::of(g, &t.p, t.blocks.as_ref().map(|b| &b.p), computed || !smooth, held(l, |f| &f.p))?
                            .cycled(g, h.options.f32_cycle)
                    })
                    .transpose()?,
                r: tr
                    .map(|t| {
                        DeviceCsr::of(g, &t.r, t.blocks.as_ref().map(|b| &b.r), computed || !smooth, held(l, |f| &f.r))?
                            .cycled(g, h.options.f32_cycle)
                    })
                    .transpose()?,
                // (a structure-only setup's are zeros until its re-setup)
                inverse: if computed { upload(g, &level.smoother_inverse)? } else { g.zeros(n.max(1))? },
                x: [g.zeros(n.max(1))?, g.zeros(n.max(1))?],
                b: g.zeros(n.max(1))?,
                d: g.zeros(n.max(1))?,
                residual: g.zeros(n.max(1))?,
                second_visit: match h.visits_twice(l) {
                    true => Some([g.zeros(n.max(1))?, g.zeros(n.max(1))?]),
                    false => None,
                },
                gauss_seidel: match h.smoother.on_level(l) {
                    Smoother::GaussSeidel { .. } => Some(GaussSeidel::new(g, &level.a)?),
                    _ => None,
                },
            });
            let dl = levels.last().expect("just pushed");
            if let Some(gs) = &dl.gauss_seidel {
                let a = dl.a.as_ref().map_or(LevelMatrix { pattern, values, single: None }, |a| a.matrix());
                gs.refresh(g, n, &a)?;
            }
        }
        g.synchronize("AMG setup")?;
        clock.lap("upload: levels");
        // each level's near-null space for the device's fits: the finest's
        // uploaded (None: the constants, made by the kernel), a coarse level's the fit above it
        let finest_rows = h.levels[0].a.nrows;
        let mut fit_null_space = match (&h.fit_scale, near_null_space) {
            (Some(scale), Some(b)) if b.len() != scale.len() * finest_rows => {
                return Err(Error::size(format!(
                    "near-null space: {} values, where the hierarchy was set up with {} vectors of {finest_rows} rows",
                    b.len(),
                    scale.len(),
                )));
            }
            (Some(_), b) => b,
            (None, _) => None,
        };
        let mut fit_scale = h.fit_scale.as_ref().map(|scale| upload(g, scale)).transpose()?;
        let mut numbers = Vec::with_capacity(h.levels.len());
        for (l, level) in h.levels.iter().enumerate() {
            let a = &level.a;
            let rho = needs_rho(h.smoother.on_level(l), smooth, level.transfer.is_some());
            numbers.push(LevelNumbers {
                dinv: g.zeros(a.nrows.max(1))?,
                lanczos: g.zeros(if rho { 2 * LANCZOS_STEPS + 1 } else { 1 })?,
                transfer: level
                    .transfer
                    .as_ref()
                    .map(|tr| -> Result<TransferNumbers> {
                        let kept = tr.blocks.as_ref();
                        let dl = &levels[l];
                        let (p, r) = (dl.p.as_ref().expect("a transfer's P"), dl.r.as_ref().expect("a transfer's R"));
                        let smoothing = match (smooth, kept) {
                            (false, _) => None,
                            // T written out from its block pattern, A T's pattern P's
                            (true, Some(b)) => {
                                let held_t = held_level(l).and_then(|f| f.t.as_ref());
                                let mut t = DeviceCsr::expanded(g, &b.t, held_t)?;
                                let uploaded;
                                let members = match (&b.members, held_level(l).and_then(|f| f.members.as_ref())) {
                                    (Some((ptr, nodes)), _) => {
                                        uploaded = DeviceBlocks(upload(g, ptr)?, upload(g, nodes)?);
                                        Some(&uploaded)
                                    }
                                    (None, on_device) => on_device,
                                };
                                if let Some(members) = members {
                                    let level_null_space = fit_null_space.take();
                                    let fitted = (a.nrows, b.t.rows, b.t.run);
                                    fit_null_space = Some(fit(
                                        g,
                                        members,
                                        fitted,
                                        (level_null_space.as_ref(), fit_scale.take().as_ref()),
                                        &t,
                                    )?);
                                } else if !tr.tentative.v.is_empty() {
                                    g.upload(&tr.tentative.v, &mut t.values, 0)?;
                                }
                                let at = p.same_pattern(g)?;
                                let t_at = values_at(g, &t, &at)?;
                                let plan = match host::tentative_tiles(a, (b.t.rows, b.t.run)) {
                                    Some((s, k)) => Plan::Tentative(s, k),
                                    None => {
                                        Plan::split(a.nnz(), b.p.nrows(), || widest_blocks(&b.p), false).unwrap_or(Plan::Rows)
                                    }
                                };
                                Some(Smoothing { t, at, t_at, plan })
                            }
                            (true, None) => Some(Smoothing {
                                t: DeviceCsr::new(g, &tr.tentative, true)?,
                                at: DeviceCsr::new(g, &tr.at, computed)?,
                                t_at: upload(g, &tr.t_at)?,
                                plan: Plan::split(a.nnz(), tr.at.nrows, || widest(&tr.at), false).unwrap_or(Plan::Rows),
                            }),
                        };
                        let (r_from, plans) = match kept {
                            Some(b) => (
                                transpose_from(
                                    g,
                                    b,
                                    (p, r),
                                    held(l, |f| &f.p).zip(held(l, |f| &f.r)),
                                    held_level(l).and_then(|f| f.r_from.as_ref()),
                                )?,
                                [
                                    {
                                        // A's blocks are square, a node's dofs
                                        let tiles = host::block_tiles((b.p.rows, b.p.rows), (b.p.rows, b.p.run));
                                        match Plan::split(a.nnz(), b.ap.nrows(), || widest_blocks(&b.ap), tiles.is_some()) {
                                            Some(split) => split,
                                            None => Plan::of_blocks(g, b.p.rows, a.nrows, tiles)?,
                                        }
                                    },
                                    {
                                        let tiles = host::block_tiles((b.r.rows, b.r.run), (b.ap.rows, b.ap.run));
                                        let coarse = &h.levels[l + 1].a;
                                        match Plan::split(b.r.nnz(), coarse.nrows, || widest(coarse), tiles.is_some()) {
                                            Some(split) => split,
                                            None => Plan::of_blocks(g, b.r.rows, b.r.nrows(), tiles)?,
                                        }
                                    },
                                ],
                            ),
                            None => {
                                let coarse = &h.levels[l + 1].a;
                                let r_from: Vec<i32> = tr.r_from.iter().map(|&k| k as i32).collect();
                                // (tiles looked for only where they decide)
                                let split = |a: &Mat, b: &Mat, c: &Mat| {
                                    let decides = (SPLIT_TILED_ROWS..=SPLIT_ROWS).contains(&c.nrows);
                                    let tiles = decides && host::tiles(a, b, c).is_some();
                                    Plan::split(a.nnz(), c.nrows, || widest(c), tiles)
                                };
                                let a_p = match split(a, &tr.p, &tr.ap) {
                                    Some(split) => split,
                                    None => Plan::new(g, a, &tr.p, &tr.ap)?,
                                };
                                let r_ap = match split(&tr.r, &tr.ap, coarse) {
                                    Some(split) => split,
                                    None => Plan::new(g, &tr.r, &tr.ap, coarse)?,
                                };
                                (upload(g, &r_from)?, [a_p, r_ap])
                            }
                        };
                        let ap = DeviceCsr::of(g, &tr.ap, kept.map(|b| &b.ap), computed, held(l, |f| &f.ap))?;
                        Ok(TransferNumbers { smoothing, r_from, ap, plans })
                    })
                    .transpose()?,
            });
        }
        let mirror = match (mirror, &h.mirror) {
            (Some(m), _) => Some(m),
            (None, Some(m)) => Some(upload(g, &m.iter().map(|&k| k as i32).collect::<Vec<_>>())?),
            (None, None) => None,
        };
        let finest_single = if h.single_on_level(0) { Some(g.alloc(values.len())?) } else { None };
        if let Some(single) = &finest_single {
            round_to_f32(g, values, single, None)?;
        }
        round_levels(g, &levels)?;
        let mut dh = DeviceHierarchy {
            levels,
            finest_single,
            coefficients: upload(g, &coefficient_table(h))?,
            coarse_inverse: h.coarse_inverse.as_ref().map(|inv| upload(g, inv)).transpose()?,
            inverse_scratch: g.alloc(match h.levels.last() {
                Some(c) if h.coarse_inverse.is_some() && c.a.nrows <= DEVICE_INVERSE_ROWS => c.a.nrows * c.a.nrows,
                _ => 1,
            })?,
            numbers,
            mirror,
            reduce: Reduce::new(g)?,
            lanczos_partial: g.alloc(2 * LANCZOS_BLOCKS as usize)?,
            scalars: g.zeros(2 * h.levels.len())?,
            first: g.alloc(SLOTS)?,
            numbers_graph: None,
        };
        if h.needs_numbers {
            // a structure-only setup: the numbers are the re-setup's, the phases the host's, the upload's and its
            g.synchronize("AMG setup")?;
            clock.lap("upload: transfers");
            let mut phases = std::mem::take(&mut h.phases);
            phases.append(&mut clock.0);
            dh.refresh(g, h, pattern, values)?;
            phases.append(&mut h.phases);
            (h.phases, h.needs_numbers) = (phases, false);
        }
        Ok(dh)
    }

    /// The values-only re-setup for new finest values `values` (on
    /// `pattern`, the solver's own, already on the device): the numbers of
    /// setup.rs `refresh`, computed here and written into the same buffers,
    /// so a captured graph stays valid. The finest values' checks are read
    /// back first (one wait); the levels' numbers then queue without a host
    /// read (rho, omega and the Chebyshev coefficients come from
    /// amg_level_numbers, on the device), as a CUDA graph captured after
    /// the first run and replayed while `NumbersShape` holds, and the host
    /// reads the levels' rho and the coarsest inverse's status once, at the
    /// end. The host hierarchy keeps the structure and takes the new scalars (rho, the
    /// smoother's coefficients, the asymmetry; the coarsest inverse where the
    /// host computes it, above DEVICE_INVERSE_ROWS); its other numbers are
    /// those of its last host setup. A matrix the setup would refuse is
    /// refused with the host's message (the solver then drops the
    /// hierarchy: sparse/solver.rs build_amg).
    pub fn refresh(&mut self, g: &Gpu, h: &mut Hierarchy, pattern: &DevicePattern, values: &DeviceBuffer<f64>) -> Result<()> {
        // timed: each level's phases apart, one after another; else the
        // host's time to queue them, then its wait for the device
        let timed = timed_phases();
        let lap = |clock: &mut Phases, level: Option<usize>, phase: &'static str| -> Result<()> {
            if timed {
                g.synchronize("AMG re-setup")?;
                clock.lap(level.map_or(phase.into(), |l| format!("level {l} {phase}")));
            } else {
                clock.lap("queueing");
            }
            Ok(())
        };
        let mut clock = Phases::start();
        let DeviceHierarchy {
            levels,
            finest_single,
            coefficients: table,
            coarse_inverse: inverse,
            inverse_scratch: scratch,
            numbers,
            mirror,
            reduce,
            lanczos_partial,
            scalars,
            first,
            numbers_graph,
        } = self;
        let fine = &h.levels[0].a;
        // the finest values' checks, read back together (they are finite:
        // Csr::update_values checks them on entry)
        g.upload(&[i32::MAX; SLOTS], first, 0)?;
        let slot = |k: usize| first.slice(k..k + 1);
        if let Some(dm) = &*mirror {
            let tpr = pattern.threads_per_row as usize;
            let name = format!("amg_asymmetry_tpr{tpr}");
            queue_first(g, &slot(ASYMMETRY), (&name, tpr, &[]), fine.nrows, &[&pattern.row_ptr], &[values], Some(dm))?;
        }
        if let Some(single) = &*finest_single {
            // the f32 copy of the finest values, checked as it is made
            round_to_f32(g, values, single, Some(&slot(NOT_F32)))?;
        }
        inverse_diagonal(g, fine.nrows, (&pattern.diag, values), &numbers[0].dinv, Some(&slot(FINEST_DIAGONAL)))?;
        let mut found = [0i32; SLOTS];
        g.download(first, 0, &mut found)?;
        if found[NOT_F32] != i32::MAX || found[FINEST_DIAGONAL] != i32::MAX {
            return Err(refused(g, fine, &h.options, values));
        }
        let asym = match (&*mirror, found[ASYMMETRY] as usize) {
            (Some(_), k) if k == i32::MAX as usize => None,
            (Some(dm), k) => {
                let (mut aij, mut mk, mut aji) = ([0.0], [0i32], [0.0]);
                g.download(values, k, &mut aij)?;
                g.download(dm, k, &mut mk)?;
                g.download(values, mk[0] as usize, &mut aji)?;
                let i = fine.rp.partition_point(|&p| p as usize <= k) - 1;
                Some((i, fine.ci[k] as usize, aij[0], aji[0]))
            }
            (None, _) => asymmetry(&on_host(g, fine, values)?, None),
        };
        clock.lap("device checks");
        if h.needs_numbers && h.options.smoother.is_none() {
            // a structure-only setup left the default smoother to this symmetry check
            h.smoother = Smoother::default_for(asym.is_none());
        }
        let (smoother, smooth, symmetric) = (h.smoother, h.options.smooth_prolongator, asym.is_none());
        if h.needs_numbers {
            // the smoother was chosen just now: the table's steps (a Chebyshev
            // level's are amg_level_numbers' below)
            for (l, level) in h.levels.iter_mut().enumerate() {
                if !matches!(smoother.on_level(l), Smoother::Chebyshev { .. }) {
                    level.coefficients = coefficients(smoother.on_level(l), 0.0);
                }
            }
            g.upload(&coefficient_table(h), table, 0)?;
        }
        // the levels' numbers queue without a host read, except where a
        // level's rho is Gershgorin's bound (nonsymmetric), Gauss-Seidel
        // refreshes its sweeps or the host inverts the coarsest matrix;
        // elsewhere they replay as one graph, captured once for this shape
        let last = h.levels.len() - 1;
        let host_inverse = inverse.is_some() && h.levels[last].a.nrows > DEVICE_INVERSE_ROWS;
        let reads_rho = !symmetric && (0..=last).any(|l| needs_rho(smoother.on_level(l), smooth, numbers[l].transfer.is_some()));
        let replayable = !timed && !host_inverse && !reads_rho && levels.iter().all(|dl| dl.gauss_seidel.is_none());
        let shape = NumbersShape {
            smoother,
            symmetric,
            finest: [g.address(values), g.address(&pattern.row_ptr), g.address(&pattern.col), g.address(&pattern.diag)],
        };
        // untimed, Lanczos runs on the side stream beside A T (in a graph, a branch of it)
        let mut queue = |clock: &mut Phases| -> Result<()> {
            for l in 0..h.levels.len() {
                let (n, smoother) = (h.levels[l].a.nrows, smoother.on_level(l));
                let (dl, numbers) = (&levels[l], &numbers[l]);
                let a = match &dl.a {
                    Some(a) => a.matrix(),
                    None => LevelMatrix { pattern, values, single: None },
                };
                if l > 0 {
                    // (a coarse level's zero diagonal takes dinv = 0, as on the host)
                    inverse_diagonal(g, n, (&a.pattern.diag, a.values), &numbers.dinv, None)?;
                }
                let has_transfer = numbers.transfer.is_some();
                // A T needs no rho: the main stream computes it while the side
                // stream runs Lanczos' chain of short launches, ahead of its
                // blocks (where another thread holds the side stream, one after
                // the other)
                let smoothing = numbers.transfer.as_ref().and_then(|tn| tn.smoothing.as_ref());
                if let Some(sm) = smoothing {
                    if !timed {
                        g.fork_side()?;
                    }
                    product(g, n, &a, (&sm.t.matrix(), sm.t.nrows), &sm.at.matrix(), &sm.plan)?;
                    lap(clock, Some(l), "A T")?;
                }
                // Lanczos' steps for rho, or rho itself (0 where no number needs it)
                let (steps, given) = match (needs_rho(smoother, smooth, has_transfer), symmetric) {
                    (false, _) => (0, 0.0),
                    (true, true) if smoothing.is_some() && !timed => {
                        g.on_side_if_free(|| lanczos(g, (reduce, lanczos_partial), n, (dl, numbers), &a))?;
                        g.join_side()?;
                        (LANCZOS_STEPS.min(n), 0.0)
                    }
                    (true, true) => {
                        lanczos(g, (reduce, lanczos_partial), n, (dl, numbers), &a)?;
                        lap(clock, Some(l), "Lanczos")?;
                        (LANCZOS_STEPS.min(n), 0.0)
                    }
                    (true, false) => {
                        // Gershgorin's bound: a host read (nonsymmetric systems)
                        row_sums(g, n, &a, Some(&numbers.dinv), &dl.d)?;
                        (0, amax(g, n, &dl.d)?)
                    }
                };
                let degree = match smoother {
                    Smoother::Chebyshev { degree } => degree as i32,
                    _ => 0,
                };
                let (table_at, steps) = (l * MAX_STEPS * 2, steps as i32);
                let (f, level_scalars, coef) = (
                    g.kernel("amg", SOURCE, "amg_level_numbers")?,
                    scalars.slice(2 * l..2 * l + 2),
                    table.slice(table_at..table_at + MAX_STEPS * 2),
                );
                let mut la = g.launcher(&f);
                la.arg(&steps).arg(&numbers.lanczos).arg(&given).arg(&degree).arg(&CHEBYSHEV_TOP).arg(&CHEBYSHEV_RATIO);
                la.arg(&level_scalars).arg(&coef);
                g.launch("amg_level_numbers", la, (1, 1, 1), (64, 1, 1), 0)?;
                match smoother {
                    Smoother::Chebyshev { .. } | Smoother::GaussSeidel { .. } => {
                        update(g, n, &dl.inverse, 1.0, &numbers.dinv, 0.0, None, 0.0)?
                    }
                    Smoother::L1Jacobi { .. } => row_sums(g, n, &a, None, &dl.inverse)?,
                }
                if let Some(gs) = &dl.gauss_seidel {
                    gs.refresh(g, n, &a)?;
                }
                lap(clock, Some(l), "numbers")?;
                let (Some(tn), Some(p), Some(r)) = (&numbers.transfer, &dl.p, &dl.r) else { continue };
                if let Some(Smoothing { at, t_at, .. }) = &tn.smoothing {
                    let f = g.kernel("amg", SOURCE, "amg_prolongator")?;
                    let n32 = n as i32;
                    let mut la = g.launcher(&f);
                    la.arg(&n32).arg(&at.pattern.row_ptr).arg(t_at).arg(&at.values).arg(&numbers.dinv).arg(&level_scalars);
                    la.arg(&p.values);
                    g.launch("amg_prolongator", la, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)?;
                }
                gather(g, tn.r_from.len(), &p.values, &tn.r_from, &r.values)?;
                lap(clock, Some(l), "P")?;
                product(g, n, &a, (&p.matrix(), p.nrows), &tn.ap.matrix(), &tn.plans[0])?;
                lap(clock, Some(l), "A P")?;
                let next = levels[l + 1].a.as_ref().expect("coarse levels keep their matrix");
                product(g, r.nrows, &r.matrix(), (&tn.ap.matrix(), n), &next.matrix(), &tn.plans[1])?;
                lap(clock, Some(l), "R (A P)")?;
            }
            if let Some(d) = inverse.as_ref().filter(|_| !host_inverse) {
                // on the device (one block), the host keeping its last setup's inverse
                let coarsest = match &levels[last].a {
                    Some(a) => a.matrix(),
                    None => LevelMatrix { pattern, values, single: None },
                };
                let rows = h.levels[last].a.nrows;
                let name = "amg_dense_inverse";
                let bytes = rows * rows * std::mem::size_of::<f64>();
                let shared = if bytes <= g.shared_room(&g.kernel("amg", SOURCE, name)?, name)? { bytes } else { 0 };
                let f = g.kernel_with_shared("amg", SOURCE, name, shared)?;
                let (rows32, in_shared, status) = (rows as i32, (shared > 0) as i32, slot(COARSEST));
                let mut l = g.launcher(&f);
                l.arg(&rows32).arg(&coarsest.pattern.row_ptr).arg(&coarsest.pattern.col).arg(coarsest.values);
                l.arg(&*scratch).arg(&in_shared).arg(d).arg(&status);
                g.launch("amg_dense_inverse", l, (1, 1, 1), (1024, 1, 1), shared as u32)?;
            }
            lap(clock, None, "coarsest inverse")?;
            if h.options.f32_cycle {
                round_levels(g, levels)?;
                lap(clock, None, "f32 copies")?;
            }
            Ok(())
        };
        match numbers_graph.take().filter(|(seen, _)| replayable && *seen == shape) {
            Some(kept) => g.replay("the AMG re-setup", &numbers_graph.insert(kept).1)?,
            None => {
                queue(&mut clock)?;
                if replayable {
                    // captured after a run, so its kernels are compiled and loaded
                    let graph = g.capture("the AMG re-setup", || queue(&mut Phases::start()))?;
                    *numbers_graph = Some((shape, graph));
                }
            }
        }
        if let Some(d) = inverse.as_mut().filter(|_| host_inverse) {
            // a few thousand rows: on the host
            let coarsest = levels[last].a.as_ref().map_or(values, |a| &a.values);
            let mut v = std::mem::take(&mut h.levels[last].a.v);
            v.resize(h.levels[last].a.nnz(), 0.0); // a structure-only finest level has none
            g.download(coarsest, 0, &mut v)?;
            h.levels[last].a.v = v;
            let inv = coarse_inverse(h)?.expect("the coarsest level is inverted densely");
            g.upload(&inv, d, 0)?;
            h.coarse_inverse = Some(inv);
            lap(&mut clock, None, "coarsest inverse")?;
        }
        // the one wait for the levels' numbers: what the host keeps of them
        let mut rho = vec![0.0; 2 * h.levels.len()];
        g.download(scalars, 0, &mut rho)?;
        let mut status = [0i32];
        g.download(first, COARSEST, &mut status)?;
        if (0..i32::MAX).contains(&status[0]) {
            return Err(singular_coarsest(h.levels[last].a.nrows, last));
        }
        for (l, level) in h.levels.iter_mut().enumerate() {
            level.spectral_radius = rho[2 * l];
            level.coefficients = coefficients(smoother.on_level(l), rho[2 * l]);
        }
        clock.lap(if timed { "reading rho" } else { "the device's work, waited for" });
        h.asymmetry = asym;
        h.phases = clock.0;
        Ok(())
    }
}

/// Each row's diagonal entry (-1: none) of a pattern on the device
/// (kernels/amg.cu `amg_diagonal_positions`).
fn diagonal_positions(g: &Gpu, n: usize, p: &DevicePattern) -> Result<DeviceBuffer<i32>> {
    let diag = g.alloc::<i32>(n.max(1))?;
    let f = g.kernel("amg", SOURCE, "amg_diagonal_positions")?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&p.row_ptr).arg(&p.col).arg(&diag);
    g.launch("amg_diagonal_positions", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)?;
    Ok(diag)
}

/// For each entry (i, j) of a square pattern of `n` rows, the entry (j, i),
/// found on the device (kernels/amg.cu `amg_mirror`); None where the pattern
/// is not symmetric (the re-setup's symmetry check then reads the values on
/// the host).
pub fn finest_mirror(g: &Gpu, n: usize, pattern: &DevicePattern) -> Result<Option<DeviceBuffer<i32>>> {
    let (mirror, mut first) = (g.alloc::<i32>(pattern.col.len().max(1))?, g.alloc(1)?);
    let missing = first_of(g, &mut first, ("amg_mirror", 32, &[]), n, &[&pattern.row_ptr, &pattern.col], &[], Some(&mirror))?;
    Ok(missing.is_none().then_some(mirror))
}

/// Whether the finest matrix's rows are nodes of `bs` x `bs` blocks
/// (`host::block_pattern`'s test, which reads every row on the host),
/// checked on the device (kernels/amg.cu `amg_node_blocks`).
pub fn finest_nodes_are_blocks(g: &Gpu, n: usize, bs: usize, pattern: &DevicePattern) -> Result<bool> {
    if bs <= 1 || n == 0 || !n.is_multiple_of(bs) {
        return Ok(false);
    }
    let mut first = g.alloc::<i32>(1)?;
    let kernel = ("amg_node_blocks", 32, &[bs as i32][..]);
    let bad = first_of(g, &mut first, kernel, n / bs, &[&pattern.row_ptr, &pattern.col], &[], None)?;
    Ok(bad.is_none())
}

/// `to` = `from` rounded to f32; with `first`, the first value f32 cannot
/// hold is reported there (kernels/amg.cu amg_round_to_f32).
fn round_to_f32(g: &Gpu, from: &DeviceBuffer<f64>, to: &DeviceBuffer<f32>, first: Option<&DeviceView<i32>>) -> Result<()> {
    let f = g.kernel("amg", SOURCE, "amg_round_to_f32")?;
    let n = from.len() as i64;
    let mut l = g.launcher(&f);
    l.arg(&n).arg(from).arg(to);
    view_or_null(&mut l, first);
    g.launch("amg_round_to_f32", l, (grid_for(from.len()), 1, 1), (BLOCK, 1, 1), 0)
}

/// dinv = 1 / a_ii (0 where the diagonal is 0 or missing; `diag`: each
/// row's diagonal entry); with `bad`, the first row whose diagonal is 0 or
/// not finite is reported there (kernels/amg.cu amg_inverse_diagonal).
fn inverse_diagonal(
    g: &Gpu,
    n: usize,
    (diag, values): (&DeviceBuffer<i32>, &DeviceBuffer<f64>),
    dinv: &DeviceBuffer<f64>,
    bad: Option<&DeviceView<i32>>,
) -> Result<()> {
    let f = g.kernel("amg", SOURCE, "amg_inverse_diagonal")?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(diag).arg(values).arg(dinv);
    view_or_null(&mut l, bad);
    g.launch("amg_inverse_diagonal", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
}

/// The f32 copies of the coarse levels' matrices and the transfers that an
/// f32 cycle reads, rounded from their current values.
fn round_levels(g: &Gpu, levels: &[DeviceLevel]) -> Result<()> {
    for m in levels.iter().flat_map(|dl| [&dl.a, &dl.p, &dl.r]).flatten() {
        if let Some(to) = &m.single {
            round_to_f32(g, &m.values, to, None)?;
        }
    }
    Ok(())
}

/// The finest matrix with its values from the device.
fn on_host(g: &Gpu, fine: &Mat, values: &DeviceBuffer<f64>) -> Result<Mat> {
    let mut v = vec![0.0; fine.nnz()];
    g.download(values, 0, &mut v)?;
    Ok(Mat { nrows: fine.nrows, ncols: fine.ncols, rp: fine.rp.clone(), ci: fine.ci.clone(), v })
}

/// The host setup's message for finest values a device check refused.
fn refused(g: &Gpu, fine: &Mat, options: &Options, values: &DeviceBuffer<f64>) -> Error {
    match on_host(g, fine, values) {
        Ok(a) => check_finest(&a, options)
            .err()
            .unwrap_or_else(|| Error::internal("AMG: a device check refused what the host's passes")),
        Err(e) => e,
    }
}

/// Launches a kernel over n rows, `lanes` threads a row, with arguments
/// (n, `scalars`..., `ints`..., `reals`..., `last_int`, first) that
/// reports a first failing row or entry through `first` (armed at
/// i32::MAX here); returns it, if any.
fn first_of(
    g: &Gpu,
    first: &mut DeviceBuffer<i32>,
    kernel: (&str, usize, &[i32]),
    n: usize,
    ints: &[&DeviceBuffer<i32>],
    reals: &[&DeviceBuffer<f64>],
    last_int: Option<&DeviceBuffer<i32>>,
) -> Result<Option<usize>> {
    g.upload(&[i32::MAX], first, 0)?;
    queue_first(g, &first.slice(0..1), kernel, n, ints, reals, last_int)?;
    let mut found = [0i32];
    g.download(first, 0, &mut found)?;
    Ok((found[0] != i32::MAX).then_some(found[0] as usize))
}

/// `first_of`'s launch alone, reporting into `flag` (armed by the caller),
/// which the caller reads when it needs it.
fn queue_first(
    g: &Gpu,
    flag: &DeviceView<i32>,
    (kernel, lanes, scalars): (&str, usize, &[i32]),
    n: usize,
    ints: &[&DeviceBuffer<i32>],
    reals: &[&DeviceBuffer<f64>],
    last_int: Option<&DeviceBuffer<i32>>,
) -> Result<()> {
    let f = g.kernel("amg", SOURCE, kernel)?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32);
    for s in scalars {
        l.arg(s);
    }
    for a in ints {
        l.arg(*a);
    }
    for v in reals {
        l.arg(*v);
    }
    if let Some(a) = last_int {
        l.arg(a);
    }
    l.arg(flag);
    g.launch(kernel, l, (grid_for(n * lanes), 1, 1), (BLOCK, 1, 1), 0)
}

/// Queues LANCZOS_STEPS Lanczos steps for rho(D^-1 A) of a level of `n`
/// rows on the device from the host's start vector (made there, the same
/// bits): host.rs `spectral_radius_symmetric`, step for step, over the
/// level's V-cycle scratch vectors. The steps' scalars stay on the device
/// (kernels/amg.cu `amg_lanczos_*`), where amg_level_numbers turns them
/// into rho.
fn lanczos(
    g: &Gpu,
    (reduce, partial): (&mut Reduce, &DeviceBuffer<f64>),
    n: usize,
    (dl, numbers): (&DeviceLevel, &LevelNumbers),
    a: &LevelMatrix,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let steps = LANCZOS_STEPS.min(n);
    let (n32, blocks) = (n as i32, (Reduce::blocks(n) as u32, 1, 1));
    let t = &numbers.lanczos;
    // v and the previous v alternate, and so do w and the next w; sw = s w
    // (the V-cycle's right-hand side: level 0's is the caller's, a coarse
    // level's restricted before it is read)
    let (mut v, mut prev, mut w, mut w_out, sw) = (&dl.x[0], &dl.x[1], &dl.d, &dl.residual, &dl.b);
    if n <= LANCZOS_BLOCK_ROWS && a.values.len() <= LANCZOS_BLOCK_ENTRIES {
        // a small level: every step in one block, not two launches a step
        let f = g.kernel("amg", SOURCE, "amg_lanczos_block")?;
        let steps32 = steps as i32;
        let mut l = g.launcher(&f);
        l.arg(&n32).arg(&steps32).arg(&a.pattern.row_ptr).arg(&a.pattern.col).arg(a.values).arg(&numbers.dinv);
        l.arg(v).arg(prev).arg(w).arg(w_out).arg(sw).arg(t);
        return g.launch("amg_lanczos_block", l, (1, 1, 1), (n.next_multiple_of(32) as u32, 1, 1), 0);
    }
    let f = g.kernel("amg", SOURCE, "amg_lanczos_start")?;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&numbers.dinv).arg(w).arg(sw).arg(t).arg(&reduce.partial).arg(&reduce.counter);
    g.launch("amg_lanczos_start", l, blocks, (BLOCK, 1, 1), 0)?;
    let tpr = a.pattern.threads_per_row;
    let name = format!("amg_lanczos_product_tpr{tpr}");
    let (product, beta) = (g.kernel("amg", SOURCE, &name)?, g.kernel("amg", SOURCE, "amg_lanczos_beta")?);
    let product_blocks = grid_for(n * tpr as usize).min(LANCZOS_BLOCKS);
    for k in 0..steps as i32 {
        // v = w / |w| (t[2k]: the start's norm, then the previous beta), w_out = s A s v - beta prev, alpha
        let (norm_at, first, alpha_at) = (2 * k, (k == 0) as i32, 2 * k + 1);
        let mut l = g.launcher(&product);
        l.arg(&n32).arg(&a.pattern.row_ptr).arg(&a.pattern.col).arg(a.values).arg(&numbers.dinv).arg(sw).arg(w);
        l.arg(w_out).arg(v).arg(prev).arg(t).arg(&norm_at).arg(&first).arg(&alpha_at);
        l.arg(partial).arg(&reduce.counter);
        g.launch(&name, l, (product_blocks, 1, 1), (BLOCK, 1, 1), 0)?;
        let mut l = g.launcher(&beta);
        l.arg(&n32).arg(&numbers.dinv).arg(w_out).arg(v).arg(sw).arg(t).arg(&alpha_at);
        l.arg(&reduce.partial).arg(&reduce.counter);
        g.launch("amg_lanczos_beta", l, blocks, (BLOCK, 1, 1), 0)?;
        std::mem::swap(&mut prev, &mut v);
        std::mem::swap(&mut w, &mut w_out);
    }
    Ok(())
}

/// The largest level whose Lanczos runs in one block (kernels/amg.cu
/// amg_lanczos_block, a thread a row): below, its 2 LANCZOS_STEPS launches
/// cost more than their work (32 rows: 0.15 ms on the H100); its entries
/// are read once a step, by one multiprocessor.
const LANCZOS_BLOCK_ROWS: usize = 1024;
const LANCZOS_BLOCK_ENTRIES: usize = 32768;

/// The Lanczos product's most blocks (kernels/amg.cu lanczos_product): a
/// lane group a row, as an SpMV, up to these (then a grid-stride loop; the
/// last block sums the blocks' partial sums).
const LANCZOS_BLOCKS: u32 = 8192;

/// out = the l1 inverse (1 / sum_j |a_ij|) or, with `scale`, |scale_i| sum_j |a_ij|.
fn row_sums(g: &Gpu, n: usize, a: &LevelMatrix, scale: Option<&DeviceBuffer<f64>>, out: &DeviceBuffer<f64>) -> Result<()> {
    let f = g.kernel("amg", SOURCE, "amg_row_sums")?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&a.pattern.row_ptr).arg(a.values);
    arg_or_null(&mut l, scale);
    l.arg(out);
    g.launch("amg_row_sums", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
}

/// C's values = A B on C's kept pattern; A has n rows and B `b_rows`
/// rows. A row of C takes a group of lanes about as wide as B's rows: a
/// warp per row idles most lanes where B has a few entries a row (T, P of a
/// scalar problem), a lane per row serialises long ones.
/// Over blocks of rows or tiles as `plan` says, a group takes a block's
/// rows of C at once, loading B's entries once for them.
fn product(g: &Gpu, n: usize, a: &LevelMatrix, (b, b_rows): (&LevelMatrix, usize), c: &LevelMatrix, plan: &Plan) -> Result<()> {
    // lanes over B's entries, or over its column runs of J
    let per_row = b.values.len().div_ceil(b_rows.max(1));
    let lanes = |items: usize| items.next_power_of_two().clamp(1, 32);
    let (name, rows, group) = match *plan {
        Plan::Rows => (format!("amg_product_g{}", lanes(per_row)), 1, lanes(per_row)),
        Plan::Tentative(s, k) => (format!("amg_times_tentative_s{s}_k{k}"), s, 32),
        Plan::Blocks { rows, .. } => (format!("amg_product_g{}_s{rows}", lanes(per_row)), rows, lanes(per_row)),
        Plan::Tiles(s, k, j) => (format!("amg_product_t{s}x{k}x{j}"), s, 32),
        Plan::Split { width, warps } => return split_product(g, n, (a, b, c), width, warps),
    };
    let f = g.kernel("amg", SOURCE, &name)?;
    let units = n / rows;
    let units32 = units as i32;
    let mut l = g.launcher(&f);
    l.arg(&units32);
    if let Plan::Blocks { alike, .. } = plan {
        l.arg(alike);
    }
    l.arg(&a.pattern.row_ptr).arg(&a.pattern.col).arg(a.values);
    l.arg(&b.pattern.row_ptr).arg(&b.pattern.col).arg(b.values);
    l.arg(&c.pattern.row_ptr).arg(&c.pattern.col).arg(c.values);
    // times_tentative's shared memory holds four warps' partial blocks
    let block = if matches!(plan, Plan::Tentative(..) | Plan::Tiles(..)) { 128 } else { BLOCK };
    g.launch(&name, l, ((units * group).div_ceil(block as usize).max(1) as u32, 1, 1), (block, 1, 1), 0)
}

/// C = A B over Plan::Split: a block of `warps` warps a row of C (n rows, at most `width` entries each).
fn split_product(
    g: &Gpu,
    n: usize,
    (a, b, c): (&LevelMatrix, &LevelMatrix, &LevelMatrix),
    width: usize,
    warps: usize,
) -> Result<()> {
    let name = "amg_product_split";
    let shared = (warps * 8 + 4) * width;
    let f = g.kernel_with_shared("amg", SOURCE, name, shared)?;
    let (n32, width32) = (n as i32, width as i32);
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&width32);
    l.arg(&a.pattern.row_ptr).arg(&a.pattern.col).arg(a.values);
    l.arg(&b.pattern.row_ptr).arg(&b.pattern.col).arg(b.values);
    l.arg(&c.pattern.row_ptr).arg(&c.pattern.col).arg(c.values);
    g.launch(name, l, (n.clamp(1, 65535) as u32, 1, 1), ((warps * 32) as u32, 1, 1), shared as u32)
}

/// The matrix of a level: the solver's own on level 0. `single`: its f32
/// copy, which the cycle's kernels read instead where present.
struct LevelMatrix<'a> {
    pattern: &'a DevicePattern,
    values: &'a DeviceBuffer<f64>,
    single: Option<&'a DeviceBuffer<f32>>,
}

impl<'a> LevelMatrix<'a> {
    /// The cycle's kernel `stem` for this matrix's values and row width.
    fn kernel_name(&self, stem: &str) -> String {
        let single = if self.single.is_some() { "_f32" } else { "" };
        format!("{stem}{single}_tpr{}", self.pattern.threads_per_row)
    }

    /// Pushes the row pointers, columns and the values the cycle reads.
    fn push(&self, l: &mut Launch<'a>) {
        let pattern: &'a DevicePattern = self.pattern;
        l.arg(&pattern.row_ptr).arg(&pattern.col);
        match self.single {
            Some(v) => l.arg(v),
            None => l.arg(self.values),
        };
    }
}

#[allow(clippy::too_many_arguments)]
fn smooth_step(
    g: &Gpu,
    a: &LevelMatrix,
    n: usize,
    dl: &DeviceLevel,
    b: &DeviceBuffer<f64>,
    x_in: Option<&DeviceBuffer<f64>>,
    x_out: &DeviceBuffer<f64>,
    coef: (&DeviceBuffer<f64>, i32),
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let tpr = a.pattern.threads_per_row;
    let name = a.kernel_name("amg_smooth");
    let f = g.kernel("amg", SOURCE, &name)?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32);
    a.push(&mut l);
    l.arg(&dl.inverse).arg(b);
    arg_or_null(&mut l, x_in);
    l.arg(x_out).arg(&dl.d).arg(coef.0).arg(&coef.1);
    arg_or_null(&mut l, sc);
    g.launch(&name, l, (spmv_blocks(n, tpr) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

/// One symmetric Gauss-Seidel step: x_out = x_in + M^-1 (b - A x_in), or
/// M^-1 b from zero, M^-1 by the two sweeps over the level's factor.
#[allow(clippy::too_many_arguments)]
fn gauss_seidel_step(
    g: &Gpu,
    a: &LevelMatrix,
    n: usize,
    dl: &DeviceLevel,
    gs: &GaussSeidel,
    b: &DeviceBuffer<f64>,
    x_in: Option<&DeviceBuffer<f64>>,
    x_out: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let Some(x_in) = x_in else {
        return syncfree_apply(g, a.pattern, n, &gs.sweeps, &gs.factor, b, x_out, sc);
    };
    residual(g, a, n, b, x_in, &dl.residual, sc)?;
    syncfree_apply(g, a.pattern, n, &gs.sweeps, &gs.factor, &dl.residual, &dl.d, sc)?;
    correct(g, n, x_in, &dl.d, x_out, sc)
}

/// x_out = x_in + d (elementwise: x_out may be x_in).
fn correct(
    g: &Gpu,
    n: usize,
    x_in: &DeviceBuffer<f64>,
    d: &DeviceBuffer<f64>,
    x_out: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let f = g.kernel("amg", SOURCE, "amg_correct")?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(x_in).arg(d).arg(x_out);
    arg_or_null(&mut l, sc);
    g.launch("amg_correct", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
}

/// Which of the level's two iterates `x` is.
fn x_index(dl: &DeviceLevel, x: &DeviceBuffer<f64>) -> usize {
    usize::from(std::ptr::eq(x, &dl.x[1]))
}

fn residual(
    g: &Gpu,
    a: &LevelMatrix,
    n: usize,
    b: &DeviceBuffer<f64>,
    x: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let tpr = a.pattern.threads_per_row;
    let name = a.kernel_name("amg_residual");
    let f = g.kernel("amg", SOURCE, &name)?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32);
    a.push(&mut l);
    l.arg(b).arg(x).arg(r);
    arg_or_null(&mut l, sc);
    g.launch(&name, l, (spmv_blocks(n, tpr) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

/// The V-cycle from level `l`: b -> the returned iterate (one of the
/// level's two x buffers, or `out` on level 0).
#[allow(clippy::too_many_arguments)]
fn cycle<'a>(
    g: &Gpu,
    h: &Hierarchy,
    dh: &'a DeviceHierarchy,
    l: usize,
    a: LevelMatrix,
    b: &'a DeviceBuffer<f64>,
    x: [&'a DeviceBuffer<f64>; 2],
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<&'a DeviceBuffer<f64>> {
    let (level, dl) = (&h.levels[l], &dh.levels[l]);
    let n = level.a.nrows;
    // the steps alternate between the two iterates, starting with x[1]:
    // pre and post smoothing take as many steps, so the cycle ends in x[0]
    let mut current: Option<usize> = None;
    let smooth = |current: &mut Option<usize>| -> Result<()> {
        for s in 0..level.coefficients.len() {
            let out = current.map_or(1, |c| 1 - c);
            let coef = (&dh.coefficients, (l * MAX_STEPS + s) as i32);
            match &dl.gauss_seidel {
                Some(gs) => gauss_seidel_step(g, &a, n, dl, gs, b, current.map(|c| x[c]), x[out], sc)?,
                None => smooth_step(g, &a, n, dl, b, current.map(|c| x[c]), x[out], coef, sc)?,
            }
            *current = Some(out);
        }
        Ok(())
    };
    let (Some(p), Some(r)) = (&dl.p, &dl.r) else {
        if let Some(inv) = &dh.coarse_inverse {
            let f = g.kernel("amg", SOURCE, "amg_dense")?;
            let n32 = n as i32;
            let mut launch = g.launcher(&f);
            launch.arg(&n32).arg(inv).arg(b).arg(x[0]);
            arg_or_null(&mut launch, sc);
            g.launch("amg_dense", launch, ((n * 32).div_ceil(BLOCK as usize).max(1) as u32, 1, 1), (BLOCK, 1, 1), 0)?;
            return Ok(x[0]);
        }
        smooth(&mut current)?;
        return Ok(x[current.unwrap_or(0)]);
    };
    smooth(&mut current)?;
    let xc = x[current.expect("at least one smoothing step")];
    residual(g, &a, n, b, xc, &dl.residual, sc)?;
    let next = &dh.levels[l + 1];
    r.spmv(g, &dl.residual, 0.0, &next.b, sc)?;
    let na = next.a.as_ref().expect("coarse levels keep their matrix");
    let coarse = cycle(g, h, dh, l + 1, na.matrix(), &next.b, [&next.x[0], &next.x[1]], sc)?;
    if let Some([rhs, correction]) = &next.second_visit {
        // a W-cycle's second visit: the correction from the first's residual
        residual(g, &na.matrix(), na.nrows, &next.b, coarse, rhs, sc)?;
        let e = cycle(g, h, dh, l + 1, na.matrix(), rhs, [correction, &next.x[1 - x_index(next, coarse)]], sc)?;
        correct(g, na.nrows, coarse, e, coarse, sc)?;
    }
    p.spmv(g, coarse, 1.0, xc, sc)?;
    smooth(&mut current)?;
    Ok(x[current.expect("at least one smoothing step")])
}

/// z = one V-cycle applied to r; `pattern` and `values` are the finest matrix.
#[allow(clippy::too_many_arguments)]
pub fn vcycle(
    g: &Gpu,
    h: &Hierarchy,
    dh: &DeviceHierarchy,
    pattern: &DevicePattern,
    values: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    z: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let finest = &dh.levels[0];
    let a = LevelMatrix { pattern, values, single: dh.finest_single.as_ref() };
    let out = cycle(g, h, dh, 0, a, r, [z, &finest.x[1]], sc)?;
    if !std::ptr::eq(out, z) {
        // a smoothed coarsest level alone with an odd number of steps
        crate::array::cuda::update(g, r.len(), z, 1.0, out, 0.0, None, 0.0)?;
    }
    Ok(())
}
