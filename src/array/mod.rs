//! Device-resident arrays: column-major rows x cols matrices (a vector is n x 1)
//! of f32 or f64 that stay where their context's backend keeps them.

pub mod cuda;
pub mod vector;

use crate::context::{Backend, Context};
use crate::error::{element_count, host_copy, host_vec, Error, Result};
use crate::gpu::{DeviceBuffer, DeviceScalar};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F64,
}

impl Dtype {
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
        }
    }
}

/// Where an array's elements live.
pub enum Buffer<T: DeviceScalar> {
    Host(Vec<T>),
    Device(DeviceBuffer<T>),
}

impl<T: DeviceScalar> Buffer<T> {
    /// The host elements; a device buffer here is the impossible mixed case
    /// (an object's parts on two backends), reported as an internal error.
    pub fn host(&self) -> Result<&[T]> {
        match self {
            Buffer::Host(v) => Ok(v),
            Buffer::Device(_) => Err(mixed_backends()),
        }
    }
    pub fn device(&self) -> Result<&DeviceBuffer<T>> {
        match self {
            Buffer::Device(d) => Ok(d),
            Buffer::Host(_) => Err(mixed_backends()),
        }
    }
}

/// The one error for parts of one solve found on two backends (a bug).
pub fn mixed_backends() -> Error {
    Error::new(crate::error::ErrorKind::Internal, "internal: parts of one operation live on different backends")
}

pub enum Storage {
    F32(Buffer<f32>),
    F64(Buffer<f64>),
}

/// The element types arrays hold; maps a Rust type to its storage variant.
pub trait Real: DeviceScalar + Default + PartialEq + PartialOrd + Debug + std::ops::Sub<Output = Self> {
    const DTYPE: Dtype;
    /// Written into uninitialised host storage so an unwritten element shows.
    const POISON: Self;
    fn wrap(b: Buffer<Self>) -> Storage;
    fn unwrap_mut(s: &mut Storage) -> Option<&mut Buffer<Self>>;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl Real for f32 {
    const DTYPE: Dtype = Dtype::F32;
    const POISON: Self = f32::NAN;
    fn wrap(b: Buffer<Self>) -> Storage {
        Storage::F32(b)
    }
    fn unwrap_mut(s: &mut Storage) -> Option<&mut Buffer<Self>> {
        match s {
            Storage::F32(b) => Some(b),
            _ => None,
        }
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(v: f64) -> Self {
        v as Self
    }
}

impl Real for f64 {
    const DTYPE: Dtype = Dtype::F64;
    const POISON: Self = f64::NAN;
    fn wrap(b: Buffer<Self>) -> Storage {
        Storage::F64(b)
    }
    fn unwrap_mut(s: &mut Storage) -> Option<&mut Buffer<Self>> {
        match s {
            Storage::F64(b) => Some(b),
            _ => None,
        }
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}

pub struct Array {
    pub ctx: Arc<Context>,
    pub rows: usize,
    pub cols: usize,
    pub dtype: Dtype,
    data: Mutex<Storage>,
}

impl Array {
    /// A rows x cols array; filled from `init` (column-major, rows*cols long)
    /// or left uninitialised (NaN on the CPU backend).
    pub fn new<T: Real>(ctx: Arc<Context>, rows: usize, cols: usize, init: Option<&[T]>) -> Result<Array> {
        let n = element_count(rows, cols)?;
        if let Some(src) = init {
            if src.len() != n {
                return Err(Error::size(format!("host data has {} elements, a {rows} x {cols} array needs {n}", src.len())));
            }
        }
        let buf = match &ctx.backend {
            Backend::Cpu => Buffer::Host(match init {
                Some(src) => host_copy(src, "array")?,
                None => host_vec(n, T::POISON, "array")?,
            }),
            Backend::Cuda(g) => {
                // an empty array (a distributed rank owning no rows) still gets a buffer
                let mut d = g.alloc::<T>(n.max(1)).map_err(|e| e.within("array"))?;
                if let Some(src) = init {
                    g.upload(src, &mut d, 0)?;
                }
                Buffer::Device(d)
            }
        };
        Ok(Array { ctx, rows, cols, dtype: T::DTYPE, data: Mutex::new(T::wrap(buf)) })
    }

    pub fn len(&self) -> usize {
        self.rows * self.cols
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The array's storage; refused once a call that panicked holding it
    /// may have left it half-written (`error::locked`).
    pub fn lock(&self, arg: &str) -> Result<MutexGuard<'_, Storage>> {
        crate::error::locked(&self.data, arg)
    }

    /// Refuses an f64 array holding NaN or Inf, naming the first such
    /// element as `arg[k]` (the largest magnitude first, where it lives).
    pub fn check_finite(&self, arg: &str) -> Result<()> {
        let n = self.rows * self.cols;
        let largest = match &*self.lock(arg)? {
            Storage::F64(Buffer::Host(h)) => vector::amax(h),
            Storage::F64(Buffer::Device(d)) => cuda::amax(self.ctx.device()?, n, d)?,
            Storage::F32(_) => return Ok(()),
        };
        if largest.is_finite() {
            return Ok(());
        }
        let mut v = vec![0.0f64; n];
        self.download(0, &mut v, arg)?;
        match v.iter().position(|x| !x.is_finite()) {
            Some(k) => Err(Error::invalid(format!("{} = {}: {arg} must be finite", crate::error::at(arg, k), v[k]))),
            None => Ok(()),
        }
    }

    /// The typed buffer inside a locked storage, or an error naming `arg`.
    pub fn typed<'a, T: Real>(&self, s: &'a mut Storage, arg: &str) -> Result<&'a mut Buffer<T>> {
        let dtype = self.dtype;
        T::unwrap_mut(s).ok_or_else(|| {
            Error::invalid(format!("{arg} holds {} elements but this call is for {}", dtype.name(), T::DTYPE.name()))
        })
    }

    /// Sets every element to zero where the array lives.
    pub fn zero(&self) -> Result<()> {
        let mut s = self.lock("the array")?;
        match &mut *s {
            Storage::F64(Buffer::Host(h)) => h.fill(0.0),
            Storage::F32(Buffer::Host(h)) => h.fill(0.0),
            Storage::F64(Buffer::Device(d)) => self.ctx.device()?.fill_bytes(d, 0)?,
            Storage::F32(Buffer::Device(d)) => self.ctx.device()?.fill_bytes(d, 0)?,
        }
        Ok(())
    }

    /// Checks that `first..first+count` (0-based) lies inside the array; the
    /// message names the slice as the caller counts (crate::error::range).
    fn check_range(&self, first: usize, count: usize, arg: &str) -> Result<()> {
        match first.checked_add(count) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(Error::size(format!(
                "{} lies outside the array of {} x {} = {} elements",
                crate::error::range(arg, first, first.saturating_add(count)),
                self.rows,
                self.cols,
                self.len()
            ))),
        }
    }

    /// Overwrites elements `first..first+src.len()` (0-based, column-major order).
    pub fn upload<T: Real>(&self, first: usize, src: &[T], arg: &str) -> Result<()> {
        self.check_range(first, src.len(), arg)?;
        let mut s = self.lock(arg)?;
        match self.typed::<T>(&mut s, arg)? {
            Buffer::Host(v) => v[first..first + src.len()].copy_from_slice(src),
            Buffer::Device(d) => self.ctx.device()?.upload(src, d, first)?,
        }
        Ok(())
    }

    /// Reads elements `first..first+dst.len()` (0-based, column-major order).
    pub fn download<T: Real>(&self, first: usize, dst: &mut [T], arg: &str) -> Result<()> {
        self.check_range(first, dst.len(), arg)?;
        let mut s = self.lock(arg)?;
        match self.typed::<T>(&mut s, arg)? {
            Buffer::Host(v) => dst.copy_from_slice(&v[first..first + dst.len()]),
            Buffer::Device(d) => self.ctx.device()?.download(d, first, dst)?,
        }
        Ok(())
    }
}

/// Checks that two arrays live in the same context.
pub fn same_context(a: &Array, b: &Array, a_arg: &str, b_arg: &str) -> Result<()> {
    if !Arc::ptr_eq(&a.ctx, &b.ctx) {
        return Err(Error::invalid(format!("{a_arg} and {b_arg} belong to different contexts: both must be in one context")));
    }
    Ok(())
}

/// Locks two distinct arrays in address order (so two threads locking the
/// same pair cannot deadlock) and returns the guards in argument order. The
/// same array twice is refused by name: its lock would be taken twice.
pub fn lock_pair<'a>(
    a: &'a Array,
    b: &'a Array,
    a_arg: &str,
    b_arg: &str,
) -> Result<(MutexGuard<'a, Storage>, MutexGuard<'a, Storage>)> {
    distinct(&[(a, a_arg), (b, b_arg)])?;
    Ok(if (a as *const Array) < (b as *const Array) {
        let ga = a.lock(a_arg)?;
        (ga, b.lock(b_arg)?)
    } else {
        let gb = b.lock(b_arg)?;
        (a.lock(a_arg)?, gb)
    })
}

/// Refuses the same array passed for two arguments that a call writes
/// through or locks separately.
pub fn distinct(args: &[(&Array, &str)]) -> Result<()> {
    for (i, (a, a_arg)) in args.iter().enumerate() {
        if let Some((_, b_arg)) = args[i + 1..].iter().find(|(b, _)| std::ptr::eq(*a, *b)) {
            return Err(Error::invalid(format!("{a_arg} and {b_arg} are the same array: this call needs distinct arrays")));
        }
    }
    Ok(())
}
