//! CUDA launches for `kernels/sparse.cu`: SpMV (also fused with CG's p.q),
//! Dirichlet rows, level-scheduled ILU(0).

use super::DevicePattern;
use crate::error::Result;
use crate::gpu::{arg_or_null, DeviceBuffer, DeviceScalar, Gpu, KernelArg};

/// kernels/sparse.cu after the shared prelude.
pub const SOURCE: &str = concat!(
    include_str!("../../kernels/one_kernel.cuh"),
    include_str!("../../kernels/common.cuh"),
    include_str!("../../kernels/csr.cuh"),
    include_str!("../../kernels/sparse.cu")
);

use crate::array::cuda::{grid_for, Reduce, BLOCK, REDUCE_BLOCKS};

/// A device copy of `v` (at least one element, so empty matrices still have buffers).
pub fn upload<T: DeviceScalar>(g: &Gpu, v: &[T]) -> Result<DeviceBuffer<T>> {
    let mut d = g.alloc::<T>(v.len().max(1))?;
    if !v.is_empty() {
        g.upload(v, &mut d, 0)?;
    }
    Ok(d)
}

/// Threads per row for SpMV: a group of t threads takes rows of about 3.4 t
/// entries or more, so each thread loads several (measured on the H100,
/// BENCHMARKS.md: 2 for the 7-point Laplacian, 4 for the 27-point operator).
pub fn threads_per_row(nnz: usize, nrows: usize) -> u32 {
    let mean = nnz as f64 / nrows.max(1) as f64;
    let mut t = 1u32;
    while t < 32 && (2 * t) as f64 * 3.4 <= mean {
        t *= 2;
    }
    t
}

/// Entries a lane past which a row is long: its group would hold the whole
/// launch back, so `spmv_long_rows` takes it, in chunks of LONG_CHUNK
/// entries a block (kernels/sparse.cu).
const LONG_ROW_PER_LANE: usize = 128;
const LONG_CHUNK: usize = 4096;

/// The rows too long for their SpMV group, on the device, cut into chunks;
/// with the scratch their chunks' sums meet in. One product at a time a
/// matrix (the context's stream orders them).
pub struct LongRows {
    rows: DeviceBuffer<i32>,
    chunk_row: DeviceBuffer<i32>,
    first_chunk: DeviceBuffer<i32>,
    chunks: usize,
    partial: DeviceBuffer<f64>,
    /// A count a row, zero between products.
    done: DeviceBuffer<u32>,
    /// Rows with more entries than this are long.
    longer_than: i32,
}

impl LongRows {
    /// The long rows of `row_ptr` at `tpr` lanes a row; None where there are none.
    pub fn find(g: &Gpu, row_ptr: &[i32], tpr: u32) -> Result<Option<LongRows>> {
        let longer_than = LONG_ROW_PER_LANE * tpr as usize;
        let length = |i: usize| (row_ptr[i + 1] - row_ptr[i]) as usize;
        let rows: Vec<i32> =
            (0..row_ptr.len().saturating_sub(1)).filter(|&i| length(i) > longer_than).map(|i| i as i32).collect();
        if rows.is_empty() {
            return Ok(None);
        }
        let (mut chunk_row, mut first_chunk) = (Vec::new(), vec![0i32]);
        for (q, &r) in rows.iter().enumerate() {
            chunk_row.extend(std::iter::repeat_n(q as i32, length(r as usize).div_ceil(LONG_CHUNK)));
            first_chunk.push(chunk_row.len() as i32);
        }
        Ok(Some(LongRows {
            rows: upload(g, &rows)?,
            chunk_row: upload(g, &chunk_row)?,
            first_chunk: upload(g, &first_chunk)?,
            chunks: chunk_row.len(),
            partial: g.alloc(chunk_row.len())?,
            done: g.zeros(rows.len())?,
            longer_than: longer_than as i32,
        }))
    }
}

/// What the SpMV kernels take as `long_len`: rows longer are skipped.
fn long_len(dp: &DevicePattern) -> i32 {
    dp.long_rows.as_ref().map_or(i32::MAX, |l| l.longer_than)
}

/// y = alpha A x + beta y over the long rows alone.
#[allow(clippy::too_many_arguments)]
fn spmv_long_rows<V: SpmvValues>(
    g: &Gpu,
    dp: &DevicePattern,
    v: &DeviceBuffer<V>,
    alpha: f64,
    x: &DeviceBuffer<f64>,
    beta: f64,
    y: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let Some(long) = &dp.long_rows else { return Ok(()) };
    let name = format!("{}_long_rows", V::KERNEL);
    let f = g.kernel("sparse", SOURCE, &name)?;
    let chunks = long.chunks as i32;
    let mut l = g.launcher(&f);
    l.arg(&chunks).arg(&long.chunk_row).arg(&long.first_chunk).arg(&long.rows).arg(&dp.row_ptr).arg(&dp.col);
    l.arg(v).arg(x).arg(y).arg(&alpha).arg(&beta).arg(&long.partial).arg(&long.done);
    arg_or_null(&mut l, sc);
    g.launch(&name, l, (long.chunks.min(REDUCE_BLOCKS * 16) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

/// The values an SpMV reads: f64, or f32 copies (the AMG cycle's), each
/// with its kernels (kernels/sparse.cu `spmv_tpr*`, `spmv_f32_tpr*`).
pub trait SpmvValues: DeviceScalar {
    const KERNEL: &'static str;
}

impl SpmvValues for f64 {
    const KERNEL: &'static str = "spmv";
}

impl SpmvValues for f32 {
    const KERNEL: &'static str = "spmv_f32";
}

/// y = alpha A x + beta y; with `sc`, skipped once a device-driven solve has stopped.
#[allow(clippy::too_many_arguments)]
pub fn spmv_with<V: SpmvValues>(
    g: &Gpu,
    dp: &DevicePattern,
    tpr: u32,
    n: usize,
    v: &DeviceBuffer<V>,
    alpha: f64,
    x: &DeviceBuffer<f64>,
    beta: f64,
    y: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let name = format!("{}_tpr{tpr}", V::KERNEL);
    let f = g.kernel("sparse", SOURCE, &name)?;
    let (n32, long_len) = (n as i32, long_len(dp));
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&dp.row_ptr).arg(&dp.col).arg(v).arg(x).arg(y).arg(&alpha).arg(&beta);
    arg_or_null(&mut l, sc);
    l.arg(&long_len);
    g.launch(&name, l, (spmv_blocks(n, tpr) as u32, 1, 1), (BLOCK, 1, 1), 0)?;
    spmv_long_rows(g, dp, v, alpha, x, beta, y, sc)
}

/// The rows of a distributed matrix's halo block that have entries: their
/// numbers among the rank's rows, and the block's pattern (`count` rows) and
/// values over them alone, so that its product touches those rows of y only.
pub struct RowsBlock<'a> {
    pub count: usize,
    pub rows: &'a DeviceBuffer<i32>,
    pub dp: &'a DevicePattern,
    pub values: &'a DeviceBuffer<f64>,
}

/// y[rows[k]] += (H x)_k over the block's rows (kernels/sparse.cu).
pub fn spmv_rows_add(
    g: &Gpu,
    h: &RowsBlock,
    x: &DeviceBuffer<f64>,
    y: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    if h.count == 0 {
        return Ok(());
    }
    let f = g.kernel("sparse", SOURCE, "spmv_rows_add")?;
    let m32 = h.count as i32;
    let mut l = g.launcher(&f);
    l.arg(&m32).arg(h.rows).arg(&h.dp.row_ptr).arg(&h.dp.col).arg(h.values).arg(x).arg(y);
    arg_or_null(&mut l, sc);
    g.launch("spmv_rows_add", l, (h.count.div_ceil(BLOCK as usize) as u32, 1, 1), (BLOCK, 1, 1), 0)
}

#[allow(clippy::too_many_arguments)]
pub fn spmv(
    g: &Gpu,
    dp: &DevicePattern,
    n: usize,
    v: &DeviceBuffer<f64>,
    alpha: f64,
    x: &DeviceBuffer<f64>,
    beta: f64,
    y: &DeviceBuffer<f64>,
) -> Result<()> {
    spmv_with(g, dp, dp.threads_per_row, n, v, alpha, x, beta, y, None)
}

/// Blocks of the SpMV kernel for n rows at `tpr` threads per row.
pub(crate) fn spmv_blocks(n: usize, tpr: u32) -> usize {
    (n * tpr as usize).div_ceil(BLOCK as usize).max(1)
}

/// Symmetric Dirichlet rows and columns, one thread per row
/// (`super::apply_dirichlet` checked the input).
#[allow(clippy::too_many_arguments)]
pub fn dirichlet(
    g: &Gpu,
    dp: &DevicePattern,
    n: usize,
    v: &DeviceBuffer<f64>,
    fixed: &[u8],
    values: &[f64],
    b: &DeviceBuffer<f64>,
) -> Result<()> {
    let (fixed_d, values_d) = (upload(g, fixed)?, upload(g, values)?);
    let f = g.kernel("sparse", SOURCE, "dirichlet")?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&dp.row_ptr).arg(&dp.col).arg(&dp.diag).arg(v).arg(&fixed_d).arg(&values_d).arg(b);
    g.launch("dirichlet", l, (n.div_ceil(BLOCK as usize).max(1) as u32, 1, 1), (BLOCK, 1, 1), 0)?;
    // the staging buffers are freed on return: wait for the kernel first
    g.synchronize("dirichlet")
}

/// Rows grouped by dependency level, on the device.
pub struct DeviceLevels {
    pub(crate) rows: DeviceBuffer<i32>,
    pub(crate) ptr: Vec<usize>,
}

impl DeviceLevels {
    pub fn new(g: &Gpu, rows: &[i32], ptr: &[usize]) -> Result<DeviceLevels> {
        Ok(DeviceLevels { rows: upload(g, rows)?, ptr: ptr.to_vec() })
    }
}

/// One triangular sweep in one launch (kernels/sparse.cu `lsolve_syncfree`,
/// `usolve_syncfree`): the chunks' rows level by level, the threads a block
/// needs, and the ticket/done words the kernel re-arms itself.
pub struct DeviceSweep {
    chunk: i32,
    nchunks: u32,
    threads: u32,
    chunk_level: DeviceBuffer<i32>,
    level_ptr: DeviceBuffer<i32>,
    order: DeviceBuffer<i32>,
    ctl: DeviceBuffer<u32>,
}

/// Both synchronisation-free sweeps and the scratch vector y between them.
pub struct SyncFreeSweeps {
    pub schedule: SweepSchedule,
    /// The lower sweep's output: kept pending between applies by the chunks
    /// and the grid walk, written plainly by the plane pipeline, whose
    /// blocks poll their own slots instead (kernels/sparse.cu).
    pub y: DeviceBuffer<f64>,
}

/// How the synchronisation-free sweeps walk the rows: chunks of consecutive
/// rows by dependency level, or a box stencil's planes and lines
/// (sparse::grid_walk), with the walk's ticket/done words.
pub enum SweepSchedule {
    Chunks {
        lower: Box<DeviceSweep>,
        upper: Box<DeviceSweep>,
    },
    Grid {
        walk: super::grid_walk::GridWalk,
        sweeps: Box<[WalkSweep; 2]>,
    },
    /// A 7-point stencil's planes in a pipeline, in runs as `runs` allows
    /// (one where the windows are off); `hand` the blocks' slots for the
    /// plane they hand on (kept pending).
    Pipeline {
        walk: super::grid_walk::GridWalk,
        sweeps: Box<[PipeSweep; 2]>,
        runs: PipeRuns,
        hand: DeviceBuffer<f64>,
    },
}

/// One sweep of the plane pipeline (sparse::grid_walk::GridWalk::pipeline):
/// where each step of a plane starts, the factor's entries in that order
/// (gathered by `SyncFreeSweeps::refresh` through `from`), the ticket/done
/// words, and its plan {window, runs, planes a run} (kernels/sparse.cu
/// pipe_window_pick; {-1, 1, nz}, the exact schedule, until a factorisation
/// picks windows) with the windows' bound's two maxima.
pub struct PipeSweep {
    step_off: DeviceBuffer<i32>,
    from: DeviceBuffer<i32>,
    vals: DeviceBuffer<f64>,
    ctl: DeviceBuffer<u32>,
    plan: DeviceBuffer<i32>,
    bound: DeviceBuffer<u64>,
}

impl PipeSweep {
    fn new(g: &Gpu, layout: &super::grid_walk::PipeLayout, nz: usize) -> Result<PipeSweep> {
        Ok(PipeSweep {
            step_off: upload(g, &layout.step_off)?,
            vals: g.alloc(layout.from.len().max(1))?,
            from: upload(g, &layout.from)?,
            ctl: upload(g, &[0u32, 0])?,
            plan: upload(g, &[-1i32, 1, nz as i32])?,
            bound: upload(g, &[0u64, 0])?,
        })
    }

    /// The plan the sweep's current factor entries allow (on the device).
    fn pick_plan(&self, g: &Gpu, walk: &super::grid_walk::GridWalk, runs: &PipeRuns, upper: bool) -> Result<()> {
        let n = walk.nx * walk.ny * walk.nz;
        let f = g.kernel("sparse", SOURCE, "pipe_window_bound")?;
        let (n32, up) = (n as i32, i32::from(upper));
        let mut l = g.launcher(&f);
        l.arg(&n32).arg(&up).arg(&self.vals).arg(&self.bound);
        g.launch("pipe_window_bound", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)?;
        let f = g.kernel("sparse", SOURCE, "pipe_window_pick")?;
        let (nz, planes, most_window) = (walk.nz as i32, pipe_planes(walk) as i32, WINDOW_MOST as i32);
        let (fixed, most, budget) = (runs.fixed as i32, runs.most as i32, runs.budget as i32);
        let mut l = g.launcher(&f);
        l.arg(&self.bound).arg(&nz).arg(&planes).arg(&fixed).arg(&most).arg(&budget).arg(&most_window).arg(&self.plan);
        g.launch("pipe_window_pick", l, (1, 1, 1), (1, 1, 1), 0)
    }
}

/// The most planes a window of the plane pipeline spans (beyond it, the
/// exact schedule).
pub const WINDOW_MOST: usize = 64;

/// How the plane pipeline may split the planes into runs with windows
/// (kernels/sparse.cu sweep_pipe, pipe_window_pick): not at all (the exact
/// schedule) where `windows` is off; else `fixed` runs where the caller
/// chose them, or the most up to `most` (a run per 16 planes) whose blocks
/// fit `budget` (a block a multiprocessor, an eighth more: more runs
/// queued blocks and measured slower on the H100; at most a block a plane,
/// so the blocks' slots hold at most a vector); `blocks` the grid, for
/// every plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PipeRuns {
    pub windows: bool,
    pub fixed: usize,
    pub most: usize,
    pub budget: usize,
    pub blocks: usize,
}

impl PipeRuns {
    pub fn new(g: &Gpu, walk: &super::grid_walk::GridWalk, windows: bool, runs: Option<usize>) -> PipeRuns {
        let (nz, planes) = (walk.nz, pipe_planes(walk));
        let most = (nz / 16).max(1);
        let fixed = runs.map_or(0, |r| r.clamp(1, most));
        let sms = g.info.multiprocessors.max(1) as usize;
        let budget = (sms + sms / 8).min(nz);
        let windowed = match (windows, fixed) {
            (false, _) => 0,
            (true, 0) => budget,
            (true, r) => r * (nz.div_ceil(r) + WINDOW_MOST).div_ceil(planes),
        };
        PipeRuns { windows, fixed, most, budget, blocks: nz.div_ceil(planes).max(windowed) }
    }
}

/// Planes a block of the plane pipeline: up to 3 in PIPE_THREADS threads
/// (3 measured faster than 2 or 4 at 128³).
fn pipe_planes(walk: &super::grid_walk::GridWalk) -> usize {
    (PIPE_THREADS / walk.ny.next_multiple_of(32)).clamp(1, 3).min(walk.nz)
}

const PIPE_THREADS: usize = 512;

/// The plane pipeline's launch (kernels/sparse.cu sweep_pipe): `runs`'
/// blocks, threads a line (a warp's multiple) for each of the block's
/// planes, and shared memory for PIPE_LEAD steps of staged loads and the
/// step offsets.
fn pipe_launch(walk: &super::grid_walk::GridWalk, runs: PipeRuns, upper: bool) -> (u32, u32, u32, i32) {
    const PIPE_LEAD: usize = 6;
    let lines = walk.ny.next_multiple_of(32);
    let threads = pipe_planes(walk) * lines;
    let staged = PIPE_LEAD * (4 + 2 * upper as usize) * threads * std::mem::size_of::<f64>();
    let shared = staged + (walk.nx + walk.ny) * std::mem::size_of::<i32>();
    (runs.blocks as u32, threads as u32, shared as u32, lines as i32)
}

/// One sweep of the grid walk: its stencil (distances in walk index, CSR
/// order), a bit per distance each point has, the factor's entries in that
/// layout (gathered by `SyncFreeSweeps::refresh` through `from`), the
/// ticket/done words.
pub struct WalkSweep {
    k: i32,
    /// The k distances, then their line steps, then their point steps.
    stencil: DeviceBuffer<i32>,
    mask: DeviceBuffer<u32>,
    from: DeviceBuffer<i32>,
    vals: DeviceBuffer<f64>,
    ctl: DeviceBuffer<u32>,
}

/// A square CSR pattern on the host: row pointers, columns, each row's diagonal position.
pub type CsrPattern<'a> = (&'a [i32], &'a [i32], &'a [i32]);

/// How the sweeps walk a box stencil: the grid walk over its pattern, or
/// the plane pipeline with both sweeps' layouts (GridWalk::pipelines).
pub enum BoxSweeps<'a> {
    Walk(super::grid_walk::GridWalk, CsrPattern<'a>),
    Pipeline(super::grid_walk::GridWalk, [super::grid_walk::PipeLayout; 2], PipeRuns),
}

impl WalkSweep {
    fn new(g: &Gpu, walk: &super::grid_walk::GridWalk, (row_ptr, col, diag): CsrPattern<'_>, upper: bool) -> Result<WalkSweep> {
        let layout = walk.layout(row_ptr, col, diag, upper).ok_or_else(|| {
            crate::error::Error::invalid(format!(
                "ILU(0) grid walk: more than {} distances in a triangle, or a distance that is not one step of the box",
                super::grid_walk::GridWalk::MOST_ENTRIES
            ))
        })?;
        Ok(WalkSweep {
            k: layout.off.len() as i32,
            stencil: upload(g, &[layout.off, layout.dj, layout.di].concat())?,
            mask: upload(g, &layout.mask)?,
            vals: g.alloc(layout.from.len().max(1))?,
            from: upload(g, &layout.from)?,
            ctl: upload(g, &[0u32, 0])?,
        })
    }

    /// The kernels' register width for this stencil (kernels/sparse.cu GRID_SWEEPS: 4 or 16).
    fn width(&self) -> usize {
        if self.k <= 4 {
            4
        } else {
            16
        }
    }
}

impl SyncFreeSweeps {
    /// Both sweeps over a matrix of n rows: a box stencil's walk or pipeline
    /// when given, else chunks of `rows` (`sweep_chunk`'s when None) over
    /// the dependency levels `lv`; y armed pending.
    pub fn new(
        g: &Gpu,
        lv: &super::solver::Levels,
        n: usize,
        rows: Option<usize>,
        boxed: Option<BoxSweeps<'_>>,
    ) -> Result<SyncFreeSweeps> {
        let schedule = match boxed {
            Some(BoxSweeps::Pipeline(walk, [lower, upper], runs)) => {
                let mut hand = g.alloc::<f64>(runs.blocks * walk.nx * walk.ny)?;
                g.fill_bytes(&mut hand, 0xff)?; // pending (kernels/sparse.cu)
                let sweeps = Box::new([PipeSweep::new(g, &lower, walk.nz)?, PipeSweep::new(g, &upper, walk.nz)?]);
                SweepSchedule::Pipeline { walk, sweeps, runs, hand }
            }
            Some(BoxSweeps::Walk(walk, p)) => SweepSchedule::Grid {
                walk,
                sweeps: Box::new([WalkSweep::new(g, &walk, p, false)?, WalkSweep::new(g, &walk, p, true)?]),
            },
            None => {
                let chunk = rows.unwrap_or_else(|| sweep_chunk(n)).clamp(1, n.max(1));
                // beside the sweeps' own shared arrays (kernels/sparse.cu lsolve_syncfree, usolve_syncfree alike)
                let name = "lsolve_syncfree";
                let most = g.shared_room(&g.kernel("sparse", SOURCE, name)?, name)? / std::mem::size_of::<f64>();
                if chunk > most {
                    return Err(crate::error::Error::invalid(format!(
                        "ILU(0) sweeps: chunks of {chunk} rows exceed a block's shared memory ({most} rows)"
                    )));
                }
                SweepSchedule::Chunks {
                    lower: Box::new(DeviceSweep::new(g, &lv.sweep_order(chunk, false))?),
                    upper: Box::new(DeviceSweep::new(g, &lv.sweep_order(chunk, true))?),
                }
            }
        };
        let mut y = g.alloc::<f64>(n.max(1))?;
        g.fill_bytes(&mut y, 0xff)?; // pending (kernels/sparse.cu)
        Ok(SyncFreeSweeps { schedule, y })
    }

    /// The plane pipeline's plans (lower, upper: {window, runs, planes a
    /// run}; window -1: exact); None for the other schedules.
    pub fn plans(&self, g: &Gpu) -> Result<Option<[[i32; 3]; 2]>> {
        let SweepSchedule::Pipeline { sweeps, .. } = &self.schedule else { return Ok(None) };
        let mut plans = [[0i32; 3]; 2];
        for (s, out) in sweeps.iter().zip(plans.iter_mut()) {
            g.download(&s.plan, 0, out)?;
        }
        Ok(Some(plans))
    }

    /// The grid walk's factor entries from freshly built factors `lu`;
    /// nothing for the chunks, which read `lu` itself.
    pub fn refresh(&self, g: &Gpu, lu: &DeviceBuffer<f64>) -> Result<()> {
        match &self.schedule {
            SweepSchedule::Grid { sweeps, .. } => {
                for s in sweeps.iter() {
                    crate::array::cuda::gather(g, s.from.len(), lu, &s.from, &s.vals)?;
                }
            }
            SweepSchedule::Pipeline { walk, sweeps, runs, .. } => {
                let f = g.kernel("sparse", SOURCE, "pipe_gather")?;
                for (upper, s) in sweeps.iter().enumerate() {
                    // the upper sweep's last n entries: the reciprocals of U's diagonal (kernels/sparse.cu quotient)
                    let m = s.from.len() as i64;
                    let reciprocals = if upper == 1 { m - m / 5 } else { m };
                    let mut l = g.launcher(&f);
                    l.arg(&m).arg(&reciprocals).arg(&s.from).arg(lu).arg(&s.vals);
                    g.launch("pipe_gather", l, (grid_for(s.from.len()), 1, 1), (BLOCK, 1, 1), 0)?;
                    if runs.windows {
                        s.pick_plan(g, walk, runs, upper == 1)?;
                    }
                }
            }
            SweepSchedule::Chunks { .. } => {}
        }
        Ok(())
    }
}

/// Rows per chunk of the synchronisation-free sweeps (measured on the H100,
/// BENCHMARKS.md): up to 8,192 rows the whole matrix is one chunk, one
/// block, every hand-off in shared memory; larger ones take chunks of 1,024
/// rows (on the 128³ and 96³ grids 1,024 measured faster than 4,096 to 28,672).
pub fn sweep_chunk(n: usize) -> usize {
    if n <= 8192 {
        n.max(1)
    } else {
        1024
    }
}

/// Threads a block of the sweeps has at most (kernels/sparse.cu's launch bounds).
const SWEEP_THREADS: usize = 512;

impl DeviceSweep {
    pub fn new(g: &Gpu, so: &super::solver::SweepOrder) -> Result<DeviceSweep> {
        Ok(DeviceSweep {
            chunk: so.chunk as i32,
            nchunks: (so.chunk_level.len() - 1).max(1) as u32,
            threads: so.widest().next_multiple_of(32).clamp(32, SWEEP_THREADS) as u32,
            chunk_level: upload(g, &so.chunk_level)?,
            level_ptr: upload(g, &so.level_ptr)?,
            order: upload(g, &so.order)?,
            ctl: upload(g, &[0u32, 0])?,
        })
    }
}

/// How the device applies ILU(0): level by level (a launch per level; the
/// lower levels are the factorisation's, so only the upper ones are kept
/// here), or synchronisation-free (one launch a sweep, through the scratch
/// vector y, kept pending between applies: kernels/sparse.cu).
pub enum DeviceSweeps {
    SyncFree(Box<SyncFreeSweeps>),
    Levels {
        upper: DeviceLevels,
    },
    /// `sweeps` Jacobi sweeps per triangle (Precond::Ilu0Jacobi), ping-ponging
    /// through two scratch vectors, over the factors split into their triangles.
    Jacobi {
        sweeps: usize,
        scratch: (DeviceBuffer<f64>, DeviceBuffer<f64>),
        split: Box<SplitFactors>,
    },
    /// The same for block ILU(0): block rows read the combined factor.
    BlockJacobi {
        sweeps: usize,
        scratch: (DeviceBuffer<f64>, DeviceBuffer<f64>),
    },
}

/// One strict triangle of the ILU(0) factors as its own CSR matrix: a
/// Jacobi sweep then reads only its triangle's entries (in the combined
/// factor the other triangle's share every cache line).
pub struct Triangle {
    row_ptr: DeviceBuffer<i32>,
    col: DeviceBuffer<i32>,
    /// Entry k is entry from[k] of the combined factor.
    from: DeviceBuffer<i32>,
    values: DeviceBuffer<f64>,
    nnz: usize,
    threads_per_row: u32,
}

/// The factors split for the Jacobi sweeps: L's and U's strict triangles and
/// U's diagonal, refreshed from the combined factor after each
/// factorisation (`refresh`).
pub struct SplitFactors {
    lower: Triangle,
    upper: Triangle,
    diag_pos: DeviceBuffer<i32>,
    diag: DeviceBuffer<f64>,
}

impl Triangle {
    fn new(g: &Gpu, p: &super::Pattern, upper: bool) -> Result<Triangle> {
        let (mut rp, mut col, mut from) = (vec![0i32], Vec::new(), Vec::new());
        for i in 0..p.nrows {
            let d = p.diag[i] as usize;
            let range = if upper { d + 1..p.row_ptr[i + 1] as usize } else { p.row_ptr[i] as usize..d };
            for k in range {
                col.push(p.col[k]);
                from.push(k as i32);
            }
            rp.push(col.len() as i32);
        }
        let nnz = col.len();
        Ok(Triangle {
            row_ptr: upload(g, &rp)?,
            col: upload(g, &col)?,
            from: upload(g, &from)?,
            values: g.alloc(nnz.max(1))?,
            nnz,
            threads_per_row: threads_per_row(nnz, p.nrows),
        })
    }
}

impl SplitFactors {
    pub fn new(g: &Gpu, p: &super::Pattern) -> Result<SplitFactors> {
        let n = p.nrows.max(1);
        Ok(SplitFactors {
            lower: Triangle::new(g, p, false)?,
            upper: Triangle::new(g, p, true)?,
            diag_pos: upload(g, &p.diag)?,
            diag: g.alloc(n)?,
        })
    }

    /// The triangles and u_ii from the combined factor `lu`.
    pub fn refresh(&self, g: &Gpu, n: usize, lu: &DeviceBuffer<f64>) -> Result<()> {
        for t in [&self.lower, &self.upper] {
            crate::array::cuda::gather(g, t.nnz, lu, &t.from, &t.values)?;
        }
        crate::array::cuda::gather(g, n, lu, &self.diag_pos, &self.diag)
    }
}

/// Launches `kernel` (of module `module` with `source`) once per level with
/// (count, the level's rows, args...), then the guard `sc` when given.
macro_rules! per_level {
    ($g:expr, ($module:expr, $source:expr), $levels:expr, $kernel:expr, [$($arg:expr),*] $(, $sc:expr)?) => {{
        let f = $g.kernel($module, $source, $kernel)?;
        for w in $levels.ptr.windows(2) {
            let count = (w[1] - w[0]) as i32;
            let rows = $levels.rows.slice(w[0]..w[1]);
            let mut l = $g.launcher(&f);
            l.arg(&count).arg(&rows);
            $( l.arg($arg); )*
            $( arg_or_null(&mut l, $sc); )?
            $g.launch($kernel, l, ((count as u32).div_ceil(128), 1, 1), (128, 1, 1), 0)?;
        }
    }};
}
pub(crate) use per_level;

/// What a run of `ilu_colour` launches computes with multicolour ILU(0)'s
/// factors of P A P^T (kernels/sparse.cu, its modes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColourPasses {
    /// z = P^T U^-1 L^-1 P r, y scratch (the last colour's two sweeps in one launch).
    Apply,
    /// y = L^-1 P r.
    Lower,
    /// y = U P r, one launch.
    UpperTimes,
    /// z = P^T U^-1 y, y overwritten.
    UpperInverse,
    /// y = L r in P A P^T's order, one launch.
    LowerTimes,
}

/// Multicolour ILU(0)'s `passes` over the factors `lu` of P A P^T
/// (pattern `dp`), a launch a colour of each sweep (kernels/sparse.cu
/// `ilu_colour`); z may be r (with `sc`: skipped once a device-driven solve
/// has stopped).
#[allow(clippy::too_many_arguments)]
pub fn ilu_colours(
    g: &Gpu,
    dp: &DevicePattern,
    colour_start: &[usize],
    perm: &DeviceBuffer<i32>,
    lu: &DeviceBuffer<f64>,
    (r, y, z): (&DeviceBuffer<f64>, &DeviceBuffer<f64>, &DeviceBuffer<f64>),
    passes: ColourPasses,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let colours = colour_start.len().saturating_sub(1);
    let last = colours.saturating_sub(1);
    let all_rows = |mode: i32| vec![(0, *colour_start.last().unwrap_or(&0), mode)];
    let lanes: Vec<(usize, usize, i32)> = match passes {
        ColourPasses::Apply => (0..last)
            .map(|c| (c, 0))
            .chain((colours > 0).then_some((last, 1)))
            .chain((0..last).rev().map(|c| (c, 2)))
            .map(|(c, mode)| (colour_start[c], colour_start[c + 1], mode))
            .collect(),
        ColourPasses::Lower => (0..colours).map(|c| (colour_start[c], colour_start[c + 1], 0)).collect(),
        ColourPasses::UpperTimes => all_rows(3),
        ColourPasses::LowerTimes => all_rows(4),
        ColourPasses::UpperInverse => (0..colours).rev().map(|c| (colour_start[c], colour_start[c + 1], 2)).collect(),
    };
    let tpr = dp.threads_per_row;
    let name = format!("ilu_colour_tpr{tpr}");
    let f = g.kernel("sparse", SOURCE, &name)?;
    for (lo, hi, mode) in lanes {
        let (lo32, hi32) = (lo as i32, hi as i32);
        let mut l = g.launcher(&f);
        l.arg(&lo32).arg(&hi32).arg(&mode).arg(&dp.row_ptr).arg(&dp.col).arg(&dp.diag).arg(lu).arg(perm).arg(r).arg(y).arg(z);
        arg_or_null(&mut l, sc);
        g.launch(&name, l, (spmv_blocks(hi - lo, tpr).max(1) as u32, 1, 1), (BLOCK, 1, 1), 0)?;
    }
    Ok(())
}

/// Multicolour ILU(0) applied split: out = L^-1 A U^-1 v in P A P^T's order
/// (Eisenstat's trick, kernels/sparse.cu `ilu_split`) from the factors `lu`,
/// e = D - 2 D~ and the pivots D~; t is scratch, out may be v (with `sc`:
/// skipped once a device-driven solve has stopped).
#[allow(clippy::too_many_arguments)]
pub fn ilu_split(
    g: &Gpu,
    dp: &DevicePattern,
    colour_start: &[usize],
    lu: &DeviceBuffer<f64>,
    (e, pivot): (&DeviceBuffer<f64>, &DeviceBuffer<f64>),
    (v, t, out): (&DeviceBuffer<f64>, &DeviceBuffer<f64>, &DeviceBuffer<f64>),
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let colours = colour_start.len().saturating_sub(1);
    // the last colour's t where it is read: upper sweeps second last colour to second, both for the first, lower sweeps second to last
    let last = colour_start[colours.saturating_sub(1)] as i32;
    let passes = (1..colours.saturating_sub(1))
        .rev()
        .map(|c| (c, 1i32))
        .chain((colours > 0).then_some((0, 3)))
        .chain((1..colours).map(|c| (c, 2)));
    let tpr = dp.threads_per_row;
    let name = format!("ilu_split_tpr{tpr}");
    let f = g.kernel("sparse", SOURCE, &name)?;
    for (c, mode) in passes {
        let (lo, hi) = (colour_start[c] as i32, colour_start[c + 1] as i32);
        let mut l = g.launcher(&f);
        l.arg(&lo).arg(&hi).arg(&last).arg(&mode).arg(&dp.row_ptr).arg(&dp.col).arg(&dp.diag).arg(lu).arg(e).arg(pivot);
        l.arg(v).arg(t).arg(out);
        arg_or_null(&mut l, sc);
        g.launch(&name, l, (spmv_blocks((hi - lo) as usize, tpr).max(1) as u32, 1, 1), (BLOCK, 1, 1), 0)?;
    }
    Ok(())
}

/// The split form's e = D - 2 D~: A's diagonal (stored entry a_from[i] of
/// `a`) less twice the pivots D~ of the factors `lu`, and D~ alone.
pub fn ilu_split_shift(
    g: &Gpu,
    dp: &DevicePattern,
    a_from: &DeviceBuffer<i32>,
    a: &DeviceBuffer<f64>,
    lu: &DeviceBuffer<f64>,
    (e, pivot): (&DeviceBuffer<f64>, &DeviceBuffer<f64>),
    n: usize,
) -> Result<()> {
    let f = g.kernel("sparse", SOURCE, "ilu_split_shift")?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&dp.diag).arg(a_from).arg(a).arg(lu).arg(e).arg(pivot);
    g.launch("ilu_split_shift", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
}

/// ILU(0) of the values `lu` (a copy of A's) in place, level by level.
/// `diag` is the host copy of the diagonal positions, to read a bad pivot.
/// `caller_row` names the caller's row of a reordered matrix's row.
pub fn ilu0(
    g: &Gpu,
    dp: &DevicePattern,
    lower: &DeviceLevels,
    lu: &DeviceBuffer<f64>,
    diag: &[i32],
    caller_row: &dyn Fn(usize) -> usize,
) -> Result<()> {
    let nrows = diag.len();
    let bad = upload(g, &[nrows as i32])?;
    per_level!(g, ("sparse", SOURCE), lower, "ilu0_level", [&dp.row_ptr, &dp.col, &dp.diag, lu, &bad]);
    let mut first_bad = [0i32];
    g.download(&bad, 0, &mut first_bad)?;
    let row = first_bad[0] as usize;
    if row < nrows {
        let mut piv = [0.0];
        g.download(lu, diag[row] as usize, &mut piv)?;
        return Err(super::cpu::pivot_error(caller_row(row), piv[0]));
    }
    Ok(())
}

/// z = U^-1 L^-1 r (with `sc`: skipped once a device-driven solve has stopped).
#[allow(clippy::too_many_arguments)]
pub fn ilu0_apply(
    g: &Gpu,
    dp: &DevicePattern,
    n: usize,
    lower: &DeviceLevels,
    sweeps: &DeviceSweeps,
    lu: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    z: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    match sweeps {
        DeviceSweeps::Levels { upper } => {
            per_level!(g, ("sparse", SOURCE), lower, "lsolve_level", [&dp.row_ptr, &dp.col, &dp.diag, lu, r, z], sc);
            per_level!(g, ("sparse", SOURCE), upper, "usolve_level", [&dp.row_ptr, &dp.col, &dp.diag, lu, z], sc);
        }
        DeviceSweeps::Jacobi { sweeps, scratch: (a, b), split } => {
            // each sweep reads the previous one's output: the lower sweeps end in
            // `y`, the upper ones alternate so that the last writes z
            let mut y = r;
            for s in 0..*sweeps {
                let out = if s % 2 == 0 { a } else { b };
                jacobi_sweep(g, &split.lower, &split.diag, n, (r, y, out), (false, false), sc)?;
                y = out;
            }
            let other = if std::ptr::eq(y, a) { b } else { a };
            let mut from = y;
            for s in 0..*sweeps {
                let out = if (sweeps - 1 - s) % 2 == 0 { z } else { other };
                jacobi_sweep(g, &split.upper, &split.diag, n, (y, from, out), (true, s == 0), sc)?;
                from = out;
            }
        }
        DeviceSweeps::BlockJacobi { .. } => {
            return Err(crate::error::Error::internal("block ILU(0) sweeps go through sparse::block::cuda"))
        }
        DeviceSweeps::SyncFree(sf) => syncfree_apply(g, dp, n, sf, lu, r, z, sc)?,
    }
    Ok(())
}

/// z = U^-1 L^-1 r by the synchronisation-free sweeps over the factor `lu`
/// (z may be r; with `sc`: skipped once a device-driven solve has stopped).
#[allow(clippy::too_many_arguments)]
pub fn syncfree_apply(
    g: &Gpu,
    dp: &DevicePattern,
    n: usize,
    sf: &SyncFreeSweeps,
    lu: &DeviceBuffer<f64>,
    r: &DeviceBuffer<f64>,
    z: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let y = &sf.y;
    let n = n as i32;
    match &sf.schedule {
        SweepSchedule::Chunks { lower, upper } => {
            for (s, name) in [(lower, "lsolve_syncfree"), (upper, "usolve_syncfree")] {
                let shared = s.chunk as usize * std::mem::size_of::<f64>();
                let f = g.kernel_with_shared("sparse", SOURCE, name, shared)?;
                let mut l = g.launcher(&f);
                l.arg(&n).arg(&s.chunk).arg(&s.chunk_level).arg(&s.level_ptr).arg(&s.order);
                l.arg(&dp.row_ptr).arg(&dp.col).arg(&dp.diag).arg(lu);
                if name == "lsolve_syncfree" {
                    l.arg(r);
                }
                l.arg(y).arg(z).arg(&s.ctl);
                arg_or_null(&mut l, sc);
                g.launch(name, l, (s.nchunks, 1, 1), (s.threads, 1, 1), shared as u32)?;
            }
        }
        SweepSchedule::Grid { walk, sweeps } => {
            // a ring of points a line in shared memory (kernels/sparse.cu GRID_RING)
            let shared = walk.ny * 8 * std::mem::size_of::<f64>();
            let threads = walk.ny.next_multiple_of(32) as u32;
            let (nx, ny) = (walk.nx as i32, walk.ny as i32);
            for (upper, s) in sweeps.iter().enumerate() {
                let name = match (upper, s.width()) {
                    (0, 4) => "lsolve_grid4",
                    (0, _) => "lsolve_grid16",
                    (_, 4) => "usolve_grid4",
                    _ => "usolve_grid16",
                };
                let f = g.kernel_with_shared("sparse", SOURCE, name, shared)?;
                let mut l = g.launcher(&f);
                let skew = walk.skew[upper] as i32;
                l.arg(&n).arg(&nx).arg(&ny).arg(&skew).arg(&s.k).arg(&s.stencil).arg(&s.mask).arg(&s.vals);
                if upper == 0 {
                    l.arg(r);
                }
                l.arg(y).arg(z).arg(&s.ctl);
                arg_or_null(&mut l, sc);
                g.launch(name, l, (walk.nz as u32, 1, 1), (threads, 1, 1), shared as u32)?;
            }
        }
        SweepSchedule::Pipeline { walk, sweeps, runs, hand } => {
            let (nx, ny) = (walk.nx as i32, walk.ny as i32);
            for (upper, s) in sweeps.iter().enumerate() {
                let name = if upper == 0 { "lsolve_pipe" } else { "usolve_pipe" };
                let (blocks, threads, shared, lines) = pipe_launch(walk, *runs, upper == 1);
                let f = g.kernel_with_shared("sparse", SOURCE, name, shared as usize)?;
                let mut l = g.launcher(&f);
                l.arg(&n).arg(&nx).arg(&ny).arg(&lines).arg(&s.plan).arg(&s.step_off).arg(&s.vals);
                if upper == 0 {
                    l.arg(r).arg(y);
                } else {
                    l.arg(y).arg(z);
                }
                l.arg(hand).arg(&s.ctl);
                arg_or_null(&mut l, sc);
                g.launch(name, l, (blocks, 1, 1), (threads, 1, 1), shared)?;
            }
        }
    }
    Ok(())
}

/// One Jacobi sweep of a triangular solve over triangle `t`, (y, from,
/// out): lower: out = y - L_s from; upper: out = D^-1 (y - U_s from), `from`
/// read as D^-1 from when `scale_from` (the first upper sweep starts at D^-1 y).
fn jacobi_sweep(
    g: &Gpu,
    t: &Triangle,
    diag: &DeviceBuffer<f64>,
    n: usize,
    (y, from, out): (&DeviceBuffer<f64>, &DeviceBuffer<f64>, &DeviceBuffer<f64>),
    (upper, scale_from): (bool, bool),
    sc: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let tpr = t.threads_per_row;
    let name = format!("ilu_jacobi_tpr{tpr}");
    let f = g.kernel("sparse", SOURCE, &name)?;
    let (n32, upper, scale_from) = (n as i32, i32::from(upper), i32::from(scale_from));
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&t.row_ptr).arg(&t.col).arg(&t.values).arg(diag).arg(y).arg(from).arg(&upper).arg(&scale_from).arg(out);
    arg_or_null(&mut l, sc);
    g.launch("ilu_jacobi", l, (spmv_blocks(n, tpr) as u32, 1, 1), (256, 1, 1), 0)
}

/// The factors of M^T in A^T's pattern `t` from ILU(0)'s `lu` of A
/// (super::transpose).
pub fn ilu_transpose(
    g: &Gpu,
    n: usize,
    t: &DevicePattern,
    from: &DeviceBuffer<i32>,
    a_diag: &DeviceBuffer<i32>,
    lu: &DeviceBuffer<f64>,
    out: &DeviceBuffer<f64>,
) -> Result<()> {
    let f = g.kernel("sparse", SOURCE, "ilu_transpose")?;
    let n32 = n as i32;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&t.row_ptr).arg(&t.col).arg(from).arg(a_diag).arg(lu).arg(out);
    g.launch("ilu_transpose", l, (n.div_ceil(256).max(1) as u32, 1, 1), (256, 1, 1), 0)
}

/// The widest row group for which CG fuses p.q into its SpMV: measured on
/// the H100 (BENCHMARKS.md), fused was faster at 2 threads per row (7-point
/// operator) and slower at 4 (27-point), whose grid-stride loop is longer.
pub(crate) const FUSED_PQ_MAX_TPR: u32 = 2;

/// CG's q = A p fused with p.q into the scalars `sc` (a breakdown when not
/// positive), or with `own_total`, p.q over these rows into it, for
/// `spmv_rows_add_pq` to finish; for patterns of at most FUSED_PQ_MAX_TPR
/// threads per row and n > 0.
#[allow(clippy::too_many_arguments)]
pub fn spmv_pq(
    g: &Gpu,
    dp: &DevicePattern,
    n: usize,
    v: &DeviceBuffer<f64>,
    p: &DeviceBuffer<f64>,
    q: &DeviceBuffer<f64>,
    reduce: &Reduce,
    sc: &DeviceBuffer<f64>,
    own_total: Option<&DeviceBuffer<f64>>,
) -> Result<()> {
    let tpr = dp.threads_per_row;
    // the long rows' q first: the fused kernel reads it there for p.q
    spmv_long_rows(g, dp, v, 1.0, p, 0.0, q, Some(sc))?;
    let name = format!("spmv_pq_tpr{tpr}");
    let f = g.kernel("sparse", SOURCE, &name)?;
    let (n32, long_len) = (n as i32, long_len(dp));
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(&dp.row_ptr).arg(&dp.col).arg(v).arg(p).arg(q).arg(&reduce.partial).arg(&reduce.counter).arg(sc);
    arg_or_null(&mut l, own_total);
    l.arg(&long_len);
    let blocks = spmv_blocks(n, tpr).min(REDUCE_BLOCKS) as u32;
    g.launch(&name, l, (blocks, 1, 1), (BLOCK, 1, 1), 0)
}

/// A distributed CG's q = A p after `spmv_pq` with `own_total`: q += H
/// x_halo over `halo`'s rows, then p.q summed over those rows, the diagonal
/// block's and the team's ranks into `sc` (None: a rank without halo only
/// finishes p.q).
#[allow(clippy::too_many_arguments)]
pub fn spmv_rows_add_pq(
    g: &Gpu,
    halo: Option<(&RowsBlock, &DeviceBuffer<f64>)>,
    p: &DeviceBuffer<f64>,
    q: &DeviceBuffer<f64>,
    own_total: &DeviceBuffer<f64>,
    reduce: &Reduce,
    sc: &DeviceBuffer<f64>,
) -> Result<()> {
    let f = g.kernel("sparse", SOURCE, "spmv_rows_add_pq")?;
    let m = halo.map_or(0, |(h, _)| h.count);
    let m32 = m as i32;
    let mut l = g.launcher(&f);
    l.arg(&m32);
    arg_or_null(&mut l, halo.map(|(h, _)| h.rows));
    arg_or_null(&mut l, halo.map(|(h, _)| &h.dp.row_ptr));
    arg_or_null(&mut l, halo.map(|(h, _)| &h.dp.col));
    arg_or_null(&mut l, halo.map(|(h, _)| h.values));
    arg_or_null(&mut l, halo.map(|(_, x)| x));
    l.arg(p).arg(q).arg(own_total).arg(&reduce.partial).arg(&reduce.counter).arg(sc);
    let blocks = m.div_ceil(BLOCK as usize).clamp(1, REDUCE_BLOCKS) as u32;
    g.launch("spmv_rows_add_pq", l, (blocks, 1, 1), (BLOCK, 1, 1), 0)
}
