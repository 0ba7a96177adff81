//! Helpers shared by the C-ABI tests: a context on the backend the
//! environment selects (FEGPU_BACKEND), random data, message retrieval.
#![allow(dead_code)]

use fegpu::ffi::array::*;
use fegpu::ffi::context::*;
use fegpu::ffi::*;
use fegpu::*;

pub fn last_message() -> String {
    let mut buf = vec![0u8; 1024];
    unsafe { fegpu_last_error_message(buf.as_mut_ptr() as *mut _, buf.len() as i64) };
    let end = buf.iter().position(|&b| b == 0).unwrap();
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Asserts a call failed with `status` and a message containing every word of `words`.
pub fn expect_err(got: fegpu_status, status: fegpu_status, words: &[&str]) {
    let m = last_message();
    assert_eq!(got, status, "expected {} but got {} ({m})", status_name(status), status_name(got));
    for w in words {
        assert!(m.contains(w), "message {m:?} does not mention {w:?}");
    }
}

pub fn ok(s: fegpu_status) {
    assert_eq!(s, FEGPU_OK, "{}: {}", status_name(s), last_message());
}

pub fn context() -> fegpu_context_t {
    let mut c = 0;
    ok(unsafe { fegpu_context_create(FEGPU_BACKEND_AUTO, 0, &mut c) });
    c
}

/// xorshift64*: fresh data per call without a dependency.
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E3779B97F4A7C15) | 1)
    }
    pub fn next_f64(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545F4914F6CDD1D) >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
    pub fn vec_f64(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next_f64()).collect()
    }
    pub fn vec_f32(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next_f64() as f32).collect()
    }
}

pub fn seed() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
}

pub fn create_f64(ctx: fegpu_context_t, rows: usize, cols: usize, data: &[f64]) -> fegpu_array_t {
    let mut a = 0;
    ok(unsafe { fegpu_array_create_f64(ctx, rows as i64, cols as i64, data.as_ptr(), &mut a) });
    a
}

pub fn create_f32(ctx: fegpu_context_t, rows: usize, cols: usize, data: &[f32]) -> fegpu_array_t {
    let mut a = 0;
    ok(unsafe { fegpu_array_create_f32(ctx, rows as i64, cols as i64, data.as_ptr(), &mut a) });
    a
}

pub fn download_f64(a: fegpu_array_t, n: usize) -> Vec<f64> {
    let mut v = vec![0.0; n];
    ok(unsafe { fegpu_array_download_f64(a, v.as_mut_ptr(), n as i64) });
    v
}

pub fn download_f32(a: fegpu_array_t, n: usize) -> Vec<f32> {
    let mut v = vec![0.0; n];
    ok(unsafe { fegpu_array_download_f32(a, v.as_mut_ptr(), n as i64) });
    v
}

/// The serial do-loop transpose of the concrete-dam program: b(j,i) = a(i,j).
pub fn serial_transpose<T: Copy + Default>(m: usize, n: usize, a: &[T]) -> Vec<T> {
    let mut b = vec![T::default(); m * n];
    for j in 0..n {
        for i in 0..m {
            b[j + i * n] = a[i + j * m];
        }
    }
    b
}
