//! The C status codes: every entry point returns one (0 = success), and
//! each `ErrorKind` of the library has its code here.

use crate::error::ErrorKind;

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
/// The host has no room for the allocation (or the size exceeds what this
/// machine's memory could ever hold); nothing was changed.
pub const FEGPU_ERR_OUT_OF_MEMORY: fegpu_status = 11;

impl From<ErrorKind> for fegpu_status {
    fn from(kind: ErrorKind) -> fegpu_status {
        match kind {
            ErrorKind::InvalidArgument => FEGPU_ERR_INVALID_ARGUMENT,
            ErrorKind::InvalidHandle => FEGPU_ERR_INVALID_HANDLE,
            ErrorKind::SizeMismatch => FEGPU_ERR_SIZE_MISMATCH,
            ErrorKind::OutOfDeviceMemory => FEGPU_ERR_OUT_OF_DEVICE_MEMORY,
            ErrorKind::Device => FEGPU_ERR_DEVICE,
            ErrorKind::NotConverged => FEGPU_ERR_NOT_CONVERGED,
            ErrorKind::Breakdown => FEGPU_ERR_BREAKDOWN,
            ErrorKind::Unsupported => FEGPU_ERR_UNSUPPORTED,
            ErrorKind::Internal => FEGPU_ERR_INTERNAL,
            ErrorKind::NoDevice => FEGPU_ERR_NO_DEVICE,
            ErrorKind::OutOfMemory => FEGPU_ERR_OUT_OF_MEMORY,
        }
    }
}

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
        FEGPU_ERR_OUT_OF_MEMORY => "FEGPU_ERR_OUT_OF_MEMORY",
        _ => "unknown status",
    }
}
