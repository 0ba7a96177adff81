//! Host-array pipelines through the C ABI: every strategy, stream and chunk
//! count against the serial host loop (and the one-chunk device result) on
//! fresh random data, registered and unregistered arrays, tiny arrays and
//! sizes that do not divide; the profile's byte counts; bad input.

mod common;
use common::*;
use fegpu::ffi::context::*;
use fegpu::ffi::pipeline::*;
use fegpu::*;
use std::ffi::CString;
use std::ptr::{null, null_mut};

#[allow(clippy::too_many_arguments)] // the C call's arguments
fn axpby(ctx: u64, a: f64, x: &[f64], b: f64, y: &mut [f64], strategy: i32, streams: i64, chunks: i64) -> fegpu_status {
    unsafe { fegpu_pipeline_axpby(ctx, y.len() as i64, a, x.as_ptr(), b, y.as_mut_ptr(), strategy, streams, chunks) }
}

#[allow(clippy::too_many_arguments)] // the C call's arguments
fn column_dots(
    ctx: u64,
    m: usize,
    a: &[f64],
    b: &[f64],
    out: &mut [f64],
    strategy: i32,
    streams: i64,
    chunks: i64,
) -> fegpu_status {
    unsafe {
        fegpu_pipeline_column_dots(
            ctx,
            m as i64,
            out.len() as i64,
            a.as_ptr(),
            b.as_ptr(),
            out.as_mut_ptr(),
            strategy,
            streams,
            chunks,
        )
    }
}

/// The serial host loops of the legacy code.
fn serial_axpby(a: f64, x: &[f64], b: f64, y: &[f64]) -> Vec<f64> {
    x.iter().zip(y).map(|(x, y)| a.mul_add(*x, b * y)).collect()
}
fn serial_dots(m: usize, a: &[f64], b: &[f64]) -> Vec<f64> {
    a.chunks(m).zip(b.chunks(m)).map(|(p, q)| p.iter().zip(q).map(|(u, v)| u * v).sum()).collect()
}

const STRATEGIES: [i32; 3] = [FEGPU_PIPELINE_SERIAL, FEGPU_PIPELINE_PER_CHUNK, FEGPU_PIPELINE_STAGED];

#[test]
fn every_strategy_stream_and_chunk_count_gives_the_serial_result() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let ctx = context();
    for n in [1usize, 2, 7, 1000, 100_003] {
        let (x, y0) = (rng.vec_f64(n), rng.vec_f64(n));
        let (a, b) = (rng.next_f64(), rng.next_f64());
        let want = serial_axpby(a, &x, b, &y0);
        for register in [false, true] {
            let mut y = y0.clone();
            let mut x = x.clone();
            if register {
                ok(unsafe { fegpu_host_register(ctx, x.as_mut_ptr().cast(), 8 * n as i64) });
                ok(unsafe { fegpu_host_register(ctx, y.as_mut_ptr().cast(), 8 * n as i64) });
            }
            for strategy in STRATEGIES {
                for chunks in 1..=16i64 {
                    for streams in [1i64, 3, 4, 16] {
                        y.copy_from_slice(&y0);
                        ok(axpby(ctx, a, &x, b, &mut y, strategy, streams, chunks));
                        assert_eq!(
                            y, want,
                            "n {n} strategy {strategy} streams {streams} chunks {chunks} registered {register} (seed {seed})"
                        );
                    }
                }
            }
            if register {
                ok(unsafe { fegpu_host_unregister(ctx, x.as_mut_ptr().cast()) });
                ok(unsafe { fegpu_host_unregister(ctx, y.as_mut_ptr().cast()) });
            }
        }
        // b = 0: y is not read, as in fegpu_vector_axpby (a NaN there once came back)
        for strategy in STRATEGIES {
            let mut y = vec![f64::NAN; n];
            ok(axpby(ctx, a, &x, 0.0, &mut y, strategy, 4, 3));
            assert!(y.iter().zip(&x).all(|(y, x)| *y == a * x), "b = 0, strategy {strategy}: y read");
        }
    }
}

#[test]
fn column_dots_match_the_serial_loop_and_the_one_chunk_result() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let ctx = context();
    for (m, ncols) in [(1usize, 1usize), (5, 3), (1000, 37), (33, 1001)] {
        let (a, b) = (rng.vec_f64(m * ncols), rng.vec_f64(m * ncols));
        let want = serial_dots(m, &a, &b);
        let mut one = vec![f64::NAN; ncols];
        ok(column_dots(ctx, m, &a, &b, &mut one, FEGPU_PIPELINE_SERIAL, 1, 1));
        for (g, w) in one.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()) * m as f64, "m {m}: {g} vs {w} (seed {seed})");
        }
        for strategy in STRATEGIES {
            for chunks in [1i64, 2, 5, 16] {
                let mut out = vec![f64::NAN; ncols];
                ok(column_dots(ctx, m, &a, &b, &mut out, strategy, 4, chunks));
                assert_eq!(out, one, "m {m} ncols {ncols} strategy {strategy} chunks {chunks} (seed {seed})");
            }
        }
        // Automatic: the first two calls measure serially, the third uses the model.
        for _ in 0..3 {
            let mut out = vec![f64::NAN; ncols];
            ok(column_dots(ctx, m, &a, &b, &mut out, FEGPU_PIPELINE_AUTO, 0, 0));
            assert_eq!(out, one);
        }
        // AUTO ignores n_streams and n_chunks, but not values outside their ranges
        let mut out = vec![f64::NAN; ncols];
        expect_err(
            column_dots(ctx, m, &a, &b, &mut out, FEGPU_PIPELINE_AUTO, 17, 0),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["n_streams = 17"],
        );
        expect_err(
            column_dots(ctx, m, &a, &b, &mut out, FEGPU_PIPELINE_AUTO, 0, -1),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["n_chunks = -1"],
        );
        // a chunk an element would be a copy and a launch an element
        expect_err(
            column_dots(ctx, m, &a, &b, &mut out, FEGPU_PIPELINE_PER_CHUNK, 0, (1 << 16) + 1),
            FEGPU_ERR_INVALID_ARGUMENT,
            &["n_chunks = 65537"],
        );
        assert!(out.iter().all(|v| v.is_nan()), "a refused call writes nothing");
    }
}

/// The staged strategy's two orders (`fegpu::pipeline::model::release_on_host`),
/// once the automatic calls have measured an operation: the inner products
/// and gemv (little comes back) are queued from the host as each chunk
/// lands, axpby (y comes back) on the device. The results must not change,
/// over one round or several, registered or staged through the ring.
#[test]
fn kernels_released_from_the_host_give_the_serial_result() {
    use fegpu::context::Context;
    use fegpu::pipeline::{self, Plan, Strategy};
    let seed = seed();
    let mut rng = Rng::new(seed);
    let ctx = Context::new(fegpu::context::Request::Auto, 0).unwrap();
    // About 64 MB in each: over a millisecond of copy, ample per chunk.
    let (m, ncols) = (1000usize, 4000usize);
    let (mut a, mut b) = (rng.vec_f64(m * ncols), rng.vec_f64(m * ncols));
    let want_dots = serial_dots(m, &a, &b);
    let n = 4_000_000;
    let (mut x, y0) = (rng.vec_f64(n), rng.vec_f64(n));
    let want_axpby = serial_axpby(0.75, &x, -1.25, &y0);
    let mut one = vec![f64::NAN; ncols];
    pipeline::column_dots(&ctx, m, &a, &b, &mut one, Some(Plan { strategy: Strategy::Serial, streams: 1, chunks: 1 })).unwrap();
    for (g, w) in one.iter().zip(&want_dots) {
        assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()) * m as f64, "{g} vs {w} (seed {seed})");
    }
    for register in [true, false] {
        let mut y = y0.clone();
        if register {
            for v in [&mut a, &mut b, &mut x, &mut y] {
                ctx.register_host(v.as_mut_ptr().cast(), 8 * v.len()).unwrap();
            }
        }
        // The first two automatic calls measure the operation (the first warms up).
        for _ in 0..2 {
            let mut out = vec![f64::NAN; ncols];
            pipeline::column_dots(&ctx, m, &a, &b, &mut out, None).unwrap();
            pipeline::axpby(&ctx, 0.75, &x, -1.25, &mut y, None).unwrap();
        }
        for (streams, chunks) in [(2usize, 2usize), (4, 4), (3, 8), (4, 7), (16, 16)] {
            let plan = Some(Plan { strategy: Strategy::Staged, streams, chunks });
            let mut out = vec![f64::NAN; ncols];
            let dots = pipeline::column_dots(&ctx, m, &a, &b, &mut out, plan).unwrap();
            assert_eq!(out, one, "streams {streams} chunks {chunks} registered {register} (seed {seed})");
            y.copy_from_slice(&y0);
            let axpby = pipeline::axpby(&ctx, 0.75, &x, -1.25, &mut y, plan).unwrap();
            assert_eq!(y, want_axpby, "streams {streams} chunks {chunks} registered {register} (seed {seed})");
            if ctx.gpu().is_some() && register {
                assert!(
                    dots.released_on_host,
                    "streams {streams} chunks {chunks}: the inner products' kernels queued on the device"
                );
                assert!(
                    !axpby.released_on_host,
                    "streams {streams} chunks {chunks}: axpby's kernels queued by the host, though y comes back"
                );
            }
        }
        if register {
            for v in [&mut a, &mut b, &mut x, &mut y] {
                ctx.unregister_host(v.as_mut_ptr().cast()).unwrap();
            }
        }
    }
    // gemv's first call also loads cuBLAS's kernels (a one-time cost far
    // above its kernel): the second, warm, call's times decide, and with them
    // the host order. 2000 x 2000: 32 MB in, in row panels (2-D copies).
    let (gm, gn) = (2000usize, 2000usize);
    let (mut ga, gx, gy0) = (rng.vec_f64(gm * gn), rng.vec_f64(gn), rng.vec_f64(gm));
    let mut gy = gy0.clone();
    ctx.register_host(ga.as_mut_ptr().cast(), 8 * ga.len()).unwrap();
    ctx.register_host(gy.as_mut_ptr().cast(), 8 * gy.len()).unwrap();
    for _ in 0..2 {
        pipeline::gemv(&ctx, gm, gn, 1.0, &ga, &gx, 0.0, &mut gy, None).unwrap();
    }
    for (streams, chunks) in [(2usize, 2usize), (3, 7)] {
        gy.copy_from_slice(&gy0);
        let report = pipeline::gemv(
            &ctx,
            gm,
            gn,
            2.0,
            &ga,
            &gx,
            0.25,
            &mut gy,
            Some(Plan { strategy: Strategy::Staged, streams, chunks }),
        )
        .unwrap();
        let want = serial_gemm(gm, 1, gn, 2.0, &ga, &gx, 0.25, &gy0);
        assert!(close(&gy, &want, 2.0 * gn as f64), "gemv, streams {streams} chunks {chunks} (seed {seed})");
        if ctx.gpu().is_some() {
            assert!(report.released_on_host, "gemv: kernels queued on the device after two automatic calls");
        }
    }
    ctx.unregister_host(ga.as_mut_ptr().cast()).unwrap();
    ctx.unregister_host(gy.as_mut_ptr().cast()).unwrap();
}

/// The textbook triple loop and its relatives, independent of fegpu's reference.
#[allow(clippy::too_many_arguments)] // BLAS's argument list
fn serial_gemm(m: usize, n: usize, k: usize, alpha: f64, a: &[f64], b: &[f64], beta: f64, c: &[f64]) -> Vec<f64> {
    let mut out = vec![0.0; m * n];
    for j in 0..n {
        for i in 0..m {
            let mut s = 0.0;
            for l in 0..k {
                s += a[i + m * l] * b[l + k * j];
            }
            out[i + m * j] = alpha * s + beta * c[i + m * j];
        }
    }
    out
}

fn close(got: &[f64], want: &[f64], scale: f64) -> bool {
    got.len() == want.len() && got.iter().zip(want).all(|(g, w)| (g - w).abs() <= 1e-13 * scale)
}

#[test]
fn matrix_products_and_panel_transposes_match_the_serial_loops() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let ctx = context();
    for (m, n, k) in [(1usize, 1usize, 1usize), (7, 5, 3), (130, 97, 61), (64, 1000, 8)] {
        let (a, b, c0) = (rng.vec_f64(m * k), rng.vec_f64(k * n), rng.vec_f64(m * n));
        let scale = k as f64 + 1.0;
        for register in [false, true] {
            let (mut a, mut b, mut c) = (a.clone(), b.clone(), c0.clone());
            if register {
                for v in [&mut a, &mut b, &mut c] {
                    ok(unsafe { fegpu_host_register(ctx, v.as_mut_ptr().cast(), 8 * v.len() as i64) });
                }
            }
            for (strategy, streams, chunks) in [
                (FEGPU_PIPELINE_SERIAL, 1, 1),
                (FEGPU_PIPELINE_PER_CHUNK, 3, 7),
                (FEGPU_PIPELINE_STAGED, 4, 16),
                (FEGPU_PIPELINE_STAGED, 16, 5),
            ] {
                for beta in [0.0, -0.5] {
                    c.copy_from_slice(&c0);
                    if beta == 0.0 {
                        c.fill(f64::NAN); // not read when beta = 0
                    }
                    ok(unsafe {
                        fegpu_pipeline_gemm(
                            ctx,
                            m as i64,
                            n as i64,
                            k as i64,
                            1.5,
                            a.as_ptr(),
                            b.as_ptr(),
                            beta,
                            c.as_mut_ptr(),
                            strategy,
                            streams,
                            chunks,
                        )
                    });
                    let want = serial_gemm(m, n, k, 1.5, &a, &b, beta, &c0);
                    assert!(
                        close(&c, &want, scale),
                        "gemm {m}x{n}x{k} beta {beta} strategy {strategy} chunks {chunks} registered {register} (seed {seed})"
                    );
                }
                // gemv: A (m x k) times b's first column.
                let x = &b[..k];
                let mut y = c0[..m].to_vec();
                ok(unsafe {
                    fegpu_pipeline_gemv(
                        ctx,
                        m as i64,
                        k as i64,
                        2.0,
                        a.as_ptr(),
                        x.as_ptr(),
                        0.25,
                        y.as_mut_ptr(),
                        strategy,
                        streams,
                        chunks,
                    )
                });
                let want = serial_gemm(m, 1, k, 2.0, &a, x, 0.25, &c0[..m]);
                assert!(
                    close(&y, &want, 2.0 * scale),
                    "gemv {m}x{k} strategy {strategy} chunks {chunks} registered {register} (seed {seed})"
                );
                // transpose: A (m x k) to At (k x m), exactly.
                let mut at = vec![f64::NAN; m * k];
                ok(unsafe {
                    fegpu_pipeline_transpose(ctx, m as i64, k as i64, a.as_ptr(), at.as_mut_ptr(), strategy, streams, chunks)
                });
                for i in 0..m {
                    for j in 0..k {
                        assert_eq!(
                            at[j + k * i],
                            a[i + m * j],
                            "transpose {m}x{k} strategy {strategy} chunks {chunks} (seed {seed})"
                        );
                    }
                }
            }
            if register {
                for v in [&mut a, &mut b, &mut c] {
                    ok(unsafe { fegpu_host_unregister(ctx, v.as_mut_ptr().cast()) });
                }
            }
        }
    }
    // zero sizes as BLAS takes them: k = 0 leaves C = beta C (not read at beta = 0),
    // n = 0 leaves y = beta y, an empty C or transpose is nothing to do; a negative size is refused
    let mut c = vec![2.0, f64::NAN, 4.0, 5.0];
    ok(unsafe { fegpu_pipeline_gemm(ctx, 2, 2, 0, 1.0, null(), null(), 0.0, c.as_mut_ptr(), 0, 0, 0) });
    assert_eq!(c, [0.0; 4]);
    let mut c = vec![2.0, 3.0, 4.0, 5.0];
    ok(unsafe { fegpu_pipeline_gemm(ctx, 2, 2, 0, 1.0, null(), null(), 0.5, c.as_mut_ptr(), 0, 0, 0) });
    assert_eq!(c, [1.0, 1.5, 2.0, 2.5]);
    let b6 = [1.0; 6];
    ok(unsafe { fegpu_pipeline_gemm(ctx, 0, 3, 2, 1.0, null(), b6.as_ptr(), 0.5, null_mut(), 0, 0, 0) });
    ok(unsafe { fegpu_pipeline_gemv(ctx, 4, 0, 1.0, null(), null(), 2.0, c.as_mut_ptr(), 0, 0, 0) });
    assert_eq!(c, [2.0, 3.0, 4.0, 5.0]);
    ok(unsafe { fegpu_pipeline_transpose(ctx, 0, 7, null(), null_mut(), 0, 0, 0) });
    expect_err(
        unsafe { fegpu_pipeline_gemm(ctx, 2, 2, -1, 1.0, c.as_ptr(), c.as_ptr(), 0.0, c.as_mut_ptr(), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["k = -1"],
    );
    let (a2, x2, mut y2) = (vec![1.0; 4], vec![1.0; 2], vec![0.0; 2]);
    expect_err(
        unsafe { fegpu_pipeline_gemv(ctx, 2, 2, f64::INFINITY, a2.as_ptr(), x2.as_ptr(), 0.0, y2.as_mut_ptr(), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["alpha"],
    );
    expect_err(
        unsafe { fegpu_pipeline_transpose(ctx, 2, 2, null(), c.as_mut_ptr(), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["a"],
    );
    // Overlapping host arrays: an output that shares memory with another
    // argument would be read after it was written; each is refused by name
    // and nothing is written.
    let mut m = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
    let before = m;
    let p = m.as_mut_ptr();
    expect_err(
        unsafe { fegpu_pipeline_gemm(ctx, 2, 2, 2, 1.0, p, a2.as_ptr(), 0.0, p, 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["c and a overlap"],
    );
    expect_err(unsafe { fegpu_pipeline_transpose(ctx, 2, 2, p, p, 0, 0, 0) }, FEGPU_ERR_INVALID_ARGUMENT, &["at and a overlap"]);
    expect_err(
        unsafe { fegpu_pipeline_transpose(ctx, 2, 2, p, p.add(2), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["at and a overlap"],
    );
    expect_err(
        unsafe { fegpu_pipeline_axpby(ctx, 4, 1.0, p, 2.0, p.add(1), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["y and x overlap"],
    );
    expect_err(
        unsafe { fegpu_pipeline_column_dots(ctx, 2, 2, p, a2.as_ptr(), p.add(3), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["out and a overlap"],
    );
    expect_err(
        unsafe { fegpu_pipeline_gemv(ctx, 2, 2, 1.0, p, x2.as_ptr(), 0.0, p.add(2), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["y and a overlap"],
    );
    assert_eq!(m, before, "a refused call changed its arrays");
    // Inputs may share memory: a.a by column through the same array twice.
    let mut dots = [0.0; 2];
    ok(unsafe { fegpu_pipeline_column_dots(ctx, 2, 2, a2.as_ptr(), a2.as_ptr(), dots.as_mut_ptr(), 0, 0, 0) });
    assert_eq!(dots, [2.0, 2.0]);
}

fn op_profile(ctx: u64, op: &str) -> fegpu_op_profile {
    let mut p = fegpu_op_profile::default();
    let name = CString::new(op).unwrap();
    ok(unsafe { fegpu_profile_op(ctx, name.as_ptr(), &mut p) });
    p
}

#[test]
fn the_profile_counts_the_bytes_moved() {
    let mut rng = Rng::new(seed());
    let ctx = context();
    let device = fegpu::ffi::registry::get::<fegpu::context::Context>(ctx, "ctx").unwrap().gpu().is_some();
    assert_eq!(op_profile(ctx, "axpby").calls, 0);
    ok(fegpu_profile_enable(ctx, 1));
    let (x, mut y) = (rng.vec_f64(1000), rng.vec_f64(1000));
    for strategy in [FEGPU_PIPELINE_STAGED, FEGPU_PIPELINE_PER_CHUNK] {
        ok(axpby(ctx, 2.0, &x, 1.0, &mut y, strategy, 4, 7));
    }
    let (a, b, mut out) = (rng.vec_f64(500), rng.vec_f64(500), vec![0.0; 50]);
    ok(column_dots(ctx, 10, &a, &b, &mut out, FEGPU_PIPELINE_STAGED, 3, 0));
    let p = op_profile(ctx, "axpby");
    assert_eq!(p.calls, 2);
    // x and y in, y out, each call; nothing moves on the CPU backend.
    let moved = |bytes: i64| if device { bytes } else { 0 };
    assert_eq!((p.h2d_bytes, p.d2h_bytes), (moved(2 * 16_000), moved(2 * 8_000)));
    let d = op_profile(ctx, "column_dots");
    assert_eq!((d.calls, d.h2d_bytes, d.d2h_bytes), (1, moved(8_000), moved(400)));
    assert!(p.wall_seconds > 0.0 && p.serial_seconds > 0.0 && (!device || p.kernel_seconds > 0.0));
    let path = std::env::temp_dir().join(format!("fegpu-profile-test-{}.json", std::process::id()));
    let c_path = CString::new(path.to_str().unwrap()).unwrap();
    ok(unsafe { fegpu_profile_report(ctx, c_path.as_ptr()) });
    let json = std::fs::read_to_string(&path).unwrap();
    assert!(json.contains("\"operation\": \"axpby\", \"calls\": 2") && json.contains("\"operation\": \"column_dots\""), "{json}");
    let _ = std::fs::remove_file(path);
    // Past the first calls only one in TIMED_EVERY times its phases, but every call counts its bytes.
    for _ in 0..20 {
        ok(axpby(ctx, 2.0, &x, 1.0, &mut y, FEGPU_PIPELINE_STAGED, 2, 0));
    }
    let p = op_profile(ctx, "axpby");
    assert_eq!((p.calls, p.h2d_bytes, p.d2h_bytes), (22, moved(22 * 16_000), moved(22 * 8_000)));
    assert!(!device || p.kernel_seconds > 0.0);
    // Off again: nothing more is recorded.
    ok(fegpu_profile_enable(ctx, 0));
    ok(axpby(ctx, 2.0, &x, 1.0, &mut y, FEGPU_PIPELINE_STAGED, 2, 0));
    assert_eq!(op_profile(ctx, "axpby").calls, 22);
}

#[test]
fn bad_input_is_refused_and_the_output_left_alone() {
    let ctx = context();
    let x = vec![1.0; 10];
    let mut y = vec![3.0; 10];
    expect_err(axpby(ctx, 1.0, &x, 1.0, &mut y, 7, 2, 0), FEGPU_ERR_INVALID_ARGUMENT, &["strategy = 7"]);
    expect_err(axpby(ctx, 1.0, &x, 1.0, &mut y, FEGPU_PIPELINE_STAGED, 17, 0), FEGPU_ERR_INVALID_ARGUMENT, &["n_streams = 17"]);
    expect_err(axpby(ctx, 1.0, &x, 1.0, &mut y, FEGPU_PIPELINE_STAGED, 2, -1), FEGPU_ERR_INVALID_ARGUMENT, &["n_chunks = -1"]);
    expect_err(axpby(ctx, f64::NAN, &x, 1.0, &mut y, FEGPU_PIPELINE_STAGED, 2, 0), FEGPU_ERR_INVALID_ARGUMENT, &["a = NaN"]);
    expect_err(
        unsafe { fegpu_pipeline_axpby(ctx, 10, 1.0, null(), 1.0, y.as_mut_ptr(), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["x"],
    );
    expect_err(
        unsafe { fegpu_pipeline_axpby(ctx, -3, 1.0, x.as_ptr(), 1.0, y.as_mut_ptr(), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["n = -3"],
    );
    assert!(y.iter().all(|&v| v == 3.0));
    let mut out = vec![5.0; 2];
    ok(column_dots(ctx, 0, &[], &[], &mut out, 0, 0, 0)); // empty columns: every dot is 0
    assert_eq!(out, [0.0, 0.0]);
    out = vec![5.0; 2];
    expect_err(
        unsafe { fegpu_pipeline_column_dots(ctx, -1, 2, x.as_ptr(), x.as_ptr(), out.as_mut_ptr(), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["m = -1"],
    );
    expect_err(
        unsafe { fegpu_pipeline_column_dots(ctx, 5, 2, x.as_ptr(), x.as_ptr(), null_mut(), 0, 0, 0) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["out"],
    );
    assert_eq!(out, [5.0, 5.0]);
    // Empty arrays are a no-op.
    ok(unsafe { fegpu_pipeline_axpby(ctx, 0, 1.0, null(), 1.0, null_mut(), 0, 0, 0) });
    let mut p = fegpu_op_profile::default();
    expect_err(unsafe { fegpu_profile_op(ctx, null(), &mut p) }, FEGPU_ERR_INVALID_ARGUMENT, &["op"]);
    // A misspelt name is refused, not answered with an empty profile.
    expect_err(unsafe { fegpu_profile_op(ctx, c"axbpy".as_ptr(), &mut p) }, FEGPU_ERR_INVALID_ARGUMENT, &["axbpy", "gemv"]);
    ok(fegpu_context_destroy(ctx));
    expect_err(axpby(ctx, 1.0, &x, 1.0, &mut y, 0, 0, 0), FEGPU_ERR_INVALID_HANDLE, &["ctx"]);
}
