//! The grid walk of ILU(0)'s triangular sweeps (kernels/sparse.cu
//! `sweep_grid`): where a matrix is a stencil on an nx x ny x nz box with
//! its rows numbered x fastest (finite differences and volumes on
//! structured grids: TOUGHREACT's, the porous-flow and heat codes'), a
//! block walks a z-plane and a thread an x-line, so a sweep costs about
//! nx + skew ny barrier steps plus nz hand-offs between blocks instead of
//! nx + ny + nz dependency levels with a hand-off at each. The box is read
//! from the pattern alone and checked entry by entry here; the walk does the
//! same sums in the same order as every other schedule (same bits).

/// A box the sweeps can walk: every row's neighbours in each triangle lie
/// where `sweep_grid` finds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GridWalk {
    pub nx: usize,
    pub ny: usize,
    pub nz: usize,
    /// Steps between a line and the next, in the lower and the upper sweep:
    /// one more than the furthest point ahead a row reads on the previous line.
    pub skew: [usize; 2],
}

/// One sweep's factor as the walk reads it (`GridWalk::layout`).
pub struct WalkLayout {
    pub off: Vec<i32>,
    /// Each distance's line and point step in its plane (i32::MIN for an earlier plane).
    pub dj: Vec<i32>,
    pub di: Vec<i32>,
    pub mask: Vec<u32>,
    pub from: Vec<i32>,
}

/// One sweep of the plane pipeline (`GridWalk::pipeline`): where each step
/// of a plane starts, and each entry's place in the CSR values.
pub struct PipeLayout {
    pub step_off: Vec<i32>,
    pub from: Vec<i32>,
}

/// Steps a plane may have in the plane pipeline (its offsets sit in shared memory).
const PIPE_STEPS: usize = 2048;

/// Where each step of an nx x ny plane starts in the pipeline's order
/// (lines max(0, s - nx + 1) ..= min(s, ny - 1) at step s), and the plane's end.
fn pipe_step_offsets(nx: usize, ny: usize) -> Vec<i32> {
    let mut off = vec![0i32; nx + ny];
    for s in 0..nx + ny - 1 {
        let count = s.min(ny - 1) + 1 - (s + 1).saturating_sub(nx);
        off[s + 1] = off[s] + count as i32;
    }
    off
}

/// Points of each line the kernel keeps in shared memory (kernels/sparse.cu GRID_RING).
const RING: i64 = 8;

impl GridWalk {
    /// Lines a plane may have (a thread each; kernels/sparse.cu's launch bounds).
    pub const MOST_LINES: usize = 512;
    /// Distances a triangle's rows may have (the kernel's widest registers).
    pub const MOST_ENTRIES: usize = 16;

    /// The cheapest box this pattern (square, sorted columns, every diagonal
    /// present at `diag`) can be walked as, if any. Candidate line and plane
    /// lengths come from the distances between rows and their neighbours;
    /// a pattern with more than 64 distinct distances is not a stencil's.
    pub fn find(row_ptr: &[i32], col: &[i32], diag: &[i32]) -> Option<GridWalk> {
        let n = diag.len();
        let mut offsets = std::collections::BTreeSet::new();
        for r in 0..n {
            for &c in &col[triangle(row_ptr, diag, r, false)] {
                offsets.insert(r - c as usize);
                if offsets.len() > 64 {
                    return None;
                }
            }
        }
        if offsets.is_empty() {
            return None; // diagonal: nothing to walk
        }
        let near = |q: usize| [q.saturating_sub(1), q, q + 1];
        let mut boxes = Vec::new();
        for nx in offsets.iter().flat_map(|&o| near(o)).chain([n]) {
            if nx == 0 || !n.is_multiple_of(nx) {
                continue;
            }
            for ny in offsets.iter().flat_map(|&o| near(o / nx)).chain([n / nx]) {
                if ny == 0 || ny > Self::MOST_LINES || !n.is_multiple_of(nx * ny) {
                    continue;
                }
                boxes.push((nx, ny, n / (nx * ny)));
            }
        }
        boxes.sort_by_key(|&(nx, ny, nz)| (nx + ny + 8 * nz, nx));
        boxes.dedup();
        boxes.into_iter().find_map(|(nx, ny, nz)| {
            let skew = [Self::skew(row_ptr, col, diag, nx, ny, false)?, Self::skew(row_ptr, col, diag, nx, ny, true)?];
            Some(GridWalk { nx, ny, nz, skew })
        })
    }

    /// The walk where it measured faster than the chunked schedule (H100,
    /// BENCHMARKS.md): past one chunk's rows (sparse::cuda::sweep_chunk), on
    /// boxes of several planes (7-point 128^3: 1.27 against 1.62 ms an
    /// apply; 27-point 96^3: 5.8 against 7.4 ms).
    pub fn pick(row_ptr: &[i32], col: &[i32], diag: &[i32]) -> Option<GridWalk> {
        if diag.len() <= 8192 {
            return None;
        }
        Self::find(row_ptr, col, diag).filter(|w| w.nz > 1)
    }

    /// The lower (upper) sweep's factor in the walk's layout
    /// (kernels/sparse.cu sweep_grid): its distinct distances in walk index
    /// in the rows' CSR order (descending for the lower sweep, ascending for
    /// the upper, which walks from the last row), each one's step in the
    /// box, a bit per distance a point has, by walk index, and where each
    /// entry comes from in the CSR values, by distance then walk index (0
    /// where a point lacks it), then, upper, U's diagonal. None where the
    /// box does not hold the stencil (`steps`; `find` has checked it).
    pub fn layout(&self, row_ptr: &[i32], col: &[i32], diag: &[i32], upper: bool) -> Option<WalkLayout> {
        let n = diag.len();
        let mut steps = Self::steps(row_ptr, col, diag, self.nx, self.ny, upper)?;
        steps.sort_unstable_by_key(|&(d, _)| if upper { d } else { -d });
        let walk = |k: usize| if upper { n - 1 - k } else { k };
        let mut mask = vec![0u32; n];
        let mut from = vec![0i32; (steps.len() + upper as usize) * n];
        for r in 0..n {
            let w = walk(r);
            for k in triangle(row_ptr, diag, r, upper) {
                let d = (w - walk(col[k] as usize)) as i64;
                let e = steps.iter().position(|&(o, _)| o == d).expect("a distance steps() counted");
                mask[w] |= 1 << e;
                from[e * n + w] = k as i32;
            }
            if upper {
                from[steps.len() * n + w] = diag[r];
            }
        }
        // in its own plane an entry is read from the ring at (line + dj, point + di); elsewhere dj = di = i32::MIN marks it
        let ring = |&(_, [dk, dj, di]): &(i64, [i64; 3])| if dk == 0 { (dj as i32, di as i32) } else { (i32::MIN, i32::MIN) };
        let (dj, di) = steps.iter().map(ring).unzip();
        Some(WalkLayout { off: steps.iter().map(|&(d, _)| d as i32).collect(), dj, di, mask, from })
    }

    /// The plane pipeline's layout of the lower (upper) sweep
    /// (kernels/sparse.cu sweep_pipe), where the box takes it: each
    /// triangle reads at most the point before on its line, the line before
    /// and the plane before, lines of at most `MOST_LINES` points, and a
    /// plane of at most PIPE_STEPS steps. The points are stored plane by
    /// plane, step by step (a point (i, j) at step i + j), a step's lines in
    /// order; `from` gives each entry's place in the CSR values by kind
    /// (the point before, the line before, the plane before, then, upper,
    /// U's diagonal), -1 where a point lacks it.
    pub fn pipeline(&self, row_ptr: &[i32], col: &[i32], diag: &[i32], upper: bool) -> Option<PipeLayout> {
        let (nx, ny, n) = (self.nx, self.ny, diag.len());
        if self.skew != [1, 1] || nx + ny > PIPE_STEPS || ny > Self::MOST_LINES {
            return None;
        }
        let kinds = [[0, 0, -1], [0, -1, 0], [-1, 0, 0]];
        let steps = Self::steps(row_ptr, col, diag, nx, ny, upper)?;
        let kind_of: Vec<(i64, usize)> =
            steps.iter().map(|&(d, st)| kinds.iter().position(|&k| k == st).map(|e| (d, e))).collect::<Option<_>>()?;
        let step_off = pipe_step_offsets(nx, ny);
        let area = nx * ny;
        let pos = |w: usize| {
            let (j, i) = (w % area / nx, w % nx);
            let s = i + j;
            (w / area * area) as i32 + step_off[s] + (j - (s + 1).saturating_sub(nx)) as i32
        };
        let walk = |k: usize| if upper { n - 1 - k } else { k };
        // upper: U's diagonal twice, the second for its reciprocal (SyncFreeSweeps::refresh)
        let mut from = vec![-1i32; (3 + 2 * upper as usize) * n];
        for r in 0..n {
            let (w, p) = (walk(r), pos(walk(r)) as usize);
            for k in triangle(row_ptr, diag, r, upper) {
                let d = (w - walk(col[k] as usize)) as i64;
                let e = kind_of.iter().find(|&&(o, _)| o == d).expect("a distance steps() counted").1;
                from[e * n + p] = k as i32;
            }
            if upper {
                from[3 * n + p] = diag[r];
                from[4 * n + p] = diag[r];
            }
        }
        Some(PipeLayout { step_off, from })
    }

    /// Both sweeps' plane-pipeline layouts (lower, upper), where the box
    /// takes the pipeline in both triangles (`pipeline`).
    pub fn pipelines(&self, row_ptr: &[i32], col: &[i32], diag: &[i32]) -> Option<[PipeLayout; 2]> {
        Some([self.pipeline(row_ptr, col, diag, false)?, self.pipeline(row_ptr, col, diag, true)?])
    }

    /// The distances in walk index that the lower (upper) sweep's rows read
    /// on box nx x ny, each with its step in the box (planes, lines, points),
    /// in the order first met; None where a distance is not the same step
    /// at every point, or past MOST_ENTRIES of them. The upper sweep is read
    /// as the kernel walks it, from the last row (row -> n - 1 - row).
    fn steps(row_ptr: &[i32], col: &[i32], diag: &[i32], nx: usize, ny: usize, upper: bool) -> Option<Vec<(i64, [i64; 3])>> {
        let n = diag.len() as i64;
        let (nx, area) = (nx as i64, (nx * ny) as i64);
        let walk = |k: i64| if upper { n - 1 - k } else { k };
        let at = |w: i64| [w / area, w % area / nx, w % nx];
        let mut steps: Vec<(i64, [i64; 3])> = Vec::new();
        for r in 0..n as usize {
            let (w, [k, j, i]) = (walk(r as i64), at(walk(r as i64)));
            for &c in &col[triangle(row_ptr, diag, r, upper)] {
                let (wc, [kc, jc, ic]) = (walk(c as i64), at(walk(c as i64)));
                let step = [kc - k, jc - j, ic - i];
                match steps.iter().find(|(d, _)| *d == w - wc) {
                    Some((_, s)) if *s != step => return None,
                    Some(_) => {}
                    None if steps.len() == Self::MOST_ENTRIES => return None,
                    None => steps.push((w - wc, step)),
                }
            }
        }
        Some(steps)
    }

    /// The lower (upper) sweep's skew on box nx x ny, or None where the box
    /// does not hold the stencil (`steps`) or a row reads a neighbour the
    /// walk does not have by then: in its own plane, only points of its own
    /// line up to RING behind, or of the previous line within the ring's
    /// reach.
    fn skew(row_ptr: &[i32], col: &[i32], diag: &[i32], nx: usize, ny: usize, upper: bool) -> Option<usize> {
        let (mut lo, mut hi) = (i64::MAX, i64::MIN); // previous-line reach, relative to the row's point
        for (_, [dk, dj, di]) in Self::steps(row_ptr, col, diag, nx, ny, upper)? {
            if dk != 0 || (dj == 0 && di < 0 && -di <= RING) {
                continue; // an earlier plane (polled in global memory), or its own line
            }
            if dj != -1 {
                return None;
            }
            lo = lo.min(di);
            hi = hi.max(di);
        }
        let skew = (hi + 1).max(1);
        // the ring holds the previous line's points skew - RING .. skew - 1 ahead
        (lo == i64::MAX || lo >= skew - RING).then_some(skew as usize)
    }
}

/// Row r's entries in the lower (upper) strict triangle.
fn triangle(row_ptr: &[i32], diag: &[i32], r: usize, upper: bool) -> std::ops::Range<usize> {
    if upper {
        diag[r] as usize + 1..row_ptr[r + 1] as usize
    } else {
        row_ptr[r] as usize..diag[r] as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sparse::{build_pattern, gallery};

    impl GridWalk {
        fn sweep_skew(p: &crate::sparse::Pattern, nx: usize, ny: usize) -> Option<usize> {
            GridWalk::skew(&p.row_ptr, &p.col, &p.diag, nx, ny, false)
        }
    }

    fn walk_of((rp, ci, _): &gallery::CsrArrays) -> Option<GridWalk> {
        let p = build_pattern(rp.len() - 1, rp.len() - 1, rp, ci, 0).unwrap();
        GridWalk::find(&p.row_ptr, &p.col, &p.diag)
    }

    #[test]
    fn finds_the_box_of_generated_stencils() {
        assert_eq!(walk_of(&gallery::laplacian7(12)), Some(GridWalk { nx: 12, ny: 12, nz: 12, skew: [1, 1] }));
        assert_eq!(walk_of(&gallery::laplacian7_box([20, 9, 5])), Some(GridWalk { nx: 20, ny: 9, nz: 5, skew: [1, 1] }));
        // 27 points: a row reads the previous line one point ahead
        assert_eq!(walk_of(&gallery::laplacian27(10)), Some(GridWalk { nx: 10, ny: 10, nz: 10, skew: [2, 2] }));
        assert_eq!(walk_of(&gallery::convection_diffusion(11, 3.0)).map(|w| (w.nx, w.ny, w.nz)), Some((11, 11, 11)));
        // a plane of 5 points: one block walks it all
        assert_eq!(walk_of(&gallery::laplacian7_box([40, 30, 1])), Some(GridWalk { nx: 40, ny: 30, nz: 1, skew: [1, 1] }));
    }

    #[test]
    fn lays_out_each_triangle_by_distance_in_csr_order() {
        let (rp, ci, _) = gallery::laplacian7_box([10, 4, 3]);
        let p = build_pattern(120, 120, &rp, &ci, 0).unwrap();
        let w = GridWalk::find(&p.row_ptr, &p.col, &p.diag).unwrap();
        assert_eq!((w.nx, w.ny, w.nz), (10, 4, 3));
        let lower = w.layout(&p.row_ptr, &p.col, &p.diag, false).unwrap();
        // (0, 0, -1), (0, -1, 0), (-1, 0, 0): the first in an earlier plane
        assert_eq!(
            (lower.off.clone(), lower.dj.clone(), lower.di.clone()),
            (vec![40, 10, 1], vec![i32::MIN, -1, 0], vec![i32::MIN, 0, -1])
        );
        let upper = w.layout(&p.row_ptr, &p.col, &p.diag, true).unwrap();
        assert_eq!(upper.off, vec![1, 10, 40]); // walked from the last row: the nearest column first
        for (r, bits) in [(0usize, 0u32), (1, 0b100), (10, 0b010), (40, 0b001), (51, 0b111)] {
            assert_eq!(lower.mask[r], bits, "row {r}");
            for e in (0..3).filter(|e| bits >> e & 1 == 1) {
                // each entry comes from that row's CSR entry at that distance
                assert_eq!(r as i32 - p.col[lower.from[e * 120 + r] as usize], lower.off[e], "row {r}");
            }
        }
        // upper, by walk index: row 0 (walked last) reads all three, row 119 (first) none; U's diagonal after
        assert_eq!((upper.mask[119], upper.mask[0]), (0b111, 0));
        assert_eq!(upper.from[3 * 120 + 119], p.diag[0]);
    }

    #[test]
    fn lays_out_the_pipeline_step_by_step_and_reversed_for_the_upper_sweep() {
        let (nx, ny, nz) = (5, 3, 2);
        let n = nx * ny * nz;
        let (rp, ci, _) = gallery::laplacian7_box([nx, ny, nz]);
        let p = build_pattern(n, n, &rp, &ci, 0).unwrap();
        let w = GridWalk::find(&p.row_ptr, &p.col, &p.diag).unwrap();
        let (lower, upper) =
            (w.pipeline(&p.row_ptr, &p.col, &p.diag, false).unwrap(), w.pipeline(&p.row_ptr, &p.col, &p.diag, true).unwrap());
        // a 5 x 3 plane: steps hold 1, 2, 3, 3, 3, 2, 1 points
        assert_eq!(lower.step_off, vec![0, 1, 3, 6, 9, 12, 14, 15]);
        // the lower sweep's position of each row (plane by plane, step by step, a step's lines in order)
        let pos = |r: usize| {
            let (k, j, i) = (r / 15, r % 15 / 5, r % 5);
            let s = i + j;
            k * 15 + lower.step_off[s] as usize + j - (s + 1).saturating_sub(5)
        };
        for r in 0..n {
            let (k, j, i) = (r / 15, r % 15 / 5, r % 5);
            // each kind comes from the row's CSR entry at that neighbour, or is absent on the box's faces
            for (e, has, c) in [(0, i > 0, r.wrapping_sub(1)), (1, j > 0, r.wrapping_sub(5)), (2, k > 0, r.wrapping_sub(15))] {
                let f = lower.from[e * n + pos(r)];
                assert_eq!(f >= 0, has, "row {r}, kind {e}");
                if has {
                    assert_eq!(p.col[f as usize] as usize, c, "row {r}, kind {e}");
                }
            }
            // the upper sweep's order is the lower's reversed: row r sits at n - 1 - pos(r), its diagonal there
            assert_eq!(upper.from[3 * n + n - 1 - pos(r)], p.diag[r], "row {r}");
            let f = upper.from[n - 1 - pos(r)];
            assert_eq!(f >= 0, i + 1 < nx, "row {r}: the point after");
            if f >= 0 {
                assert_eq!(p.col[f as usize] as usize, r + 1);
            }
        }
        // positions are a permutation
        let mut seen: Vec<usize> = (0..n).map(pos).collect();
        seen.sort();
        assert!(seen.iter().enumerate().all(|(a, &b)| a == b));
        // 27 points (skew 2) and the 27-point plane's diagonals are not the pipeline's
        let (rp, ci, _) = gallery::laplacian27(6);
        let p = build_pattern(216, 216, &rp, &ci, 0).unwrap();
        let w = GridWalk::find(&p.row_ptr, &p.col, &p.diag).unwrap();
        assert!(w.pipeline(&p.row_ptr, &p.col, &p.diag, false).is_none());
    }

    #[test]
    fn refuses_what_it_cannot_walk() {
        // a diagonal matrix: nothing to walk
        let n = 64i64;
        assert_eq!(walk_of(&((0..=n).collect(), (0..n).collect(), vec![1.0; n as usize])), None);
        // the 7-point pattern with one far entry added in a plane
        let (mut rp, mut ci, mut v) = gallery::laplacian7(8);
        let row = 8 * 8 * 3 + 8 * 5 + 4; // (4, 5, 3) reads (4, 2, 3): three lines back
        let at = rp[row] as usize;
        ci.insert(at, row as i64 - 24);
        v.insert(at, -0.1);
        for p in rp.iter_mut().skip(row + 1) {
            *p += 1;
        }
        // build_pattern sorts its columns; the box of 8 x 8 planes no longer
        // holds it (some box of one-point lines still does, slowly)
        let found = walk_of(&(rp, ci, v)).map(|w| (w.nx, w.ny, w.nz));
        assert!(found.is_some() && found != Some((8, 8, 8)), "{found:?}");
        // a box whose distances are not one step everywhere: the 8^3 stencil as 8 x 4 planes
        let (rp, ci, _) = gallery::laplacian7(8);
        let p = build_pattern(512, 512, &rp, &ci, 0).unwrap();
        assert_eq!(GridWalk::sweep_skew(&p, 8, 4), None);
        // an unstructured pattern: more distances than a stencil has
        let n = 500usize;
        let (mut rp, mut ci) = (vec![0i64], Vec::new());
        for r in 0..n {
            let mut cols: Vec<i64> = vec![r as i64];
            cols.extend((1..4).map(|t| ((r * 7919 + t * 104729) % n) as i64));
            cols.sort();
            cols.dedup();
            ci.extend(&cols);
            rp.push(ci.len() as i64);
        }
        let v = vec![1.0; ci.len()];
        assert_eq!(walk_of(&(rp, ci, v)), None);
    }
}
