//! Transpose and copy through the C ABI against the serial loop, on the
//! backend FEGPU_BACKEND selects (CPU in CI, CUDA on the GPU machine).
//! Outputs are poisoned with NaN first so an unwritten element fails.

mod common;
use common::*;
use fegpu::ffi::array::*;
use fegpu::ffi::context::*;
use fegpu::ffi::dense::*;

const SIZES: &[(usize, usize)] = &[(1, 1), (1, 77), (77, 1), (31, 33), (32, 32), (33, 31), (65, 129), (300, 17), (1024, 1024)];
const VARIANTS: &[i32] = &[FEGPU_VARIANT_AUTO, FEGPU_VARIANT_NAIVE, FEGPU_VARIANT_TILE, FEGPU_VARIANT_PADDED];

#[test]
fn out_of_place_matches_the_serial_loop_f64_and_f32() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    for &(m, n) in SIZES {
        let a = rng.vec_f64(m * n);
        let want = serial_transpose(m, n, &a);
        let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
        let want32 = serial_transpose(m, n, &a32);
        let src = create_f64(ctx, m, n, &a);
        let src32 = create_f32(ctx, m, n, &a32);
        for &v in VARIANTS {
            let dst = create_f64(ctx, n, m, &vec![f64::NAN; m * n]);
            ok(fegpu_dense_transpose(src, dst, v));
            assert_eq!(download_f64(dst, m * n), want, "f64 {m}x{n} variant {v}");
            let dst32 = create_f32(ctx, n, m, &vec![f32::NAN; m * n]);
            ok(fegpu_dense_transpose(src32, dst32, v));
            assert_eq!(download_f32(dst32, m * n), want32, "f32 {m}x{n} variant {v}");
        }
        // the source is left as it was
        assert_eq!(download_f64(src, m * n), a);
    }
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn in_place_square_matches_the_serial_loop() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    for n in [1usize, 2, 31, 32, 33, 64, 100, 257, 1024] {
        let a = rng.vec_f64(n * n);
        let want = serial_transpose(n, n, &a);
        for &v in VARIANTS {
            let arr = create_f64(ctx, n, n, &a);
            ok(fegpu_dense_transpose_in_place(arr, v));
            assert_eq!(download_f64(arr, n * n), want, "f64 {n}x{n} in place, variant {v}");
            let a32: Vec<f32> = a.iter().map(|&x| x as f32).collect();
            let arr32 = create_f32(ctx, n, n, &a32);
            ok(fegpu_dense_transpose_in_place(arr32, v));
            assert_eq!(download_f32(arr32, n * n), serial_transpose(n, n, &a32), "f32 {n} in place, variant {v}");
        }
    }
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn copy_reproduces_the_source_for_every_variant() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    for &(m, n) in SIZES {
        let a = rng.vec_f64(m * n);
        let src = create_f64(ctx, m, n, &a);
        for &v in VARIANTS {
            let dst = create_f64(ctx, m, n, &vec![f64::NAN; m * n]);
            ok(fegpu_dense_copy(src, dst, v));
            assert_eq!(download_f64(dst, m * n), a, "copy {m}x{n} variant {v}");
        }
    }
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn host_convenience_forms_match_the_serial_loop() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    for &(m, n) in SIZES {
        let a = rng.vec_f64(m * n);
        let mut at = vec![f64::NAN; m * n];
        ok(unsafe { fegpu_dense_transpose_host_f64(ctx, m as i64, n as i64, a.as_ptr(), at.as_mut_ptr(), FEGPU_VARIANT_AUTO) });
        assert_eq!(at, serial_transpose(m, n, &a));
        let a32 = rng.vec_f32(m * n);
        let mut at32 = vec![f32::NAN; m * n];
        ok(unsafe {
            fegpu_dense_transpose_host_f32(ctx, m as i64, n as i64, a32.as_ptr(), at32.as_mut_ptr(), FEGPU_VARIANT_NAIVE)
        });
        assert_eq!(at32, serial_transpose(m, n, &a32));
    }
    let n = 97;
    let a = rng.vec_f64(n * n);
    let mut b = a.clone();
    ok(unsafe { fegpu_dense_transpose_host_in_place_f64(ctx, n as i64, b.as_mut_ptr(), FEGPU_VARIANT_AUTO) });
    assert_eq!(b, serial_transpose(n, n, &a));
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn slices_move_exactly_the_elements_asked_for() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    let (m, n) = (40, 7);
    let a = rng.vec_f64(m * n);
    let arr = create_f64(ctx, m, n, &a);
    // 1-based: column 3 (elements 81..120) as a Fortran caller would name it
    let mut col = vec![f64::NAN; m];
    ok(unsafe { fegpu_array_download_slice_f64(arr, (2 * m + 1) as i64, m as i64, col.as_mut_ptr(), 1) });
    assert_eq!(col, a[2 * m..3 * m]);
    let patch = rng.vec_f64(5);
    ok(unsafe { fegpu_array_upload_slice_f64(arr, 10, 5, patch.as_ptr(), 0) });
    let mut want = a.clone();
    want[10..15].copy_from_slice(&patch);
    assert_eq!(download_f64(arr, m * n), want);
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn registered_host_memory_round_trips() {
    let ctx = context();
    let mut rng = Rng::new(seed());
    let n = 1 << 16;
    let mut host = rng.vec_f64(n);
    let bytes = (n * 8) as i64;
    ok(unsafe { fegpu_host_register(ctx, host.as_mut_ptr() as *mut _, bytes) });
    let arr = create_f64(ctx, n, 1, &host);
    let want = host.clone();
    host.iter_mut().for_each(|x| *x = f64::NAN);
    ok(unsafe { fegpu_array_download_f64(arr, host.as_mut_ptr(), n as i64) });
    assert_eq!(host, want);
    ok(unsafe { fegpu_host_unregister(ctx, host.as_mut_ptr() as *mut _) });
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn every_compiled_tile_shape_matches_the_serial_loop() {
    use fegpu::array::Array;
    use fegpu::dense::{cuda::SHAPES, transpose_shaped, Variant};
    let ctx = std::sync::Arc::new(fegpu::context::Context::new(fegpu::context::Request::Auto, 0).unwrap());
    let mut rng = Rng::new(seed());
    for &(m, n) in &[(1usize, 77usize), (77, 1), (65, 129), (300, 17), (257, 513)] {
        let a = rng.vec_f32(m * n);
        let src = Array::new(ctx.clone(), m, n, Some(&a)).unwrap();
        for s in SHAPES {
            for v in [Variant::Tile, Variant::Padded] {
                let dst = Array::new(ctx.clone(), n, m, Some(&vec![f32::NAN; m * n])).unwrap();
                transpose_shaped(&src, &dst, Some(v), Some(s)).unwrap();
                let mut got = vec![0.0f32; m * n];
                dst.download(0, &mut got, "dst").unwrap();
                assert_eq!(got, serial_transpose(m, n, &a), "{m}x{n} {v:?} {s:?}");
            }
        }
    }
}
