//! Vector algebra on f64 arrays (n x 1, or any shape taken as a vector):
//! the host loops of the CPU reference here, the device launches in
//! `cuda.rs`. The Krylov methods use the same operations on their work
//! vectors.

use super::{cuda, lock_pair, same_context, Array, Buffer, Dtype, Storage};
use crate::error::{Error, Result};

/// max |v_i|, NaN when any element is NaN (as the device's `amax`).
pub fn amax(v: &[f64]) -> f64 {
    v.iter().fold(0.0, |m: f64, x| if x.is_nan() || m.is_nan() { f64::NAN } else { m.max(x.abs()) })
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// w = a*x + b*y + c*w (w not read when c == 0, y not read when b == 0).
pub fn update(w: &mut [f64], a: f64, x: &[f64], b: f64, y: Option<&[f64]>, c: f64) {
    for i in 0..w.len() {
        let mut r = a * x[i];
        if b != 0.0 {
            r += b * y.expect("y needed when b != 0")[i];
        }
        if c != 0.0 {
            r += c * w[i];
        }
        w[i] = r;
    }
}

/// The power of two that brings max |b| near 1 when it lies so far out that
/// squares could underflow or overflow (as LAPACK's scaled nrm2 guards
/// against); 1 otherwise, so ordinary systems are computed unchanged.
pub(crate) fn equilibration(bmax: f64) -> f64 {
    const SAFE: std::ops::RangeInclusive<f64> = 1.0e-150..=1.0e150;
    // 0 and non-finite maxima have no scale (frexp needs a finite positive x)
    if SAFE.contains(&bmax) || bmax == 0.0 || !bmax.is_finite() {
        return 1.0;
    }
    let (_, exponent) = frexp(bmax);
    // within 2^-1022 and 2^1022: a subnormal max needs up to 2^1074 and
    // one near f64::MAX 2^-1024, which powi gives as inf and 0; the clamped
    // powers bring even 2^-1074 to 2^-52 and f64::MAX to 4
    2f64.powi((-exponent).clamp(-1022, 1022))
}

/// x = m 2^e with 0.5 <= m < 1, for finite positive x.
fn frexp(x: f64) -> (f64, i32) {
    let bits = x.to_bits();
    let e = ((bits >> 52) & 0x7ff) as i32;
    if e == 0 {
        let (m, e2) = frexp(x * 2f64.powi(64));
        return (m, e2 - 64);
    }
    (f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52)), e - 1022)
}

fn f64_buf(s: &mut Storage) -> &mut Buffer<f64> {
    match s {
        Storage::F64(b) => b,
        Storage::F32(_) => unreachable!("checked by check_pair"),
    }
}

/// Dot product of two f64 arrays of one length and context; the reduction
/// finishes on the device and only the scalar comes back.
pub fn vector_dot(x: &Array, y: &Array) -> Result<f64> {
    check_pair(x, y)?;
    if std::ptr::eq(x, y) {
        let mut g = x.lock("x")?;
        let b = f64_buf(&mut g);
        return dot_bufs(x, b, b);
    }
    let (mut gx, mut gy) = lock_pair(x, y, "x", "y")?;
    dot_bufs(x, f64_buf(&mut gx), f64_buf(&mut gy))
}

/// ||x||_2 of an f64 array as LAPACK's nrm2 computes it: where max |x_i|
/// lies so far out that the squares would underflow or overflow, the sum
/// runs over x scaled by a power of two (exact) and the scale comes off after.
pub fn vector_nrm2(x: &Array) -> Result<f64> {
    check_pair(x, x)?;
    let mut g = x.lock("x")?;
    let n = x.len();
    match f64_buf(&mut g) {
        Buffer::Host(v) => {
            let max = amax(v);
            let s = equilibration(max);
            if !max.is_finite() || max == 0.0 || s == 1.0 {
                return Ok(if max.is_finite() { dot(v, v).sqrt() } else { max });
            }
            Ok(v.iter().map(|e| (e * s) * (e * s)).sum::<f64>().sqrt() / s)
        }
        Buffer::Device(v) => {
            let gpu = x.ctx.device()?;
            let max = cuda::amax(gpu, n, v)?;
            let s = equilibration(max);
            let mut reduce = cuda::Reduce::new(gpu)?;
            if !max.is_finite() || max == 0.0 || s == 1.0 {
                return Ok(if max.is_finite() { reduce.dots(gpu, n, v, v, None)?.0.sqrt() } else { max });
            }
            let scaled = gpu.alloc::<f64>(n)?;
            cuda::update(gpu, n, &scaled, s, v, 0.0, None, 0.0)?;
            Ok(reduce.dots(gpu, n, &scaled, &scaled, None)?.0.sqrt() / s)
        }
    }
}

fn dot_bufs(x: &Array, a: &Buffer<f64>, b: &Buffer<f64>) -> Result<f64> {
    match (a, b) {
        (Buffer::Host(a), Buffer::Host(b)) => Ok(dot(a, b)),
        (Buffer::Device(a), Buffer::Device(b)) => {
            let g = x.ctx.device()?;
            Ok(cuda::Reduce::new(g)?.dots(g, x.len(), a, b, None)?.0)
        }
        _ => Err(crate::array::mixed_backends()),
    }
}

/// y = alpha*x + beta*y for f64 arrays of one length and context.
pub fn vector_axpby(alpha: f64, x: &Array, beta: f64, y: &Array) -> Result<()> {
    check_pair(x, y)?;
    if std::ptr::eq(x, y) {
        return Err(Error::invalid("x and y are the same array"));
    }
    if !alpha.is_finite() || !beta.is_finite() {
        return Err(Error::invalid(format!("alpha = {alpha}, beta = {beta}: must be finite")));
    }
    let (mut gx, mut gy) = lock_pair(x, y, "x", "y")?;
    match (f64_buf(&mut gx), f64_buf(&mut gy)) {
        (Buffer::Host(a), Buffer::Host(b)) => update(b, alpha, a, 0.0, None, beta),
        (Buffer::Device(a), Buffer::Device(b)) => cuda::update(x.ctx.device()?, x.len(), b, alpha, a, 0.0, None, beta)?,
        _ => return Err(crate::array::mixed_backends()),
    }
    Ok(())
}

fn check_pair(x: &Array, y: &Array) -> Result<()> {
    same_context(x, y, "x", "y")?;
    for (a, name) in [(x, "x"), (y, "y")] {
        if a.dtype != Dtype::F64 {
            return Err(Error::invalid(format!("{name} holds {} elements; vector operations use f64", a.dtype.name())));
        }
    }
    if x.len() != y.len() {
        return Err(Error::size(format!("x has {} elements and y {}", x.len(), y.len())));
    }
    Ok(())
}
