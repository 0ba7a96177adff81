//! The FE-IIEE rad_fields accumulator through the C ABI: the backend against
//! the CPU reference on random data (element by element and in one call, every
//! kernel variant), the equivalence principle for a Hertzian dipole inside a
//! sphere as independent truth, coincident points, several devices, bad input.

mod common;
use common::*;
use fegpu::ffi::context::*;
use fegpu::ffi::fegpu_context_t;
use fegpu::ffi::radfields::*;
use fegpu::*;
use num_complex::Complex64;
use std::f64::consts::PI;
use std::ptr::{null, null_mut};

struct Acc(fegpu_radfields_t);
impl Drop for Acc {
    fn drop(&mut self) {
        fegpu_radfields_destroy(self.0);
    }
}

fn as_f64(z: &Complex64) -> *const f64 {
    z as *const Complex64 as *const f64
}

fn accumulator(ctx: fegpu_context_t, s_points: &[f64], n_rhs: usize, k: Complex64, omega_mu: Complex64) -> Acc {
    let mut a = 0;
    ok(unsafe {
        fegpu_radfields_create(
            ctx,
            (s_points.len() / 3) as i64,
            s_points.as_ptr(),
            n_rhs as i64,
            as_f64(&k),
            as_f64(&omega_mu),
            &mut a,
        )
    });
    Acc(a)
}

fn accumulate(a: &Acc, points: &[f64], weights: &[f64], currents: &[Complex64]) -> fegpu_status {
    unsafe {
        fegpu_radfields_accumulate(a.0, weights.len() as i64, points.as_ptr(), weights.as_ptr(), currents.as_ptr() as *const f64)
    }
}

/// The fields, downloaded into a NaN-poisoned buffer.
fn download(a: &Acc, n: usize) -> Vec<Complex64> {
    let mut f = vec![Complex64::new(f64::NAN, f64::NAN); n];
    ok(unsafe { fegpu_radfields_download(a.0, f.as_mut_ptr() as *mut f64, n as i64) });
    f
}

fn cpu_context() -> fegpu_context_t {
    let mut c = 0;
    ok(unsafe { fegpu_context_create(FEGPU_BACKEND_CPU, 0, &mut c) });
    c
}

/// max |a - b| / max |b|; NaN if any value is NaN.
fn relative_diff(a: &[Complex64], b: &[Complex64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().map(|z| z.norm()).fold(0.0, f64::max);
    let worst =
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).norm())
            .fold(0.0, |m: f64, d| if d.is_nan() || m.is_nan() { f64::NAN } else { m.max(d) });
    worst / scale
}

/// The currents of S' point p within a batch, for every right-hand side.
fn batch_currents(all: &[Complex64], n_p: usize, n_rhs: usize, first: usize, count: usize) -> Vec<Complex64> {
    let mut out = Vec::with_capacity(6 * count * n_rhs);
    for r in 0..n_rhs {
        out.extend_from_slice(&all[6 * (first + n_p * r)..6 * (first + count + n_p * r)]);
    }
    out
}

/// Element by element: batches of S' points with sizes cycling through `sizes`,
/// from one scratch buffer that is overwritten as soon as each call returns;
/// then downloaded.
fn run_elementwise(a: &Acc, p: &[f64], w: &[f64], cur: &[Complex64], n_rhs: usize, sizes: &[usize]) {
    let n_p = w.len();
    let mut scratch = Vec::new();
    let (mut first, mut call) = (0, 0);
    while first < n_p {
        let count = sizes[call % sizes.len()].min(n_p - first);
        scratch.clear();
        scratch.extend(batch_currents(cur, n_p, n_rhs, first, count));
        ok(accumulate(a, &p[3 * first..3 * (first + count)], &w[first..first + count], &scratch));
        scratch.iter_mut().for_each(|z| *z = Complex64::new(f64::NAN, f64::NAN));
        first += count;
        call += 1;
    }
}

struct Case {
    s: Vec<f64>,
    p: Vec<f64>,
    w: Vec<f64>,
    cur: Vec<Complex64>,
}

fn random_case(rng: &mut Rng, n_s: usize, n_p: usize, n_rhs: usize) -> Case {
    // S on a shell of radius ~2, S' inside radius 1: the FE-IIEE geometry.
    let s: Vec<f64> = (0..3 * n_s).map(|_| 2.0 * rng.next_f64() + if rng.next_f64() > 0.0 { 2.5 } else { -2.5 }).collect();
    Case {
        s,
        p: rng.vec_f64(3 * n_p),
        w: (0..n_p).map(|_| 0.5 + 0.5 * rng.next_f64()).collect(),
        cur: (0..6 * n_p * n_rhs).map(|_| Complex64::new(rng.next_f64(), rng.next_f64())).collect(),
    }
}

#[test]
fn backend_matches_cpu_reference_elementwise_and_in_one_call() {
    let seed = seed();
    let mut rng = Rng::new(seed);
    let (ctx, cpu) = (context(), cpu_context());
    let k = Complex64::new(2.0 * PI, -0.3);
    let omega_mu = Complex64::new(2.0 * PI * 1.2, 0.1);
    for &(n_s, n_p, n_rhs) in &[(1, 1, 1), (37, 13, 1), (1000, 29, 3), (513, 70, 10), (300, 16, 33), (64, 9, 100), (200, 900, 2)]
    {
        let c = random_case(&mut rng, n_s, n_p, n_rhs);
        let n = 6 * n_s * n_rhs;
        let reference = accumulator(cpu, &c.s, n_rhs, k, omega_mu);
        ok(accumulate(&reference, &c.p, &c.w, &c.cur));
        let want = download(&reference, n);
        for variant in [FEGPU_RADFIELDS_AUTO, FEGPU_RADFIELDS_DIRECT, FEGPU_RADFIELDS_TILED] {
            // Element-sized batches (packed together until enough are pending),
            // all at once, and sizes that overflow and regrow the staging.
            for batch in [&[7][..], &[n_p], &[7, 300, 1]] {
                let a = accumulator(ctx, &c.s, n_rhs, k, omega_mu);
                ok(fegpu_radfields_set_variant(a.0, variant));
                run_elementwise(&a, &c.p, &c.w, &c.cur, n_rhs, batch);
                let d = relative_diff(&download(&a, n), &want);
                assert!(d < 1e-12, "n_s {n_s} n_p {n_p} n_rhs {n_rhs} variant {variant} batches {batch:?}: {d:e} (seed {seed})");
            }
        }
        let mut one = vec![Complex64::new(f64::NAN, 0.0); n];
        ok(unsafe {
            fegpu_radfields_compute(
                ctx,
                n_s as i64,
                c.s.as_ptr(),
                n_p as i64,
                c.p.as_ptr(),
                c.w.as_ptr(),
                c.cur.as_ptr() as *const f64,
                n_rhs as i64,
                as_f64(&k),
                as_f64(&omega_mu),
                one.as_mut_ptr() as *mut f64,
            )
        });
        assert!(relative_diff(&one, &want) < 1e-12, "one-call form, n_s {n_s} (seed {seed})");
    }
}

#[test]
fn reset_starts_the_next_iteration_from_zero() {
    let mut rng = Rng::new(seed());
    let c = random_case(&mut rng, 200, 20, 2);
    let (k, omega_mu) = (Complex64::new(3.0, 0.0), Complex64::new(3.0, 0.0));
    let a = accumulator(context(), &c.s, 2, k, omega_mu);
    ok(accumulate(&a, &c.p, &c.w, &c.cur));
    let first = download(&a, 6 * 200 * 2);
    ok(accumulate(&a, &c.p, &c.w, &c.cur));
    let twice = download(&a, 6 * 200 * 2);
    let doubled: Vec<Complex64> = first.iter().map(|z| z * 2.0).collect();
    assert!(relative_diff(&twice, &doubled) < 1e-14);
    // Reset also drops points still waiting to be launched.
    ok(accumulate(&a, &c.p[..3], &c.w[..1], &batch_currents(&c.cur, 20, 2, 0, 1)));
    ok(fegpu_radfields_reset(a.0));
    assert!(download(&a, 6 * 200 * 2).iter().all(|z| *z == Complex64::default()));
    ok(accumulate(&a, &c.p, &c.w, &c.cur));
    assert!(relative_diff(&download(&a, 6 * 200 * 2), &first) < 1e-14);
}

// ---- the equivalence principle -------------------------------------------

/// Gauss-Legendre nodes and weights on [-1, 1] (Newton on P_n).
fn gauss_legendre(n: usize) -> Vec<(f64, f64)> {
    (0..n)
        .map(|i| {
            let mut x = (PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
            loop {
                let (mut p0, mut p1) = (1.0, x);
                for m in 2..=n {
                    let p2 = ((2 * m - 1) as f64 * x * p1 - (m - 1) as f64 * p0) / m as f64;
                    p0 = p1;
                    p1 = p2;
                }
                let dp = n as f64 * (x * p1 - p0) / (x * x - 1.0);
                let dx = p1 / dp;
                x -= dx;
                if dx.abs() < 1e-15 {
                    return (x, 2.0 / ((1.0 - x * x) * dp * dp));
                }
            }
        })
        .collect()
}

type V3 = [Complex64; 3];

fn real3(v: [f64; 3]) -> V3 {
    v.map(|x| Complex64::new(x, 0.0))
}
fn cross(a: &V3, b: &V3) -> V3 {
    [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
}

/// E and H of a unit Hertzian dipole (I l = 1) along `d` at `r0`, observed at
/// `x` (Balanis, Antenna Theory, ch. 4, in vector form; exp(+jwt)).
fn dipole(x: [f64; 3], r0: [f64; 3], d: [f64; 3], k: f64, eta: f64) -> (V3, V3) {
    let rv = [x[0] - r0[0], x[1] - r0[1], x[2] - r0[2]];
    let r = (rv[0] * rv[0] + rv[1] * rv[1] + rv[2] * rv[2]).sqrt();
    let rh = rv.map(|v| v / r);
    let j = Complex64::new(0.0, 1.0);
    let phase = (-j * k * r).exp();
    let cos = d[0] * rh[0] + d[1] * rh[1] + d[2] * rh[2];
    let h_mag = j * k / (4.0 * PI * r) * (1.0 + 1.0 / (j * k * r)) * phase;
    let er = eta / (2.0 * PI * r * r) * (1.0 + 1.0 / (j * k * r)) * phase;
    let et = j * eta * k / (4.0 * PI * r) * (1.0 + 1.0 / (j * k * r) - 1.0 / (k * r * k * r)) * phase;
    let dxr = cross(&real3(d), &real3(rh));
    let h = dxr.map(|c| c * h_mag);
    let e: V3 = std::array::from_fn(|i| er * cos * rh[i] + et * (cos * rh[i] - d[i]));
    (e, h)
}

/// The worst relative error of fegpu's (E, curl E) against the dipoles' fields
/// outside S' (radius `a`), and the largest field inside it relative to the
/// fields outside, with an n_theta x 2 n_theta product rule on S'.
fn equivalence_errors(ctx: fegpu_context_t, n_theta: usize) -> (f64, f64) {
    let (k, eta, a) = (2.0 * PI, 1.0, 0.5);
    let omega_mu = k * eta;
    let sources =
        [([0.05, -0.03, 0.02], [0.0, 0.0, 1.0]), ([0.0, 0.1, 0.0], [1.0, 0.0, 0.0]), ([-0.08, 0.0, 0.04], [0.6, 0.0, 0.8])];
    let n_rhs = sources.len();
    // S: points on a sphere of radius 1 (outside) and of radius 0.3 (inside S').
    let mut s = Vec::new();
    let golden = PI * (3.0 - 5f64.sqrt());
    for (radius, count) in [(1.0, 40), (0.3, 20)] {
        for i in 0..count {
            let z = 1.0 - 2.0 * (i as f64 + 0.5) / count as f64;
            let (rho, phi) = ((1.0 - z * z).sqrt(), golden * i as f64);
            s.extend_from_slice(&[radius * rho * phi.cos(), radius * rho * phi.sin(), radius * z]);
        }
    }
    let n_s = s.len() / 3;
    // S': product rule, Gauss-Legendre in cos(theta), uniform in phi.
    let n_phi = 2 * n_theta;
    let (mut p, mut w, mut cur_by_point) = (Vec::new(), Vec::new(), Vec::new());
    for &(ct, wt) in &gauss_legendre(n_theta) {
        let st = (1.0 - ct * ct).sqrt();
        for m in 0..n_phi {
            let phi = 2.0 * PI * m as f64 / n_phi as f64;
            let n = [st * phi.cos(), st * phi.sin(), ct];
            let x = n.map(|c| a * c);
            p.extend_from_slice(&x);
            w.push(a * a * wt * 2.0 * PI / n_phi as f64);
            cur_by_point.push(sources.map(|(r0, d)| {
                let (e, h) = dipole(x, r0, d, k, eta);
                let nn = real3(n);
                let (jv, mv) = (cross(&nn, &h), cross(&e, &nn)); // J = n x H, M = -n x E
                [jv, mv]
            }));
        }
    }
    let n_p = w.len();
    let mut cur = vec![Complex64::default(); 6 * n_p * n_rhs];
    for (pi, per_rhs) in cur_by_point.iter().enumerate() {
        for (r, [jv, mv]) in per_rhs.iter().enumerate() {
            cur[6 * (pi + n_p * r)..][..3].copy_from_slice(jv);
            cur[6 * (pi + n_p * r) + 3..][..3].copy_from_slice(mv);
        }
    }
    let acc = accumulator(ctx, &s, n_rhs, Complex64::new(k, 0.0), Complex64::new(omega_mu, 0.0));
    run_elementwise(&acc, &p, &w, &cur, n_rhs, &[2 * n_phi]);
    let f = download(&acc, 6 * n_s * n_rhs);
    let (mut worst_out, mut scale_out, mut worst_in) = (0.0f64, 0.0f64, 0.0f64);
    for (r, &(r0, d)) in sources.iter().enumerate() {
        for si in 0..n_s {
            let x = [s[3 * si], s[3 * si + 1], s[3 * si + 2]];
            let got = &f[6 * (si + n_s * r)..][..6];
            if si < 40 {
                let (e, h) = dipole(x, r0, d, k, eta);
                let curl_e = h.map(|c| c * Complex64::new(0.0, -omega_mu));
                for i in 0..3 {
                    worst_out = worst_out.max((got[i] - e[i]).norm()).max((got[3 + i] - curl_e[i]).norm() / k);
                    scale_out = scale_out.max(e[i].norm()).max(curl_e[i].norm() / k);
                }
            } else {
                worst_in = worst_in.max(got.iter().map(|z| z.norm()).fold(0.0, f64::max));
            }
        }
    }
    (worst_out / scale_out, worst_in / scale_out)
}

#[test]
fn equivalent_currents_of_dipoles_reproduce_their_fields_outside_and_extinguish_inside() {
    let ctx = context();
    let mut last = (f64::INFINITY, f64::INFINITY);
    for n_theta in [8, 16, 24] {
        let (outside, inside) = equivalence_errors(ctx, n_theta);
        eprintln!("n_theta {n_theta}: outside {outside:.2e}, inside {inside:.2e}");
        assert!(
            outside < last.0 / 10.0 && inside < last.1 / 10.0,
            "n_theta {n_theta}: errors {outside:e}, {inside:e} did not fall tenfold from {last:?}"
        );
        last = (outside, inside);
    }
    assert!(last.0 < 1e-11 && last.1 < 1e-7, "finest rule: {last:?}");
}

// ---- coincident points, several devices, bad input -------------------------

#[test]
fn coincident_points_are_skipped_and_counted() {
    let mut rng = Rng::new(seed());
    let mut c = random_case(&mut rng, 50, 6, 2);
    let s11 = c.s[30..33].to_owned();
    c.p[3..6].copy_from_slice(&s11); // S' point 2 = S point 11
    let (k, omega_mu) = (Complex64::new(1.0, 0.0), Complex64::new(1.0, 0.0));
    let a = accumulator(context(), &c.s, 2, k, omega_mu);
    ok(accumulate(&a, &c.p, &c.w, &c.cur));
    let got = download(&a, 6 * 50 * 2);
    assert!(got.iter().all(|z| z.re.is_finite() && z.im.is_finite()));
    let mut excluded = -1;
    ok(unsafe { fegpu_radfields_excluded(a.0, &mut excluded) });
    assert_eq!(excluded, 1);
    // The same as the CPU reference, where the pair is skipped too.
    let r = accumulator(cpu_context(), &c.s, 2, k, omega_mu);
    ok(accumulate(&r, &c.p, &c.w, &c.cur));
    assert!(relative_diff(&got, &download(&r, 6 * 50 * 2)) < 1e-12);
}

#[test]
fn several_devices_split_the_s_points_or_are_refused_clearly() {
    let mut rng = Rng::new(seed());
    let c = random_case(&mut rng, 1001, 30, 4);
    let (k, omega_mu) = (Complex64::new(2.0, -0.1), Complex64::new(2.5, 0.0));
    let ctx = context();
    let one = accumulator(ctx, &c.s, 4, k, omega_mu);
    ok(accumulate(&one, &c.p, &c.w, &c.cur));
    let want = download(&one, 6 * 1001 * 4);
    let devices = fegpu::gpu::Gpu::device_count().unwrap_or(0);
    let cuda = std::env::var("FEGPU_BACKEND").is_ok_and(|b| b == "cuda");
    let mut ctxs = vec![ctx];
    if cuda && devices >= 2 {
        for d in 1..devices {
            let mut c2 = 0;
            ok(unsafe { fegpu_context_create(FEGPU_BACKEND_CUDA, d as i64, &mut c2) });
            ctxs.push(c2);
        }
        let mut h = 0;
        ok(unsafe {
            fegpu_radfields_create_multi(
                ctxs.len() as i64,
                ctxs.as_ptr(),
                1001,
                c.s.as_ptr(),
                4,
                as_f64(&k),
                as_f64(&omega_mu),
                &mut h,
            )
        });
        let multi = Acc(h);
        run_elementwise(&multi, &c.p, &c.w, &c.cur, 4, &[7]);
        assert!(relative_diff(&download(&multi, 6 * 1001 * 4), &want) < 1e-12, "{devices} devices");
        eprintln!("split across {devices} devices");
    } else {
        // Two contexts on one device (or two CPU contexts) are refused.
        let mut h = 0;
        ctxs.push(if cuda { context() } else { cpu_context() });
        let s = unsafe {
            fegpu_radfields_create_multi(2, ctxs.as_ptr(), 1001, c.s.as_ptr(), 4, as_f64(&k), as_f64(&omega_mu), &mut h)
        };
        let words: &[&str] = if cuda { &["ctxs[1]", "device"] } else { &["ctxs[0]", "CPU"] };
        expect_err(s, FEGPU_ERR_INVALID_ARGUMENT, words);
    }
}

#[test]
fn bad_input_is_refused_with_the_argument_named_and_nothing_changed() {
    let mut rng = Rng::new(seed());
    let c = random_case(&mut rng, 20, 5, 2);
    let ctx = context();
    let (k, omega_mu) = (Complex64::new(1.0, 0.0), Complex64::new(1.0, 0.0));
    let mut h = 0;
    let create = |n_s: i64, pts: *const f64, n_rhs: i64, k: &Complex64, h: &mut u64| unsafe {
        fegpu_radfields_create(ctx, n_s, pts, n_rhs, as_f64(k), as_f64(&omega_mu), h)
    };
    expect_err(create(0, c.s.as_ptr(), 2, &k, &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["n_s"]);
    expect_err(create(20, c.s.as_ptr(), 0, &k, &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["n_rhs"]);
    expect_err(create(20, null(), 2, &k, &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["points"]);
    expect_err(create(20, c.s.as_ptr(), 2, &Complex64::default(), &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["k"]);
    // 1 / k^2 and k^2 must not overflow
    for tiny_or_huge in [Complex64::new(1e-170, 0.0), Complex64::new(0.0, 1e160)] {
        expect_err(create(20, c.s.as_ptr(), 2, &tiny_or_huge, &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["k = ", "overflows"]);
    }
    expect_err(
        unsafe { fegpu_radfields_create(ctx, 20, c.s.as_ptr(), 2, as_f64(&k), as_f64(&omega_mu), null_mut()) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["acc"],
    );
    let mut bad = c.s.clone();
    bad[7] = f64::INFINITY;
    expect_err(create(20, bad.as_ptr(), 2, &k, &mut h), FEGPU_ERR_INVALID_ARGUMENT, &["points[7]"]);

    let a = accumulator(ctx, &c.s, 2, k, omega_mu);
    ok(accumulate(&a, &c.p, &c.w, &c.cur));
    let before = download(&a, 6 * 20 * 2);
    let mut p = c.p.clone();
    p[4] = f64::NAN;
    expect_err(accumulate(&a, &p, &c.w, &c.cur), FEGPU_ERR_INVALID_ARGUMENT, &["points[4]"]);
    let mut w = c.w.clone();
    w[1] = f64::NAN;
    expect_err(accumulate(&a, &c.p, &w, &c.cur), FEGPU_ERR_INVALID_ARGUMENT, &["weights[1]"]);
    let mut cur = c.cur.clone();
    cur[6 * 5 + 4] = Complex64::new(0.0, f64::NAN);
    expect_err(accumulate(&a, &c.p, &c.w, &cur), FEGPU_ERR_INVALID_ARGUMENT, &["currents[34]"]);
    expect_err(
        unsafe { fegpu_radfields_accumulate(a.0, 0, c.p.as_ptr(), c.w.as_ptr(), c.cur.as_ptr() as *const f64) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["n_p"],
    );
    expect_err(
        unsafe { fegpu_radfields_accumulate(a.0, 5, c.p.as_ptr(), null(), c.cur.as_ptr() as *const f64) },
        FEGPU_ERR_INVALID_ARGUMENT,
        &["weights"],
    );
    let mut small = vec![Complex64::default(); 10];
    expect_err(
        unsafe { fegpu_radfields_download(a.0, small.as_mut_ptr() as *mut f64, 10) },
        FEGPU_ERR_SIZE_MISMATCH,
        &["n = 10"],
    );
    expect_err(fegpu_radfields_set_variant(a.0, 7), FEGPU_ERR_INVALID_ARGUMENT, &["variant"]);
    assert_eq!(download(&a, 6 * 20 * 2), before, "a refused call changed the fields");
    let mut excluded = 0;
    ok(unsafe { fegpu_radfields_excluded(a.0, &mut excluded) });
    assert_eq!(excluded, 0);

    let stale = a.0;
    drop(a);
    expect_err(fegpu_radfields_reset(stale), FEGPU_ERR_INVALID_HANDLE, &["acc", "destroyed"]);
    expect_err(accumulate(&Acc(stale), &c.p, &c.w, &c.cur), FEGPU_ERR_INVALID_HANDLE, &["fegpu_radfields_t"]);
}
