//! A^T beside A, for BiCG: the transposed pattern with, for each of its
//! entries, the entry of A it comes from, so that new values of A reach A^T
//! in one gather; and ILU(0)'s factors of A turned into factors in A^T's
//! pattern that the same triangular solves apply:
//! M^T = (L U)^T = U^T L^T = (U^T D^-1) (D L^T), D = diag(U), a unit lower
//! factor and an upper one with U's pivots on its diagonal.

use super::{cpu, cuda, Buffer, Csr, Pattern};
use crate::error::Result;
use crate::gpu::DeviceBuffer;
use rayon::prelude::*;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering::Relaxed};

/// The transposed pattern of an nrows x ncols CSR pattern (columns sorted
/// within rows), and for each of its entries the entry it came from.
pub fn transpose_pattern(nrows: usize, ncols: usize, row_ptr: &[i32], col: &[i32]) -> (Vec<i32>, Vec<i32>, Vec<u32>) {
    if col.len() < PARALLEL_ENTRIES {
        return transpose_serial(nrows, ncols, row_ptr, col);
    }
    // the rows cut into a chunk a thread: each chunk's count per column, then
    // its first slot in each column after the earlier chunks', so each chunk
    // fills its slots in row order and the result is the serial one
    let chunks = rayon::current_num_threads().clamp(1, col.len() / PARALLEL_ENTRIES);
    let bounds: Vec<usize> = (0..=chunks).map(|t| t * nrows / chunks).collect();
    let mut starts: Vec<Vec<i32>> = bounds
        .par_windows(2)
        .map(|w| {
            let mut count = vec![0i32; ncols];
            col[row_ptr[w[0]] as usize..row_ptr[w[1]] as usize].iter().for_each(|&c| count[c as usize] += 1);
            count
        })
        .collect();
    let mut rp = vec![0i32; ncols + 1];
    for j in 0..ncols {
        let mut at = rp[j];
        for count in starts.iter_mut() {
            at += std::mem::replace(&mut count[j], at);
        }
        rp[j + 1] = at;
    }
    let (ci, from): (Vec<AtomicI32>, Vec<AtomicU32>) =
        (0..col.len()).into_par_iter().map(|_| (AtomicI32::new(0), AtomicU32::new(0))).unzip();
    bounds.par_windows(2).zip(starts).for_each(|(w, mut fill)| {
        for i in w[0]..w[1] {
            for k in row_ptr[i] as usize..row_ptr[i + 1] as usize {
                let at = &mut fill[col[k] as usize];
                ci[*at as usize].store(i as i32, Relaxed);
                from[*at as usize].store(k as u32, Relaxed);
                *at += 1;
            }
        }
    });
    (rp, ci.into_par_iter().map(AtomicI32::into_inner).collect(), from.into_par_iter().map(AtomicU32::into_inner).collect())
}

/// Below this many entries the transpose runs on one thread.
const PARALLEL_ENTRIES: usize = 1 << 16;

fn transpose_serial(nrows: usize, ncols: usize, row_ptr: &[i32], col: &[i32]) -> (Vec<i32>, Vec<i32>, Vec<u32>) {
    let mut rp = vec![0i32; ncols + 1];
    for &c in col {
        rp[c as usize + 1] += 1;
    }
    for j in 0..ncols {
        rp[j + 1] += rp[j];
    }
    let mut fill: Vec<i32> = rp[..ncols].to_vec();
    let (mut ci, mut from) = (vec![0i32; col.len()], vec![0u32; col.len()]);
    for i in 0..nrows {
        for k in row_ptr[i] as usize..row_ptr[i + 1] as usize {
            let at = &mut fill[col[k] as usize];
            ci[*at as usize] = i as i32;
            from[*at as usize] = k as u32;
            *at += 1;
        }
    }
    (rp, ci, from)
}

pub struct Transposed {
    /// A^T, its values kept equal to A's by `refresh`.
    pub csr: Csr,
    /// Entry k of A^T is entry from[k] of A, on the host and where A lives.
    from: Vec<u32>,
    from_device: Option<DeviceBuffer<i32>>,
}

impl Transposed {
    /// A^T's pattern and gather map; its values are zero until `refresh`.
    pub fn new(a: &Csr) -> Result<Transposed> {
        let p = &a.pattern;
        let (row_ptr, col, from) = transpose_pattern(p.nrows, p.ncols, &p.row_ptr, &p.col);
        let diag = (0..p.ncols)
            .map(|i| {
                let row = row_ptr[i] as usize..row_ptr[i + 1] as usize;
                col[row.clone()].binary_search(&(i as i32)).map_or(-1, |k| (row.start + k) as i32)
            })
            .collect();
        let nnz = col.len();
        let pattern = Pattern {
            nrows: p.ncols,
            ncols: p.nrows,
            row_ptr: row_ptr.into(),
            col: col.into(),
            diag,
            slot_of: None,
            caller_nnz: nnz,
        };
        // zeros: the solver's first build (`refresh`) gathers A's values before any use
        let csr = Csr::new(a.ctx.clone(), pattern, &vec![0.0; nnz])?;
        let from_device = match a.ctx.gpu() {
            Some(g) => Some(cuda::upload(g, &from.iter().map(|&k| k as i32).collect::<Vec<_>>())?),
            None => None,
        };
        Ok(Transposed { csr, from, from_device })
    }

    /// A^T's values from A's `values` (where they live).
    pub fn refresh(&self, values: &Buffer<f64>) -> Result<()> {
        self.csr.rewrite_values(|at| match (at, values) {
            (Buffer::Host(at), Buffer::Host(v)) => {
                at.iter_mut().zip(&self.from).for_each(|(t, &k)| *t = v[k as usize]);
                Ok(())
            }
            (Buffer::Device(at), Buffer::Device(v)) => {
                let g = self.csr.ctx.device()?;
                let from = self.from_device.as_ref().ok_or_else(crate::array::mixed_backends)?;
                crate::array::cuda::gather(g, self.from.len(), v, from, at)
            }
            _ => Err(crate::array::mixed_backends()),
        })
    }

    /// The factors of M^T in A^T's pattern from ILU(0)'s `lu` of `a`, into `out`.
    pub fn ilu_factors(&self, a: &Csr, lu: &Buffer<f64>, out: &mut Buffer<f64>) -> Result<()> {
        let t = &self.csr.pattern;
        match (lu, out) {
            (Buffer::Host(lu), Buffer::Host(out)) => {
                out.resize(t.nnz(), 0.0);
                cpu::ilu_transpose(t, &self.from, &a.pattern.diag, lu, out);
                Ok(())
            }
            (Buffer::Device(lu), Buffer::Device(out)) => {
                let g = self.csr.ctx.device()?;
                let missing = crate::array::mixed_backends;
                let from = self.from_device.as_ref().ok_or_else(missing)?;
                let (dp, a_dp) = (self.csr.device.as_ref().ok_or_else(missing)?, a.device.as_ref().ok_or_else(missing)?);
                cuda::ilu_transpose(g, t.nrows, dp, from, &a_dp.diag, lu, out)
            }
            _ => Err(crate::array::mixed_backends()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The parallel transpose (a chunk of rows a thread, each filling its
    /// slots from its own offsets) equals the serial one, entry for entry,
    /// on a pattern large enough to take it in several chunks: random rows
    /// of a wide matrix, some of them empty.
    #[test]
    fn the_parallel_transpose_is_the_serial_one() {
        let (nrows, ncols) = (60_000usize, 3_001usize);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |m: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % m
        };
        let (mut row_ptr, mut col) = (vec![0i32], Vec::new());
        for _ in 0..nrows {
            let mut row: Vec<i32> = (0..next(12)).map(|_| next(ncols as u64) as i32).collect();
            row.sort_unstable();
            row.dedup();
            col.extend(row);
            row_ptr.push(col.len() as i32);
        }
        assert!(col.len() >= 4 * PARALLEL_ENTRIES, "several chunks");
        assert_eq!(transpose_pattern(nrows, ncols, &row_ptr, &col), transpose_serial(nrows, ncols, &row_ptr, &col));
    }
}
