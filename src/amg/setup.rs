//! The hierarchy's setup on the host: strength of connection, pyamg's
//! standard aggregation (or the parallel one, in the device's rounds), the
//! tentative prolongator fitted to the near-null
//! space, Jacobi smoothing of it, Galerkin products and the smoothers; and
//! the values-only re-setup that keeps every structure.

use super::host::{
    block_pattern, dense_inverse, for_each_row_mut, pieces, product_pattern, product_pattern_by, product_values, row_pointers,
    spectral_bound, spectral_radius_symmetric, BlockPattern, Blocked, Mat,
};
use super::{Aggregation, Hierarchy, Level, NearNullSpace, Options, Smoother, Transfer, TransferBlocks};
use crate::error::{Error, ErrorKind, Result};
use rayon::prelude::*;
use std::borrow::Cow;

/// The largest coarsest level inverted densely; above it (coarsening stalled)
/// the coarsest level is smoothed instead.
pub(super) const DENSE_LIMIT: usize = 4096;
/// Lanczos steps for rho(D^-1 A): 10 (hypre's count for its Chebyshev
/// bounds) come within about 1% below 20 steps' estimate on the benched
/// systems, which CHEBYSHEV_TOP's 10% margin covers, at half the SpMVs of
/// every (re-)setup.
pub(super) const LANCZOS_STEPS: usize = 10;
/// The Chebyshev interval is [CHEBYSHEV_TOP rho / CHEBYSHEV_RATIO, CHEBYSHEV_TOP
/// rho]: it damps the upper part of the spectrum (hypre's default fraction
/// is 0.3; pyamg's 1/30 cost 14 iterations against 8 on the 7-point
/// Laplacian, measured with degree 2).
pub(super) const CHEBYSHEV_RATIO: f64 = 5.0;
pub(super) const CHEBYSHEV_TOP: f64 = 1.1;

/// Seconds spent per phase of a setup, in the order first met.
pub(super) struct Phases(pub(super) Vec<(Cow<'static, str>, f64)>, std::time::Instant);

impl Phases {
    pub(super) fn start() -> Phases {
        Phases(Vec::new(), std::time::Instant::now())
    }
    pub(super) fn lap(&mut self, phase: impl Into<Cow<'static, str>>) {
        let (now, phase) = (std::time::Instant::now(), phase.into());
        let dt = (now - self.1).as_secs_f64();
        self.1 = now;
        match self.0.iter_mut().find(|p| p.0 == phase) {
            Some(p) => p.1 += dt,
            None => self.0.push((phase, dt)),
        }
    }
}

fn breakdown(message: String) -> Error {
    Error::new(ErrorKind::Breakdown, format!("AMG: {message}"))
}

/// The six rigid-body modes of 3-D elasticity (three for 2-D), node by
/// node with `dim` unknowns each, from the nodes' coordinates (`dim` per
/// node): translations, then rotations about the centroid.
pub fn rigid_body_modes(dim: usize, coords: &[f64]) -> Result<NearNullSpace> {
    if dim != 2 && dim != 3 {
        return Err(Error::invalid(format!("dim = {dim}: rigid-body modes are for dim 2 or 3")));
    }
    if !coords.len().is_multiple_of(dim) {
        return Err(Error::size(format!("coords has {} values: not a multiple of dim = {dim}", coords.len())));
    }
    if let Some(k) = coords.iter().position(|c| !c.is_finite()) {
        return Err(Error::invalid(format!("{} = {}: coordinates must be finite", crate::error::at("coords", k), coords[k])));
    }
    let nodes = coords.len() / dim;
    let n = nodes * dim;
    let mut centre = [0.0; 3];
    for v in 0..nodes {
        for c in 0..dim {
            centre[c] += coords[v * dim + c] / nodes.max(1) as f64;
        }
    }
    let count = if dim == 3 { 6 } else { 3 };
    let mut b = crate::error::host_vec(n * count, 0.0, "rigid-body modes")?;
    for v in 0..nodes {
        let x: Vec<f64> = (0..dim).map(|c| coords[v * dim + c] - centre[c]).collect();
        let row = |c: usize| v * dim + c;
        for c in 0..dim {
            b[c * n + row(c)] = 1.0;
        }
        if dim == 2 {
            b[2 * n + row(0)] = -x[1];
            b[2 * n + row(1)] = x[0];
        } else {
            // rotations about z, x and y
            b[3 * n + row(0)] = -x[1];
            b[3 * n + row(1)] = x[0];
            b[4 * n + row(1)] = -x[2];
            b[4 * n + row(2)] = x[1];
            b[5 * n + row(0)] = x[2];
            b[5 * n + row(2)] = -x[0];
        }
    }
    // nodes on one point, or on a line along an axis, turn a rotation into zeros (AMG refuses it later)
    let axes = if dim == 2 { &["z"][..] } else { &["z", "x", "y"][..] };
    for (k, axis) in (dim..count).zip(axes) {
        if b[k * n..(k + 1) * n].iter().all(|&v| v == 0.0) {
            return Err(Error::invalid(format!(
                "coords: the rotation about {axis} (mode {k}) is zero: the {nodes} nodes are coincident or on a line \
                 along an axis, so they do not span the {dim}-D rigid-body motions"
            )));
        }
    }
    Ok(NearNullSpace { vectors: b, count })
}

/// For each entry (i, j) of A, the entry (j, i), when the pattern is
/// symmetric (None otherwise): a re-setup's symmetry check is then one pass.
/// Where A is stored as dense `bs` x `bs` blocks, the blocks' mirror is
/// searched and written out entry by entry.
fn mirror(a: &Mat, bs: usize) -> Option<Vec<u32>> {
    if let Some(blocks) = (bs > 1).then(|| block_pattern(a, bs, bs)).flatten() {
        let block_mirror = entry_mirror(&blocks)?;
        return Some(
            (0..a.nrows)
                .into_par_iter()
                .flat_map_iter(|i| {
                    let (node, oi, start, blocks, block_mirror) = (i / bs, i % bs, a.rp[i] as usize, &blocks, &block_mirror);
                    a.row(i).map(move |k| {
                        let (e, oj) = ((k - start) / bs, (k - start) % bs);
                        let mb = block_mirror[blocks.rp[node] as usize + e] as usize; // block (J, I)
                        let j_node = blocks.ci[blocks.rp[node] as usize + e] as usize;
                        let row = j_node * bs + oj;
                        (a.rp[row] as usize + (mb - blocks.rp[j_node] as usize) * bs + oi) as u32
                    })
                })
                .collect(),
        );
    }
    entry_mirror(a)
}

fn entry_mirror(a: &Mat) -> Option<Vec<u32>> {
    (0..a.nrows)
        .into_par_iter()
        .flat_map_iter(|i| {
            a.row(i).map(move |k| {
                let j = a.ci[k] as usize;
                let r = a.row(j);
                a.ci[r.clone()].binary_search(&(i as i32)).ok().map(|t| (r.start + t) as u32)
            })
        })
        .collect()
}

/// The first entry where A differs from A^T by more than rounding (1e-10
/// of the row's largest entry), as (i, j, a_ij, a_ji); None: symmetric.
/// `mirror` (from `mirror`) makes it one pass over the values.
pub fn asymmetry(a: &Mat, mirror: Option<&[u32]>) -> Option<(usize, usize, f64, f64)> {
    let at = |i: usize, k: usize| match mirror {
        Some(m) => a.v[m[k] as usize],
        None => a.get(a.ci[k] as usize, i),
    };
    (0..a.nrows).into_par_iter().find_map_first(|i| {
        let scale = a.row(i).map(|k| a.v[k].abs()).fold(0.0, f64::max);
        a.row(i).find(|&k| (a.v[k] - at(i, k)).abs() > 1e-10 * scale).map(|k| (i, a.ci[k] as usize, a.v[k], at(i, k)))
    })
}

/// The first value that is not finite. A task scans a chunk: rayon's
/// position_first over single values cost 57 ms for bench fem's 5.9M
/// near-null-space values on 2 cores, 8 ms sequentially (this ran on every
/// setup; now only once a value is known not finite).
fn first_not_finite(v: &[f64]) -> Option<usize> {
    const CHUNK: usize = 1 << 16;
    v.par_chunks(CHUNK).enumerate().find_map_first(|(c, chunk)| chunk.iter().position(|x| !x.is_finite()).map(|i| c * CHUNK + i))
}

/// The near-null space's vectors (each `n` long) as given, or a copy with
/// each vector scaled to a largest magnitude of 1 where one is so small or
/// so large that the fits' sums of squares would underflow or overflow (the
/// hierarchy depends only on the vectors' spans). One pass finds each
/// vector's largest magnitude, NaN and inf carried through it; only then is
/// the first value that is not finite searched for, to name it. A vector of
/// zeros spans nothing and is refused.
/// Also each vector's multiplier in that copy (1 where none is made).
fn checked_vectors(vectors: &[f64], n: usize) -> Result<(Cow<'_, [f64]>, Vec<f64>)> {
    let larger = |m: f64, a: f64| if a > m || a.is_nan() { a } else { m };
    let largest: Vec<f64> = vectors
        .chunks(n.max(1))
        .map(|v| v.par_chunks(1 << 16).map(|c| c.iter().fold(0.0, |m, x| larger(m, x.abs()))).reduce(|| 0.0, larger))
        .collect();
    if largest.iter().any(|m| !m.is_finite()) {
        let i = first_not_finite(vectors).expect("a vector's largest magnitude is not finite");
        let rows = n.max(1);
        let at = crate::error::at2("near_null_space", i % rows, i / rows, rows);
        return Err(Error::invalid(format!("{at} = {}: the near-null space must be finite", vectors[i])));
    }
    if let Some(j) = largest.iter().position(|&m| m == 0.0) {
        return Err(Error::invalid(format!(
            "near-null space vector {j} (values {} to {}) is zero: it spans nothing",
            j * n,
            (j + 1) * n - 1
        )));
    }
    // its multiplier 1 / m would overflow
    if let Some(j) = largest.iter().position(|&m| m < f64::MIN_POSITIVE) {
        return Err(Error::invalid(format!(
            "near-null space vector {j} (values {} to {}): its largest magnitude {:e} is subnormal; scale it up",
            j * n,
            (j + 1) * n - 1,
            largest[j]
        )));
    }
    if largest.iter().all(|&m| (1e-100..=1e100).contains(&m)) {
        return Ok((vectors.into(), vec![1.0; largest.len()]));
    }
    let mut scaled = crate::error::host_copy(vectors, "near-null space")?;
    scaled.chunks_mut(n).zip(&largest).for_each(|(v, m)| v.par_iter_mut().for_each(|x| *x /= m));
    Ok((scaled.into(), largest.iter().map(|m| 1.0 / m).collect()))
}

pub(super) fn check_square(a: &Mat) -> Result<()> {
    match a.nrows == a.ncols {
        true => Ok(()),
        false => Err(Error::size(format!("A is {} x {}: AMG needs a square matrix", a.nrows, a.ncols))),
    }
}

/// Refuses a finest matrix AMG cannot work on: not square, an empty row,
/// a missing or zero diagonal, a value that is not finite.
pub(super) fn check_finest(a: &Mat, options: &Options) -> Result<()> {
    check_square(a)?;
    if let Some(k) = a.v.iter().position(|v| !v.is_finite()) {
        return Err(Error::invalid(format!("{} = {}: matrix values must be finite", crate::error::at("values", k), a.v[k])));
    }
    // an f32 cycle rounds them: none may overflow, or underflow to zero or a subnormal
    let single = |v: f64| v == 0.0 || ((v as f32).is_finite() && (v as f32).abs() >= f32::MIN_POSITIVE);
    if options.f32_cycle {
        if let Some(k) = a.v.iter().position(|&v| !single(v)) {
            return Err(Error::invalid(format!(
                "{} = {:e}: outside f32's normal range, which the f32 cycle (f32_cycle) rounds to; \
                 scale the system or take the f64 cycle",
                crate::error::at("values", k),
                a.v[k]
            )));
        }
    }
    let d = a.diagonal();
    if let Some(i) = (0..a.nrows).find(|&i| a.row(i).is_empty()) {
        return Err(breakdown(format!("row {i} (0-based) is empty")));
    }
    if let Some(i) = (0..a.nrows).find(|&i| d[i] == 0.0) {
        return Err(breakdown(format!("row {i} (0-based) has a zero or missing diagonal entry")));
    }
    Ok(())
}

/// D^-1 (0 where the diagonal is 0: rows left empty by dropped null-space columns).
fn inverse_diagonal(a: &Mat) -> Vec<f64> {
    a.diagonal().into_iter().map(|d| if d == 0.0 { 0.0 } else { 1.0 / d }).collect()
}

/// The strong-connection graph between nodes (block_size unknowns each),
/// symmetric, as a pattern: a node's row its neighbours, its own entry
/// possibly among them (`aggregate` passes over it).
/// `a`: the level's matrix by nodes (bs x bs blocks).
fn strength(a: &Blocked, theta: f64, symmetric_pattern: bool) -> Mat {
    let bs = a.rows;
    // theta = 0: every stored connection is strong, so the graph is the node
    // pattern (shared, not copied), symmetric where the pattern is
    let nodes = match (theta == 0.0, bs) {
        (true, 1) => Some(a.m),
        (true, _) => a.blocks.as_ref(),
        (false, _) => None,
    };
    let lists = match nodes {
        Some(m) if symmetric_pattern => {
            return Mat { nrows: m.nrows, ncols: m.ncols, rp: m.rp.clone(), ci: m.ci.clone(), v: Vec::new() }
        }
        Some(m) => crate::sparse::symmetrised(off_diagonal(m)),
        // blocks not stored dense, or theta > 0
        None => crate::sparse::symmetrised(strong_connections(a.m, bs, theta)),
    };
    let n = lists.0.len() - 1;
    let rp = row_pointers(lists.0.windows(2).map(|w| w[1] - w[0]));
    Mat { nrows: n, ncols: n, rp: rp.into(), ci: lists.1.into_iter().map(|j| j as i32).collect::<Vec<_>>().into(), v: Vec::new() }
}

/// A pattern as a graph without self-loops.
fn off_diagonal(m: &Mat) -> (Vec<usize>, Vec<u32>) {
    let others = |i: usize| m.ci[m.row(i)].iter().filter(move |&&j| j as usize != i);
    let counts: Vec<usize> = (0..m.nrows).into_par_iter().map(|i| others(i).count()).collect();
    let rp = row_pointers(counts.into_iter());
    let mut adj = vec![0u32; rp[m.nrows] as usize];
    for_each_row_mut(&rp, &mut adj, |i, row| row.iter_mut().zip(others(i)).for_each(|(o, &j)| *o = j as u32));
    (rp.into_par_iter().map(|p| p as usize).collect(), adj)
}

/// The strong connections between nodes, as stored (not yet symmetric).
fn strong_connections(a: &Mat, bs: usize, theta: f64) -> (Vec<usize>, Vec<u32>) {
    let nodes = a.nrows / bs;
    // each node row's block norms squared (|a_ij|^2 when bs = 1), sorted by node
    // theta = 0 keeps every connection: the values are not read (a structure-only setup has none)
    let weigh = theta > 0.0;
    let node_row = |node: usize, row: &mut Vec<(u32, f64)>| {
        row.clear();
        for i in node * bs..(node + 1) * bs {
            row.extend(a.row(i).map(|k| ((a.ci[k] as usize / bs) as u32, if weigh { a.v[k] * a.v[k] } else { 0.0 })));
        }
        if bs > 1 {
            row.sort_unstable_by_key(|e| e.0);
            row.dedup_by(|e, kept| {
                let same = e.0 == kept.0;
                if same {
                    kept.1 += e.1;
                }
                same
            });
        }
    };
    let diag: Vec<f64> = (0..nodes * weigh as usize)
        .into_par_iter()
        .map_init(Vec::new, |row, node| {
            node_row(node, row);
            row.iter().find(|e| e.0 as usize == node).map_or(0.0, |e| e.1)
        })
        .collect();
    let theta2 = theta * theta;
    let chunk = 4096;
    let parts: Vec<(Vec<usize>, Vec<u32>)> = (0..nodes.div_ceil(chunk))
        .into_par_iter()
        .map_init(Vec::new, |row, c| {
            let (mut counts, mut adj) = (Vec::new(), Vec::new());
            for i in c * chunk..((c + 1) * chunk).min(nodes) {
                node_row(i, row);
                let before = adj.len();
                adj.extend(
                    row.iter()
                        .filter(|&&(j, s)| j as usize != i && (!weigh || s >= theta2 * (diag[i] * diag[j as usize]).sqrt()))
                        .map(|e| e.0),
                );
                counts.push(adj.len() - before);
            }
            (counts, adj)
        })
        .collect();
    let mut ptr = Vec::with_capacity(nodes + 1);
    ptr.push(0usize);
    let mut adj = Vec::new();
    for (counts, part) in parts {
        counts.iter().for_each(|c| ptr.push(ptr.last().unwrap() + c));
        adj.extend(part);
    }
    (ptr, adj)
}

/// pyamg's standard aggregation: a node whose neighbours are all free
/// takes them into a new aggregate; the rest join a neighbouring
/// aggregate; what is left groups with its free neighbours. A node with no
/// strong neighbour (a Dirichlet row) stays out of every aggregate (-1): the
/// smoother alone treats it, and it adds no coarse unknowns.
/// `graph`: a node's row its neighbours, its own entry passed over (it
/// changes no step: a free node's own aggregate is what it takes).
fn aggregate(graph: &Mat) -> (Vec<i32>, usize) {
    let n = graph.nrows;
    let mut agg = vec![-1i32; n];
    let neighbours = |i: usize| &graph.ci[graph.row(i)];
    let isolated = |i: usize| neighbours(i).iter().all(|&j| j as usize == i);
    let mut count = 0i32;
    for i in 0..n {
        if agg[i] >= 0 || isolated(i) {
            continue;
        }
        let nb = neighbours(i);
        if nb.iter().all(|&j| agg[j as usize] < 0) {
            agg[i] = count;
            nb.iter().for_each(|&j| agg[j as usize] = count);
            count += 1;
        }
    }
    let first_pass = agg.clone();
    for i in 0..n {
        if agg[i] < 0 {
            if let Some(&j) = neighbours(i).iter().find(|&&j| first_pass[j as usize] >= 0) {
                agg[i] = first_pass[j as usize];
            }
        }
    }
    for i in 0..n {
        if agg[i] < 0 && !isolated(i) {
            agg[i] = count;
            for &j in neighbours(i) {
                if agg[j as usize] < 0 {
                    agg[j as usize] = count;
                }
            }
            count += 1;
        }
    }
    (agg, count as usize)
}

/// A node's place in the parallel aggregation's order: bijective on 32 bits
/// (Wellons' lowbias32), so no two nodes tie. kernels/amg.cu `amg_mis_hash`.
fn mis_hash(i: usize) -> u64 {
    let mut x = i as u32;
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x as u64
}

/// The parallel aggregation's node states.
const OUT: u8 = 0;
const UNDECIDED: u8 = 1;
const ROOT: u8 = 2;

/// The parallel aggregation (Aggregation::Parallel), in the rounds the
/// device runs (device_structure.rs `aggregate`): roots are a maximal set of nodes at
/// least three apart (an MIS of the graph's square, Bell, Dalton and Olson
/// 2012), each taking its neighbours as the greedy first pass does; every
/// other node joins its first neighbour's aggregate in row order. A round
/// keys each undecided node by its undecided neighbours, fewest first, then
/// by `mis_hash`: nodes beside decided ones go first, so roots pack against
/// the aggregates already placed as the sequential sweep's do (plain hash
/// keys left a quarter fewer aggregates and 3-5 more iterations). A node
/// whose key is the largest within distance two becomes a root; an undecided
/// node within distance two of a root drops out. `graph` symmetric.
fn aggregate_parallel(graph: &Mat) -> (Vec<i32>, usize) {
    let n = graph.nrows;
    let neighbours = |i: usize| graph.ci[graph.row(i)].iter().map(|&j| j as usize).filter(move |&j| j != i);
    let mut state: Vec<u8> =
        (0..n).into_par_iter().map(|i| if neighbours(i).next().is_some() { UNDECIDED } else { OUT }).collect();
    let closed_max = |i: usize, of: &[u64]| neighbours(i).map(|j| of[j]).fold(of[i], u64::max);
    while state.contains(&UNDECIDED) {
        let key: Vec<u64> = (0..n)
            .into_par_iter()
            .map(|i| match state[i] {
                UNDECIDED => {
                    let open = neighbours(i).filter(|&j| state[j] == UNDECIDED).count().min(255) as u64;
                    (1 << 62) | ((255 - open) << 32) | mis_hash(i)
                }
                ROOT => (2 << 62) | mis_hash(i),
                _ => 0,
            })
            .collect();
        let near: Vec<u64> = (0..n).into_par_iter().map(|i| closed_max(i, &key)).collect();
        state.par_iter_mut().enumerate().filter(|(_, s)| **s == UNDECIDED).for_each(|(i, s)| {
            let top = closed_max(i, &near);
            if top == key[i] {
                *s = ROOT;
            } else if top >> 62 == 2 {
                *s = OUT;
            }
        });
    }
    // roots numbered in the nodes' order; their neighbours join them, then the rest their first aggregated neighbour
    let mut count = 0i32;
    let roots: Vec<i32> = state
        .iter()
        .map(|&s| match s {
            ROOT => (count, count += 1).0,
            _ => -1,
        })
        .collect();
    let mut first = roots.clone();
    first.par_iter_mut().enumerate().filter(|(_, a)| **a < 0).for_each(|(i, a)| {
        *a = neighbours(i).find(|&j| roots[j] >= 0).map_or(-1, |j| roots[j]);
    });
    let agg = (0..n)
        .into_par_iter()
        .map(|i| match first[i] {
            -1 => neighbours(i).find(|&j| first[j] >= 0).map_or(-1, |j| first[j]),
            a => a,
        })
        .collect();
    (agg, count as usize)
}

/// Each aggregate's nodes in order: aggregate a's are nodes[ptr[a]..ptr[a + 1]].
fn members(agg: &[i32], naggs: usize) -> (Vec<usize>, Vec<i32>) {
    let mut ptr = vec![0usize; naggs + 1];
    agg.iter().filter(|&&a| a >= 0).for_each(|&a| ptr[a as usize + 1] += 1);
    (0..naggs).for_each(|a| ptr[a + 1] += ptr[a]);
    let mut fill = ptr.clone();
    let mut nodes = vec![0i32; ptr[naggs]];
    for (v, &a) in agg.iter().enumerate().filter(|(_, &a)| a >= 0) {
        nodes[fill[a as usize]] = v as i32;
        fill[a as usize] += 1;
    }
    (ptr, nodes)
}

/// The tentative prolongator: per aggregate, the near-null space's rows
/// orthonormalised (modified Gram-Schmidt; a column dependent on the earlier
/// ones is dropped to zero), and the coarse near-null space from the R factors.
fn tentative(agg: &[i32], naggs: usize, bs: usize, b: &[f64], k: usize) -> (Mat, Vec<f64>) {
    let nodes = agg.len();
    let n = nodes * bs;
    let nc = naggs * k;
    let (ptr, members) = members(agg, naggs);
    // each node's place among its aggregate's
    let mut place = vec![0usize; nodes];
    for a in 0..naggs {
        (ptr[a]..ptr[a + 1]).for_each(|p| place[members[p] as usize] = p - ptr[a]);
    }
    // one segment an aggregate: its rows' k columns orthonormalised (column
    // by column), then their R factor (k x k); no allocation per aggregate
    let rows_of = |a: usize| (ptr[a + 1] - ptr[a]) * bs;
    let size = |a: usize| rows_of(a) * k + k * k;
    let seg = row_pointers((0..naggs).map(size));
    let mut fitted = vec![0.0; seg[naggs] as usize];
    // an aggregate a task: its fit is dozens of rows' work (for_each_row_mut's blocks of rows are too coarse)
    pieces(&mut fitted, (0..naggs).map(size)).into_par_iter().enumerate().for_each(|(a, segment)| {
        let m = rows_of(a);
        let (q, r) = segment.split_at_mut(m * k);
        for j in 0..k {
            let rows = members[ptr[a]..ptr[a + 1]].iter().flat_map(|&v| v as usize * bs..(v as usize + 1) * bs);
            q[j * m..(j + 1) * m].iter_mut().zip(rows).for_each(|(x, i)| *x = b[j * n + i]);
        }
        for j in 0..k {
            let before = q[j * m..(j + 1) * m].iter().map(|x| x * x).sum::<f64>().sqrt();
            for i in 0..j {
                let dot: f64 = (0..m).map(|t| q[i * m + t] * q[j * m + t]).sum();
                r[i * k + j] = dot;
                (0..m).for_each(|t| q[j * m + t] -= dot * q[i * m + t]);
            }
            let norm = q[j * m..(j + 1) * m].iter().map(|x| x * x).sum::<f64>().sqrt();
            if norm > 1e-10 * before && norm > 0.0 {
                r[j * k + j] = norm;
                q[j * m..(j + 1) * m].iter_mut().for_each(|x| *x /= norm);
            } else {
                q[j * m..(j + 1) * m].iter_mut().for_each(|x| *x = 0.0);
            }
        }
    });
    // k entries on the rows of aggregated nodes (the aggregate's columns), none on the others
    let rp = row_pointers((0..n).map(|i| if agg[i / bs] >= 0 { k } else { 0 }));
    let nnz = rp[n] as usize;
    let mut ci = vec![0; nnz];
    for_each_row_mut(&rp, &mut ci, |i, row| {
        row.iter_mut().enumerate().for_each(|(j, c)| *c = (agg[i / bs] as usize * k + j) as i32);
    });
    let mut t = Mat { nrows: n, ncols: nc, rp: rp.into(), ci: ci.into(), v: vec![0.0; nnz] };
    for_each_row_mut(&t.rp, &mut t.v, |i, row| {
        if row.is_empty() {
            return; // a node in no aggregate
        }
        let (node, a) = (i / bs, agg[i / bs] as usize);
        let (q, m) = (&fitted[seg[a] as usize..], rows_of(a));
        row.iter_mut().enumerate().for_each(|(j, x)| *x = q[j * m + place[node] * bs + i % bs]);
    });
    let mut coarse = vec![0.0; nc * k];
    for a in 0..naggs {
        let r = &fitted[seg[a] as usize + rows_of(a) * k..];
        for i in 0..k {
            for j in 0..k {
                coarse[j * nc + a * k + i] = r[i * k + j];
            }
        }
    }
    (t, coarse)
}

/// A level's transfer from its aggregates and tentative prolongator `t`:
/// the patterns of A T (P's, when smoothing), R = P^T and A P. With
/// `keep_blocks` (a structure-only setup) and A and T block matrices, a
/// smoothed transfer keeps them as block patterns for the device to write
/// out (`Transfer::blocks`); otherwise they are written out here.
/// `device`: where the device computes A P's pattern and the coarse level's.
fn transfer(
    a: &Blocked,
    (aggregate, t, k): (Vec<i32>, Mat, usize),
    coarse_null_space: Vec<f64>,
    (smooth, keep_blocks): (bool, bool),
    device: Option<&mut dyn DeviceProducts>,
    clock: &mut Phases,
) -> Result<Transfer> {
    // T's block pattern: each aggregated node's one block, in its aggregate's column
    let nodes = aggregate.len();
    let t_blocks = Mat {
        nrows: nodes,
        ncols: t.ncols / k.max(1),
        rp: row_pointers(aggregate.iter().map(|&g| (g >= 0) as usize)).into(),
        ci: aggregate.iter().filter(|&&g| g >= 0).copied().collect::<Vec<_>>().into(),
        v: Vec::new(),
    };
    let mut tr = Transfer {
        aggregate,
        coarse_null_space,
        at: Mat::default(),
        t_at: Vec::new(),
        p: Mat::default(),
        r: Mat::default(),
        r_from: Vec::new(),
        ap: Mat::default(),
        blocks: None,
        tentative: Mat::default(),
    };
    // A T's block pattern: each node's neighbours' aggregates, read from the aggregates (T's blocks)
    let aggregate_of = |j: usize| match tr.aggregate[j] >= 0 {
        true => std::slice::from_ref(&tr.aggregate[j]),
        false => &[],
    };
    let at = match (smooth, a.pattern()) {
        (true, Some(nodes)) => {
            Some(BlockPattern { blocks: product_pattern_by(nodes, t_blocks.ncols, aggregate_of), rows: a.rows, run: k })
        }
        _ => None,
    };
    clock.lap("A T pattern");
    match at {
        Some(at) if keep_blocks => {
            let (r, r_from) = at.transpose();
            clock.lap("R pattern");
            let on_device = match device {
                Some(d) => d.products(&at, &r)?,
                None => None,
            };
            let (ap, coarse) = match on_device {
                Some((rp, coarse)) => {
                    let blocks = Mat { nrows: at.blocks.nrows, ncols: at.blocks.ncols, rp: rp.into(), ..Mat::default() };
                    (BlockPattern { blocks, rows: a.rows, run: at.run }, Some(coarse))
                }
                None => (a.times(&at.blocks, at.run).expect("A is a block matrix"), None),
            };
            clock.lap(if coarse.is_some() { "device A P and coarse patterns" } else { "A P pattern" });
            // the written-out shapes, for the device's buffers
            (tr.at, tr.p) = (at.shape(), at.shape());
            (tr.r, tr.ap) = (r.shape(), ap.shape());
            let t_pattern = BlockPattern { blocks: t_blocks, rows: a.rows, run: k };
            tr.blocks = Some(TransferBlocks { t: t_pattern, p: at, r, r_from, ap, members: None, coarse });
            tr.tentative = t;
        }
        at => {
            if smooth {
                tr.at = at.map_or_else(|| product_pattern(a.m, &t), BlockPattern::into_entries);
                tr.p = Mat { v: vec![0.0; tr.at.nnz()], ..tr.at.clone() };
            } else {
                tr.p = t.clone();
            }
            tr.tentative = t;
            written_out_rest(&mut tr, a, k, clock);
        }
    }
    Ok(tr)
}

/// T's values on A T's pattern, then R = P^T and A P written out, from P's
/// pattern (`tr.at` when smoothing).
fn written_out_rest(tr: &mut Transfer, a: &Blocked, k: usize, clock: &mut Phases) {
    tr.t_at = values_at(&tr.tentative, &tr.at);
    clock.lap("A T pattern");
    let p_blocks = Blocked::new(&tr.p, a.rows, k);
    (tr.r, tr.r_from) = p_blocks.transpose();
    clock.lap("R pattern");
    tr.ap = a.product_pattern(&p_blocks);
    clock.lap("A P pattern");
}

/// A structure-only transfer's block patterns written out on the host (a
/// host re-setup of a structure-only hierarchy needs them).
fn write_out(tr: &mut Transfer, a: &Mat) {
    let Some(kept) = tr.blocks.take() else { return };
    tr.at = kept.p.entries();
    tr.p = Mat { v: vec![0.0; tr.at.nnz()], ..tr.at.clone() };
    written_out_rest(tr, &Blocked::new(a, kept.p.rows, kept.p.rows), kept.p.run, &mut Phases::start());
}

/// `t`'s value at each entry of `pattern` (0 where `t` stores none).
fn values_at(t: &Mat, pattern: &Mat) -> Vec<f64> {
    let mut out = vec![0.0; pattern.nnz()];
    for_each_row_mut(&pattern.rp, &mut out, |i, row| {
        for (o, &c) in row.iter_mut().zip(&pattern.ci[pattern.row(i)]) {
            *o = t.row(i).find(|&e| t.ci[e] == c).map_or(0.0, |e| t.v[e]);
        }
    });
    out
}

/// The smoother's step coefficients (c1, c2) for rho(D^-1 A) = `rho`.
pub(super) fn coefficients(smoother: Smoother, rho: f64) -> Vec<[f64; 2]> {
    match smoother {
        Smoother::Chebyshev { degree } => {
            let (top, bottom) = (CHEBYSHEV_TOP * rho, CHEBYSHEV_TOP * rho / CHEBYSHEV_RATIO);
            let (centre, half) = ((top + bottom) / 2.0, (top - bottom) / 2.0);
            let sigma = centre / half;
            let mut coef = vec![[0.0, 1.0 / centre]];
            let mut rho_prev = 1.0 / sigma;
            for _ in 1..degree {
                let rho_k = 1.0 / (2.0 * sigma - rho_prev);
                coef.push([rho_k * rho_prev, 2.0 * rho_k / half]);
                rho_prev = rho_k;
            }
            coef
        }
        Smoother::L1Jacobi { sweeps } | Smoother::GaussSeidel { sweeps } => vec![[0.0, 1.0]; sweeps],
    }
}

/// Whether a level's numbers need rho(D^-1 A): for Chebyshev, and for
/// smoothing a transfer's prolongator.
pub(super) fn needs_rho(smoother: Smoother, smooth: bool, has_transfer: bool) -> bool {
    matches!(smoother, Smoother::Chebyshev { .. }) || (smooth && has_transfer)
}

/// The prolongator smoothing's weight, 4 / (3 rho).
pub(super) fn omega(rho: f64) -> f64 {
    if rho > 0.0 {
        4.0 / (3.0 * rho)
    } else {
        0.0
    }
}

/// The smoother's scaling and step coefficients for `a`, with rho(D^-1 A)
/// (`rho`) where Chebyshev needs it.
fn smoother_of(a: &Mat, smoother: Smoother, dinv: &[f64], rho: f64) -> (Vec<f64>, Vec<[f64; 2]>) {
    let inverse = match smoother {
        Smoother::Chebyshev { .. } | Smoother::GaussSeidel { .. } => dinv.to_vec(),
        Smoother::L1Jacobi { .. } => (0..a.nrows)
            .into_par_iter()
            .map(|i| {
                let s: f64 = a.row(i).map(|k| a.v[k].abs()).sum();
                if s == 0.0 {
                    0.0
                } else {
                    1.0 / s
                }
            })
            .collect(),
    };
    (inverse, coefficients(smoother, rho))
}

/// rho(D^-1 A): Lanczos for a symmetric hierarchy, the Gershgorin bound otherwise.
fn spectral_radius(a: &Mat, dinv: &[f64], symmetric: bool) -> f64 {
    if symmetric {
        spectral_radius_symmetric(a, dinv, LANCZOS_STEPS)
    } else {
        spectral_bound(a, dinv)
    }
}

/// P's values from A T: P = T - omega D^-1 A T with omega = 4 / (3 rho), or T.
fn prolongator_values(tr: &mut Transfer, dinv: &[f64], rho: f64, smooth: bool) {
    if !smooth {
        tr.p.v.copy_from_slice(&tr.tentative.v);
        return;
    }
    let omega = omega(rho);
    let (at, t_at) = (&tr.at, &tr.t_at);
    for_each_row_mut(&at.rp, &mut tr.p.v, |i, row| {
        let s = at.rp[i] as usize;
        row.iter_mut().enumerate().for_each(|(o, p)| *p = t_at[s + o] - omega * dinv[i] * at.v[s + o]);
    });
}

/// The numbers of a level and its transfer from its matrix `a`: the
/// smoother, P, R and A P (the next level's matrix is R (A P)).
fn numbers(level: &mut Level, smoother: Smoother, symmetric: bool, smooth: bool) {
    let dinv = inverse_diagonal(&level.a);
    let needs_rho = needs_rho(smoother, smooth, level.transfer.is_some());
    let rho = if needs_rho { spectral_radius(&level.a, &dinv, symmetric) } else { 0.0 };
    level.spectral_radius = rho;
    (level.smoother_inverse, level.coefficients) = smoother_of(&level.a, smoother, &dinv, rho);
    if let Some(tr) = level.transfer.as_mut() {
        if smooth {
            product_values(&level.a, &tr.tentative, &mut tr.at);
        }
        prolongator_values(tr, &dinv, rho, smooth);
        tr.r.v.par_iter_mut().zip(&tr.r_from).for_each(|(v, &k)| *v = tr.p.v[k as usize]);
        product_values(&level.a, &tr.p, &mut tr.ap);
    }
}

/// What the caller of a structure-only setup knows and wants
/// (`Hierarchy::structure`).
#[derive(Clone, Copy, Default)]
pub struct StructureOnly {
    /// A's pattern is symmetric.
    pub symmetric_pattern: bool,
    /// Where the caller checked whether A's rows are nodes of blocks, what it found.
    pub node_blocks: Option<bool>,
    /// The device fits the tentative prolongators (cuda.rs, kernels/amg.cu
    /// `amg_fit`), where every level keeps block patterns: the host keeps
    /// T's pattern and each aggregate's nodes, no values.
    pub fit_on_device: bool,
}

impl StructureOnly {
    /// Whether the device fits the tentative prolongators for options `o`:
    /// where asked to and every level keeps block patterns (smoothing from
    /// a scalar matrix or one of node blocks).
    pub fn device_fits(&self, o: &Options) -> bool {
        self.fit_on_device && o.smooth_prolongator && (o.block_size == 1 || self.node_blocks == Some(true))
    }
}

/// The finest transfer's symbolic products where a device computes them
/// (cuda.rs `FinestProducts`), from P's and R's block patterns: A P's block
/// pattern (the device keeps its columns; its row pointers here) and the
/// coarse level's, R (A P)'s. None: the device cannot, the host computes them.
pub trait DeviceProducts {
    fn products(&mut self, p: &BlockPattern, r: &BlockPattern) -> Result<Option<(Vec<i32>, Mat)>>;
}

/// The options' own checks, for a matrix of `n` rows.
pub(super) fn check_options(o: &Options, n: usize) -> Result<()> {
    if o.block_size == 0 || !n.is_multiple_of(o.block_size) {
        return Err(Error::invalid(format!("block_size = {}: must divide the {n} rows", o.block_size)));
    }
    if !(o.strength >= 0.0 && o.strength <= 1.0) {
        return Err(Error::invalid(format!("strength = {}: must be in [0, 1]", o.strength)));
    }
    if let Some(s) = o.smoother.filter(|s| s.steps() == 0 || s.steps() > 16) {
        return Err(Error::invalid(format!(
            "smoother {}: needs 1 to 16 steps (Chebyshev degree, l1-Jacobi sweeps) or 1 to 8 Gauss-Seidel sweeps",
            s.name()
        )));
    }
    if o.max_levels == 0 {
        return Err(Error::invalid("max_levels = 0: must be at least 1"));
    }
    if o.coarsest == 0 {
        return Err(Error::invalid("coarsest = 0: must be at least 1"));
    }
    Ok(())
}

/// Whether `naggs` aggregates of `k` modes coarsen a level of `n` rows:
/// coarsening that stalls ends the hierarchy, and so does a poor ratio on a
/// level small enough to invert densely.
pub(super) fn coarsens(naggs: usize, k: usize, n: usize) -> bool {
    let nc = naggs * k;
    naggs > 0 && nc < n * 9 / 10 && !(2 * nc > n && n <= DENSE_LIMIT / 2)
}

/// Sets up the hierarchy of `a`. With `structure_only` the host builds the
/// structure alone from the pattern (aggregates, tentative prolongators, patterns) and
/// leaves the numbers at zero for the device's re-setup to compute
/// (`Hierarchy::needs_numbers`); a strength threshold above 0 reads the
/// coarse levels' values, so it is refused there.
/// `device`: where a structure-only setup's finest products are the device's.
pub fn build(
    a: Mat,
    o: &Options,
    structure_only: Option<StructureOnly>,
    mut device: Option<&mut dyn DeviceProducts>,
) -> Result<Hierarchy> {
    let host_numbers = structure_only.is_none();
    let known = structure_only.unwrap_or_default();
    let (symmetric_pattern, mut finest_blocks, device_fits) = (known.symmetric_pattern, known.node_blocks, known.device_fits(o));
    let mut clock = Phases::start();
    match host_numbers {
        true => check_finest(&a, o)?,
        // the values are the device's to check, in its re-setup
        false => check_square(&a)?,
    }
    if !host_numbers && o.strength > 0.0 {
        return Err(Error::invalid(format!(
            "strength = {}: above 0 the coarse levels' values set their strong connections, so the host computes the numbers (Hierarchy::new)",
            o.strength
        )));
    }
    let n = a.nrows;
    check_options(o, n)?;
    // the caller's vectors are read in place: only the coarse levels' are new
    let (mut b, mut k, scale): (Cow<[f64]>, usize, Vec<f64>) = match &o.near_null_space {
        Some(ns) => {
            if ns.count == 0 || ns.vectors.len() != n * ns.count {
                return Err(Error::size(format!(
                    "near-null space: {} values for {} vectors of {n} rows",
                    ns.vectors.len(),
                    ns.count
                )));
            }
            let (b, scale) = checked_vectors(&ns.vectors, n)?;
            (b, ns.count, scale)
        }
        // the constant per unknown of a node (the translations of elasticity)
        None => {
            let bs = o.block_size;
            let b = match device_fits {
                // the device makes them itself
                true => Vec::new(),
                false => (0..bs * n).into_par_iter().map(|e| if (e % n) % bs == e / n { 1.0 } else { 0.0 }).collect(),
            };
            (b.into(), bs, vec![1.0; bs])
        }
    };
    // without host numbers the device finds the mirror and the asymmetry (and the default smoother from it)
    let mirror = if host_numbers { mirror(&a, o.block_size) } else { None };
    let asym = if host_numbers { asymmetry(&a, mirror.as_deref()) } else { None };
    let symmetric = asym.is_none();
    clock.lap("checks and symmetry");
    let smoother = o.smoother.unwrap_or(Smoother::default_for(symmetric));
    let mut levels: Vec<Level> = Vec::new();
    let mut a = a;
    // the coarse level's block pattern, where its pattern was built from it
    let mut a_blocks: Option<Mat> = None;
    let mut bs = o.block_size;
    loop {
        let (n, fine_bs) = (a.nrows, bs);
        let blocks = a_blocks.take().map(|blocks| BlockPattern { blocks, rows: bs, run: bs });
        let mut level =
            Level { a, smoother_inverse: Vec::new(), coefficients: Vec::new(), spectral_radius: 0.0, transfer: None, blocks };
        let last = n <= o.coarsest.max(1) || levels.len() + 1 >= o.max_levels;
        if !last {
            // A's pattern symmetric: so is every Galerkin level's, P^T A P
            // A by nodes: its block pattern found once for the strength graph and both products
            let a_nodes = match (&level.blocks, finest_blocks.take()) {
                (Some(known), _) => Blocked { m: &level.a, rows: bs, run: bs, blocks: Some(known.blocks.clone()) },
                (None, Some(checked)) => Blocked::checked(&level.a, bs, checked),
                (None, None) => Blocked::new(&level.a, bs, bs),
            };
            let graph = strength(&a_nodes, o.strength, mirror.is_some() || symmetric_pattern);
            let (agg, naggs) = match o.aggregation {
                Aggregation::Greedy => aggregate(&graph),
                Aggregation::Parallel => aggregate_parallel(&graph),
            };
            clock.lap("strength and aggregation");
            if coarsens(naggs, k, n) {
                let nc = naggs * k;
                let (t, coarse) = match device_fits {
                    // T's shape: its pattern is the block pattern `transfer` keeps
                    true => (Mat { nrows: n, ncols: nc, ..Mat::default() }, Vec::new()),
                    false => tentative(&agg, naggs, bs, &b, k),
                };
                clock.lap("tentative prolongator");
                let fit_members = device_fits.then(|| members(&agg, naggs));
                // the device's products take the finest level, whose A it holds
                let products = if levels.is_empty() && device_fits { device.take() } else { None };
                let keep = (o.smooth_prolongator, !host_numbers);
                let mut tr = transfer(&a_nodes, (agg, t, k), coarse.clone(), keep, products, &mut clock)?;
                if let Some((ptr, nodes)) = fit_members {
                    let kept = tr.blocks.as_mut().ok_or_else(|| {
                        Error::new(ErrorKind::Internal, format!("AMG level {}: no block patterns to fit T on", levels.len()))
                    })?;
                    kept.members = Some((ptr.iter().map(|&p| p as i32).collect(), nodes));
                }
                level.transfer = Some(tr);
                (b, k, bs) = (coarse.into(), k, k);
            }
        }
        // R (A P): an aggregate's modes by a node's dofs, times a node's dofs by the modes
        let mut next = level.transfer.as_mut().map(|tr| match &mut tr.blocks {
            Some(kept) => {
                let blocks = kept.coarse.take().unwrap_or_else(|| product_pattern(&kept.r.blocks, &kept.ap.blocks));
                let coarse = BlockPattern { blocks, rows: k, run: k };
                if k == 1 {
                    return coarse.into_entries();
                }
                let entries = coarse.entries();
                a_blocks = Some(coarse.blocks);
                entries
            }
            None => Blocked::new(&tr.r, k, fine_bs).product_pattern(&Blocked::new(&tr.ap, fine_bs, k)),
        });
        if host_numbers {
            numbers(&mut level, smoother.on_level(levels.len()), symmetric, o.smooth_prolongator);
            if let (Some(c), Some(tr)) = (&mut next, &level.transfer) {
                product_values(&tr.r, &tr.ap, c);
            }
        } else {
            // the buffers the device's re-setup fills
            level.smoother_inverse = vec![0.0; n];
            level.coefficients = coefficients(smoother.on_level(levels.len()), 1.0);
        }
        clock.lap(if host_numbers { "values" } else { "coarse pattern" });
        levels.push(level);
        match next {
            Some(ac) => a = ac,
            None => break,
        }
    }
    let mut h = Hierarchy {
        levels,
        coarse_inverse: None,
        smoother,
        asymmetry: asym,
        mirror,
        // the near-null space lives on in the tentative prolongators
        options: o.without_vectors(),
        phases: Vec::new(),
        needs_numbers: !host_numbers,
        fit_scale: device_fits.then_some(scale),
    };
    h.coarse_inverse = match host_numbers {
        true => coarse_inverse(&h)?,
        false => (n_coarsest(&h) <= DENSE_LIMIT).then(|| vec![0.0; n_coarsest(&h).pow(2)]),
    };
    clock.lap("coarsest inverse");
    h.phases = clock.0;
    Ok(h)
}

fn n_coarsest(h: &Hierarchy) -> usize {
    h.levels.last().expect("a hierarchy has a level").a.nrows
}

/// The dense inverse of the coarsest matrix, when it is small enough.
pub(super) fn coarse_inverse(h: &Hierarchy) -> Result<Option<Vec<f64>>> {
    let a = &h.levels.last().expect("a hierarchy has a level").a;
    let n = a.nrows;
    if n > DENSE_LIMIT {
        return Ok(None);
    }
    let mut dense = vec![0.0; n * n];
    for i in 0..n {
        for k in a.row(i) {
            dense[i * n + a.ci[k] as usize] = a.v[k];
        }
    }
    dense_inverse(&dense, n).map(Some).ok_or_else(|| singular_coarsest(n, h.levels.len() - 1))
}

/// The error for a coarsest matrix of `n` rows, on `level`, that has no inverse.
pub(super) fn singular_coarsest(n: usize, level: usize) -> Error {
    breakdown(format!("the coarsest matrix ({n} rows, level {level}) is singular"))
}

/// New values of the finest matrix, same pattern: every level's numbers
/// redone on the kept aggregates, tentative prolongators and patterns.
pub fn refresh(h: &mut Hierarchy, values: &[f64]) -> Result<()> {
    if h.fit_scale.is_some() {
        return Err(Error::new(
            ErrorKind::Unsupported,
            "this AMG hierarchy's tentative prolongators were fitted on the device: its re-setup runs there",
        ));
    }
    let finest = &mut h.levels[0].a;
    if values.len() != finest.nnz() {
        return Err(Error::size(format!("{} values for a matrix of {} entries", values.len(), finest.nnz())));
    }
    let mut clock = Phases::start();
    let old = std::mem::replace(&mut finest.v, values.to_vec());
    if let Err(e) = check_finest(&h.levels[0].a, &h.options) {
        h.levels[0].a.v = old;
        return Err(e);
    }
    h.asymmetry = asymmetry(&h.levels[0].a, h.mirror.as_deref());
    if h.needs_numbers && h.options.smoother.is_none() {
        // a structure-only setup left the default smoother to this symmetry check
        h.smoother = Smoother::default_for(h.asymmetry.is_none());
    }
    clock.lap("checks");
    let (smoother, symmetric, smooth) = (h.smoother, h.asymmetry.is_none(), h.options.smooth_prolongator);
    for l in 0..h.levels.len() {
        let (this, rest) = h.levels.split_at_mut(l + 1);
        let level = &mut this[l];
        if let Some(tr) = level.transfer.as_mut() {
            write_out(tr, &level.a);
        }
        numbers(level, smoother.on_level(l), symmetric, smooth);
        if let (Some(tr), Some(next)) = (&level.transfer, rest.first_mut()) {
            product_values(&tr.r, &tr.ap, &mut next.a);
        }
    }
    clock.lap("values");
    h.coarse_inverse = coarse_inverse(h)?;
    clock.lap("coarsest inverse");
    (h.phases, h.needs_numbers) = (clock.0, false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block-wise mirror equals the entry-wise one on a matrix of dense
    /// 3 x 3 blocks, and a block missing its transpose leaves none.
    #[test]
    fn block_mirror_is_the_entry_mirror() {
        let ctx = std::sync::Arc::new(crate::context::Context::cpu_reference());
        let (a, _, _) = crate::fem::gallery::clamped_block(&ctx, 3, false).unwrap();
        let p = &a.pattern;
        let m = Mat { nrows: p.nrows, ncols: p.ncols, rp: p.row_ptr.clone(), ci: p.col.clone(), v: Vec::new() };
        assert!(block_pattern(&m, 3, 3).is_some());
        let want = entry_mirror(&m).expect("a symmetric pattern");
        assert_eq!(mirror(&m, 3), Some(want));
        // drop the last block of the first node's rows: (0, J) has no (J, 0) now
        let (mut rp, mut ci) = (vec![0], Vec::new());
        for i in 0..m.nrows {
            let row = &m.ci[m.row(i)];
            ci.extend_from_slice(if i < 3 { &row[..row.len() - 3] } else { row });
            rp.push(ci.len() as i32);
        }
        let cut = Mat { rp: rp.into(), ci: ci.into(), ..m.clone() };
        assert_eq!(mirror(&cut, 3), None);
        assert_eq!(entry_mirror(&cut), None);
    }
}
