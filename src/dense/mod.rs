//! Dense transpose and copy of column-major matrices, on device-resident
//! arrays (out of place for any m x n, in place for square) and on host arrays.

pub mod cpu;
pub mod cuda;

use crate::array::{lock_pair, same_context, Array, Buffer, Dtype, Real};
use crate::context::Context;
use crate::error::{element_count, Error, Result};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    Naive,
    Tile,
    Padded,
}

impl Variant {
    pub const ALL: [Variant; 3] = [Variant::Naive, Variant::Tile, Variant::Padded];

    /// Decodes the ABI code; `None` is AUTO.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Naive => "naive",
            Variant::Tile => "tile",
            Variant::Padded => "padded",
        }
    }
}

fn check_pair(src: &Array, dst: &Array, rows: usize, cols: usize, what: &str) -> Result<()> {
    same_context(src, dst, "src", "dst")?;
    if src.dtype != dst.dtype {
        return Err(Error::invalid(format!(
            "src holds {} and dst {}: {what} needs one type",
            src.dtype.name(),
            dst.dtype.name()
        )));
    }
    if std::ptr::eq(src, dst) {
        return Err(Error::invalid(format!("src and dst are the same array: {what} is out of place")));
    }
    if dst.rows != rows || dst.cols != cols {
        return Err(Error::size(format!(
            "src is {} x {}, so dst must be {rows} x {cols} for {what}, but it is {} x {}",
            src.rows, src.cols, dst.rows, dst.cols
        )));
    }
    Ok(())
}

/// dst = src^T, with src m x n and dst n x m.
pub fn transpose(src: &Array, dst: &Array, variant: Option<Variant>) -> Result<()> {
    transpose_shaped(src, dst, variant, None)
}

/// As `transpose`, with the tile shape forced (benchmarks compare shapes).
pub fn transpose_shaped(src: &Array, dst: &Array, variant: Option<Variant>, shape: Option<cuda::Shape>) -> Result<()> {
    check_pair(src, dst, src.cols, src.rows, "a transpose")?;
    match src.dtype {
        Dtype::F32 => transpose_typed::<f32>(src, dst, variant, shape),
        Dtype::F64 => transpose_typed::<f64>(src, dst, variant, shape),
    }
}

fn transpose_typed<T: Real>(src: &Array, dst: &Array, variant: Option<Variant>, shape: Option<cuda::Shape>) -> Result<()> {
    let (m, n) = (src.rows, src.cols);
    let (mut ga, mut gb) = lock_pair(src, dst, "src", "dst")?;
    match (src.typed::<T>(&mut ga, "src")?, dst.typed::<T>(&mut gb, "dst")?) {
        (Buffer::Host(a), Buffer::Host(b)) => cpu::transpose(m, n, a, b),
        (Buffer::Device(a), Buffer::Device(b)) => {
            let g = src.ctx.device()?;
            cuda::transpose(g, variant.unwrap_or(Variant::Padded), shape, m, n, a, b)?
        }
        _ => return Err(crate::array::mixed_backends()),
    }
    Ok(())
}

/// a = a^T for a square array.
pub fn transpose_in_place(a: &Array, variant: Option<Variant>) -> Result<()> {
    if a.rows != a.cols {
        return Err(Error::size(format!("a is {} x {}: an in-place transpose needs a square array", a.rows, a.cols)));
    }
    match a.dtype {
        Dtype::F32 => transpose_in_place_typed::<f32>(a, variant),
        Dtype::F64 => transpose_in_place_typed::<f64>(a, variant),
    }
}

fn transpose_in_place_typed<T: Real>(a: &Array, variant: Option<Variant>) -> Result<()> {
    let mut g = a.lock("a")?;
    match a.typed::<T>(&mut g, "a")? {
        Buffer::Host(v) => cpu::transpose_square_in_place(a.rows, v),
        Buffer::Device(d) => {
            let gpu = a.ctx.device()?;
            cuda::transpose_square_in_place(gpu, variant.unwrap_or(Variant::Padded), a.rows, d)?
        }
    }
    Ok(())
}

/// dst = src (same shape). AUTO uses the driver's device-to-device copy;
/// the kernel variants exist so the benchmark can compare like with like.
pub fn copy(src: &Array, dst: &Array, variant: Option<Variant>) -> Result<()> {
    check_pair(src, dst, src.rows, src.cols, "a copy")?;
    match src.dtype {
        Dtype::F32 => copy_typed::<f32>(src, dst, variant),
        Dtype::F64 => copy_typed::<f64>(src, dst, variant),
    }
}

fn copy_typed<T: Real>(src: &Array, dst: &Array, variant: Option<Variant>) -> Result<()> {
    let (mut ga, mut gb) = lock_pair(src, dst, "src", "dst")?;
    match (src.typed::<T>(&mut ga, "src")?, dst.typed::<T>(&mut gb, "dst")?) {
        (Buffer::Host(a), Buffer::Host(b)) => b.copy_from_slice(a),
        (Buffer::Device(a), Buffer::Device(b)) => {
            let g = src.ctx.device()?;
            match variant {
                None => g.copy(a, b)?,
                Some(v) => cuda::copy(g, v, src.rows, src.cols, a, b)?,
            }
        }
        _ => return Err(crate::array::mixed_backends()),
    }
    Ok(())
}

/// Host convenience: at = a^T (a m x n, at n x m, column-major) through the
/// context's backend: upload, transpose, download in one call.
pub fn transpose_host<T: Real>(
    ctx: &Arc<Context>,
    m: usize,
    n: usize,
    a: &[T],
    at: &mut [T],
    variant: Option<Variant>,
) -> Result<()> {
    let len = element_count(m, n)?;
    if a.len() != len || at.len() != len {
        return Err(Error::size(format!("a has {} and at {} elements; m x n = {m} x {n} needs {len}", a.len(), at.len())));
    }
    if ctx.gpu().is_none() {
        cpu::transpose(m, n, a, at);
        return Ok(());
    }
    let src = Array::new(ctx.clone(), m, n, Some(a))?;
    let dst = Array::new::<T>(ctx.clone(), n, m, None)?;
    transpose(&src, &dst, variant)?;
    dst.download(0, at, "at")
}

/// Host convenience: square a = a^T in place through the context's backend.
pub fn transpose_host_in_place<T: Real>(ctx: &Arc<Context>, n: usize, a: &mut [T], variant: Option<Variant>) -> Result<()> {
    let len = element_count(n, n)?;
    if a.len() != len {
        return Err(Error::size(format!("a has {} elements; n x n = {n} x {n} needs {len}", a.len())));
    }
    if ctx.gpu().is_none() {
        cpu::transpose_square_in_place(n, a);
        return Ok(());
    }
    let arr = Array::new(ctx.clone(), n, n, Some(&*a))?;
    transpose_in_place(&arr, variant)?;
    arr.download(0, a, "a")
}
