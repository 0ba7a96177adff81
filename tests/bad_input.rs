//! Bad input through the C ABI: each gets its status and a message naming the
//! argument, and nothing is changed.

mod common;
use common::*;
use fegpu::ffi::array::*;
use fegpu::ffi::context::*;
use fegpu::ffi::dense::*;
use fegpu::*;
use std::ptr::{null, null_mut};

#[test]
fn sizes_shapes_and_pointers() {
    let ctx = context();
    let data = vec![1.0f64; 12];
    let mut h = 0;
    unsafe {
        expect_err(fegpu_array_create_f64(ctx, 0, 3, data.as_ptr(), &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["rows = 0"]);
        expect_err(fegpu_array_create_f64(ctx, 3, -4, data.as_ptr(), &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["cols = -4"]);
        expect_err(fegpu_array_create_f64(ctx, 3, 4, null(), &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["host", "null"]);
        expect_err(fegpu_array_create_f64(ctx, 3, 4, data.as_ptr(), null_mut()), FEGPU_ERR_INVALID_ARGUMENT, &["arr", "null"]);
        expect_err(fegpu_array_create_empty(ctx, 7, 3, 4, &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["dtype = 7"]);
        expect_err(fegpu_array_create_f64(ctx, i64::MAX, 4, data.as_ptr(), &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["overflow"]);
        assert_eq!(h, 0, "a failed create leaves the out-parameter alone");
    }
    let a = create_f64(ctx, 3, 4, &data);
    let wrong = create_f64(ctx, 3, 4, &[7.0; 12]);
    // mismatched shape: a is 3x4, so dst must be 4x3; dst is left as it was
    expect_err(fegpu_dense_transpose(a, wrong, FEGPU_VARIANT_AUTO), FEGPU_ERR_SIZE_MISMATCH, &["dst must be 4 x 3", "3 x 4"]);
    assert_eq!(download_f64(wrong, 12), vec![7.0; 12]);
    expect_err(fegpu_dense_transpose(a, a, FEGPU_VARIANT_AUTO), FEGPU_ERR_INVALID_ARGUMENT, &["same array"]);
    expect_err(fegpu_dense_transpose_in_place(a, FEGPU_VARIANT_AUTO), FEGPU_ERR_SIZE_MISMATCH, &["square"]);
    let b = create_f64(ctx, 4, 3, &data);
    expect_err(fegpu_dense_transpose(a, b, 9), FEGPU_ERR_INVALID_ARGUMENT, &["variant = 9"]);
    let f = create_f32(ctx, 4, 3, &[0.0; 12]);
    expect_err(fegpu_dense_transpose(a, f, FEGPU_VARIANT_AUTO), FEGPU_ERR_INVALID_ARGUMENT, &["f64", "f32"]);
    expect_err(fegpu_dense_copy(a, b, FEGPU_VARIANT_AUTO), FEGPU_ERR_SIZE_MISMATCH, &["dst must be 3 x 4"]);
    let mut out = vec![0.0f64; 12];
    unsafe {
        expect_err(fegpu_array_download_f64(a, out.as_mut_ptr(), 11), FEGPU_ERR_SIZE_MISMATCH, &["count = 11", "12"]);
        expect_err(fegpu_array_download_f64(a, null_mut(), 12), FEGPU_ERR_INVALID_ARGUMENT, &["host", "null"]);
        expect_err(fegpu_array_download_f32(a, out.as_mut_ptr() as *mut f32, 12), FEGPU_ERR_INVALID_ARGUMENT, &["f64", "f32"]);
        expect_err(fegpu_array_download_slice_f64(a, 10, 5, out.as_mut_ptr(), 0), FEGPU_ERR_SIZE_MISMATCH, &["outside"]);
        expect_err(fegpu_array_download_slice_f64(a, 0, 5, out.as_mut_ptr(), 1), FEGPU_ERR_INVALID_ARGUMENT, &["index_base"]);
        expect_err(fegpu_array_download_slice_f64(a, 1, 5, out.as_mut_ptr(), 2), FEGPU_ERR_INVALID_ARGUMENT, &["index_base = 2"]);
        // first - index_base would wrap: refused as below the base, by its value
        expect_err(
            fegpu_array_download_slice_f64(a, i64::MIN, 5, out.as_mut_ptr(), 1),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["first = -9223372036854775808 is below index_base = 1"],
        );
        expect_err(fegpu_array_upload_f64(a, data.as_ptr(), 13), FEGPU_ERR_SIZE_MISMATCH, &["count = 13"]);
        let mut at = vec![0.0; 12];
        expect_err(
            fegpu_dense_transpose_host_f64(ctx, 3, 0, data.as_ptr(), at.as_mut_ptr(), 0),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["n = 0"],
        );
        expect_err(
            fegpu_dense_transpose_host_f64(ctx, 3, 4, data.as_ptr(), null_mut(), 0),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["at", "null"],
        );
        let p = at.as_mut_ptr();
        expect_err(fegpu_dense_transpose_host_f64(ctx, 3, 4, p, p, 0), FEGPU_ERR_INVALID_ARGUMENT, &["overlap"]);
        expect_err(fegpu_host_register(ctx, null_mut(), 8), FEGPU_ERR_INVALID_ARGUMENT, &["ptr", "null"]);
        // a length in elements where bytes were meant, or past the address space: refused on both backends
        for bytes in [1i64 << 40, i64::MAX] {
            expect_err(
                fegpu_host_register(ctx, out.as_mut_ptr().cast(), bytes),
                FEGPU_ERR_INVALID_ARGUMENT,
                &["bytes", "not all"],
            );
        }
        ok(fegpu_host_register(ctx, out.as_mut_ptr().cast(), 8 * out.len() as i64));
        ok(fegpu_host_unregister(ctx, out.as_mut_ptr().cast()));
        expect_err(fegpu_host_unregister(ctx, out.as_mut_ptr() as *mut _), FEGPU_ERR_INVALID_ARGUMENT, &["not registered"]);
    }
    assert_eq!(download_f64(a, 12), data, "nothing changed by the failed calls");
    // optional out-parameters: a misaligned one is named, and none is written
    let mut words = [0u64; 3];
    let (rows, mut cols, mut dtype) = (words.as_mut_ptr() as usize + 1, -1i64, -1i32);
    expect_err(
        unsafe { fegpu_array_shape(a, rows as *mut i64, &mut cols, &mut dtype) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["rows = 0x", "not aligned"],
    );
    assert_eq!((words, cols, dtype), ([0; 3], -1, -1), "a refused shape wrote an out-parameter");
    expect_err(
        unsafe { fegpu_array_shape(a, &mut cols, null_mut(), (words.as_mut_ptr() as usize + 2) as *mut i32) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["dtype = 0x"],
    );
    assert_eq!((words, cols), ([0; 3], -1), "a refused shape wrote an out-parameter");
    let (mut r, mut c) = (0i64, 0i64);
    ok(unsafe { fegpu_array_shape(a, &mut r, &mut c, null_mut()) });
    assert_eq!((r, c), (3, 4));
    ok(fegpu_context_destroy(ctx));
}

#[test]
fn stale_foreign_and_null_handles() {
    let ctx = context();
    let a = create_f64(ctx, 2, 2, &[1.0, 2.0, 3.0, 4.0]);
    let b = create_f64(ctx, 2, 2, &[0.0; 4]);
    expect_err(fegpu_dense_transpose(0, b, 0), FEGPU_ERR_INVALID_HANDLE, &["src", "null handle"]);
    expect_err(
        fegpu_dense_transpose(ctx, b, 0),
        FEGPU_ERR_INVALID_HANDLE,
        &["src", "fegpu_context_t", "expected a fegpu_array_t"],
    );
    expect_err(fegpu_context_destroy(a), FEGPU_ERR_INVALID_HANDLE, &["ctx", "fegpu_array_t"]);
    expect_err(fegpu_dense_transpose(12345, b, 0), FEGPU_ERR_INVALID_HANDLE, &["not a fegpu handle"]);
    ok(fegpu_array_destroy(a));
    expect_err(fegpu_array_destroy(a), FEGPU_ERR_INVALID_HANDLE, &["arr", "destroyed"]);
    expect_err(fegpu_dense_transpose(a, b, 0), FEGPU_ERR_INVALID_HANDLE, &["src", "destroyed"]);
    // destroying the context invalidates its arrays
    ok(fegpu_context_destroy(ctx));
    expect_err(fegpu_array_destroy(b), FEGPU_ERR_INVALID_HANDLE, &["destroyed"]);
    expect_err(fegpu_context_destroy(ctx), FEGPU_ERR_INVALID_HANDLE, &["ctx", "destroyed"]);
}

#[test]
fn arrays_of_two_contexts_do_not_mix() {
    let (c1, c2) = (context(), context());
    let a = create_f64(c1, 2, 3, &[0.0; 6]);
    let b = create_f64(c2, 3, 2, &[0.0; 6]);
    expect_err(fegpu_dense_transpose(a, b, 0), FEGPU_ERR_INVALID_ARGUMENT, &["one context"]);
    ok(fegpu_context_destroy(c1));
    ok(fegpu_context_destroy(c2));
}

#[test]
fn context_arguments_and_environment() {
    let mut c = 0;
    unsafe {
        expect_err(fegpu_context_create(FEGPU_BACKEND_CPU, 0, null_mut()), FEGPU_ERR_INVALID_ARGUMENT, &["ctx", "null"]);
    }
    // The environment overrides the argument; only check values it does not set.
    if std::env::var("FEGPU_BACKEND").is_err() {
        unsafe {
            expect_err(fegpu_context_create(5, 0, &mut c), FEGPU_ERR_INVALID_ARGUMENT, &["backend = 5"]);
            expect_err(fegpu_context_create(FEGPU_BACKEND_CPU, -1, &mut c), FEGPU_ERR_INVALID_ARGUMENT, &["device = -1"]);
            ok(fegpu_context_create(FEGPU_BACKEND_CPU, 0, &mut c));
            let mut b = -1;
            ok(fegpu_context_backend(c, &mut b));
            assert_eq!(b, FEGPU_BACKEND_CPU);
            ok(fegpu_context_destroy(c));
        }
    }
    let mut buf = [0i8; 4];
    assert_eq!(unsafe { fegpu::ffi::fegpu_last_error_message(buf.as_mut_ptr(), 0) }, FEGPU_ERR_INVALID_ARGUMENT);
    // A short buffer gets a truncated, terminated message.
    unsafe { fegpu_context_create(FEGPU_BACKEND_CPU, 0, null_mut()) };
    assert_eq!(unsafe { fegpu::ffi::fegpu_last_error_message(buf.as_mut_ptr(), 4) }, FEGPU_OK);
    assert_eq!(buf[3], 0);
}

/// Found by a bad-input review: sizes no memory holds, a near-null space
/// that spans nothing or lies near underflow (or whose largest value is
/// subnormal), a GMRES restart far past maxit or past 10,000, and the Gauss-Seidel sweeps' own range, each refused or handled
/// with a status and a message naming the argument (no abort, no crash).
#[test]
fn amg_and_gmres_sizes_and_near_null_spaces() {
    use fegpu::ffi::sparse::*;
    let ctx = context();
    let (rp, ci, v) = fegpu::sparse::gallery::laplacian7(6);
    let n = rp.len() - 1;
    let mut a = 0;
    ok(unsafe { fegpu_csr_create_i64(ctx, n as i64, n as i64, v.len() as i64, rp.as_ptr(), ci.as_ptr(), v.as_ptr(), 0, &mut a) });
    let mut s = 0;
    let small = vec![1.0f64; 2 * n];
    unsafe {
        // counts no host holds: refused before the caller's array is read
        for count in [1i64 << 40, 1 << 34] {
            expect_err(
                fegpu_solver_create_amg(a, FEGPU_METHOD_CG, null(), small.as_ptr(), count, &mut s),
                FEGPU_ERR_OUT_OF_MEMORY,
                &["near_null_space", &format!("{count} vectors")],
            );
        }
        // a vector of zeros spans nothing
        let mut zero = vec![1.0f64; 2 * n];
        zero[n..].iter_mut().for_each(|x| *x = 0.0);
        expect_err(
            fegpu_solver_create_amg(a, FEGPU_METHOD_CG, null(), zero.as_ptr(), 2, &mut s),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["near-null space vector 1", "zero"],
        );
        assert_eq!(s, 0, "a refused create leaves the out-parameter alone");
        // a vector whose largest magnitude is subnormal: its multiplier would overflow
        let mut tiny = vec![1.0f64; 2 * n];
        tiny[n..].iter_mut().for_each(|x| *x = 1e-310);
        expect_err(
            fegpu_solver_create_amg(a, FEGPU_METHOD_CG, null(), tiny.as_ptr(), 2, &mut s),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["near-null space vector 1", "subnormal"],
        );
        // Gauss-Seidel takes 1 to 8 sweeps, the others up to 16
        let mut o = fegpu_amg_options { smoother: FEGPU_SMOOTHER_GAUSS_SEIDEL, sweeps: 9, ..fegpu_amg_options::default() };
        expect_err(
            fegpu_solver_create_amg(a, FEGPU_METHOD_BICGSTAB, &o, null(), 0, &mut s),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["options.sweeps = 9", "Gauss-Seidel: 1 to 8"],
        );
        o.smoother = FEGPU_SMOOTHER_L1_JACOBI;
        // a cycle that does not exist
        let w = fegpu_amg_options { cycle: 3, ..o };
        expect_err(
            fegpu_solver_create_amg(a, FEGPU_METHOD_CG, &w, null(), 0, &mut s),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["options.cycle = 3", "FEGPU_CYCLE_HYBRID"],
        );
        ok(fegpu_solver_create_amg(a, FEGPU_METHOD_CG, &o, null(), 0, &mut s));
        ok(fegpu_solver_destroy(s));
        // rigid-body modes: `len` refused before the coordinates are read
        let (coords, mut modes) = ([0.0f64; 12], [0.0f64; 72]);
        expect_err(
            fegpu_rigid_body_modes(3, 1 << 40, coords.as_ptr(), modes.as_mut_ptr(), 72),
            FEGPU_ERR_SIZE_MISMATCH,
            &["len = 72"],
        );
        expect_err(
            fegpu_rigid_body_modes(3, 4, coords.as_ptr(), modes.as_mut_ptr(), 71),
            FEGPU_ERR_SIZE_MISMATCH,
            &["len = 71", "72"],
        );
        // restarts past 10,000 are refused (a basis and Hessenberg matrix that
        // large only ever hung a caller that also passed a huge maxit)
        for restart in [10_001, i32::MAX] {
            expect_err(
                fegpu_solver_create_gmres(a, FEGPU_PRECOND_NONE, restart, &mut s),
                FEGPU_ERR_INVALID_ARGUMENT,
                &[&format!("restart = {restart}"), "1 to 10000"],
            );
        }
        // GMRES(10,000) with maxit 10 holds 11 basis vectors, not 10,001
        ok(fegpu_solver_create_gmres(a, FEGPU_PRECOND_NONE, 10_000, &mut s));
        let (b, x) = (create_f64(ctx, n, 1, &vec![1.0; n]), create_f64(ctx, n, 1, &vec![0.0; n]));
        let status = fegpu_solver_solve(s, b, x, 1e-30, 10, null_mut());
        assert_eq!(status, FEGPU_ERR_NOT_CONVERGED, "10 iterations cannot reach 1e-30");
        ok(fegpu_solver_destroy(s));
    }
    ok(fegpu_context_destroy(ctx));
}
