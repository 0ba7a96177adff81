//! The host-side sparse algebra the AMG setup needs: a plain CSR matrix,
//! its transpose, SpMV, and the sparse product split into a symbolic pass
//! (the pattern, kept) and a numeric pass (the values, redone by a
//! values-only re-setup), both parallel over row blocks.

use crate::sparse::Indices;
use rayon::prelude::*;

/// Rows per parallel task in the products and SpMV.
const ROWS_PER_TASK: usize = 4096;

/// A CSR matrix: 0-based, columns sorted and unique within each row.
#[derive(Clone, Debug, Default)]
pub struct Mat {
    pub nrows: usize,
    pub ncols: usize,
    pub rp: Indices,
    pub ci: Indices,
    pub v: Vec<f64>,
}

impl Mat {
    /// The entries: the last row pointer (a block pattern whose columns a
    /// device keeps has row pointers alone: setup.rs `DeviceProducts`; one
    /// the device built and holds alone, of many rows, keeps `[0, entries]`:
    /// device_structure.rs).
    pub fn nnz(&self) -> usize {
        self.rp.last().map_or(self.ci.len(), |&p| p as usize)
    }

    pub fn row(&self, i: usize) -> std::ops::Range<usize> {
        self.rp[i] as usize..self.rp[i + 1] as usize
    }

    /// Each row's diagonal entry (-1 where a row stores none).
    pub fn diagonal_positions(&self) -> Vec<i32> {
        (0..self.nrows)
            .into_par_iter()
            .map(|i| self.row(i).find(|&k| self.ci[k] as usize == i).map_or(-1, |k| k as i32))
            .collect()
    }

    /// The diagonal (0 where a row stores none).
    pub fn diagonal(&self) -> Vec<f64> {
        self.diagonal_positions().into_par_iter().map(|k| if k < 0 { 0.0 } else { self.v[k as usize] }).collect()
    }

    /// y = A x, rows in parallel (each row summed in order).
    pub fn spmv(&self, x: &[f64], y: &mut [f64]) {
        y.par_chunks_mut(ROWS_PER_TASK).enumerate().for_each(|(t, ys)| {
            for (o, yi) in ys.iter_mut().enumerate() {
                let i = t * ROWS_PER_TASK + o;
                *yi = self.row(i).map(|k| self.v[k] * x[self.ci[k] as usize]).sum();
            }
        });
    }

    /// The transpose, and for each of its entries the entry of `self` it
    /// came from (a values-only re-setup permutes new values with it).
    pub fn transpose(&self) -> (Mat, Vec<u32>) {
        let (rp, ci, from) = crate::sparse::transpose::transpose_pattern(self.nrows, self.ncols, &self.rp, &self.ci);
        let v = from.iter().map(|&k| self.v[k as usize]).collect();
        (Mat { nrows: self.ncols, ncols: self.nrows, rp: rp.into(), ci: ci.into(), v }, from)
    }

    /// The entry at (i, j), 0 where none is stored.
    pub fn get(&self, i: usize, j: usize) -> f64 {
        let r = self.row(i);
        match self.ci[r.clone()].binary_search(&(j as i32)) {
            Ok(k) => self.v[r.start + k],
            Err(_) => 0.0,
        }
    }
}

/// Row blocks of `n` rows for the parallel passes: at most ROWS_PER_TASK
/// rows, and fewer where that leaves threads idle (a coarse level's few
/// thousand rows are long ones). The results never depend on the split.
fn blocks(n: usize) -> Vec<std::ops::Range<usize>> {
    let size = (n / (8 * rayon::current_num_threads())).clamp(64, ROWS_PER_TASK);
    (0..n.div_ceil(size)).map(|t| t * size..((t + 1) * size).min(n)).collect()
}

/// `v` cut into consecutive pieces of these sizes, for threads to fill.
pub fn pieces<T>(v: &mut [T], sizes: impl Iterator<Item = usize>) -> Vec<&mut [T]> {
    let mut rest = v;
    sizes
        .map(|size| {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(size);
            rest = tail;
            head
        })
        .collect()
}

/// Calls `f(i, entries of row i)` for every row, rows in parallel blocks
/// (`v` laid out by the row pointers `rp`: values, or columns being written).
pub fn for_each_row_mut<T: Send>(rp: &[i32], v: &mut [T], f: impl Fn(usize, &mut [T]) + Sync) {
    for_each_row_init(rp, v, || (), |_, i, row| f(i, row));
}

/// As `for_each_row_mut`, with scratch from `init` per task.
fn for_each_row_init<S, T: Send>(
    rp: &[i32],
    v: &mut [T],
    init: impl Fn() -> S + Sync + Send,
    f: impl Fn(&mut S, usize, &mut [T]) + Sync,
) {
    // (a matrix left empty, Mat::default(), has no row pointers at all)
    let ranges = blocks(rp.len().saturating_sub(1));
    let chunks = pieces(v, ranges.iter().map(|r| (rp[r.end] - rp[r.start]) as usize));
    ranges.into_par_iter().zip(chunks).for_each_init(init, |scratch, (rows, out)| {
        let base = rp[rows.start] as usize;
        for i in rows {
            f(scratch, i, &mut out[rp[i] as usize - base..rp[i + 1] as usize - base]);
        }
    });
}

/// The pattern of A B (row pointers and sorted columns), values zero.
pub fn product_pattern(a: &Mat, b: &Mat) -> Mat {
    product_pattern_by(a, b.ncols, |j| &b.ci[b.row(j)])
}

/// As `product_pattern`, B's row j being `b_row(j)` of `ncols` columns (a
/// tentative prolongator's: a node's aggregate, read straight from the
/// aggregates, one load where B's pattern takes three).
pub fn product_pattern_by<'b>(a: &Mat, ncols: usize, b_row: impl Fn(usize) -> &'b [i32] + Sync) -> Mat {
    let parts: Vec<(Vec<i32>, Vec<i32>)> = blocks(a.nrows)
        .into_par_iter()
        .map_init(
            || vec![u32::MAX; ncols],
            |mark, rows| {
                let (mut counts, mut cols) = (Vec::with_capacity(rows.len()), Vec::new());
                for i in rows {
                    let start = cols.len();
                    for ka in a.row(i) {
                        for &c in b_row(a.ci[ka] as usize) {
                            if mark[c as usize] != i as u32 {
                                mark[c as usize] = i as u32;
                                cols.push(c);
                            }
                        }
                    }
                    cols[start..].sort_unstable();
                    counts.push((cols.len() - start) as i32);
                }
                (counts, cols)
            },
        )
        .collect();
    // the blocks' rows laid end to end, in parallel, each from its offset
    let offsets: Vec<usize> = parts.iter().scan(0, |at, p| Some(std::mem::replace(at, *at + p.1.len()))).collect();
    let nnz: usize = parts.iter().map(|p| p.1.len()).sum();
    if nnz > i32::MAX as usize {
        too_many_entries();
    }
    let (mut rp, mut ci) = (vec![0i32; a.nrows + 1], vec![0i32; nnz]);
    let ci_pieces = pieces(&mut ci, parts.iter().map(|p| p.1.len()));
    let rp_pieces = pieces(&mut rp[1..], parts.iter().map(|p| p.0.len()));
    parts.par_iter().zip(ci_pieces).zip(rp_pieces).zip(offsets).for_each(|(((part, ci), rp), base)| {
        ci.copy_from_slice(&part.1);
        let mut at = base as i32;
        rp.iter_mut().zip(&part.0).for_each(|(o, c)| {
            at += c;
            *o = at;
        });
    });
    Mat { nrows: a.nrows, ncols, rp: rp.into(), ci: ci.into(), v: vec![0.0; nnz] }
}

/// C's values = A B on C's pattern (from `product_pattern`): each row's sums
/// in the order of A's and B's entries, so the result does not depend on
/// how the rows were shared out.
pub fn product_values(a: &Mat, b: &Mat, c: &mut Mat) {
    let (crp, cci) = (&c.rp, &c.ci);
    // slot[j]: where column j sits in the row being summed
    for_each_row_init(
        crp,
        &mut c.v,
        || vec![0u32; b.ncols],
        |slot, i, out| {
            let start = crp[i] as usize;
            for (o, &j) in cci[start..crp[i + 1] as usize].iter().enumerate() {
                slot[j as usize] = o as u32;
                out[o] = 0.0;
            }
            for ka in a.row(i) {
                let aik = a.v[ka];
                for kb in b.row(a.ci[ka] as usize) {
                    out[slot[b.ci[kb] as usize] as usize] += aik * b.v[kb];
                }
            }
        },
    );
}

/// Row blocks the device's products take at once (kernels/amg.cu
/// `block_product`). Not 6 (an aggregate's rigid-body modes): on the H100
/// R (A P) at bench fem's 985k dofs took 12.0 ms so, 10.1 by threes.
pub const ROW_BLOCKS: [usize; 3] = [4, 3, 2];

/// The rows of C = A B the device sums at once (S), and for each block of
/// S consecutive rows whether they have one column pattern in A and one in
/// C (a node's dofs, an aggregate's modes): of `ROW_BLOCKS`, the S that
/// saves the most loads of B (the share of rows in alike blocks times
/// 1 - 1/S) with at least half its blocks alike; (1, none) where no S is.
pub fn row_blocks(a: &Mat, c: &Mat) -> (usize, Vec<u8>) {
    let alike = |m: &Mat, r: usize, s: usize| (1..s).all(|o| m.ci[m.row(r + o)] == m.ci[m.row(r)]);
    if a.nrows == 0 || a.nrows != c.nrows {
        return (1, Vec::new());
    }
    let mut best = (0.0, 1, Vec::new());
    for s in ROW_BLOCKS.into_iter().filter(|&s| a.nrows.is_multiple_of(s)) {
        let flags: Vec<u8> = (0..a.nrows / s).into_par_iter().map(|b| (alike(a, b * s, s) && alike(c, b * s, s)) as u8).collect();
        let share = flags.iter().map(|&f| f as f64).sum::<f64>() / flags.len() as f64;
        let saved = share * (1.0 - 1.0 / s as f64);
        if share >= 0.5 && saved > best.0 {
            best = (saved, s, flags);
        }
    }
    (best.1, best.2)
}

/// Tile shapes (S, K, J) the device's products take (kernels/amg.cu
/// `tile_product`), the largest first: 3-D elasticity's A P on the finest
/// level (a node's three dofs by an aggregate's six modes), A P and R (A P)
/// on the coarse levels (six modes by six), R (A P) on the finest (six
/// modes by three dofs). On the H200 at 48^3 they took A P 2.9 -> 1.9 ms and
/// R (A P) 3.1 -> 1.3 ms against blocks of rows and the earlier tiles; a
/// scalar problem's products stay in rows or blocks of rows (tiles of one
/// entry: A P 0.9 -> 2.5 ms, R (A P) 1.8 -> 3.2 ms on the Laplacian 128^3).
pub const TILES: [(usize, usize, usize); 3] = [(6, 6, 6), (6, 3, 6), (3, 3, 6)];

/// Block shapes (S, K) for which A T goes a warp a node (kernels/amg.cu
/// `times_tentative`): a node's S dofs by an aggregate's K modes. On the
/// H200 at bench fem's 985k dofs, A T and the finest Lanczos beside it
/// took 5.6 -> 3.7 ms. A scalar problem's T holds one entry a row: its A T
/// goes a lane a row (a warp a node left most lanes idle, no faster).
pub const TENTATIVE_TILES: [(usize, usize); 5] = [(2, 2), (2, 3), (3, 3), (3, 6), (6, 6)];

/// (S, K) where A T can go a warp a node: T in S x K blocks (`(s, k)`), A
/// (its rows alike within each node: a kept transfer's) with at most 32
/// blocks a block row, a shape of `TENTATIVE_TILES`; None otherwise.
pub fn tentative_tiles(a: &Mat, (s, k): (usize, usize)) -> Option<(usize, usize)> {
    if !TENTATIVE_TILES.contains(&(s, k)) || !a.nrows.is_multiple_of(s) {
        return None;
    }
    let widest = (0..a.nrows / s).into_par_iter().map(|b| a.row(b * s).len() / s).max().unwrap_or(0);
    (widest <= 32).then_some((s, k))
}

/// Whether `m`'s rows come in blocks of `rows` with one column pattern,
/// and each row's columns in aligned runs of `run` (a block matrix stored
/// as CSR, its blocks dense).
fn tiled(m: &Mat, rows: usize, run: usize) -> bool {
    m.nrows.is_multiple_of(rows)
        && (0..m.nrows).into_par_iter().all(|i| {
            let cols = &m.ci[m.row(i)];
            let lead = i - i % rows;
            (i == lead || *cols == m.ci[m.row(lead)])
                && cols.len().is_multiple_of(run)
                && cols.chunks(run).all(|c| (c[0] as usize).is_multiple_of(run) && (1..run).all(|o| c[o] == c[0] + o as i32))
        })
}

/// The tile (S, K, J) of `TILES` over which C = A B can be summed: A in
/// S x K blocks, B in K x J, C in S x J, each dense; None where none fits.
pub fn tiles(a: &Mat, b: &Mat, c: &Mat) -> Option<(usize, usize, usize)> {
    if a.nrows == 0 || b.nrows == 0 {
        return None;
    }
    TILES.into_iter().find(|&(s, k, j)| tiled(a, s, k) && tiled(b, k, j) && tiled(c, s, j))
}

/// As `tiles`, for C = A B where A and B are block matrices of these
/// (rows, run) shapes (C's blocks are A's rows by B's run).
pub fn block_tiles((a_rows, a_run): (usize, usize), (b_rows, b_run): (usize, usize)) -> Option<(usize, usize, usize)> {
    let tiled = |rows: usize, run: usize, s: usize, k: usize| rows.is_multiple_of(s) && run.is_multiple_of(k);
    TILES.into_iter().find(|&(s, k, j)| tiled(a_rows, a_run, s, k) && tiled(b_rows, b_run, k, j) && tiled(a_rows, b_run, s, j))
}

/// The row pointers of rows with these entry counts.
pub fn row_pointers(counts: impl Iterator<Item = usize>) -> Vec<i32> {
    std::iter::once(0)
        .chain(counts.scan(0i32, |at, c| {
            *at = i32::try_from(c).ok().and_then(|c| at.checked_add(c)).unwrap_or_else(|| too_many_entries());
            Some(*at)
        }))
        .collect()
}

/// A pattern past 32-bit indices stops the setup (the ABI reports it as an
/// internal error with this message) rather than wrapping its row pointers.
fn too_many_entries() -> ! {
    panic!("AMG: a pattern of more than 2^31 - 1 entries, beyond fegpu's 32-bit indices")
}

/// A matrix with its block pattern, where it is stored as dense `rows` x
/// `run` blocks (a node's dofs, an aggregate's modes): found once, for each
/// product and transpose that reads it.
pub struct Blocked<'a> {
    pub m: &'a Mat,
    pub rows: usize,
    pub run: usize,
    /// Each block one entry; None where `m` is not such a block matrix (or
    /// its blocks are single entries).
    pub blocks: Option<Mat>,
}

impl<'a> Blocked<'a> {
    pub fn new(m: &'a Mat, rows: usize, run: usize) -> Blocked<'a> {
        let blocks = ((rows, run) != (1, 1)).then(|| block_pattern(m, rows, run)).flatten();
        Blocked { m, rows, run, blocks }
    }

    /// As `new` for square `bs` x `bs` blocks, where the caller has checked
    /// whether `m` is tiled by them (`tiles_known`; on the device,
    /// amg::cuda::finest_nodes_are_blocks): only the block pattern is read.
    pub fn checked(m: &'a Mat, bs: usize, tiles_known: bool) -> Blocked<'a> {
        let blocks = (bs > 1 && tiles_known).then(|| condensed(m, bs, bs));
        Blocked { m, rows: bs, run: bs, blocks }
    }

    /// The pattern of self times `b` (self's blocks' run = b's blocks'
    /// rows): the product of the block patterns, each block written out;
    /// the same pattern as `product_pattern`, which takes the other cases.
    pub fn product_pattern(&self, b: &Blocked) -> Mat {
        match self.block_product(b) {
            Some(c) => c.into_entries(),
            None => product_pattern(self.m, b.m),
        }
    }

    /// The block pattern: `m`'s own for single-entry blocks.
    pub fn pattern(&self) -> Option<&Mat> {
        match (self.rows, self.run) {
            (1, 1) => Some(self.m),
            _ => self.blocks.as_ref(),
        }
    }

    /// The pattern of self times `b` as its block pattern, where both are
    /// block matrices; None otherwise.
    pub fn block_product(&self, b: &Blocked) -> Option<BlockPattern> {
        self.times(b.pattern()?, b.run)
    }

    /// As `block_product`, by the block pattern `b` of blocks `run` wide.
    pub fn times(&self, b: &Mat, run: usize) -> Option<BlockPattern> {
        Some(BlockPattern { blocks: product_pattern(self.pattern()?, b), rows: self.rows, run })
    }

    /// As `Mat::transpose`: the block pattern transposed and written out in
    /// parallel (a prolongator's, its restriction).
    pub fn transpose(&self) -> (Mat, Vec<u32>) {
        let Some(blocks) = &self.blocks else {
            return self.m.transpose();
        };
        let (m, rows, run) = (self.m, self.rows, self.run);
        // transposed block t is block entry e = bfrom[t] of block row I = bci[t]:
        // m's row I rows + o holds it at rp + (e - blocks.rp[I]) run
        let (brp, bci, bfrom) = crate::sparse::transpose::transpose_pattern(blocks.nrows, blocks.ncols, &blocks.rp, &blocks.ci);
        let ncols = m.ncols;
        let rp = row_pointers((0..ncols).map(|c| (brp[c / run + 1] - brp[c / run]) as usize * rows));
        let entries = |c: usize| {
            let b = c / run;
            let (bfrom, bci, brp, starts) = (&bfrom, &bci, &brp, &blocks.rp);
            (brp[b] as usize..brp[b + 1] as usize).flat_map(move |t| {
                let (e, i) = (bfrom[t] as usize, bci[t] as usize);
                (0..rows).map(move |o| {
                    let row = i * rows + o;
                    (row as i32, (m.rp[row] as usize + (e - starts[i] as usize) * run + c % run) as u32)
                })
            })
        };
        let nnz = rp[ncols] as usize;
        let (mut ci, mut from) = (vec![0i32; nnz], vec![0u32; nnz]);
        for_each_row_mut(&rp, &mut ci, |c, row| row.iter_mut().zip(entries(c)).for_each(|(o, e)| *o = e.0));
        for_each_row_mut(&rp, &mut from, |c, row| row.iter_mut().zip(entries(c)).for_each(|(o, e)| *o = e.1));
        let v = from.par_iter().map(|&k| m.v[k as usize]).collect();
        (Mat { nrows: ncols, ncols: m.nrows, rp: rp.into(), ci: ci.into(), v }, from)
    }
}

/// The pattern of a matrix of dense `rows` x `run` blocks kept as its
/// block pattern (`blocks`, each block one entry), until it is written out:
/// on the host by `entries`, on the device by cuda.rs `DeviceCsr::expanded`.
#[derive(Clone, Debug, Default)]
pub struct BlockPattern {
    pub blocks: Mat,
    pub rows: usize,
    pub run: usize,
}

impl BlockPattern {
    pub fn nrows(&self) -> usize {
        self.blocks.nrows * self.rows
    }

    pub fn ncols(&self) -> usize {
        self.blocks.ncols * self.run
    }

    pub fn nnz(&self) -> usize {
        self.blocks.nnz() * self.rows * self.run
    }

    /// The transpose's block pattern, and for each of its blocks the
    /// block of `self` it mirrors.
    pub fn transpose(&self) -> (BlockPattern, Vec<u32>) {
        let b = &self.blocks;
        let (rp, ci, from) = crate::sparse::transpose::transpose_pattern(b.nrows, b.ncols, &b.rp, &b.ci);
        let blocks = Mat { nrows: b.ncols, ncols: b.nrows, rp: rp.into(), ci: ci.into(), v: Vec::new() };
        (BlockPattern { blocks, rows: self.run, run: self.rows }, from)
    }

    /// A matrix of the written-out pattern's size that stores nothing (the
    /// device writes the pattern out).
    pub fn shape(&self) -> Mat {
        Mat { nrows: self.nrows(), ncols: self.ncols(), ..Mat::default() }
    }

    /// As `entries`, the block pattern itself where blocks are single entries.
    pub fn into_entries(self) -> Mat {
        if (self.rows, self.run) != (1, 1) {
            return self.entries();
        }
        let mut m = self.blocks;
        if m.v.len() != m.nnz() {
            m.v = vec![0.0; m.nnz()];
        }
        m
    }

    /// The pattern written out, values zero: row i holds, for each block
    /// (i / rows, c), the columns c run .. c run + run - 1.
    pub fn entries(&self) -> Mat {
        let (s, j, nrows) = (self.rows, self.run, self.nrows());
        let blocks = &self.blocks;
        let rp = row_pointers((0..nrows).map(|i| blocks.row(i / s).len() * j));
        let mut ci = vec![0i32; rp[nrows] as usize];
        for_each_row_mut(&rp, &mut ci, |i, row| {
            let cols = blocks.ci[blocks.row(i / s)].iter().flat_map(|&c| c * j as i32..(c + 1) * j as i32);
            row.iter_mut().zip(cols).for_each(|(o, c)| *o = c);
        });
        let nnz = ci.len();
        Mat { nrows, ncols: self.ncols(), rp: rp.into(), ci: ci.into(), v: vec![0.0; nnz] }
    }
}

/// The block pattern of `m` when it is stored as dense `rows` x `run`
/// blocks (each block one entry, no values); None when it is not.
pub fn block_pattern(m: &Mat, rows: usize, run: usize) -> Option<Mat> {
    (m.ncols.is_multiple_of(run) && tiled(m, rows, run)).then(|| condensed(m, rows, run))
}

/// The block pattern of a matrix `tiled` by `rows` x `run`: each block a
/// single entry.
fn condensed(m: &Mat, rows: usize, run: usize) -> Mat {
    let nrows = m.nrows / rows;
    let rp = row_pointers((0..nrows).map(|b| m.row(b * rows).len() / run));
    let mut ci = vec![0i32; rp[nrows] as usize];
    for_each_row_mut(&rp, &mut ci, |b, row| {
        let cols = m.ci[m.row(b * rows)].iter().step_by(run).map(|&c| c / run as i32);
        row.iter_mut().zip(cols).for_each(|(o, c)| *o = c);
    });
    Mat { nrows, ncols: m.ncols / run, rp: rp.into(), ci: ci.into(), v: Vec::new() }
}

/// A B with its pattern.
pub fn product(a: &Mat, b: &Mat) -> Mat {
    let mut c = product_pattern(a, b);
    product_values(a, b, &mut c);
    c
}

/// The largest eigenvalue of the symmetric tridiagonal matrix (alpha on the
/// diagonal, beta off it), by bisection on the Sturm sequence count.
fn tridiagonal_max(alpha: &[f64], beta: &[f64]) -> f64 {
    let m = alpha.len();
    let radius = |i: usize| beta.get(i.wrapping_sub(1)).map_or(0.0, |b| b.abs()) + beta.get(i).map_or(0.0, |b| b.abs());
    let (mut lo, mut hi) =
        (0..m).fold((f64::MAX, f64::MIN), |(lo, hi), i| (lo.min(alpha[i] - radius(i)), hi.max(alpha[i] + radius(i))));
    // eigenvalues below x: the negative pivots of T - x I
    let below = |x: f64| {
        let (mut count, mut d) = (0, 1.0f64);
        for i in 0..m {
            let b2 = if i > 0 { beta[i - 1] * beta[i - 1] } else { 0.0 };
            d = alpha[i] - x - if i > 0 { b2 / if d == 0.0 { f64::MIN_POSITIVE } else { d } } else { 0.0 };
            if d < 0.0 {
                count += 1;
            }
        }
        count
    };
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if below(mid) < m {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * hi.abs() {
            break;
        }
    }
    hi
}

/// Lanczos' fixed start vector, entries in [0.5, 1.5) (zeroed where D^-1
/// is, by its user): the same on the host and the device, which makes its
/// own (kernels/amg.cu `lanczos_entry`).
pub(super) fn lanczos_start(n: usize) -> Vec<f64> {
    (0..n).into_par_iter().map(lanczos_entry).collect()
}

/// Entry i of the start vector: splitmix64 of i, to 53 bits.
fn lanczos_entry(i: usize) -> f64 {
    let mut z = (i as u64).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64 + 0.5
}

/// The spectral radius of D^-1 A for a symmetric A whose diagonal has one
/// sign (`dinv` = D^-1, 0 on empty rows): the largest Ritz value in
/// magnitude of `steps` Lanczos steps on S A S, S = |D|^-1/2, from a fixed
/// start (so a re-setup with the same values gives the same hierarchy). A
/// negative definite A (a negated Laplacian) then has D^-1 A's radius too,
/// where S A S's Ritz values are all negative.
pub fn spectral_radius_symmetric(a: &Mat, dinv: &[f64], steps: usize) -> f64 {
    let n = a.nrows;
    if n == 0 {
        return 0.0;
    }
    let s: Vec<f64> = dinv.iter().map(|d| d.abs().sqrt()).collect();
    let mut v = lanczos_start(n);
    v.iter_mut().zip(&s).for_each(|(v, s)| *v = if *s == 0.0 { 0.0 } else { *v });
    let norm = |v: &[f64]| dot(v, v).sqrt();
    let nv = norm(&v);
    if nv == 0.0 {
        return 0.0;
    }
    v.iter_mut().for_each(|x| *x /= nv);
    let (mut prev, mut w, mut sv) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
    let (mut alpha, mut beta) = (Vec::new(), Vec::new());
    let mut beta_prev = 0.0;
    for _ in 0..steps.min(n) {
        sv.par_iter_mut().zip(&v).zip(&s).for_each(|((o, x), s)| *o = x * s);
        a.spmv(&sv, &mut w);
        w.par_iter_mut().zip(&s).zip(&prev).for_each(|((w, s), p)| *w = *w * s - beta_prev * p);
        let al = dot(&w, &v);
        w.par_iter_mut().zip(&v).for_each(|(w, v)| *w -= al * v);
        alpha.push(al);
        let b = norm(&w);
        if b <= 1e-12 * al.abs().max(1e-300) {
            break;
        }
        beta.push(b);
        beta_prev = b;
        std::mem::swap(&mut prev, &mut v);
        v.par_iter_mut().zip(&w).for_each(|(v, w)| *v = w / b);
    }
    beta.truncate(alpha.len().saturating_sub(1));
    tridiagonal_radius(&alpha, &beta)
}

/// The largest eigenvalue in magnitude of the symmetric tridiagonal matrix
/// (alpha on the diagonal, beta off it): its largest, or its smallest
/// negated (the largest of -T) where that is larger.
pub(super) fn tridiagonal_radius(alpha: &[f64], beta: &[f64]) -> f64 {
    let top = tridiagonal_max(alpha, beta);
    let negated: Vec<f64> = alpha.iter().map(|a| -a).collect();
    top.abs().max(tridiagonal_max(&negated, beta).abs())
}

/// x . y summed in fixed chunks, in order: the same bits on any number of
/// threads (rayon's own sum splits by what the threads steal).
fn dot(x: &[f64], y: &[f64]) -> f64 {
    let parts: Vec<f64> = x
        .par_chunks(ROWS_PER_TASK)
        .zip(y.par_chunks(ROWS_PER_TASK))
        .map(|(x, y)| x.iter().zip(y).map(|(a, b)| a * b).sum())
        .collect();
    parts.iter().sum()
}

/// An upper bound of the spectral radius of D^-1 A for any A: the largest
/// row sum of |D^-1 A| (Gershgorin).
pub fn spectral_bound(a: &Mat, dinv: &[f64]) -> f64 {
    (0..a.nrows).into_par_iter().map(|i| dinv[i].abs() * a.row(i).map(|k| a.v[k].abs()).sum::<f64>()).reduce(|| 0.0, f64::max)
}

/// Rows from which `dense_inverse` eliminates on every core.
const PARALLEL_INVERSE_ROWS: usize = 384;

/// The inverse of a small dense matrix (row-major, n x n) by Gauss-Jordan
/// with partial pivoting. Rows and columns that are entirely zero (from
/// near-null-space columns dropped as dependent) are left out and get zero
/// rows and columns in the inverse. None: singular.
pub fn dense_inverse(a: &[f64], n: usize) -> Option<Vec<f64>> {
    let live: Vec<usize> = (0..n).filter(|&i| (0..n).any(|j| a[i * n + j] != 0.0 || a[j * n + i] != 0.0)).collect();
    let m = live.len();
    if m == 0 {
        // a matrix of zeros: singular, unless it has no rows at all
        return (n == 0).then(Vec::new);
    }
    let w = 2 * m;
    let mut t = vec![0.0; m * w];
    for (r, &i) in live.iter().enumerate() {
        for (c, &j) in live.iter().enumerate() {
            t[r * w + c] = a[i * n + j];
        }
        t[r * w + m + r] = 1.0;
    }
    // singular relative to A's own size (not the identity's 1: a matrix of
    // small values, SI units say, is not singular for it)
    let scale = t.chunks(w).flat_map(|row| &row[..m]).fold(0.0f64, |s, x| s.max(x.abs()));
    for col in 0..m {
        let piv = (col..m).max_by(|&x, &y| t[x * w + col].abs().total_cmp(&t[y * w + col].abs()))?;
        let pivot = t[piv * w + col].abs();
        if pivot.is_nan() || pivot <= 1e-14 * scale {
            return None;
        }
        if piv != col {
            for c in 0..w {
                t.swap(piv * w + c, col * w + c);
            }
        }
        let p = 1.0 / t[col * w + col];
        let pivot_row: Vec<f64> = t[col * w..(col + 1) * w].iter().map(|x| x * p).collect();
        t[col * w..(col + 1) * w].copy_from_slice(&pivot_row);
        let eliminate = |(r, row): (usize, &mut [f64])| {
            let f = row[col];
            if r != col && f != 0.0 {
                row.iter_mut().zip(&pivot_row).for_each(|(x, p)| *x -= f * p);
            }
        };
        // below a few hundred rows a step's work (m rows of 2m) is less than
        // the threads' wake-up: the values-only re-setup pays this per step
        if m >= PARALLEL_INVERSE_ROWS {
            t.par_chunks_mut(w).enumerate().for_each(eliminate);
        } else {
            t.chunks_mut(w).enumerate().for_each(eliminate);
        }
    }
    let mut inv = vec![0.0; n * n];
    for (r, &i) in live.iter().enumerate() {
        for (c, &j) in live.iter().enumerate() {
            inv[i * n + j] = t[r * w + m + c];
        }
    }
    Some(inv)
}
