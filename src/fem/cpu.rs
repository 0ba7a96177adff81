//! The host reference of `kernels/fem.cu`: the same quadrature, point for
//! point, in plain loops.

use super::loads::FaceKind;
use super::{Element, ElementSet, Problem};

/// Gauss-Legendre points and weights on [-1, 1] of `order` (1..=4).
pub fn gauss_legendre(order: usize) -> (&'static [f64], &'static [f64]) {
    const X: [&[f64]; 4] = [
        &[0.0],
        &[-0.577_350_269_189_625_8, 0.577_350_269_189_625_8],
        &[-0.774_596_669_241_483_4, 0.0, 0.774_596_669_241_483_4],
        &[-0.861_136_311_594_052_6, -0.339_981_043_584_856_3, 0.339_981_043_584_856_3, 0.861_136_311_594_052_6],
    ];
    #[allow(clippy::excessive_precision)] // the published 17-digit weights, rounded by the compiler
    const W: [&[f64]; 4] = [
        &[2.0],
        &[1.0, 1.0],
        &[0.555_555_555_555_555_6, 0.888_888_888_888_888_9, 0.555_555_555_555_555_6],
        &[0.347_854_845_137_453_9, 0.652_145_154_862_546_1, 0.652_145_154_862_546_1, 0.347_854_845_137_453_9],
    ];
    (X[order - 1], W[order - 1])
}

/// Natural coordinate c of corner a of quad4 and hex8 (kernels/fem.cu
/// `corner`): counter-clockwise from (-1, -1[, -1]), then hex8's top face.
fn corner(a: usize, c: usize) -> f64 {
    let k = a & 3;
    let plus = match c {
        0 => k == 1 || k == 2,
        1 => k >= 2,
        _ => a >= 4,
    };
    if plus {
        1.0
    } else {
        -1.0
    }
}

/// Edges of the quadratic simplices whose midpoints follow the corners.
const SIMPLEX_EDGES: [[usize; 2]; 6] = [[0, 1], [1, 2], [2, 0], [0, 3], [1, 3], [2, 3]];

/// Natural coordinates of serendipity node a (quad8, hex20: kernels/fem.cu `SERENDIPITY_*`).
fn serendipity_node(dim: usize, a: usize) -> [f64; 3] {
    const MIDS_2: [[f64; 2]; 4] = [[0.0, -1.0], [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]];
    const MIDS_3: [[f64; 3]; 12] = [
        [0.0, -1.0, -1.0],
        [1.0, 0.0, -1.0],
        [0.0, 1.0, -1.0],
        [-1.0, 0.0, -1.0],
        [0.0, -1.0, 1.0],
        [1.0, 0.0, 1.0],
        [0.0, 1.0, 1.0],
        [-1.0, 0.0, 1.0],
        [-1.0, -1.0, 0.0],
        [1.0, -1.0, 0.0],
        [1.0, 1.0, 0.0],
        [-1.0, 1.0, 0.0],
    ];
    let corners = 1 << dim;
    if a < corners {
        std::array::from_fn(|c| if c < dim { corner(a, c) } else { 0.0 })
    } else if dim == 2 {
        let m = MIDS_2[a - corners];
        [m[0], m[1], 0.0]
    } else {
        MIDS_3[a - corners]
    }
}

/// N_a and dN_a/dxi of a quadratic element at `xi` (kernels/fem.cu `quadratic_shapes`).
fn quadratic_shapes(t: Element, xi: [f64; 3]) -> (Vec<f64>, Vec<[f64; 3]>) {
    let (dim, nn) = (t.dim(), t.nodes());
    let (mut n, mut dn) = (vec![0.0; nn], vec![[0.0; 3]; nn]);
    if matches!(t, Element::Tri6 | Element::Tet10) {
        let l: Vec<f64> = std::iter::once(1.0 - xi[..dim].iter().sum::<f64>()).chain(xi[..dim].iter().copied()).collect();
        let dl = |i: usize, c: usize| {
            if i == 0 {
                -1.0
            } else if i - 1 == c {
                1.0
            } else {
                0.0
            }
        };
        for a in 0..nn {
            if a <= dim {
                n[a] = l[a] * (2.0 * l[a] - 1.0);
                (0..dim).for_each(|c| dn[a][c] = (4.0 * l[a] - 1.0) * dl(a, c));
            } else {
                let [i, j] = SIMPLEX_EDGES[a - dim - 1];
                n[a] = 4.0 * l[i] * l[j];
                (0..dim).for_each(|c| dn[a][c] = 4.0 * (dl(i, c) * l[j] + l[i] * dl(j, c)));
            }
        }
        return (n, dn);
    }
    for a in 0..nn {
        let s = serendipity_node(dim, a);
        let factor = |c: usize| 1.0 + s[c] * xi[c];
        match (0..dim).find(|&c| s[c] == 0.0) {
            None => {
                let prod: f64 = (0..dim).map(factor).product();
                let sum: f64 = (0..dim).map(|c| s[c] * xi[c]).sum::<f64>() - (dim - 1) as f64;
                let scale = 1.0 / (1 << dim) as f64;
                n[a] = prod * sum * scale;
                for k in 0..dim {
                    let others: f64 = (0..dim).filter(|&c| c != k).map(factor).product();
                    dn[a][k] = (s[k] * others * sum + prod * s[k]) * scale;
                }
            }
            Some(z) => {
                let prod: f64 = (0..dim).filter(|&c| c != z).map(factor).product();
                let bubble = 1.0 - xi[z] * xi[z];
                let scale = 1.0 / (1 << (dim - 1)) as f64;
                n[a] = bubble * prod * scale;
                for k in 0..dim {
                    dn[a][k] = if k == z {
                        -2.0 * xi[z] * prod * scale
                    } else {
                        bubble * s[k] * (0..dim).filter(|&c| c != k && c != z).map(factor).product::<f64>() * scale
                    };
                }
            }
        }
    }
    (n, dn)
}

/// The reference element's nodes in natural coordinates (simplices: the
/// unit simplex; quadrilaterals and hexahedra: [-1, 1]^dim), midpoints after
/// the corners for the quadratic elements.
pub fn reference_nodes(t: Element) -> Vec<[f64; 3]> {
    let dim = t.dim();
    if matches!(t, Element::Tri3 | Element::Tet4 | Element::Tri6 | Element::Tet10) {
        let mut x: Vec<[f64; 3]> =
            (0..=dim).map(|a| std::array::from_fn(|c| if a > 0 && a - 1 == c { 1.0 } else { 0.0 })).collect();
        for [i, j] in SIMPLEX_EDGES.iter().take(t.nodes() - dim - 1) {
            let mid = std::array::from_fn(|c| 0.5 * (x[*i][c] + x[*j][c]));
            x.push(mid);
        }
        return x;
    }
    (0..t.nodes()).map(|a| serendipity_node(dim, a)).collect()
}

/// dN_a/dxi at natural point `xi`.
pub fn shape_gradients(t: Element, xi: [f64; 3]) -> Vec<[f64; 3]> {
    let (dim, nn) = (t.dim(), t.nodes());
    if t.is_quadratic() {
        return quadratic_shapes(t, xi).1;
    }
    if t.is_simplex() {
        // N_0 = 1 - sum xi, N_a = xi_(a-1)
        let mut dn = vec![[0.0; 3]; nn];
        for c in 0..dim {
            dn[0][c] = -1.0;
            dn[c + 1][c] = 1.0;
        }
        return dn;
    }
    // bilinear / trilinear: N_a = prod_c (1 + s_ac xi_c) / 2^dim
    let scale = 1.0 / (1 << dim) as f64;
    (0..nn)
        .map(|a| {
            std::array::from_fn(|c| {
                if c >= dim {
                    return 0.0;
                }
                (0..dim).filter(|&o| o != c).fold(corner(a, c) * scale, |v, o| v * (1.0 + corner(a, o) * xi[o]))
            })
        })
        .collect()
}

/// N_a at natural point `xi`.
pub fn shape_values(t: Element, xi: [f64; 3]) -> Vec<f64> {
    let (dim, nn) = (t.dim(), t.nodes());
    if t.is_quadratic() {
        return quadratic_shapes(t, xi).0;
    }
    if t.is_simplex() {
        let mut n = vec![1.0 - xi[..dim].iter().sum::<f64>()];
        n.extend_from_slice(&xi[..dim]);
        return n;
    }
    let scale = 1.0 / (1 << dim) as f64;
    (0..nn).map(|a| (0..dim).fold(scale, |v, c| v * (1.0 + corner(a, c) * xi[c]))).collect()
}

/// The quadrature points (natural coordinates, weight) of an element type.
pub fn points(t: Element, order: usize) -> Vec<([f64; 3], f64)> {
    let dim = t.dim();
    if t.is_simplex() {
        // constant gradients: the centroid integrates K^e exactly
        let c = 1.0 / (dim + 1) as f64;
        let w = if dim == 2 { 0.5 } else { 1.0 / 6.0 };
        return vec![([c, c, if dim == 3 { c } else { 0.0 }], w)];
    }
    let (x, w) = gauss_legendre(order);
    let q = order;
    let count = if dim == 2 { q * q } else { q * q * q };
    (0..count)
        .map(|gp| {
            let (i0, i1, i2) = (gp % q, (gp / q) % q, gp / (q * q));
            let xi = [x[i0], x[i1], if dim == 3 { x[i2] } else { 0.0 }];
            let weight = w[i0] * w[i1] * if dim == 3 { w[i2] } else { 1.0 };
            if !matches!(t, Element::Tri6 | Element::Tet10) {
                return (xi, weight);
            }
            // the unit square or cube collapsed onto the simplex (kernels/fem.cu `gauss_point`)
            let (u, v, s) = (0.5 * (1.0 + xi[0]), 0.5 * (1.0 + xi[1]), 0.5 * (1.0 + xi[2]));
            let collapsed = [u, v * (1.0 - u), if dim == 3 { s * (1.0 - u) * (1.0 - v) } else { 0.0 }];
            let jacobian = if dim == 2 { 0.25 * (1.0 - u) } else { 0.125 * (1.0 - u) * (1.0 - u) * (1.0 - v) };
            (collapsed, weight * jacobian)
        })
        .collect()
}

/// The stress-strain (or conductivity) matrix.
pub fn material_matrix(problem: Problem, dim: usize, p: [f64; 2]) -> Vec<Vec<f64>> {
    let ns = problem.stress_components(dim);
    let mut d = vec![vec![0.0; ns]; ns];
    let (e, nu) = (p[0], p[1]);
    match (problem, dim) {
        (Problem::Heat, _) => (0..dim).for_each(|i| d[i][i] = p[0]),
        (Problem::PlaneStress, _) => {
            let f = e / (1.0 - nu * nu);
            (d[0][0], d[1][1], d[0][1], d[1][0], d[2][2]) = (f, f, f * nu, f * nu, f * (1.0 - nu) / 2.0);
        }
        (Problem::PlaneStrain, _) => {
            let f = e / ((1.0 + nu) * (1.0 - 2.0 * nu));
            let a = f * (1.0 - nu);
            (d[0][0], d[1][1], d[0][1], d[1][0], d[2][2]) = (a, a, f * nu, f * nu, f * (1.0 - 2.0 * nu) / 2.0);
        }
        (Problem::Elastic3d, _) => {
            let (lambda, mu) = (e * nu / ((1.0 + nu) * (1.0 - 2.0 * nu)), e / (2.0 * (1.0 + nu)));
            for i in 0..3 {
                for j in 0..3 {
                    d[i][j] = lambda;
                }
                d[i][i] = lambda + 2.0 * mu;
                d[i + 3][i + 3] = mu;
            }
        }
    }
    d
}

/// Row s of B for component c of a node with physical gradient g.
fn b_entry(problem: Problem, dim: usize, s: usize, c: usize, g: &[f64; 3]) -> f64 {
    if problem == Problem::Heat {
        return g[s];
    }
    if s < dim {
        return if s == c { g[c] } else { 0.0 };
    }
    if dim == 2 {
        return g[1 - c];
    }
    let (i, j) = (s - 3, (s - 2) % 3);
    if c == i {
        g[j]
    } else if c == j {
        g[i]
    } else {
        0.0
    }
}

/// Element e's nodes (x, y, z; z = 0 in 2-D).
fn element_nodes(set: &ElementSet, e: usize) -> Vec<[f64; 3]> {
    let (dim, nn) = (set.element.dim(), set.element.nodes());
    (0..nn)
        .map(|a| {
            let node = set.conn[e * nn + a] as usize;
            std::array::from_fn(|c| if c < dim { set.coords[dim * node + c] } else { 0.0 })
        })
        .collect()
}

/// The physical gradients dN_a/dx and det J at natural point `xi` (kernels/fem.cu
/// `gauss_point`); None when det J is not positive.
fn gauss_point(t: Element, xe: &[[f64; 3]], xi: [f64; 3]) -> Option<(Vec<[f64; 3]>, f64)> {
    let (dim, nn) = (t.dim(), t.nodes());
    let dn = shape_gradients(t, xi);
    let mut j = [[0.0; 3]; 3];
    for r in 0..dim {
        for c in 0..dim {
            j[r][c] = (0..nn).map(|a| dn[a][r] * xe[a][c]).sum();
        }
    }
    let mut inv = [[0.0; 3]; 3];
    let det = if dim == 2 {
        let det = j[0][0] * j[1][1] - j[0][1] * j[1][0];
        inv[0] = [j[1][1] / det, -j[0][1] / det, 0.0];
        inv[1] = [-j[1][0] / det, j[0][0] / det, 0.0];
        det
    } else {
        let det = j[0][0] * (j[1][1] * j[2][2] - j[1][2] * j[2][1]) - j[0][1] * (j[1][0] * j[2][2] - j[1][2] * j[2][0])
            + j[0][2] * (j[1][0] * j[2][1] - j[1][1] * j[2][0]);
        for r in 0..3 {
            for c in 0..3 {
                let (r1, r2, c1, c2) = ((r + 1) % 3, (r + 2) % 3, (c + 1) % 3, (c + 2) % 3);
                inv[c][r] = (j[r1][c1] * j[r2][c2] - j[r1][c2] * j[r2][c1]) / det;
            }
        }
        det
    };
    if !(det > 0.0 && det.is_finite()) {
        return None;
    }
    let g = (0..nn).map(|a| std::array::from_fn(|c| (0..dim).map(|r| inv[c][r] * dn[a][r]).sum())).collect();
    Some((g, det))
}

/// K^e of element `e`, packed upper triangle row by row; Err(e) when its
/// Jacobian determinant is not positive at a quadrature point.
pub fn element_stiffness(set: &ElementSet, props: &[f64], e: usize) -> Result<Vec<f64>, usize> {
    let (t, problem, dim) = (set.element, set.problem, set.element.dim());
    let (nn, dpn) = (t.nodes(), problem.dofs_per_node(dim));
    let nd = nn * dpn;
    let ns = problem.stress_components(dim);
    let xe = element_nodes(set, e);
    let m = set.material[e] as usize;
    let d = material_matrix(problem, dim, [props[2 * m], props[2 * m + 1]]);
    let mut k = vec![0.0; nd * (nd + 1) / 2];
    for (xi, w) in points(t, set.order) {
        let (g, det) = gauss_point(t, &xe, xi).ok_or(e)?;
        let f = w * det;
        let mut idx = 0;
        for p in 0..nd {
            let (a, c) = (p / dpn, p % dpn);
            let db: Vec<f64> = (0..ns).map(|t| (0..ns).map(|s| b_entry(problem, dim, s, c, &g[a]) * d[s][t]).sum()).collect();
            for r in p..nd {
                let (b, cb) = (r / dpn, r % dpn);
                let v: f64 = (0..ns).map(|t| db[t] * b_entry(problem, dim, t, cb, &g[b])).sum();
                k[idx] += f * v;
                idx += 1;
            }
        }
    }
    Ok(k)
}

/// Every element's matrix from `element` into `out`, entry-major as on the
/// device (entry k of element e at k * elements + e); Err(first bad element).
fn every_element(set: &ElementSet, out: &mut [f64], element: impl Fn(usize) -> Result<Vec<f64>, usize>) -> Result<(), usize> {
    let ne = set.elements;
    for e in 0..ne {
        for (k, v) in element(e)?.into_iter().enumerate() {
            out[k * ne + e] = v;
        }
    }
    Ok(())
}

/// Every element's K^e, entry-major; Err(first bad element).
pub fn stiffness(set: &ElementSet, props: &[f64], ke: &mut [f64]) -> Result<(), usize> {
    every_element(set, ke, |e| element_stiffness(set, props, e))
}

/// Global entry i = the sum of ke[from[ptr[i]..ptr[i + 1]]] (kernels/fem.cu `assemble`).
pub fn assemble(ptr: &[i32], from: &[i32], ke: &[f64], values: &mut [f64]) {
    for (i, v) in values.iter_mut().enumerate() {
        *v = from[ptr[i] as usize..ptr[i + 1] as usize].iter().map(|&k| ke[k as usize]).sum();
    }
}

/// Where the element-by-element products take K^e from: the stored,
/// entry-major matrices, or recomputed from the geometry (on the fly).
pub enum ElementMatrices<'a> {
    Stored(&'a [f64]),
    OnTheFly(&'a [f64]),
}

impl ElementMatrices<'_> {
    /// Packed K^e of element e.
    fn of(&self, set: &ElementSet, e: usize) -> Vec<f64> {
        match *self {
            ElementMatrices::Stored(ke) => (0..set.packed_len()).map(|k| ke[k * set.elements + e]).collect(),
            ElementMatrices::OnTheFly(props) => element_stiffness(set, props, e).expect("integrated before: valid elements"),
        }
    }
}

/// y = sum_e K^e x_e with constrained dofs masked (kernels/fem.cu `ebe_init`,
/// `ebe_apply` and `ebe_otf`): zero in x_e, receiving nothing, y = diag x on
/// them. Without `fixed`, the plain product.
pub fn ebe_apply(set: &ElementSet, ke: &ElementMatrices, fixed: Option<&[u8]>, diag: &[f64], x: &[f64], y: &mut [f64]) {
    let is_fixed = |d: usize| fixed.is_some_and(|f| f[d] != 0);
    for (i, yi) in y.iter_mut().enumerate() {
        *yi = if is_fixed(i) { diag[i] * x[i] } else { 0.0 };
    }
    let nd = set.element_dofs();
    let mut ye = vec![0.0; nd];
    for e in 0..set.elements {
        let dof: Vec<usize> = (0..nd).map(|p| set.global_dof(e, p)).collect();
        let xe: Vec<f64> = dof.iter().map(|&d| if is_fixed(d) { 0.0 } else { x[d] }).collect();
        ye.fill(0.0);
        let k = ke.of(set, e);
        let mut idx = 0;
        for i in 0..nd {
            ye[i] += k[idx] * xe[i];
            idx += 1;
            for j in i + 1..nd {
                ye[i] += k[idx] * xe[j];
                ye[j] += k[idx] * xe[i];
                idx += 1;
            }
        }
        for (p, &d) in dof.iter().enumerate() {
            if !is_fixed(d) {
                y[d] += ye[p];
            }
        }
    }
}

/// The assembled diagonal from the element matrices.
pub fn ebe_diagonal(set: &ElementSet, ke: &ElementMatrices, diag: &mut [f64]) {
    let nd = set.element_dofs();
    diag.fill(0.0);
    for e in 0..set.elements {
        let k = ke.of(set, e);
        let mut idx = 0;
        for p in 0..nd {
            diag[set.global_dof(e, p)] += k[idx];
            idx += nd - p;
        }
    }
}

/// The mass matrix of element `e` (packed): heat capacity with coef[m] = rho
/// c, or consistent mass per component with coef[m] = rho, as kernels/fem.cu `mass`.
pub fn element_mass(set: &ElementSet, coef: &[f64], e: usize) -> Result<Vec<f64>, usize> {
    let (t, dim, nn) = (set.element, set.element.dim(), set.element.nodes());
    let xe = element_nodes(set, e);
    let rc = coef[set.material[e] as usize];
    let dpn = set.problem.dofs_per_node(dim);
    let nd = nn * dpn;
    let mut m = vec![0.0; nd * (nd + 1) / 2];
    for (xi, w) in points(t, set.order) {
        let det = gauss_point(t, &xe, xi).ok_or(e)?.1;
        let n = shape_values(t, xi);
        let mut idx = 0;
        for p in 0..nd {
            for r in p..nd {
                let (a, b) = (p / dpn, r / dpn);
                if p % dpn == r % dpn {
                    m[idx] += if t.is_simplex() {
                        rc * w * det * if a == b { 2.0 } else { 1.0 } / ((dim + 1) * (dim + 2)) as f64
                    } else {
                        rc * w * det * n[a] * n[b]
                    };
                }
                idx += 1;
            }
        }
    }
    Ok(m)
}

/// Every mass matrix, entry-major; Err(first bad element).
pub fn mass(set: &ElementSet, coef: &[f64], ce: &mut [f64]) -> Result<(), usize> {
    every_element(set, ce, |e| element_mass(set, coef, e))
}

/// f += the integral of N_a b_e over each element e (b: dpn values per
/// element) at the stiffness's points, as kernels/fem.cu `body_load`;
/// Err(first bad element) before anything is added.
pub fn body_load(set: &ElementSet, b: &[f64], f: &mut [f64]) -> Result<(), usize> {
    let (t, nn) = (set.element, set.element.nodes());
    let dpn = set.problem.dofs_per_node(t.dim());
    let mut out = f.to_vec();
    for e in 0..set.elements {
        let xe = element_nodes(set, e);
        let mut fe = vec![0.0; nn];
        for (xi, w) in points(t, set.order) {
            let det = gauss_point(t, &xe, xi).ok_or(e)?.1;
            shape_values(t, xi).iter().zip(&mut fe).for_each(|(n, fa)| *fa += w * det * n);
        }
        for (a, fa) in fe.iter().enumerate() {
            for c in 0..dpn {
                out[set.conn[e * nn + a] as usize * dpn + c] += fa * b[e * dpn + c];
            }
        }
    }
    f.copy_from_slice(&out);
    Ok(())
}

/// The face points of an fn-node face (kernels/fem.cu `face_point`): shape
/// values and the area vector (weight included).
fn face_points(fnodes: usize, dim: usize, xf: &[[f64; 3]]) -> Vec<(Vec<f64>, [f64; 3])> {
    let gx = gauss_legendre(2).0[1];
    let (g3, w3) = gauss_legendre(3);
    let count = match (dim, fnodes) {
        (2, 2) => 2,
        (2, _) | (_, 3) => 3,
        (_, 4) => 4,
        _ => 9,
    };
    (0..count)
        .map(|q| {
            let (n, dn, w): (Vec<f64>, Vec<[f64; 3]>, f64) = match (dim, fnodes) {
                (2, 2) => {
                    let s = if q == 0 { -gx } else { gx };
                    (vec![0.5 * (1.0 - s), 0.5 * (1.0 + s)], vec![[-0.5, 0.0, 0.0], [0.5, 0.0, 0.0]], 1.0)
                }
                (2, _) => {
                    // edge3: the ends, then the midpoint
                    let s = g3[q];
                    let n = vec![0.5 * s * (s - 1.0), 0.5 * s * (s + 1.0), 1.0 - s * s];
                    (n, vec![[s - 0.5, 0.0, 0.0], [s + 0.5, 0.0, 0.0], [-2.0 * s, 0.0, 0.0]], w3[q])
                }
                (_, 3) => {
                    let s = if q == 1 { 2.0 / 3.0 } else { 1.0 / 6.0 };
                    let t = if q == 2 { 2.0 / 3.0 } else { 1.0 / 6.0 };
                    (vec![1.0 - s - t, s, t], vec![[-1.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], 1.0 / 6.0)
                }
                (_, 4) => {
                    let s = if q & 1 != 0 { gx } else { -gx };
                    let t = if q & 2 != 0 { gx } else { -gx };
                    let (cs, ct) = ([-1.0, 1.0, 1.0, -1.0], [-1.0, -1.0, 1.0, 1.0]);
                    let n = (0..4).map(|a| 0.25 * (1.0 + cs[a] * s) * (1.0 + ct[a] * t)).collect();
                    let dn = (0..4).map(|a| [0.25 * cs[a] * (1.0 + ct[a] * t), 0.25 * ct[a] * (1.0 + cs[a] * s), 0.0]).collect();
                    (n, dn, 1.0)
                }
                _ => {
                    // tri6 and quad8 faces: the 2-D quadratic shapes (the triangle by the collapsed square)
                    let (mut xi, mut w) = ([g3[q % 3], g3[q / 3], 0.0], w3[q % 3] * w3[q / 3]);
                    let t = if fnodes == 6 {
                        let (u, v) = (0.5 * (1.0 + xi[0]), 0.5 * (1.0 + xi[1]));
                        (xi, w) = ([u, v * (1.0 - u), 0.0], w * 0.25 * (1.0 - u));
                        Element::Tri6
                    } else {
                        Element::Quad8
                    };
                    let (n, dn) = quadratic_shapes(t, xi);
                    (n, dn, w)
                }
            };
            let tangent = |r: usize| -> [f64; 3] { std::array::from_fn(|c| (0..fnodes).map(|a| dn[a][r] * xf[a][c]).sum()) };
            let (t1, t2) = (tangent(0), tangent(1));
            let area = if dim == 2 {
                [w * t1[1], -w * t1[0], 0.0]
            } else {
                [w * (t1[1] * t2[2] - t1[2] * t2[1]), w * (t1[2] * t2[0] - t1[0] * t2[2]), w * (t1[0] * t2[1] - t1[1] * t2[0])]
            };
            (n, area)
        })
        .collect()
}

/// f += the face integrals of `kind` over `faces` (fnodes 0-based nodes per
/// face) with `values` per face, and for convection the packed face
/// matrices into `hf` (entry-major), as kernels/fem.cu `face_load`.
pub fn face_load(set: &ElementSet, fnodes: usize, faces: &[i32], kind: FaceKind, values: &[f64], f: &mut [f64], hf: &mut [f64]) {
    let dim = set.element.dim();
    let dpn = if matches!(kind, FaceKind::Traction | FaceKind::Pressure) { dim } else { 1 };
    let nf = faces.len() / fnodes;
    for i in 0..nf {
        let nodes = &faces[i * fnodes..(i + 1) * fnodes];
        let xf: Vec<[f64; 3]> = nodes
            .iter()
            .map(|&v| std::array::from_fn(|c| if c < dim { set.coords[dim * v as usize + c] } else { 0.0 }))
            .collect();
        let mut fe = vec![0.0; fnodes * dpn];
        let mut h = vec![0.0; fnodes * (fnodes + 1) / 2];
        for (n, area) in face_points(fnodes, dim, &xf) {
            let da = area[..dim].iter().map(|a| a * a).sum::<f64>().sqrt();
            for a in 0..fnodes {
                match kind {
                    FaceKind::Traction => (0..dim).for_each(|c| fe[a * dpn + c] += values[i * dim + c] * n[a] * da),
                    FaceKind::Pressure => (0..dim).for_each(|c| fe[a * dpn + c] -= values[i] * n[a] * area[c]),
                    FaceKind::Flux => fe[a] += values[i] * n[a] * da,
                    FaceKind::Convection => fe[a] += values[2 * i] * values[2 * i + 1] * n[a] * da,
                }
            }
            if kind == FaceKind::Convection {
                let mut k = 0;
                for a in 0..fnodes {
                    for b in a..fnodes {
                        h[k] += values[2 * i] * n[a] * n[b] * da;
                        k += 1;
                    }
                }
            }
        }
        for (a, &v) in nodes.iter().enumerate() {
            for c in 0..dpn {
                f[v as usize * dpn + c] += fe[a * dpn + c];
            }
        }
        if kind == FaceKind::Convection {
            h.iter().enumerate().for_each(|(k, &v)| hf[k * nf + i] = v);
        }
    }
}

/// f += s f_int(u), the total Lagrangian internal forces of St Venant-Kirchhoff
/// material (kernels/fem.cu `tl_force`: FEStudio's Algorithm 1).
pub fn tl_force(set: &ElementSet, props: &[f64], u: &[f64], s: f64, f: &mut [f64]) {
    let (t, dim, nn) = (set.element, set.element.dim(), set.element.nodes());
    for e in 0..set.elements {
        let xe = element_nodes(set, e);
        let node = |a: usize| set.conn[e * nn + a] as usize;
        let m = set.material[e] as usize;
        let (young, nu) = (props[2 * m], props[2 * m + 1]);
        let (lambda, mu) = (young * nu / ((1.0 + nu) * (1.0 - 2.0 * nu)), young / (2.0 * (1.0 + nu)));
        let mut fe = vec![[0.0; 3]; nn];
        for (xi, w) in points(t, set.order) {
            let (g, det) = gauss_point(t, &xe, xi).expect("the stepper checked the elements");
            let mut ff = [[0.0; 3]; 3];
            for i in 0..dim {
                for j in 0..dim {
                    ff[i][j] = if i == j { 1.0 } else { 0.0 } + (0..nn).map(|a| u[node(a) * dim + i] * g[a][j]).sum::<f64>();
                }
            }
            let mut strain = [[0.0; 3]; 3];
            for i in 0..dim {
                for j in 0..dim {
                    strain[i][j] = 0.5 * ((0..dim).map(|k| ff[k][i] * ff[k][j]).sum::<f64>() - if i == j { 1.0 } else { 0.0 });
                }
            }
            let trace: f64 = (0..dim).map(|i| strain[i][i]).sum();
            let stress = |i: usize, j: usize| 2.0 * mu * strain[i][j] + if i == j { lambda * trace } else { 0.0 };
            for i in 0..dim {
                for j in 0..dim {
                    let p = w * det * (0..dim).map(|k| ff[i][k] * stress(k, j)).sum::<f64>();
                    (0..nn).for_each(|a| fe[a][i] += p * g[a][j]);
                }
            }
        }
        for (a, fa) in fe.iter().enumerate() {
            for c in 0..dim {
                f[node(a) * dim + c] += s * fa[c];
            }
        }
    }
}

/// Global entry i = sum of scale[e] ke[k] over its contributions k (kernels/fem.cu `assemble_scaled`).
pub fn assemble_scaled(ptr: &[i32], from: &[i32], ke: &[f64], scale: &[f64], values: &mut [f64]) {
    let ne = scale.len();
    for (i, v) in values.iter_mut().enumerate() {
        *v = from[ptr[i] as usize..ptr[i + 1] as usize].iter().map(|&k| scale[k as usize % ne] * ke[k as usize]).sum();
    }
}

/// What a thermal-stress pass reads and writes (kernels/fem.cu `thermal_stress`).
pub struct StressPass<'a> {
    pub laws: &'a [f64],
    pub stride: usize,
    pub terms: usize,
    pub nu: &'a [f64],
    pub cast: &'a [f64],
    pub t: f64,
    pub dt: f64,
    pub t_new: &'a [f64],
    pub t_old: &'a [f64],
}

pub fn law_modulus(p: &[f64], tau: f64) -> f64 {
    match p[0] as i32 {
        0 => p[1] * (1.0 - (-p[2] * tau.powf(p[3])).exp()),
        1 => p[1] * tau / (p[2] + tau),
        _ => p[1],
    }
}

fn law_autogenous(p: &[f64], tau: f64) -> f64 {
    if tau > 0.0 {
        p[5] * (1.0 - (-p[6] * tau.powf(p[7])).exp())
    } else {
        0.0
    }
}

/// One thermal-stress pass as kernels/fem.cu `thermal_stress`: without `du`
/// the step's load into f and each element's modulus into ebar; with `du`
/// the stresses and creep state advanced (entry-major state).
pub fn thermal_stress(
    set: &ElementSet,
    s: &StressPass,
    stress: &mut [f64],
    w: &mut [f64],
    ebar: &mut [f64],
    f: &mut [f64],
    du: Option<&[f64]>,
) {
    let (t, nn, ne) = (set.element, set.element.nodes(), set.elements);
    let pts = points(t, set.order);
    let np = pts.len();
    for e in 0..ne {
        let m = set.material[e] as usize;
        let p = &s.laws[m * s.stride..(m + 1) * s.stride];
        let tau = s.t + 0.5 * s.dt - s.cast[e];
        let em = law_modulus(p, tau);
        let term = |j: usize| &p[8 + 4 * j..12 + 4 * j];
        let psi = |c: &[f64]| c[0] + c[1] * tau.powf(-c[2]);
        let q: f64 = (0..s.terms).map(|j| psi(term(j)) * (1.0 - (-term(j)[3] * 0.5 * s.dt).exp())).sum();
        let eb = em / (1.0 + em * q);
        if du.is_none() {
            ebar[e] = eb;
        }
        let dg = law_autogenous(p, s.t + s.dt - s.cast[e]) - law_autogenous(p, s.t - s.cast[e]);
        let d = material_matrix(Problem::Elastic3d, 3, [1.0, s.nu[m]]);
        let xe = element_nodes(set, e);
        let node = |a: usize| set.conn[e * nn + a] as usize;
        let mut fe = vec![[0.0; 3]; nn];
        for (gp, &(xi, wt)) in pts.iter().enumerate() {
            let (g, det) = gauss_point(t, &xe, xi).expect("the set's integration checked the elements");
            let n = shape_values(t, xi);
            let dtemp: f64 = (0..nn).map(|a| n[a] * (s.t_new[node(a)] - s.t_old[node(a)])).sum();
            let at = |j: usize, k: usize| ((j * np + gp) * 6 + k) * ne + e;
            let mut v: Vec<f64> = (0..6)
                .map(|k| {
                    let eta: f64 = (0..s.terms).map(|j| (1.0 - (-term(j)[3] * s.dt).exp()) * w[at(j, k)]).sum();
                    eta + if k < 3 { p[4] * dtemp + dg } else { 0.0 }
                })
                .collect();
            if let Some(du) = du {
                for (k, vk) in v.iter_mut().enumerate() {
                    let strain: f64 = (0..nn)
                        .flat_map(|a| (0..3).map(move |c| (a, c)))
                        .map(|(a, c)| b_entry(Problem::Elastic3d, 3, k, c, &g[a]) * du[3 * node(a) + c])
                        .sum();
                    *vk = strain - *vk;
                }
            }
            let sv: Vec<f64> = (0..6).map(|k| (0..6).map(|r| eb * d[k][r] * v[r]).sum()).collect();
            match du {
                None => {
                    for (a, fa) in fe.iter_mut().enumerate() {
                        for (c, fc) in fa.iter_mut().enumerate() {
                            *fc += wt * det * (0..6).map(|k| b_entry(Problem::Elastic3d, 3, k, c, &g[a]) * sv[k]).sum::<f64>();
                        }
                    }
                }
                Some(_) => {
                    for k in 0..6 {
                        stress[(gp * 6 + k) * ne + e] += sv[k];
                        for j in 0..s.terms {
                            let c = term(j);
                            w[at(j, k)] = (-c[3] * s.dt).exp() * w[at(j, k)] + psi(c) * (-c[3] * 0.5 * s.dt).exp() * eb * v[k];
                        }
                    }
                }
            }
        }
        if du.is_none() {
            for (a, fa) in fe.iter().enumerate() {
                for c in 0..3 {
                    f[3 * node(a) + c] += fa[c];
                }
            }
        }
    }
}

/// Node averages of the element-mean stresses (kernels/fem.cu `stress_to_nodes`, then divided): 6 per node.
pub fn stress_to_nodes(set: &ElementSet, points: usize, stress: &[f64], sums: &mut [f64], count: &mut [f64]) {
    let (nn, ne) = (set.element.nodes(), set.elements);
    for e in 0..ne {
        let mean: Vec<f64> =
            (0..6).map(|k| (0..points).map(|gp| stress[(gp * 6 + k) * ne + e]).sum::<f64>() / points as f64).collect();
        for a in 0..nn {
            let v = set.conn[e * nn + a] as usize;
            (0..6).for_each(|k| sums[6 * v + k] += mean[k]);
            count[v] += 1.0;
        }
    }
}

/// The HRZ lumped mass of the quadratic elements from their packed mass
/// matrices `ce` (entry-major), added into `out` (kernels/fem.cu `hrz_lump`).
pub fn hrz_lump(set: &ElementSet, ce: &[f64], out: &mut [f64]) {
    let (ne, nd) = (set.elements, set.element_dofs());
    let dpn = set.problem.dofs_per_node(set.element.dim());
    for e in 0..ne {
        let (mut total, mut diag, mut k) = (0.0, 0.0, 0);
        for p in 0..nd {
            for r in p..nd {
                if p % dpn == 0 && r % dpn == 0 {
                    let m = ce[k * ne + e];
                    total += if p == r { m } else { 2.0 * m };
                    if p == r {
                        diag += m;
                    }
                }
                k += 1;
            }
        }
        let mut k = 0;
        for p in 0..nd {
            out[set.global_dof(e, p)] += ce[k * ne + e] * total / diag;
            k += nd - p;
        }
    }
}
