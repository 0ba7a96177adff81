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

use super::{cpu, cuda, DevicePattern, Pattern};
use crate::error::Result;
use crate::gpu::{DeviceBuffer, Gpu};

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
        let rp: Vec<f64> = self.perm.iter().map(|&j| r[j as usize]).collect();
        let mut zp = vec![0.0; rp.len()];
        cpu::ilu0_apply(&self.pattern, lu, &rp, &mut zp);
        for (zj, &i) in z.iter_mut().zip(&self.inverse) {
            *zj = zp[i as usize];
        }
    }
}

/// The colouring on the device: P, the reordered pattern, the levels its
/// factorisation walks, and the sweeps' scratch vector.
pub struct DeviceColouring {
    perm: DeviceBuffer<i32>,
    value_from: DeviceBuffer<i32>,
    pub dp: DevicePattern,
    /// The factorisation's levels (at most the colours).
    pub lower: cuda::DeviceLevels,
    /// L^-1 P r, then U^-1 L^-1 P r.
    y: DeviceBuffer<f64>,
}

impl DeviceColouring {
    pub fn new(g: &Gpu, c: &Colouring) -> Result<DeviceColouring> {
        let p = &c.pattern;
        let lv = super::solver::levels(&p.row_ptr, &p.col, &p.diag);
        Ok(DeviceColouring {
            perm: cuda::upload(g, &c.perm)?,
            value_from: cuda::upload(g, &c.value_from)?,
            dp: DevicePattern::new(g, p, 1)?,
            lower: cuda::DeviceLevels::new(g, &lv.lower_rows, &lv.lower_ptr)?,
            y: g.alloc(p.nrows.max(1))?,
        })
    }

    /// P A P^T's values into `lu` from A's stored `a`.
    pub fn reorder_values(&self, g: &Gpu, a: &DeviceBuffer<f64>, lu: &DeviceBuffer<f64>) -> Result<()> {
        crate::array::cuda::gather(g, self.value_from.len(), a, &self.value_from, lu)
    }

    /// z = P^T U^-1 L^-1 P r with the factors `lu` of colouring `c`'s
    /// P A P^T (z may be r; with `sc`: skipped once a device-driven solve
    /// has stopped).
    pub fn apply(
        &self,
        g: &Gpu,
        c: &Colouring,
        lu: &DeviceBuffer<f64>,
        r: &DeviceBuffer<f64>,
        z: &DeviceBuffer<f64>,
        sc: Option<&DeviceBuffer<f64>>,
    ) -> Result<()> {
        cuda::ilu_colours(g, &self.dp, &c.colour_start, &self.perm, lu, (r, &self.y, z), sc)
    }
}
