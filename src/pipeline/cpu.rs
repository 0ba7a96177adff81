//! The CPU reference of the pipelined operations: the host loops a legacy
//! code runs, applied to whole arrays (the CPU backend runs these).

use super::{Arg, Kernel, Op};

/// Applies the kernel to whole arrays: `inputs` are the read-only arguments
/// and `outputs` the written ones (in/out included), each in argument order.
pub fn kernel(k: Kernel, items: usize, inputs: &[&[f64]], outputs: &mut [&mut [f64]]) {
    let out = &mut outputs[0];
    match k {
        Kernel::Axpby { a, b } => {
            let x = inputs[0];
            for i in 0..items {
                // b = 0: y is not read (a NaN there stays out)
                out[i] = if b == 0.0 { a * x[i] } else { a.mul_add(x[i], b * out[i]) };
            }
        }
        Kernel::ColumnDots { m } => {
            let (a, bm) = (inputs[0], inputs[1]);
            for j in 0..items {
                out[j] = a[j * m..(j + 1) * m].iter().zip(&bm[j * m..(j + 1) * m]).fold(0.0, |s, (x, y)| x.mul_add(*y, s));
            }
        }
        Kernel::Gemm { m, k, alpha, beta } => {
            let (a, b) = (inputs[0], inputs[1]);
            for j in 0..items {
                for i in 0..m {
                    let sum: f64 = (0..k).map(|l| a[i + m * l] * b[l + k * j]).sum();
                    let c = &mut out[i + m * j];
                    *c = alpha * sum + if beta == 0.0 { 0.0 } else { beta * *c };
                }
            }
        }
        Kernel::Gemv { n, alpha, beta } => {
            let (a, x) = (inputs[0], inputs[1]);
            let lda = a.len() / n;
            for i in 0..items {
                let sum: f64 = (0..n).map(|j| a[i + lda * j] * x[j]).sum();
                out[i] = alpha * sum + if beta == 0.0 { 0.0 } else { beta * out[i] };
            }
        }
        Kernel::Transpose { m } => {
            let a = inputs[0];
            let ldt = out.len() / m;
            for j in 0..items {
                for i in 0..m {
                    out[j + ldt * i] = a[i + m * j];
                }
            }
        }
    }
}

/// Runs the operation on the host arrays in place.
pub fn apply(op: &mut Op) {
    let mut inputs: Vec<&[f64]> = Vec::new();
    let mut outputs: Vec<&mut [f64]> = Vec::new();
    for (arg, _) in op.args.iter_mut() {
        match arg {
            Arg::In(v) => inputs.push(v),
            Arg::InOut(v) => {
                // An in/out array is read through its output slice (axpby's y).
                outputs.push(v);
            }
            Arg::Out(v) => outputs.push(v),
        }
    }
    kernel(op.kernel, op.items, &inputs, &mut outputs);
}

/// Seconds per item the serial host loop takes for this operation, on copies
/// of the outputs so the caller's data is untouched (for the profile's
/// speedup). Timed on the first 1, 2, 4, ... items until a run takes 20 ms,
/// so a large product is not run whole on the host.
pub fn time_reference(op: &Op) -> f64 {
    let inputs: Vec<&[f64]> = op.args.iter().filter_map(|(a, _)| if let Arg::In(v) = a { Some(&**v) } else { None }).collect();
    let mut copies: Vec<Vec<f64>> = op
        .args
        .iter()
        .filter_map(|(a, _)| match a {
            Arg::InOut(v) | Arg::Out(v) => Some(v.to_vec()),
            Arg::In(_) => None,
        })
        .collect();
    let mut outputs: Vec<&mut [f64]> = copies.iter_mut().map(|v| v.as_mut_slice()).collect();
    let mut count = 1;
    loop {
        let count_now = count.min(op.items);
        let t = std::time::Instant::now();
        kernel(op.kernel, count_now, &inputs, &mut outputs);
        std::hint::black_box(&outputs);
        let secs = t.elapsed().as_secs_f64();
        if secs > 0.02 || count_now == op.items {
            return secs / count_now as f64;
        }
        count *= 2;
    }
}
