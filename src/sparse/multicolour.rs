//! Multicolour ILU(0): the rows reordered by a greedy colouring of the
//! matrix's graph, no two coupled rows of one colour, and ILU(0) of the
//! reordered matrix P A P^T. A triangular sweep then has as many dependency
//! levels as colours (2 on a 7-point grid, 8 on a 27-point one) instead of
//! hundreds: a launch a colour, each a pass over that colour's rows.
//! It is another preconditioner than ILU(0) in the caller's order (more
//! iterations, Saad, "Iterative Methods for Sparse Linear Systems", 12.4;
//! AmgX's multicolour ILU), offered beside it and never substituted. The
//! CPU reference is the serial ILU(0) of P A P^T (super::cpu); the device
//! factors it level by level and sweeps it a colour a launch, P and P^T
//! folded in (kernels/sparse.cu `ilu_colour`), equal to rounding.
//! Where ILU(0) leaves A's off-diagonal entries as they are (`triangle`),
//! the same M is also applied split (`Split`, krylov::run_split): the
//! method iterates on L^-1 (P A P^T) U^-1, which Eisenstat's trick applies
//! with one pass over each triangle and no product with A (`ilu_split`).

use super::cpu::{self, lower_sum, upper_sum};
use super::{cuda, DevicePattern, Pattern};
use crate::array::Buffer;
use crate::error::Result;
use crate::gpu::{DeviceBuffer, Gpu};
use crate::krylov::Operator;

/// The colouring and the reordered matrix's pattern.
pub struct Colouring {
    pub colours: usize,
    /// Where each colour's rows start in P A P^T (then the row count).
    pub colour_start: Vec<usize>,
    /// Row i of P A P^T is row perm[i] of A: the rows colour by colour, in
    /// the caller's order within a colour.
    pub perm: Vec<i32>,
    /// Row j of A is row inverse[j] of P A P^T.
    pub inverse: Vec<i32>,
    /// P A P^T's pattern, columns sorted.
    pub pattern: Pattern,
    /// Stored entry k of P A P^T is A's stored entry value_from[k].
    pub value_from: Vec<i32>,
}

impl Colouring {
    /// First-fit colouring of the graph of A + A^T in the caller's row order
    /// (a 7-point grid in natural order gets the red-black checkerboard),
    /// and P A P^T's pattern. `p` is square with every diagonal present.
    pub fn new(p: &Pattern) -> Colouring {
        let n = p.nrows;
        let (rp, col) = (&p.row_ptr, &p.col);
        // a row's neighbours both ways
        let graph = (rp.iter().map(|&k| k as usize).collect(), col.iter().map(|&j| j as u32).collect());
        let (ptr, adj) = super::symmetrised(graph);
        let mut colour = vec![usize::MAX; n];
        // seen[c] == i: colour c is taken by a neighbour of row i
        let mut seen: Vec<usize> = Vec::new();
        for i in 0..n {
            for &j in &adj[ptr[i]..ptr[i + 1]] {
                if let Some(&c) = colour.get(j as usize).filter(|&&c| c != usize::MAX) {
                    seen[c] = i;
                }
            }
            let c = seen.iter().position(|&s| s != i).unwrap_or(seen.len());
            if c == seen.len() {
                seen.push(usize::MAX);
            }
            colour[i] = c;
        }
        let colours = seen.len();
        let mut start = vec![0usize; colours + 1];
        colour.iter().for_each(|&c| start[c + 1] += 1);
        (0..colours).for_each(|c| start[c + 1] += start[c]);
        let colour_start = start.clone();
        let (mut perm, mut inverse) = (vec![0i32; n], vec![0i32; n]);
        for (j, &c) in colour.iter().enumerate() {
            perm[start[c]] = j as i32;
            inverse[j] = start[c] as i32;
            start[c] += 1;
        }
        let (mut row_ptr, mut new_col, mut value_from, mut diag) =
            (Vec::with_capacity(n + 1), Vec::with_capacity(col.len()), Vec::with_capacity(col.len()), vec![-1i32; n]);
        row_ptr.push(0i32);
        let mut entries: Vec<(i32, i32)> = Vec::new();
        for (i, &old) in perm.iter().enumerate() {
            let (s, e) = (rp[old as usize] as usize, rp[old as usize + 1] as usize);
            entries.clear();
            entries.extend((s..e).map(|k| (inverse[col[k] as usize], k as i32)));
            entries.sort_unstable();
            for &(j, k) in &entries {
                if j as usize == i {
                    diag[i] = new_col.len() as i32;
                }
                new_col.push(j);
                value_from.push(k);
            }
            row_ptr.push(new_col.len() as i32);
        }
        let pattern = Pattern {
            nrows: n,
            ncols: n,
            row_ptr: std::sync::Arc::new(row_ptr),
            col: std::sync::Arc::new(new_col),
            diag,
            slot_of: None,
            caller_nnz: value_from.len(),
        };
        Colouring { colours, colour_start, perm, inverse, pattern, value_from }
    }

    /// The rows of each colour.
    pub fn colour_rows(&self) -> Vec<usize> {
        self.colour_start.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// P A P^T's values from A's stored ones.
    pub fn reorder_values(&self, a: &[f64]) -> Vec<f64> {
        self.value_from.iter().map(|&k| a[k as usize]).collect()
    }

    /// ILU(0) of P A P^T in place on its values; a bad pivot is named by
    /// the caller's row.
    pub fn factor(&self, lu: &mut [f64]) -> Result<()> {
        cpu::ilu0_renumbered(&self.pattern, lu, &|i| self.perm[i] as usize)
    }

    /// z = P^T U^-1 L^-1 P r with the factors of P A P^T (the CPU reference).
    pub fn apply(&self, lu: &[f64], r: &[f64], z: &mut [f64]) {
        let mut y = vec![0.0; r.len()];
        self.lower_inverse(lu, r, &mut y);
        self.upper_inverse(lu, &y, z);
    }

    /// Three rows i > k < j of P A P^T, coupled each to each, that make
    /// ILU(0) change the entry a_ij (i != j), as the caller's rows; None:
    /// ILU(0) leaves A's off-diagonal entries as they are (a 7-point or
    /// 5-point grid), so the factors are (D~ + L_A) D~^-1 (D~ + U_A) and
    /// Eisenstat's split form holds.
    pub fn triangle(&self) -> Option<[usize; 3]> {
        let p = &self.pattern;
        let (rp, col, diag) = (&p.row_ptr, &p.col, &p.diag);
        // in_row[j] == i: row i has column j
        let mut in_row = vec![usize::MAX; p.nrows];
        for i in 0..p.nrows {
            let (s, d, e) = (rp[i] as usize, diag[i] as usize, rp[i + 1] as usize);
            col[s..e].iter().for_each(|&j| in_row[j as usize] = i);
            for &k in &col[s..d] {
                let k = k as usize;
                let upper = &col[diag[k] as usize + 1..rp[k + 1] as usize];
                if let Some(&j) = upper.iter().find(|&&j| j as usize != i && in_row[j as usize] == i) {
                    return Some([i, k, j as usize].map(|r| self.perm[r] as usize));
                }
            }
        }
        None
    }

    /// e = D - 2 D~ in P A P^T's order: A's diagonal (from A's stored
    /// values `a`) less twice the pivots of the factors `lu`.
    pub fn split_shift(&self, a: &[f64], lu: &[f64]) -> Vec<f64> {
        let d = &self.pattern.diag;
        d.iter().map(|&k| a[self.value_from[k as usize] as usize] - 2.0 * lu[k as usize]).collect()
    }

    /// out = L^-1 (P A P^T) U^-1 v, Eisenstat's way (no triangle: `triangle`):
    /// t = U^-1 v, out = D~ t + L^-1 (v + e t) (the CPU reference of
    /// kernels/sparse.cu `ilu_split`).
    pub fn split_apply(&self, lu: &[f64], e: &[f64], v: &[f64], out: &mut [f64]) {
        let p = &self.pattern;
        let mut t = vec![0.0; p.nrows];
        for i in (0..p.nrows).rev() {
            t[i] = (v[i] - upper_sum(p, lu, i, &t)) / lu[p.diag[i] as usize];
        }
        let mut s = vec![0.0; p.nrows];
        for i in 0..p.nrows {
            s[i] = v[i] + e[i] * t[i] - lower_sum(p, lu, i, &s);
            out[i] = lu[p.diag[i] as usize] * t[i] + s[i];
        }
    }

    /// y = L^-1 P b.
    pub fn lower_inverse(&self, lu: &[f64], b: &[f64], y: &mut [f64]) {
        for (i, &from) in self.perm.iter().enumerate() {
            y[i] = b[from as usize] - lower_sum(&self.pattern, lu, i, y);
        }
    }

    /// y = U P x.
    pub fn upper_times(&self, lu: &[f64], x: &[f64], y: &mut [f64]) {
        let p = &self.pattern;
        let px: Vec<f64> = self.perm.iter().map(|&j| x[j as usize]).collect();
        for (i, yi) in y.iter_mut().enumerate() {
            *yi = lu[p.diag[i] as usize] * px[i] + upper_sum(p, lu, i, &px);
        }
    }

    /// y = L r in P A P^T's order.
    pub fn lower_times(&self, lu: &[f64], r: &[f64], y: &mut [f64]) {
        for (i, yi) in y.iter_mut().enumerate() {
            *yi = r[i] + lower_sum(&self.pattern, lu, i, r);
        }
    }

    /// x = P^T U^-1 y.
    pub fn upper_inverse(&self, lu: &[f64], y: &[f64], x: &mut [f64]) {
        let p = &self.pattern;
        let mut t = vec![0.0; p.nrows];
        for i in (0..p.nrows).rev() {
            t[i] = (y[i] - upper_sum(p, lu, i, &t)) / lu[p.diag[i] as usize];
            x[self.perm[i] as usize] = t[i];
        }
    }
}

/// The colouring on the device: P, the reordered pattern, the levels its
/// factorisation walks, and the sweeps' scratch vector.
pub struct DeviceColouring {
    perm: DeviceBuffer<i32>,
    value_from: DeviceBuffer<i32>,
    /// A's stored entry of each diagonal entry of P A P^T (the split form's D).
    diagonal_from: DeviceBuffer<i32>,
    pub dp: DevicePattern,
    /// The factorisation's levels (at most the colours).
    pub lower: cuda::DeviceLevels,
    /// L^-1 P r, then U^-1 L^-1 P r; the split form's t.
    y: DeviceBuffer<f64>,
    /// The split form's pivots D~ (its last colour's t is v / D~ where read).
    pivots: DeviceBuffer<f64>,
}

impl DeviceColouring {
    pub fn new(g: &Gpu, c: &Colouring) -> Result<DeviceColouring> {
        let p = &c.pattern;
        let lv = super::solver::levels(&p.row_ptr, &p.col, &p.diag);
        let diagonal_from: Vec<i32> = p.diag.iter().map(|&k| c.value_from[k as usize]).collect();
        Ok(DeviceColouring {
            perm: cuda::upload(g, &c.perm)?,
            value_from: cuda::upload(g, &c.value_from)?,
            diagonal_from: cuda::upload(g, &diagonal_from)?,
            dp: DevicePattern::new(g, p, 1)?,
            lower: cuda::DeviceLevels::new(g, &lv.lower_rows, &lv.lower_ptr)?,
            y: g.alloc(p.nrows.max(1))?,
            pivots: g.alloc(1)?,
        })
    }

    /// P A P^T's values into `lu` from A's stored `a`.
    pub fn reorder_values(&self, g: &Gpu, a: &DeviceBuffer<f64>, lu: &DeviceBuffer<f64>) -> Result<()> {
        crate::array::cuda::gather(g, self.value_from.len(), a, &self.value_from, lu)
    }

    /// The passes of colouring `c` over its factors `lu` of P A P^T, from r
    /// into `out` as `cuda::ColourPasses` says (Apply: z = P^T U^-1 L^-1 P r,
    /// out may be r; UpperInverse reads this scratch y); with `sc`: skipped
    /// once a device-driven solve has stopped.
    #[allow(clippy::too_many_arguments)]
    pub fn passes(
        &self,
        g: &Gpu,
        c: &Colouring,
        lu: &DeviceBuffer<f64>,
        r: &DeviceBuffer<f64>,
        out: &DeviceBuffer<f64>,
        passes: cuda::ColourPasses,
        sc: Option<&DeviceBuffer<f64>>,
    ) -> Result<()> {
        use cuda::ColourPasses::*;
        let (y, z) = match passes {
            Apply | UpperInverse => (&self.y, out),
            Lower | UpperTimes | LowerTimes => (out, out),
        };
        cuda::ilu_colours(g, &self.dp, &c.colour_start, &self.perm, lu, (r, y, z), passes, sc)
    }

    /// The split form's e = D - 2 D~ of colouring `c` from A's stored values
    /// `a` and the factors `lu`, and its pivots D~ (kept here).
    pub fn split_shift(
        &mut self,
        g: &Gpu,
        c: &Colouring,
        a: &DeviceBuffer<f64>,
        lu: &DeviceBuffer<f64>,
        e: &DeviceBuffer<f64>,
    ) -> Result<()> {
        let n = c.pattern.nrows;
        if self.pivots.len() < n {
            self.pivots = g.alloc(n)?;
        }
        cuda::ilu_split_shift(g, &self.dp, &self.diagonal_from, a, lu, (e, &self.pivots), n)
    }
}

/// Multicolour ILU(0) M = P^T L U P applied split: the Krylov method
/// iterates on L^-1 (P A P^T) U^-1 y = L^-1 P b, and x = P^T U^-1 y
/// (krylov::Split). Each map below is an `Operator` over the factors, on
/// the host (the CPU reference above) or the device.
#[derive(Clone, Copy)]
pub enum SplitMap {
    /// y -> L^-1 (P A P^T) U^-1 y, Eisenstat's way: the method's operator.
    Operator,
    /// b -> L^-1 P b.
    LowerInverse,
    /// x -> U P x.
    UpperTimes,
    /// y -> P^T U^-1 y.
    UpperInverse,
    /// r -> L r: the split residual to the caller's, P-ordered (the same norm).
    LowerTimes,
}

/// One `SplitMap` of colouring `c` with its factors `lu` and e = D - 2 D~ (`shift`).
pub struct Split<'a> {
    pub c: &'a Colouring,
    pub device: Option<&'a DeviceColouring>,
    pub lu: &'a Buffer<f64>,
    pub shift: &'a Buffer<f64>,
    pub map: SplitMap,
}

impl Operator for Split<'_> {
    fn apply_host(&self, x: &[f64], y: &mut [f64]) -> Result<()> {
        let lu = self.lu.host()?;
        match self.map {
            SplitMap::Operator => self.c.split_apply(lu, self.shift.host()?, x, y),
            SplitMap::LowerInverse => self.c.lower_inverse(lu, x, y),
            SplitMap::UpperTimes => self.c.upper_times(lu, x, y),
            SplitMap::UpperInverse => self.c.upper_inverse(lu, x, y),
            SplitMap::LowerTimes => self.c.lower_times(lu, x, y),
        }
        Ok(())
    }
    fn apply_device(&self, g: &Gpu, x: &DeviceBuffer<f64>, y: &DeviceBuffer<f64>, sc: Option<&DeviceBuffer<f64>>) -> Result<()> {
        let d = self.device.ok_or_else(crate::array::mixed_backends)?;
        let lu = self.lu.device()?;
        let passes = match self.map {
            SplitMap::Operator => {
                return cuda::ilu_split(g, &d.dp, &self.c.colour_start, lu, (self.shift.device()?, &d.pivots), (x, &d.y, y), sc)
            }
            SplitMap::LowerInverse => cuda::ColourPasses::Lower,
            SplitMap::UpperTimes => cuda::ColourPasses::UpperTimes,
            SplitMap::LowerTimes => cuda::ColourPasses::LowerTimes,
            SplitMap::UpperInverse => {
                crate::array::cuda::update(g, x.len(), &d.y, 1.0, x, 0.0, None, 0.0)?;
                cuda::ColourPasses::UpperInverse
            }
        };
        d.passes(g, self.c, lu, x, y, passes, sc)
    }
}
