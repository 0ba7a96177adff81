//! Status codes and the error type every fallible call returns.

use std::fmt;

/// Status returned by every C entry point (0 = success).
#[allow(non_camel_case_types)]
pub type fegpu_status = i32;

pub const FEGPU_OK: fegpu_status = 0;
/// An argument is out of range, null where data is needed, or not finite.
pub const FEGPU_ERR_INVALID_ARGUMENT: fegpu_status = 1;
/// A handle is 0, destroyed, from a destroyed context, or of the wrong type.
pub const FEGPU_ERR_INVALID_HANDLE: fegpu_status = 2;
/// Array sizes or shapes do not agree with each other.
pub const FEGPU_ERR_SIZE_MISMATCH: fegpu_status = 3;
/// The device has no room for the allocation; nothing was changed.
pub const FEGPU_ERR_OUT_OF_DEVICE_MEMORY: fegpu_status = 4;
/// The CUDA driver or NVRTC reported an error (the message says whether the context is still usable).
pub const FEGPU_ERR_DEVICE: fegpu_status = 5;
/// An iterative solver stopped at its iteration limit.
pub const FEGPU_ERR_NOT_CONVERGED: fegpu_status = 6;
/// An iterative method or factorisation broke down (the message names the quantity).
pub const FEGPU_ERR_BREAKDOWN: fegpu_status = 7;
/// The operation is not available on this backend or for these arguments.
pub const FEGPU_ERR_UNSUPPORTED: fegpu_status = 8;
/// A bug in fegpu (an internal panic was caught); please report the message.
pub const FEGPU_ERR_INTERNAL: fegpu_status = 9;
/// The CUDA backend was requested but no driver or device answers.
pub const FEGPU_ERR_NO_DEVICE: fegpu_status = 10;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub status: fegpu_status,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn new(status: fegpu_status, message: impl Into<String>) -> Self {
        Error { status, message: message.into() }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(FEGPU_ERR_INVALID_ARGUMENT, message)
    }
    pub fn size(message: impl Into<String>) -> Self {
        Self::new(FEGPU_ERR_SIZE_MISMATCH, message)
    }
    pub fn handle(message: impl Into<String>) -> Self {
        Self::new(FEGPU_ERR_INVALID_HANDLE, message)
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(FEGPU_ERR_UNSUPPORTED, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, status_name(self.status))
    }
}

impl std::error::Error for Error {}

pub fn status_name(status: fegpu_status) -> &'static str {
    match status {
        FEGPU_OK => "FEGPU_OK",
        FEGPU_ERR_INVALID_ARGUMENT => "FEGPU_ERR_INVALID_ARGUMENT",
        FEGPU_ERR_INVALID_HANDLE => "FEGPU_ERR_INVALID_HANDLE",
        FEGPU_ERR_SIZE_MISMATCH => "FEGPU_ERR_SIZE_MISMATCH",
        FEGPU_ERR_OUT_OF_DEVICE_MEMORY => "FEGPU_ERR_OUT_OF_DEVICE_MEMORY",
        FEGPU_ERR_DEVICE => "FEGPU_ERR_DEVICE",
        FEGPU_ERR_NOT_CONVERGED => "FEGPU_ERR_NOT_CONVERGED",
        FEGPU_ERR_BREAKDOWN => "FEGPU_ERR_BREAKDOWN",
        FEGPU_ERR_UNSUPPORTED => "FEGPU_ERR_UNSUPPORTED",
        FEGPU_ERR_INTERNAL => "FEGPU_ERR_INTERNAL",
        FEGPU_ERR_NO_DEVICE => "FEGPU_ERR_NO_DEVICE",
        _ => "unknown status",
    }
}

/// Checks a size argument that crosses the ABI as int64: it must be >= 1.
pub fn positive(name: &str, value: i64) -> Result<usize> {
    if value < 1 {
        return Err(Error::invalid(format!("{name} = {value}: must be at least 1")));
    }
    usize::try_from(value).map_err(|_| Error::invalid(format!("{name} = {value}: too large")))
}

/// rows * cols without overflow.
pub fn element_count(rows: usize, cols: usize) -> Result<usize> {
    rows.checked_mul(cols)
        .filter(|n| n.checked_mul(8).is_some())
        .ok_or_else(|| Error::invalid(format!("{rows} x {cols} elements overflow the address space")))
}
