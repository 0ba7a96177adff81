//! A scalar system's whole structure built on the device (Aggregation::Parallel):
//! every level's aggregates by setup.rs `aggregate_parallel`'s rounds, T,
//! each aggregate's nodes, P = A T's pattern, R = P^T by a device
//! transpose, and A P's and the coarse level's patterns by the product
//! kernels (`cuda::product_pattern`). The patterns stay on the device
//! (`HeldBlocks`); the host keeps each pattern's shape and entry count, the
//! row pointers of those of at most SPLIT_ROWS rows (which choose the
//! products' plans) and the coarsest pattern (which it may invert): no host
//! phase over the entries, no upload, and no download but counts remains.
//! The numbers are then the device's re-setup's, as for any structure-only
//! setup.

use super::cuda::{
    download_rows, host_row_pointers, mean_row, product_pattern, DeviceBlocks, FoundOnDevice, HeldBlocks, BITMAP_BYTES, SOURCE,
    SPLIT_ROWS,
};
use super::host::{BlockPattern, Mat};
use super::setup::{check_options, check_square, coarsens, coefficients, Phases};
use super::{Aggregation, Hierarchy, Level, Options, Smoother, Transfer, TransferBlocks};
use crate::array::cuda::{exclusive_scan, grid_for, BLOCK};
use crate::error::Result;
use crate::gpu::{arg_or_null, DeviceBuffer, Gpu, KernelArg};
use crate::sparse::DevicePattern;

/// Whether the device builds the structure for options `o` on a matrix
/// whose pattern is symmetric (`symmetric_pattern`): parallel aggregation of
/// a scalar system with the constants as its near-null space, every
/// connection strong, smoothed prolongation.
pub fn applies(o: &Options, symmetric_pattern: bool) -> bool {
    o.aggregation == Aggregation::Parallel
        && symmetric_pattern
        && o.block_size == 1
        && o.near_null_space.is_none()
        && o.strength == 0.0
        && o.smooth_prolongator
}

/// The hierarchy's structure of the finest matrix `a` (its pattern alone,
/// shared with the solver's `finest` on the device), and the patterns the
/// device holds for `cuda::DeviceHierarchy::new` (`found.held`). None where
/// a level's product rows need more room than the bitmap's (the host's
/// setup then builds it).
pub fn build(g: &Gpu, a: Mat, finest: &DevicePattern, o: &Options) -> Result<Option<(Hierarchy, FoundOnDevice)>> {
    let mut clock = Phases::start();
    check_square(&a)?;
    check_options(o, a.nrows)?;
    // the device's re-setup finds the asymmetry, and the default smoother from it
    let smoother = o.smoother.unwrap_or(Smoother::default_for(true));
    let (mut levels, mut held): (Vec<Level>, Vec<Option<HeldBlocks>>) = (Vec::new(), Vec::new());
    let mut a = a;
    loop {
        let (n, l) = (a.nrows, levels.len());
        let pattern = match l {
            0 => (&finest.row_ptr, &finest.col),
            _ => {
                let DeviceBlocks(rp, ci) = &held[l - 1].as_ref().expect("a coarse level's pattern is held").coarse;
                (rp, ci)
            }
        };
        let last = n <= o.coarsest.max(1) || l + 1 >= o.max_levels;
        let mut built = None;
        if !last {
            let (agg, naggs) = aggregate(g, n, pattern)?;
            clock.lap("device aggregation");
            if coarsens(naggs, 1, n) {
                match transfer(g, n, pattern, (&agg, naggs), &mut clock)? {
                    Some(t) => built = Some(t),
                    None => return Ok(None),
                }
            }
        }
        let (transfer, level_held, next) = match built {
            Some((transfer, blocks, coarse)) => (Some(transfer), Some(blocks), Some(coarse)),
            None => (None, None, None),
        };
        levels.push(level(a, l, smoother, transfer));
        held.push(level_held);
        match next {
            Some(coarse) => a = coarse,
            None => break,
        }
    }
    // the coarsest pattern on the host too: where it is too large for the device, the host inverts it
    let (l, coarsest) = (levels.len() - 1, levels.last_mut().expect("a hierarchy has a level"));
    if l > 0 {
        let (rp, ci) = held[l - 1].as_ref().expect("a coarse level's pattern is held").coarse_pattern(g)?;
        (coarsest.a.rp, coarsest.a.ci) = (rp.into(), ci.into());
    }
    clock.lap("coarsest pattern");
    let mut h = Hierarchy {
        levels,
        coarse_inverse: None,
        smoother,
        asymmetry: None,
        mirror: None,
        options: o.without_vectors(),
        phases: clock.0,
        needs_numbers: true,
        // the device fits T to the constants
        fit_scale: Some(vec![1.0]),
    };
    let rows = h.levels.last().expect("a hierarchy has a level").a.nrows;
    h.coarse_inverse = (rows <= super::setup::DENSE_LIMIT).then(|| vec![0.0; rows * rows]);
    Ok(Some((h, FoundOnDevice { mirror: None, near_null_space: None, held })))
}

/// Level `l` of matrix `a` (its numbers zeros until the device's re-setup).
fn level(a: Mat, l: usize, smoother: Smoother, transfer: Option<Transfer>) -> Level {
    let n = a.nrows;
    // a coarse level's pattern is written out on the device from the held one
    let blocks = (l > 0).then(|| BlockPattern { blocks: Mat { v: Vec::new(), ..a.clone() }, rows: 1, run: 1 });
    Level {
        a,
        smoother_inverse: vec![0.0; n],
        coefficients: coefficients(smoother.on_level(l), 1.0),
        spectral_radius: 0.0,
        transfer,
        blocks,
    }
}

/// Whether the host keeps the row pointers of a pattern of `rows` rows
/// (`cuda::Plan::split` reads the widest row of those few).
fn host_rows(rows: usize) -> bool {
    rows <= SPLIT_ROWS
}

/// A pattern's shape with its row pointers, or `[0, entries]` (its columns
/// on the device alone).
fn shape(nrows: usize, ncols: usize, rp: Vec<i32>) -> BlockPattern {
    BlockPattern { blocks: Mat { nrows, ncols, rp: rp.into(), ..Mat::default() }, rows: 1, run: 1 }
}

/// Level `n`'s transfer from its aggregates: the host's shapes, the
/// device's patterns, and the coarse level's shape. None where a product's
/// rows need more than the bitmap holds.
fn transfer(
    g: &Gpu,
    n: usize,
    (arp, aci): (&DeviceBuffer<i32>, &DeviceBuffer<i32>),
    (agg, naggs): (&DeviceBuffer<i32>, usize),
    clock: &mut Phases,
) -> Result<Option<(Transfer, HeldBlocks, Mat)>> {
    let n32 = n as i32;
    let bitmap = naggs.div_ceil(32) * 4 <= BITMAP_BYTES;
    // T: row i holds column agg[i], where node i is aggregated
    let tentative = g.kernel("amg", SOURCE, "amg_tentative_pattern")?;
    let trp = g.zeros::<i32>(n + 1)?;
    let launch_t = |trp: Option<&DeviceBuffer<i32>>, out: &DeviceBuffer<i32>| {
        let mut l = g.launcher(&tentative);
        l.arg(&n32).arg(agg);
        arg_or_null(&mut l, trp);
        l.arg(out);
        g.launch("amg_tentative_pattern", l, (grid_for(n), 1, 1), (BLOCK, 1, 1), 0)
    };
    launch_t(None, &trp)?;
    exclusive_scan(g, n + 1, &trp)?;
    let t_rp = match host_rows(n) {
        true => download_rows(g, &trp)?,
        false => {
            let mut t_nnz = [0i32];
            g.download(&trp, n, &mut t_nnz)?;
            vec![0, t_nnz[0]]
        }
    };
    let t_nnz = t_rp[t_rp.len() - 1] as usize;
    let tci = g.alloc::<i32>(t_nnz.max(1))?;
    launch_t(Some(&trp), &tci)?;
    let (members, _) = transpose(g, (n, naggs), (&trp, &tci), t_nnz, false)?;
    clock.lap("device T and aggregates' nodes");
    // P = A T's pattern, R = P^T
    let entries = |rp: &[i32]| *rp.last().expect("row pointers") as usize;
    let a_row = mean_row(aci.len(), n);
    let Some((p_rp, prp, pci)) = product_pattern(g, (n, 1), (arp, aci), (&trp, &tci), naggs, (bitmap, a_row), host_rows(n))?
    else {
        return Ok(None);
    };
    let (r, r_from) = transpose(g, (n, naggs), (&prp, &pci), entries(&p_rp), true)?;
    let r_rp = host_row_pointers(g, &r.0, host_rows(naggs), entries(&p_rp))?;
    clock.lap("device A T and R patterns");
    let ap_candidates = a_row * mean_row(entries(&p_rp), n);
    let Some((ap_rp, aprp, apci)) =
        product_pattern(g, (n, 1), (arp, aci), (&prp, &pci), naggs, (bitmap, ap_candidates), host_rows(n))?
    else {
        return Ok(None);
    };
    let c_candidates = mean_row(entries(&p_rp), naggs) * mean_row(entries(&ap_rp), n);
    let Some((c_rp, crp, cci)) =
        product_pattern(g, (naggs, 1), (&r.0, &r.1), (&aprp, &apci), naggs, (bitmap, c_candidates), host_rows(naggs))?
    else {
        return Ok(None);
    };
    clock.lap("device A P and coarse patterns");
    let (t, p, rt, ap) = (shape(n, naggs, t_rp), shape(n, naggs, p_rp), shape(naggs, n, r_rp), shape(n, naggs, ap_rp));
    let coarse = Mat { nrows: naggs, ncols: naggs, rp: c_rp.into(), ..Mat::default() };
    let transfer = Transfer {
        // on the device alone (T's columns)
        aggregate: Vec::new(),
        tentative: t.shape(),
        coarse_null_space: Vec::new(),
        at: p.shape(),
        t_at: Vec::new(),
        p: p.shape(),
        r: rt.shape(),
        r_from: Vec::new(),
        ap: ap.shape(),
        blocks: Some(TransferBlocks { t, p, r: rt, r_from: Vec::new(), ap, members: None, coarse: None }),
    };
    let held = HeldBlocks {
        p: DeviceBlocks(prp, pci),
        r,
        ap: DeviceBlocks(aprp, apci),
        coarse: DeviceBlocks(crp, cci),
        t: Some(DeviceBlocks(trp, tci)),
        members: Some(members),
        r_from,
    };
    Ok(Some((transfer, held, coarse)))
}

/// The transpose of an `nrows` x `ncols` pattern of `nnz` entries on the
/// device: its row pointers and columns, sorted within each row, and,
/// `with_from`, the entry each came from (kernels/amg.cu
/// `amg_column_counts`, `amg_transpose_scatter`, `amg_transpose_sort`).
fn transpose(
    g: &Gpu,
    (nrows, ncols): (usize, usize),
    (rp, ci): (&DeviceBuffer<i32>, &DeviceBuffer<i32>),
    nnz: usize,
    with_from: bool,
) -> Result<(DeviceBlocks, Option<DeviceBuffer<i32>>)> {
    let trp = g.zeros::<i32>(ncols + 1)?;
    let (nnz64, n32, nc32) = (nnz as i64, nrows as i32, ncols as i32);
    let f = g.kernel("amg", SOURCE, "amg_column_counts")?;
    let mut l = g.launcher(&f);
    l.arg(&nnz64).arg(ci).arg(&trp);
    g.launch("amg_column_counts", l, (grid_for(nnz), 1, 1), (BLOCK, 1, 1), 0)?;
    exclusive_scan(g, ncols + 1, &trp)?;
    let mut fill = g.alloc::<i32>(ncols + 1)?;
    g.copy(&trp, &mut fill)?;
    let (rows, from) = (g.alloc::<i32>(nnz.max(1))?, g.alloc::<i32>(nnz.max(1))?);
    let f = g.kernel("amg", SOURCE, "amg_transpose_scatter")?;
    let mut l = g.launcher(&f);
    l.arg(&n32).arg(rp).arg(ci).arg(&fill).arg(&rows).arg(&from);
    g.launch("amg_transpose_scatter", l, (grid_for(nrows), 1, 1), (BLOCK, 1, 1), 0)?;
    let tci = g.alloc::<i32>(nnz.max(1))?;
    let tfrom = if with_from { Some(g.alloc::<i32>(nnz.max(1))?) } else { None };
    let f = g.kernel("amg", SOURCE, "amg_transpose_sort")?;
    let mut l = g.launcher(&f);
    l.arg(&nc32).arg(&trp).arg(&rows).arg(&from).arg(&tci);
    arg_or_null(&mut l, tfrom.as_ref());
    g.launch("amg_transpose_sort", l, (grid_for(ncols * 32), 1, 1), (BLOCK, 1, 1), 0)?;
    Ok((DeviceBlocks(trp, tci), tfrom))
}

/// The parallel aggregation of a level of `n` rows whose symmetric pattern
/// (rp, ci) the device holds: each node's aggregate (-1: none) and the
/// aggregates' count, the same as setup.rs `aggregate_parallel`'s.
pub fn aggregate(g: &Gpu, n: usize, (rp, ci): (&DeviceBuffer<i32>, &DeviceBuffer<i32>)) -> Result<(DeviceBuffer<i32>, usize)> {
    let n32 = n as i32;
    let grid = (grid_for(n), 1, 1);
    let state = g.alloc::<u8>(n.max(1))?;
    let (key, near) = (g.alloc::<u64>(n.max(1))?, g.alloc::<u64>(n.max(1))?);
    let mut left = g.alloc::<i32>(1)?;
    let kernel = |name: &str| g.kernel("amg", SOURCE, name);
    let (start, keyed, nearest, decide) =
        (kernel("amg_mis_start")?, kernel("amg_mis_key")?, kernel("amg_mis_near")?, kernel("amg_mis_decide")?);
    let mut l = g.launcher(&start);
    l.arg(&n32).arg(rp).arg(ci).arg(&state);
    g.launch("amg_mis_start", l, grid, (BLOCK, 1, 1), 0)?;
    // a round at least ends every node whose key is the largest within distance two: n rounds at most
    for _ in 0..n {
        g.fill_bytes(&mut left, 0)?;
        let mut l = g.launcher(&keyed);
        l.arg(&n32).arg(rp).arg(ci).arg(&state).arg(&key);
        g.launch("amg_mis_key", l, grid, (BLOCK, 1, 1), 0)?;
        let mut l = g.launcher(&nearest);
        l.arg(&n32).arg(rp).arg(ci).arg(&key).arg(&near);
        g.launch("amg_mis_near", l, grid, (BLOCK, 1, 1), 0)?;
        let mut l = g.launcher(&decide);
        l.arg(&n32).arg(rp).arg(ci).arg(&key).arg(&near).arg(&state).arg(&left);
        g.launch("amg_mis_decide", l, grid, (BLOCK, 1, 1), 0)?;
        let mut undecided = [0i32];
        g.download(&left, 0, &mut undecided)?;
        if undecided[0] == 0 {
            break;
        }
    }
    // the roots numbered in the nodes' order, their neighbours joined to them, then the rest
    let number = g.zeros::<i32>(n + 1)?;
    let roots = kernel("amg_mis_roots")?;
    let mut l = g.launcher(&roots);
    l.arg(&n32).arg(&state).arg(&number);
    g.launch("amg_mis_roots", l, grid, (BLOCK, 1, 1), 0)?;
    exclusive_scan(g, n + 1, &number)?;
    let mut naggs = [0i32];
    g.download(&number, n, &mut naggs)?;
    let (first, agg) = (g.alloc::<i32>(n.max(1))?, g.alloc::<i32>(n.max(1))?);
    let (join_roots, join_neighbours) = (kernel("amg_join_roots")?, kernel("amg_join_neighbours")?);
    let mut l = g.launcher(&join_roots);
    l.arg(&n32).arg(rp).arg(ci).arg(&state).arg(&number).arg(&first);
    g.launch("amg_join_roots", l, grid, (BLOCK, 1, 1), 0)?;
    let mut l = g.launcher(&join_neighbours);
    l.arg(&n32).arg(rp).arg(ci).arg(&first).arg(&agg);
    g.launch("amg_join_neighbours", l, grid, (BLOCK, 1, 1), 0)?;
    Ok((agg, naggs[0] as usize))
}
