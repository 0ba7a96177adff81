//! Sparse matrices (CSR) resident on the device, SpMV, vector operations and
//! the preconditioned Krylov solvers (CG, BiCGSTAB, GMRES, BiCG, CGS with
//! none / Jacobi / ILU(0) / AMG).
//!
//! A matrix is created from the caller's CSR arrays (0- or 1-based, int32 or
//! int64 indices), validated, stored sorted with duplicates summed, and kept
//! on the device. `update_values` refreshes the values for the same pattern
//! without any structural work; solvers notice the new values and refactor.

pub mod block;
pub mod cpu;
pub mod cuda;
pub mod gallery;
pub mod grid_walk;
pub mod mm;
pub mod multicolour;
pub mod solver;
pub mod transpose;

pub use crate::array::Buffer;
use crate::array::{lock_pair, Array, Storage};
use crate::context::{Backend, Context};
use crate::error::{Error, Result};
use crate::gpu::DeviceBuffer;
use rayon::prelude::*;
use std::sync::{Arc, Mutex, MutexGuard};

/// Index arrays shared, not copied, between a pattern and what reads it
/// (the AMG hierarchy's finest level: 4 bytes a nonzero that need no copy).
pub type Indices = Arc<Vec<i32>>;

/// The pattern, always kept on the host too (preconditioner analysis uses it).
pub struct Pattern {
    pub nrows: usize,
    pub ncols: usize,
    /// 0-based row pointers, nrows + 1.
    pub row_ptr: Indices,
    /// 0-based column indices, sorted and unique within each row.
    pub col: Indices,
    /// Position of each row's diagonal entry, or -1 where it has none.
    pub diag: Vec<i32>,
    /// Caller's entry k -> stored slot, when sorting or merging duplicates
    /// changed the order (None: the caller's order is the stored order).
    pub slot_of: Option<Vec<usize>>,
    /// Entries the caller passes (before duplicates were merged).
    pub caller_nnz: usize,
}

impl Pattern {
    pub fn nnz(&self) -> usize {
        self.col.len()
    }

    /// The same pattern taking its values in stored order (sorted by column
    /// within rows, duplicates already summed), as a matrix's own values are.
    pub fn in_stored_order(&self) -> Pattern {
        Pattern {
            nrows: self.nrows,
            ncols: self.ncols,
            row_ptr: self.row_ptr.clone(),
            col: self.col.clone(),
            diag: self.diag.clone(),
            slot_of: None,
            caller_nnz: self.nnz(),
        }
    }
}

/// The device copy of the pattern.
pub struct DevicePattern {
    pub row_ptr: DeviceBuffer<i32>,
    pub col: DeviceBuffer<i32>,
    pub diag: DeviceBuffer<i32>,
    /// Threads per row of the SpMV kernel, from the mean row length (for a
    /// block matrix, lanes per block row: block::cuda::lanes).
    pub threads_per_row: u32,
    /// The rows the SpMV takes a block each (scalar matrices made from a
    /// host pattern; None elsewhere: every row goes to its group).
    pub long_rows: Option<cuda::LongRows>,
}

impl DevicePattern {
    /// The host pattern `p` (of `block`-sized blocks) uploaded.
    pub fn new(g: &crate::gpu::Gpu, p: &Pattern, block: usize) -> Result<DevicePattern> {
        let threads_per_row = match block {
            1 => cuda::threads_per_row(p.nnz(), p.nrows),
            k => block::cuda::lanes(p.nnz(), p.nrows, k),
        };
        Ok(DevicePattern {
            row_ptr: cuda::upload(g, &p.row_ptr)?,
            col: cuda::upload(g, &p.col)?,
            diag: cuda::upload(g, &p.diag)?,
            threads_per_row,
            long_rows: match block {
                1 => cuda::LongRows::find(g, &p.row_ptr, threads_per_row)?,
                _ => None,
            },
        })
    }
}

pub struct Values {
    pub data: Buffer<f64>,
    /// Bumped by every update, so solvers know when to refactor.
    pub version: u64,
}

/// A sparse matrix in CSR, or in block CSR (BSR) when `block` > 1: then the
/// pattern is over block rows and columns, and each stored entry is a dense
/// `block` x `block` block of values, column-major (Fortran order).
pub struct Csr {
    pub ctx: Arc<Context>,
    pub pattern: Pattern,
    pub block: usize,
    pub device: Option<DevicePattern>,
    values: Mutex<Values>,
}

/// An index type the caller's CSR arrays may use.
pub trait Index: Copy {
    fn to_i64(self) -> i64;
}
impl Index for i32 {
    fn to_i64(self) -> i64 {
        self as i64
    }
}
impl Index for i64 {
    fn to_i64(self) -> i64 {
        self
    }
}

pub(crate) fn check_finite(values: &[f64]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(k) => Err(Error::invalid(format!(
            "{at_values_k} = {}: matrix values must be finite",
            values[k],
            at_values_k = crate::error::at("values", k)
        ))),
        None => Ok(()),
    }
}

/// Validates caller CSR arrays and builds the stored (sorted, merged) pattern.
pub fn build_pattern<I: Index>(nrows: usize, ncols: usize, row_ptr: &[I], col: &[I], base: i64) -> Result<Pattern> {
    if base != 0 && base != 1 {
        return Err(Error::invalid(format!("index_base = {base}: must be 0 or 1")));
    }
    if nrows >= i32::MAX as usize || ncols >= i32::MAX as usize || col.len() >= i32::MAX as usize {
        return Err(Error::unsupported(format!(
            "{nrows} x {ncols} with {} entries: fegpu stores int32 indices (fewer than 2^31 rows and entries)",
            col.len()
        )));
    }
    if row_ptr.len() <= nrows {
        return Err(Error::size(format!("row_ptr has {} entries: needs nrows + 1 = {}", row_ptr.len(), nrows + 1)));
    }
    let rp0 = |r: usize| row_ptr[r].to_i64().saturating_sub(base);
    if rp0(0) != 0 {
        return Err(Error::invalid(format!(
            "{} = {}: must equal index_base = {base}",
            crate::error::at("row_ptr", 0),
            row_ptr[0].to_i64()
        )));
    }
    for r in 0..nrows {
        if rp0(r + 1) < rp0(r) {
            return Err(Error::invalid(format!(
                "row_ptr is not monotone: {rp_r1} = {} < {rp_r} = {}",
                row_ptr[r + 1].to_i64(),
                row_ptr[r].to_i64(),
                rp_r = crate::error::at("row_ptr", r),
                rp_r1 = crate::error::at("row_ptr", r + 1)
            )));
        }
    }
    if rp0(nrows) != col.len() as i64 {
        return Err(Error::size(format!("row_ptr[nrows] - index_base = {} but nnz = {}", rp0(nrows), col.len())));
    }
    // sized by the caller: allocated fallibly, refused with a status rather than aborting
    let mut out_rp = crate::error::host_with_capacity(nrows + 1, "row_ptr's copy")?;
    let mut out_col = crate::error::host_with_capacity(col.len(), "col_ind's copy")?;
    let mut slot_of = crate::error::host_vec(col.len(), 0usize, "the entries' slots")?;
    let mut reordered = false;
    out_rp.push(0i32);
    let mut order: Vec<usize> = Vec::new();
    for r in 0..nrows {
        let (s, e) = (rp0(r) as usize, rp0(r + 1) as usize);
        for k in s..e {
            let c = col[k].to_i64().saturating_sub(base);
            if c < 0 || c >= ncols as i64 {
                return Err(Error::invalid(format!(
                    "{at_col_ind_k} = {} (row {}): outside columns {base}..{}",
                    col[k].to_i64(),
                    r as i64 + base,
                    ncols as i64 - 1 + base,
                    at_col_ind_k = crate::error::at("col_ind", k)
                )));
            }
        }
        order.clear();
        order.extend(s..e);
        if order.windows(2).any(|w| col[w[0]].to_i64() >= col[w[1]].to_i64()) {
            reordered = true;
            order.sort_by_key(|&k| col[k].to_i64());
        }
        let row_start = out_col.len();
        for &k in &order {
            let c = (col[k].to_i64() - base) as i32;
            if out_col.len() > row_start && *out_col.last().unwrap() == c {
                slot_of[k] = out_col.len() - 1; // a duplicate: summed into the same slot
            } else {
                slot_of[k] = out_col.len();
                out_col.push(c);
            }
        }
        out_rp.push(out_col.len() as i32);
    }
    let mut diag = crate::error::host_with_capacity(nrows, "the diagonal's places")?;
    diag.extend((0..nrows).map(|r| {
        let (s, e) = (out_rp[r] as usize, out_rp[r + 1] as usize);
        out_col[s..e].binary_search(&(r as i32)).map(|p| (s + p) as i32).unwrap_or(-1)
    }));
    Ok(Pattern {
        nrows,
        ncols,
        row_ptr: Arc::new(out_rp),
        diag,
        slot_of: reordered.then_some(slot_of),
        caller_nnz: col.len(),
        col: Arc::new(out_col),
    })
}

/// The union of a graph (row pointers, neighbours) with its transpose, each
/// row sorted without repeats (the graph itself where it is symmetric):
/// AMG's aggregation and the multicolour ordering need it undirected.
pub fn symmetrised((ptr, adj): (Vec<usize>, Vec<u32>)) -> (Vec<usize>, Vec<u32>) {
    let nodes = ptr.len() - 1;
    let mut tptr = vec![0usize; nodes + 1];
    adj.iter().for_each(|&j| tptr[j as usize + 1] += 1);
    (0..nodes).for_each(|i| tptr[i + 1] += tptr[i]);
    let mut fill = tptr.clone();
    let mut tadj = vec![0u32; adj.len()];
    for i in 0..nodes {
        for &j in &adj[ptr[i]..ptr[i + 1]] {
            tadj[fill[j as usize]] = i as u32;
            fill[j as usize] += 1;
        }
    }
    if ptr == tptr && adj == tadj {
        return (ptr, adj);
    }
    let rows: Vec<Vec<u32>> = (0..nodes)
        .into_par_iter()
        .map(|i| {
            let mut r: Vec<u32> = adj[ptr[i]..ptr[i + 1]].iter().chain(&tadj[tptr[i]..tptr[i + 1]]).copied().collect();
            r.sort_unstable();
            r.dedup();
            r
        })
        .collect();
    let mut ptr = vec![0usize];
    let mut adj = Vec::new();
    for r in rows {
        adj.extend(r);
        ptr.push(adj.len());
    }
    (ptr, adj)
}

impl Csr {
    pub fn new(ctx: Arc<Context>, pattern: Pattern, caller_values: &[f64]) -> Result<Csr> {
        Csr::with_blocks(ctx, pattern, 1, caller_values)
    }

    /// A block matrix: `pattern` over block rows, `block`^2 values an entry.
    pub fn with_blocks(ctx: Arc<Context>, pattern: Pattern, block: usize, caller_values: &[f64]) -> Result<Csr> {
        block::check_size(block)?;
        let values = stored_values(&pattern, block, caller_values)?;
        let (device, data) = match &ctx.backend {
            Backend::Cpu => (None, Buffer::Host(values)),
            Backend::Cuda(g) => (Some(DevicePattern::new(g, &pattern, block)?), Buffer::Device(cuda::upload(g, &values)?)),
        };
        Ok(Csr { ctx, pattern, block, device, values: Mutex::new(Values { data, version: 0 }) })
    }

    /// A scalar matrix over a pattern already on the device (built there: the
    /// host copy is its download), its values zero.
    pub fn on_device(
        ctx: Arc<Context>,
        pattern: Pattern,
        row_ptr: DeviceBuffer<i32>,
        col: DeviceBuffer<i32>,
        diag: DeviceBuffer<i32>,
    ) -> Result<Csr> {
        let g = ctx.device()?;
        let threads_per_row = cuda::threads_per_row(pattern.nnz(), pattern.nrows);
        let values = g.zeros::<f64>(pattern.nnz().max(1))?;
        let long_rows = cuda::LongRows::find(g, &pattern.row_ptr, threads_per_row)?;
        let device = Some(DevicePattern { row_ptr, col, diag, threads_per_row, long_rows });
        Ok(Csr { ctx, pattern, block: 1, device, values: Mutex::new(Values { data: Buffer::Device(values), version: 0 }) })
    }

    /// Rows of the matrix in values (block rows times the block size).
    pub fn rows(&self) -> usize {
        self.pattern.nrows * self.block
    }

    pub fn cols(&self) -> usize {
        self.pattern.ncols * self.block
    }

    /// Values stored: one per entry, block^2 per block entry.
    pub fn stored_len(&self) -> usize {
        self.pattern.nnz() * self.block * self.block
    }

    /// Values the caller passes at creation and to `update_values`.
    pub fn caller_len(&self) -> usize {
        self.pattern.caller_nnz * self.block * self.block
    }

    /// Refuses a block matrix where only the scalar CSR form is served.
    pub fn require_scalar(&self, what: &str) -> Result<()> {
        if self.block > 1 {
            return Err(Error::unsupported(format!("{what} takes a CSR matrix; A holds {0} x {0} blocks", self.block)));
        }
        Ok(())
    }

    /// The matrix's values; refused once a call that panicked holding them
    /// may have left them half-written (`error::locked`).
    pub fn values(&self) -> Result<MutexGuard<'_, Values>> {
        crate::error::locked(&self.values, "the matrix")
    }

    /// New values for the same pattern (the caller's order, duplicates
    /// included); validated first, so a rejected update changes nothing.
    pub fn update_values(&self, caller_values: &[f64]) -> Result<()> {
        let values = stored_values(&self.pattern, self.block, caller_values)?;
        let mut v = self.values()?;
        match &mut v.data {
            Buffer::Host(h) => h.copy_from_slice(&values),
            Buffer::Device(d) => {
                if !values.is_empty() {
                    self.ctx.device()?.upload(&values, d, 0)?
                }
            }
        }
        v.version += 1;
        Ok(())
    }

    /// A new matrix in the same context with this one's pattern and `values`
    /// (in stored order: sorted by column within rows).
    pub fn with_values(&self, values: &[f64]) -> Result<Csr> {
        Csr::with_blocks(self.ctx.clone(), self.pattern.in_stored_order(), self.block, values)
    }

    /// Rewrites the stored values where they live (assembly on the device),
    /// then counts a new version so solvers rebuild their preconditioners.
    pub fn rewrite_values(&self, write: impl FnOnce(&mut Buffer<f64>) -> Result<()>) -> Result<()> {
        let mut v = self.values()?;
        write(&mut v.data)?;
        v.version += 1;
        Ok(())
    }

    /// The stored values (sorted by column within rows, duplicates summed).
    pub fn download_values(&self) -> Result<Vec<f64>> {
        self.values_on_host(&self.values()?.data)
    }

    /// The diagonal's values on the host (0 where a row stores none), from
    /// `data` (the values, under the caller's lock): on the device gathered
    /// there first, so n values cross rather than the matrix.
    pub fn diagonal_of(&self, data: &Buffer<f64>) -> Result<Vec<f64>> {
        let p = &self.pattern;
        let pick = |v: &[f64]| p.diag.iter().map(|&k| if k < 0 { 0.0 } else { v[k as usize] }).collect();
        match (data, &self.device) {
            (Buffer::Device(v), Some(d)) if self.block == 1 && p.diag.iter().all(|&k| k >= 0) && p.nrows > 0 => {
                let g = self.ctx.device()?;
                let out = g.alloc::<f64>(p.nrows)?;
                crate::array::cuda::gather(g, p.nrows, v, &d.diag, &out)?;
                let mut host = vec![0.0; p.nrows];
                g.download(&out, 0, &mut host)?;
                Ok(host)
            }
            _ => Ok(pick(&self.values_on_host(data)?)),
        }
    }

    /// A host copy of the values in `data` (for callers holding the values lock).
    pub fn values_on_host(&self, data: &Buffer<f64>) -> Result<Vec<f64>> {
        match data {
            Buffer::Host(h) => Ok(h.clone()),
            Buffer::Device(d) => {
                let mut out = vec![0.0; self.stored_len()];
                if !out.is_empty() {
                    self.ctx.device()?.download(d, 0, &mut out)?;
                }
                Ok(out)
            }
        }
    }
}

/// Maps the caller's values onto the stored slots (summing duplicates), a
/// run of `block`^2 values an entry.
pub fn stored_values(p: &Pattern, block: usize, caller: &[f64]) -> Result<Vec<f64>> {
    let bb = block * block;
    if caller.len() != p.caller_nnz * bb {
        return Err(Error::size(if block == 1 {
            format!("values has {} entries, the pattern has nnz = {}", caller.len(), p.caller_nnz)
        } else {
            format!("values has {} entries, the pattern has {} blocks of {block} x {block}", caller.len(), p.caller_nnz)
        }));
    }
    check_finite(caller)?;
    Ok(match &p.slot_of {
        None => crate::error::host_copy(caller, "values' copy")?,
        Some(slot_of) => {
            let mut v = crate::error::host_vec(p.nnz() * bb, 0.0, "values' copy")?;
            for (k, &s) in slot_of.iter().enumerate() {
                for (o, c) in v[s * bb..(s + 1) * bb].iter_mut().zip(&caller[k * bb..(k + 1) * bb]) {
                    *o += c;
                }
            }
            v
        }
    })
}

/// Checks a vector argument: an f64 array of `len` elements in A's context.
pub fn check_vector(a: &Csr, v: &Array, len: usize, arg: &str) -> Result<()> {
    check_array(&a.ctx, v, len, arg)
}

/// As `check_vector` for an operation of context `ctx` without a matrix.
pub fn check_array(ctx: &Arc<crate::context::Context>, v: &Array, len: usize, arg: &str) -> Result<()> {
    if !Arc::ptr_eq(&v.ctx, ctx) {
        return Err(Error::invalid(format!("{arg} belongs to another context than the object it is used with")));
    }
    if v.dtype != crate::array::Dtype::F64 {
        return Err(Error::invalid(format!("{arg} holds {} elements; sparse operations use f64", v.dtype.name())));
    }
    if v.len() != len {
        return Err(Error::size(format!("{arg} has {} elements ({} x {}), expected {len}", v.len(), v.rows, v.cols)));
    }
    Ok(())
}

/// The f64 buffer inside a locked array storage (checked by `check_vector`).
pub fn f64_buf(s: &mut Storage) -> &mut Buffer<f64> {
    match s {
        Storage::F64(b) => b,
        Storage::F32(_) => unreachable!("checked by check_vector"),
    }
}

/// y = alpha*A*x + beta*y on resident arrays (x has ncols, y nrows elements).
pub fn spmv(a: &Csr, alpha: f64, x: &Array, beta: f64, y: &Array) -> Result<()> {
    check_vector(a, x, a.cols(), "x")?;
    check_vector(a, y, a.rows(), "y")?;
    if std::ptr::eq(x, y) {
        return Err(Error::invalid("x and y are the same array: SpMV is out of place"));
    }
    if !alpha.is_finite() || !beta.is_finite() {
        return Err(Error::invalid(format!("alpha = {alpha}, beta = {beta}: must be finite")));
    }
    let mut vals = a.values()?;
    let (mut gx, mut gy) = lock_pair(x, y, "x", "y")?;
    match (&mut vals.data, f64_buf(&mut gx), f64_buf(&mut gy)) {
        (Buffer::Host(v), Buffer::Host(xv), Buffer::Host(yv)) => block::cpu::spmv(&a.pattern, a.block, v, alpha, xv, beta, yv),
        (Buffer::Device(v), Buffer::Device(xv), Buffer::Device(yv)) => {
            let (g, dp) = (a.ctx.device()?, a.device.as_ref().ok_or_else(crate::array::mixed_backends)?);
            block::cuda::spmv(g, dp, a.pattern.nrows, a.block, v, alpha, xv, beta, yv, None)?
        }
        _ => return Err(crate::array::mixed_backends()),
    }
    Ok(())
}

/// The flags (1: fixed) and values of x[dofs[i]] = values[i] over n
/// unknowns (`what` names them in a refusal): dofs counted from `base`,
/// inside 0..n and distinct; values finite.
pub fn dirichlet_conditions(n: usize, what: &str, dofs: &[i64], base: i64, values: &[f64]) -> Result<(Vec<u8>, Vec<f64>)> {
    let (mut fixed, mut g) = (vec![0u8; n], vec![0.0; n]);
    for (i, (&caller, &v)) in dofs.iter().zip(values).enumerate() {
        let d = caller.saturating_sub(base);
        if d < 0 || d >= n as i64 {
            return Err(Error::invalid(format!(
                "{at_dofs_i} = {caller}: outside {what} {base}..{} (index base {base})",
                n as i64 - 1 + base,
                at_dofs_i = crate::error::at("dofs", i)
            )));
        }
        if !v.is_finite() {
            return Err(Error::invalid(format!(
                "{at_values_i} = {v}: must be finite",
                at_values_i = crate::error::at("values", i)
            )));
        }
        if fixed[d as usize] != 0 {
            return Err(Error::invalid(format!(
                "{at_dofs_i} = {caller} is constrained twice",
                at_dofs_i = crate::error::at("dofs", i)
            )));
        }
        (fixed[d as usize], g[d as usize]) = (1, v);
    }
    Ok((fixed, g))
}

/// Dirichlet conditions x[dofs[i]] = values[i] on A x = b, symmetrically:
/// b -= A[:, d] g_d for the free rows, then the rows and columns of the
/// constrained dofs are zeroed with their diagonals kept and b[d] = A[d, d] g_d,
/// so a symmetric A stays symmetric (and SPD for CG). `dofs` are distinct and
/// counted from `base`. Checked first: a refused call changes nothing.
pub fn apply_dirichlet(a: &Csr, dofs: &[i64], base: i64, values: &[f64], b: &Array) -> Result<()> {
    a.require_scalar("fegpu_csr_apply_dirichlet")?;
    let p = &a.pattern;
    if p.nrows != p.ncols {
        return Err(Error::size(format!("A is {} x {}: Dirichlet conditions need a square matrix", p.nrows, p.ncols)));
    }
    check_vector(a, b, p.nrows, "b")?;
    let (fixed, g) = dirichlet_conditions(p.nrows, "rows", dofs, base, values)?;
    if let Some(i) = dofs.iter().take(values.len()).position(|&caller| p.diag[(caller - base) as usize] < 0) {
        return Err(Error::invalid(format!(
            "{} = {}: its row has no stored diagonal to keep",
            crate::error::at("dofs", i),
            dofs[i]
        )));
    }
    let mut vals = a.values()?;
    let mut gb = b.lock("b")?;
    match (&mut vals.data, f64_buf(&mut gb)) {
        (Buffer::Host(v), Buffer::Host(bv)) => cpu::dirichlet(p, v, &fixed, &g, bv),
        (Buffer::Device(v), Buffer::Device(bv)) => {
            let gpu = a.ctx.device()?;
            cuda::dirichlet(gpu, a.device.as_ref().ok_or_else(crate::array::mixed_backends)?, p.nrows, v, &fixed, &g, bv)?
        }
        _ => return Err(crate::array::mixed_backends()),
    }
    vals.version += 1;
    Ok(())
}
