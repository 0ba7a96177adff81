//! CPU reference: cache-blocked loops (the serial do-loop order, in blocks).

const BLOCK: usize = 64;

/// b (n x m) = a^T, a m x n, both column-major.
pub fn transpose<T: Copy>(m: usize, n: usize, a: &[T], b: &mut [T]) {
    for j0 in (0..n).step_by(BLOCK) {
        for i0 in (0..m).step_by(BLOCK) {
            for j in j0..(j0 + BLOCK).min(n) {
                for i in i0..(i0 + BLOCK).min(m) {
                    b[j + i * n] = a[i + j * m];
                }
            }
        }
    }
}

/// a = a^T for square n x n, swapping across the diagonal block by block.
pub fn transpose_square_in_place<T: Copy>(n: usize, a: &mut [T]) {
    for j0 in (0..n).step_by(BLOCK) {
        for i0 in (0..=j0).step_by(BLOCK) {
            for j in j0..(j0 + BLOCK).min(n) {
                for i in i0..(i0 + BLOCK).min(n).min(j) {
                    a.swap(i + j * n, j + i * n);
                }
            }
        }
    }
}

/// The serial do-loop of the original code (b(j,i) = a(i,j), i innermost):
/// the baseline the benchmark's speedups are quoted against.
pub fn transpose_serial<T: Copy>(m: usize, n: usize, a: &[T], b: &mut [T]) {
    for j in 0..n {
        for i in 0..m {
            b[j + i * n] = a[i + j * m];
        }
    }
}
