//! Generated meshes and systems for tests and benchmarks.

use super::{Element, ElementSet, Problem};
use crate::array::Array;
use crate::context::Context;
use crate::error::Result;
use crate::sparse::Csr;
use std::sync::Arc;

/// An n x n x n block of unit hex8 elements (shared nodes, x fastest):
/// node coordinates (3 per node) and 0-based connectivity.
pub fn hex_block(n: usize) -> (Vec<f64>, Vec<i64>) {
    let node = |i: usize, j: usize, k: usize| (i + (n + 1) * (j + (n + 1) * k)) as i64;
    let mut coords = Vec::with_capacity(3 * (n + 1).pow(3));
    for k in 0..=n {
        for j in 0..=n {
            for i in 0..=n {
                coords.extend([i as f64, j as f64, k as f64]);
            }
        }
    }
    let mut conn = Vec::with_capacity(8 * n.pow(3));
    for k in 0..n {
        for j in 0..n {
            for i in 0..n {
                let face = |k| [node(i, j, k), node(i + 1, j, k), node(i + 1, j + 1, k), node(i, j + 1, k)];
                conn.extend(face(k));
                conn.extend(face(k + 1));
            }
        }
    }
    (coords, conn)
}

/// Hex8 elasticity on an m^3 `hex_block` (E 30e3, nu 0.2) clamped at x = 0
/// (the clamped unknowns' rows and columns left with their diagonal), a
/// load on every unknown; `stiff`: the upper half 1000 times stiffer.
/// Returns the assembled matrix, the load and the node coordinates.
pub fn clamped_block(ctx: &Arc<Context>, m: usize, stiff: bool) -> Result<(Arc<Csr>, Vec<f64>, Vec<f64>)> {
    let (coords, conn) = hex_block(m);
    let (nodes, elements) = (coords.len() / 3, conn.len() / 8);
    let material: Vec<i64> = (0..elements).map(|e| i64::from(stiff && e / (m * m) >= m / 2)).collect();
    let set = ElementSet::new(
        ctx.clone(),
        Element::Hex8,
        Problem::Elastic3d,
        nodes as i64,
        &coords,
        elements as i64,
        &conn,
        0,
        &[30e3, 0.2, 30e6, 0.2],
        &material,
        2,
    )?;
    set.integrate()?;
    let a = set.assemble()?;
    let dofs = 3 * nodes;
    let fixed: Vec<i64> =
        (0..nodes).filter(|&v| coords[3 * v] == 0.0).flat_map(|v| (0..3).map(move |c| (3 * v + c) as i64)).collect();
    let load: Vec<f64> = (0..dofs).map(|i| ((i * 7919) % 1000) as f64 / 1000.0 - 0.5).collect();
    let b = Array::new(ctx.clone(), dofs, 1, Some(&load))?;
    crate::sparse::apply_dirichlet(&a, &fixed, 0, &vec![0.0; fixed.len()], &b)?;
    let mut bh = vec![0.0; dofs];
    b.download(0, &mut bh, "b")?;
    Ok((a, bh, coords))
}
