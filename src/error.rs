//! The error every fallible call returns (its kind and a message naming the
//! argument), and the one rule for sizes from callers and files.

use std::fmt;
use std::sync::atomic::{AtomicI32, Ordering};

/// What went wrong, in the library's own terms; the C ABI gives each kind
/// its status code (`ffi::status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// An argument is out of range, null where data is needed, or not finite.
    InvalidArgument,
    /// A handle is 0, destroyed, from a destroyed context, or of the wrong type.
    InvalidHandle,
    /// Array sizes or shapes do not agree with each other.
    SizeMismatch,
    /// The device has no room for the allocation; nothing was changed.
    OutOfDeviceMemory,
    /// The CUDA driver or NVRTC reported an error.
    Device,
    /// An iterative solver stopped at its iteration limit.
    NotConverged,
    /// An iterative method or factorisation broke down.
    Breakdown,
    /// Not available on this backend or for these arguments.
    Unsupported,
    /// A bug in fegpu.
    Internal,
    /// The CUDA backend was requested but no driver or device answers.
    NoDevice,
    /// The host has no room for the allocation; nothing was changed.
    OutOfMemory,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }
    pub fn size(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::SizeMismatch, message)
    }
    pub fn handle(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidHandle, message)
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Unsupported, message)
    }
    pub fn out_of_memory(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::OutOfMemory, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, message)
    }
    /// The same error with what was being done put in front ("lattice populations: ...").
    pub fn within(self, what: &str) -> Self {
        Error { kind: self.kind, message: format!("{what}: {}", self.message) }
    }
    /// The same error once a failed call's changes were undone (`undo`, what
    /// undoing them gave): an undo that fails too is named beside it, since
    /// the object is then not as it was.
    pub fn undone(self, undo: Result<()>, what: &str) -> Self {
        match undo {
            Ok(()) => self,
            Err(u) => Error { kind: self.kind, message: format!("{}; {what} could not be undone: {}", self.message, u.message) },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?})", self.message, self.kind)
    }
}

impl std::error::Error for Error {}

/// The state behind `m`, or an error where a call that panicked holding it
/// (a bug, reported to that call as `Internal`) may have left it
/// half-changed: such an object is refused from then on, never used as it
/// is. Conservative: a call that only read the object poisons it too (the
/// lock cannot tell), so after an internal error the objects that call held
/// are recreated. `what` names the object ("the array", "the solver").
pub fn locked<'a, T>(m: &'a std::sync::Mutex<T>, what: &str) -> Result<std::sync::MutexGuard<'a, T>> {
    m.lock().map_err(|_| {
        Error::internal(format!(
            "{what} may be half-changed: an earlier call failed inside fegpu (an internal error) while holding it; destroy it and create it again"
        ))
    })
}

/// The state behind `m` even where a panicking call held it: for reading
/// reports and fixed figures (a summary, a history, sizes), never for
/// changing or computing from it (`locked`).
pub fn peek<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Checks a size argument that crosses the ABI as int64: it must be >= 1.
pub fn positive(name: &str, value: i64) -> Result<usize> {
    if value < 1 {
        return Err(Error::invalid(format!("{name} = {}: must be at least 1", shown(value))));
    }
    usize::try_from(value).map_err(|_| Error::invalid(format!("{name} = {value}: too large")))
}

/// A caller's count, 0 allowed.
pub fn non_negative(name: &str, value: i64) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::invalid(format!("{name} = {}: must be >= 0", shown(value))))
}

/// A caller's integer for a message; the Fortran modules pass -huge (their
/// NOT_AN_INTEGER) for an actual argument that is not an integer (2.5, 'x'), so that one says so.
fn shown(value: i64) -> String {
    if value == -i64::MAX || value == -(i32::MAX as i64) {
        format!("{value} (a Fortran argument that is not an integer: a real or a character where an integer belongs)")
    } else {
        value.to_string()
    }
}

/// rows * cols without overflow.
pub fn element_count(rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols)
        .filter(|n| n.checked_mul(8).is_some())
        .ok_or_else(|| Error::invalid(format!("{rows} x {cols} elements overflow the address space")))
}

/// The product of sizes from a caller or a file, refused (naming `what`)
/// when it overflows 64 bits.
pub fn checked_product(factors: &[usize], what: &str) -> Result<usize> {
    factors
        .iter()
        .try_fold(1usize, |p, &f| p.checked_mul(f))
        .ok_or_else(|| Error::invalid(format!("{what}: {factors:?} multiply to more than 2^64")))
}

/// The host's physical memory plus swap in bytes (None where unknown): no
/// host allocation larger than this can succeed, even where the kernel
/// overcommits and would let it start.
fn host_capacity() -> Option<u128> {
    let mut info: libc::sysinfo = unsafe { std::mem::zeroed() };
    (unsafe { libc::sysinfo(&mut info) } == 0)
        .then(|| (info.totalram as u128 + info.totalswap as u128) * info.mem_unit.max(1) as u128)
}

pub(crate) fn gib(bytes: u128) -> f64 {
    bytes as f64 / (1u128 << 30) as f64
}

/// The host's capacity in bytes where `bytes` exceed it (None: they fit, or it is unknown).
fn beyond_host(bytes: u128) -> Option<u128> {
    host_capacity().filter(|&cap| bytes > cap)
}

/// Refuses, as FEGPU_ERR_OUT_OF_MEMORY naming `what`, a total of `bytes`
/// (to be allocated piece by piece) beyond the host's memory plus swap.
pub fn host_fits(bytes: u128, what: &str) -> Result<()> {
    match beyond_host(bytes) {
        Some(cap) => Err(Error::out_of_memory(format!(
            "{what}: {:.1} GiB, more than this host's {:.1} GiB of memory",
            gib(bytes),
            gib(cap)
        ))),
        None => Ok(()),
    }
}

/// An empty host vector with room for `n` elements, allocated fallibly: a
/// size that overflows, exceeds the machine's memory, or that the allocator
/// refuses is FEGPU_ERR_OUT_OF_MEMORY naming `what`, never an abort.
pub fn host_with_capacity<T>(n: usize, what: &str) -> Result<Vec<T>> {
    let bytes = n.checked_mul(std::mem::size_of::<T>().max(1));
    let Some(b) = bytes else {
        return Err(Error::out_of_memory(format!("{what}: {n} elements overflow the address space")));
    };
    if let Some(cap) = beyond_host(b as u128) {
        return Err(Error::out_of_memory(format!(
            "{what}: {n} elements need {:.1} GiB, more than this host's {:.1} GiB of memory",
            gib(b as u128),
            gib(cap)
        )));
    }
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        Error::out_of_memory(format!("{what}: {n} elements ({:.1} GiB) could not be allocated on the host", gib(b as u128)))
    })?;
    Ok(v)
}

/// A host vector of `n` copies of `value`, allocated fallibly (see `host_with_capacity`).
pub fn host_vec<T: Clone>(n: usize, value: T, what: &str) -> Result<Vec<T>> {
    let mut v = host_with_capacity(n, what)?;
    v.resize(n, value);
    Ok(v)
}

/// A copy of a caller's slice, allocated fallibly (see `host_vec`).
pub fn host_copy<T: Clone>(src: &[T], what: &str) -> Result<Vec<T>> {
    let mut v = host_with_capacity(src.len(), what)?;
    v.extend_from_slice(src);
    Ok(v)
}

/// How messages name a position in a caller's array: C's 0-based `x[k]`
/// (the default) or Fortran's 1-based `x(k)`, set once per process by
/// `fegpu_messages_set_index_base` (the Fortran module sets 1).
static MESSAGE_BASE: AtomicI32 = AtomicI32::new(0);

pub fn set_message_base(base: i32) {
    MESSAGE_BASE.store(base, Ordering::Relaxed);
}

/// Element `k` (0-based) of the caller's array `name`, as the caller counts.
pub fn at(name: &str, k: usize) -> String {
    match MESSAGE_BASE.load(Ordering::Relaxed) {
        1 => format!("{name}({})", k + 1),
        _ => format!("{name}[{k}]"),
    }
}

/// Element (row, col) (0-based) of the caller's column-major array `name`
/// of `rows` rows: Fortran's `name(row, col)`, C's flat `name[k]`.
pub fn at2(name: &str, row: usize, col: usize, rows: usize) -> String {
    at_shape(name, col * rows + row, &[(1, rows)])
}

/// Element `k` (0-based, flat) of the caller's column-major array `name`,
/// declared in Fortran with these (lower bound, extent) dimensions and one
/// more, of any extent, from 1: Fortran's `name(i1, .., in)`, C's flat `name[k]`.
pub fn at_shape(name: &str, k: usize, dims: &[(i64, usize)]) -> String {
    if MESSAGE_BASE.load(Ordering::Relaxed) != 1 {
        return format!("{name}[{k}]");
    }
    let mut rest = k;
    let mut at: Vec<String> = dims
        .iter()
        .map(|&(lower, extent)| {
            let i = rest % extent.max(1);
            rest /= extent.max(1);
            (lower + i as i64).to_string()
        })
        .collect();
    at.push((rest + 1).to_string());
    format!("{name}({})", at.join(", "))
}

/// Elements start..end (0-based, end excluded) of the caller's array `name`:
/// Fortran's `name(start + 1:end)`, C's `name[start..end)`.
pub fn range(name: &str, start: usize, end: usize) -> String {
    match MESSAGE_BASE.load(Ordering::Relaxed) {
        1 => format!("{name}({}:{end})", start + 1),
        _ => format!("{name}[{start}..{end})"),
    }
}

/// Column `col` (0-based) of the caller's column-major array `name` of
/// `rows` rows: Fortran's `name(:, col)`, C's `name[k..k + rows)`.
pub fn column(name: &str, col: usize, rows: usize) -> String {
    match MESSAGE_BASE.load(Ordering::Relaxed) {
        1 => format!("{name}(:, {})", col + 1),
        _ => range(name, col * rows, (col + 1) * rows),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock a panicking call held is refused with an Internal error naming
    /// the object; an untouched one is handed out.
    #[test]
    fn a_lock_held_by_a_panicking_call_is_refused() {
        let m = std::sync::Arc::new(std::sync::Mutex::new(1));
        assert_eq!(*locked(&m, "the solver").unwrap(), 1);
        let held = m.clone();
        let panicked = std::thread::spawn(move || {
            let mut g = held.lock().unwrap();
            *g = 2; // half-changed
            panic!("a bug while changing it");
        })
        .join();
        assert!(panicked.is_err());
        let e = locked(&m, "the solver").unwrap_err();
        assert_eq!(e.kind, ErrorKind::Internal);
        assert!(e.message.starts_with("the solver may be half-changed"), "{}", e.message);
    }
}
