//! CUDA launches for `kernels/fem.cu`.

use super::{DeviceSet, ElementSet, Problem};
use crate::error::Error;
use crate::gpu::{arg_or_null, DeviceBuffer, Gpu, KernelArg};

/// kernels/fem.cu after the prelude that lets its kernels compile one at a time.
pub const SOURCE: &str = concat!(include_str!("../../kernels/one_kernel.cuh"), include_str!("../../kernels/fem.cu"));

/// kernels/fem.cu with FEM_QUADRATIC defined: the quadratic elements'
/// kernels, a module of their own.
pub const QUADRATIC_SOURCE: &str =
    concat!("#define FEM_QUADRATIC 1\n", include_str!("../../kernels/one_kernel.cuh"), include_str!("../../kernels/fem.cu"));

/// A kernel of the set's element type: from the quadratic module for
/// quadratic elements.
fn element_kernel(g: &Gpu, set: &ElementSet, name: &str) -> crate::error::Result<crate::gpu::Kernel> {
    if set.element.is_quadratic() {
        g.kernel("fem_quadratic", QUADRATIC_SOURCE, name)
    } else {
        g.kernel("fem", SOURCE, name)
    }
}

const BLOCK: u32 = 128;

pub enum Failure {
    /// The first element with a non-positive Jacobian determinant.
    Element(usize),
    Other(Error),
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::Other(e)
    }
}

/// The kernel-name suffix of a set: element and physics.
fn suffix(set: &ElementSet) -> String {
    format!("{}_{}", set.element.name(), if set.problem == Problem::Heat { "heat" } else { "elastic" })
}

/// Elements per block of level IIa: as many as fit 48 KB of Gauss-point
/// quantities, at most 32 (level II: 1).
fn elements_per_block(set: &ElementSet, level: super::Level) -> (u32, u32, u32) {
    let points = super::cpu::points(set.element, set.order).len();
    let per_element = points * (set.element.nodes() * set.element.dim() + 1) * 8;
    let epb = if level == super::Level::Point { 1 } else { ((48 << 10) / per_element).clamp(1, 32) };
    let threads = if epb == 1 { 64 } else { 256 };
    (epb as u32, threads, (epb * per_element) as u32)
}

/// Every K^e (props: 2 per material) by the set's integration level, or with
/// `mass` every mass matrix (props: the mass coefficient per material, level
/// I), into a new device buffer.
pub fn stiffness(
    g: &Gpu,
    set: &ElementSet,
    d: &DeviceSet,
    props: &DeviceBuffer<f64>,
    total: usize,
    mass: bool,
) -> Result<DeviceBuffer<f64>, Failure> {
    let level = if mass { super::Level::Element } else { set.integration_level() };
    let blocked = level != super::Level::Element;
    let name = format!("{}_{}{}", if mass { "mass" } else { "stiffness" }, suffix(set), if blocked { "_blocked" } else { "" });
    let f = element_kernel(g, set, &name)?;
    let ke = g.alloc::<f64>(total.max(1))?;
    let bad = crate::sparse::cuda::upload(g, &[i32::MAX])?;
    let (ne, plane_strain, order) = (set.elements as i64, (set.problem == Problem::PlaneStrain) as i32, set.order as i32);
    let mut l = g.launcher(&f);
    l.arg(&ne).arg(&d.coords).arg(&d.conn).arg(&d.material).arg(props);
    if !mass {
        l.arg(&plane_strain);
    }
    l.arg(&order).arg(&ke).arg(&bad);
    if blocked {
        let (epb, threads, shared) = elements_per_block(set, level);
        let epb_arg = epb as i32;
        l.arg(&epb_arg);
        g.launch(&name, l, ((set.elements as u32).div_ceil(epb), 1, 1), (threads, 1, 1), shared)?;
    } else {
        g.launch(&name, l, ((set.elements as u32).div_ceil(BLOCK), 1, 1), (BLOCK, 1, 1), 0)?;
    }
    let mut first_bad = [0i32];
    g.download(&bad, 0, &mut first_bad)?;
    if first_bad[0] != i32::MAX {
        return Err(Failure::Element(first_bad[0] as usize));
    }
    Ok(ke)
}

/// Global values by the assembly map, one thread per stored entry.
pub fn assemble(
    g: &Gpu,
    nnz: usize,
    ptr: &DeviceBuffer<i32>,
    from: &DeviceBuffer<i32>,
    ke: &DeviceBuffer<f64>,
    values: &mut DeviceBuffer<f64>,
) -> crate::error::Result<()> {
    let f = g.kernel("fem", SOURCE, "assemble")?;
    let n = nnz as i64;
    let mut l = g.launcher(&f);
    l.arg(&n).arg(ptr).arg(from).arg(ke).arg(values);
    g.launch("assemble", l, ((nnz as u32).div_ceil(256).max(1), 1, 1), (256, 1, 1), 0)
}

fn element_grid(set: &ElementSet) -> (u32, u32, u32) {
    ((set.elements as u32).div_ceil(BLOCK).max(1), 1, 1)
}

fn vector_grid(n: usize) -> (u32, u32, u32) {
    (n.div_ceil(256).clamp(1, 1024) as u32, 1, 1)
}

/// y = diag .* x on the constrained dofs, 0 elsewhere (kernels/fem.cu
/// `ebe_init`), before the element products add in.
fn ebe_init(
    g: &Gpu,
    set: &ElementSet,
    fixed: Option<(&DeviceBuffer<u8>, &DeviceBuffer<f64>)>,
    x: &DeviceBuffer<f64>,
    y: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> crate::error::Result<()> {
    let n = set.dofs() as i64;
    let init = g.kernel("fem", SOURCE, "ebe_init")?;
    let mut l = g.launcher(&init);
    l.arg(&n).arg(x).arg(y);
    arg_or_null(&mut l, fixed.map(|f| f.0));
    arg_or_null(&mut l, fixed.map(|f| f.1));
    arg_or_null(&mut l, sc);
    g.launch("ebe_init", l, vector_grid(n as usize), (256, 1, 1), 0)
}

/// y = sum_e K^e x_e, constrained dofs masked when `fixed` is given (y = diag
/// x there); with `sc`, skipped once a device-driven solve has stopped.
#[allow(clippy::too_many_arguments)]
pub fn ebe_apply(
    g: &Gpu,
    set: &ElementSet,
    d: &DeviceSet,
    ke: &DeviceBuffer<f64>,
    fixed: Option<(&DeviceBuffer<u8>, &DeviceBuffer<f64>)>,
    x: &DeviceBuffer<f64>,
    y: &DeviceBuffer<f64>,
    sc: Option<&DeviceBuffer<f64>>,
) -> crate::error::Result<()> {
    ebe_init(g, set, fixed, x, y, sc)?;
    let name = format!("ebe_apply_{}", suffix(set));
    let f = element_kernel(g, set, &name)?;
    let ne = set.elements as i64;
    let mut l = g.launcher(&f);
    l.arg(&ne).arg(&d.conn).arg(ke).arg(x).arg(y);
    arg_or_null(&mut l, fixed.map(|f| f.0));
    arg_or_null(&mut l, sc);
    g.launch(&name, l, element_grid(set), (BLOCK, 1, 1), 0)
}

/// The assembled diagonal from the element matrices.
pub fn ebe_diagonal(
    g: &Gpu,
    set: &ElementSet,
    d: &DeviceSet,
    ke: &DeviceBuffer<f64>,
    diag: &mut DeviceBuffer<f64>,
) -> crate::error::Result<()> {
    g.fill_bytes(diag, 0)?;
    let name = format!("ebe_diagonal_{}", suffix(set));
    let f = element_kernel(g, set, &name)?;
    let ne = set.elements as i64;
    let mut l = g.launcher(&f);
    l.arg(&ne).arg(&d.conn).arg(ke).arg(&*diag);
    g.launch(&name, l, element_grid(set), (BLOCK, 1, 1), 0)
}

/// Constrained rows b = diag g, free rows b -= t (t = K g): the right-hand
/// side of Dirichlet conditions applied as on the assembled matrix.
pub fn dirichlet_rhs(
    g: &Gpu,
    n: usize,
    fixed: &DeviceBuffer<u8>,
    values: &DeviceBuffer<f64>,
    diag: &DeviceBuffer<f64>,
    t: &DeviceBuffer<f64>,
    b: &DeviceBuffer<f64>,
) -> crate::error::Result<()> {
    let f = g.kernel("fem", SOURCE, "dirichlet_rhs")?;
    let n64 = n as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64).arg(fixed).arg(values).arg(diag).arg(t).arg(b);
    g.launch("dirichlet_rhs", l, vector_grid(n), (256, 1, 1), 0)
}

/// As `ebe_apply` with K^e recomputed from the geometry (no stored matrices);
/// with `diag_out`, the element diagonals added into it instead (zeroed first).
#[allow(clippy::too_many_arguments)]
pub fn ebe_otf(
    g: &Gpu,
    set: &ElementSet,
    d: &DeviceSet,
    props: &DeviceBuffer<f64>,
    fixed: Option<(&DeviceBuffer<u8>, &DeviceBuffer<f64>)>,
    x: &DeviceBuffer<f64>,
    y: &DeviceBuffer<f64>,
    diag_out: Option<&mut DeviceBuffer<f64>>,
    sc: Option<&DeviceBuffer<f64>>,
) -> crate::error::Result<()> {
    let diag_out = match diag_out {
        Some(out) => {
            g.fill_bytes(out, 0)?;
            Some(&*out)
        }
        None => {
            ebe_init(g, set, fixed, x, y, sc)?;
            None
        }
    };
    let name = format!("ebe_otf_{}", suffix(set));
    let f = g.kernel("fem", SOURCE, &name)?;
    let (ne, plane_strain, order) = (set.elements as i64, (set.problem == Problem::PlaneStrain) as i32, set.order as i32);
    let mut l = g.launcher(&f);
    l.arg(&ne).arg(&d.coords).arg(&d.conn).arg(&d.material).arg(props).arg(&plane_strain).arg(&order).arg(x).arg(y);
    arg_or_null(&mut l, fixed.map(|f| f.0));
    arg_or_null(&mut l, diag_out);
    arg_or_null(&mut l, sc);
    g.launch(&name, l, element_grid(set), (BLOCK, 1, 1), 0)
}

/// The assembly pattern and gather map built on the device (kernels/fem.cu
/// `map_*`): the same entries as the host's `build_assembly`.
pub struct Map {
    /// Each node's sorted neighbours (the nodes it shares an element with).
    pub nbr_ptr: DeviceBuffer<i32>,
    pub nbr: DeviceBuffer<i32>,
    pub row_ptr: DeviceBuffer<i32>,
    pub col: DeviceBuffer<i32>,
    pub diag: DeviceBuffer<i32>,
    pub ptr: DeviceBuffer<i32>,
    pub from: DeviceBuffer<i32>,
}

/// Builds the map for `set` (sizes checked by the caller: every count and
/// total fits int).
pub fn assembly_map(g: &Gpu, set: &ElementSet, d: &DeviceSet) -> crate::error::Result<Map> {
    use crate::array::cuda::exclusive_scan;
    let (nodes, nn, ne) = (set.nodes, set.element.nodes(), set.elements);
    let dpn = set.problem.dofs_per_node(set.element.dim());
    let total = (nn * ne) as i64;
    let (nodes64, nn32, dpn32, ne64) = (nodes as i64, nn as i32, dpn as i32, ne as i64);
    let node_grid = ((nodes as u32).div_ceil(BLOCK), 1, 1);
    macro_rules! launch {
        ($name:expr, $grid:expr, $threads:expr, $($arg:expr),+) => {{
            let f = g.kernel("fem", SOURCE, $name)?;
            let mut l = g.launcher(&f);
            $(l.arg($arg);)+
            g.launch($name, l, $grid, ($threads, 1, 1), 0)?;
        }};
    }
    let read_last = |x: &DeviceBuffer<i32>, at: usize| -> crate::error::Result<usize> {
        let mut v = [0i32];
        g.download(x, at, &mut v)?;
        Ok(v[0] as usize)
    };
    // each node's elements
    let elem_ptr = g.zeros::<i32>(nodes + 1)?;
    launch!("map_count", vector_grid(total as usize), 256, &total, &d.conn, &elem_ptr);
    exclusive_scan(g, nodes + 1, &elem_ptr)?;
    let (cursor, elems) = (g.zeros::<i32>(nodes)?, g.alloc::<i32>(total as usize)?);
    launch!("map_fill", vector_grid(total as usize), 256, &total, &nn32, &d.conn, &elem_ptr, &cursor, &elems);
    drop(cursor);
    // each node's neighbours
    let scratch = g.alloc::<i32>(total as usize * nn)?;
    let nbr_ptr = g.zeros::<i32>(nodes + 1)?;
    launch!("map_neighbours", node_grid, BLOCK, &nodes64, &nn32, &d.conn, &elem_ptr, &elems, &scratch, &nbr_ptr);
    exclusive_scan(g, nodes + 1, &nbr_ptr)?;
    let pairs = read_last(&nbr_ptr, nodes)?;
    let nbr = g.alloc::<i32>(pairs.max(1))?;
    launch!("map_neighbour_list", node_grid, BLOCK, &nodes64, &nn32, &elem_ptr, &scratch, &nbr_ptr, &nbr);
    drop(scratch);
    // contributions per pair, scanned
    let counts = g.zeros::<i32>(pairs + 1)?;
    launch!("map_pair_count", node_grid, BLOCK, &nodes64, &nn32, &d.conn, &elem_ptr, &elems, &nbr_ptr, &nbr, &counts);
    exclusive_scan(g, pairs + 1, &counts)?;
    let (nnz, contributions) = (pairs * dpn * dpn, read_last(&counts, pairs)? * dpn * dpn);
    let ndof = nodes * dpn;
    let mut diag = g.alloc::<i32>(ndof.max(1))?;
    g.fill_bytes(&mut diag, 0xff)?; // -1: a node of no element has no diagonal
    let (row_ptr, col) = (g.alloc::<i32>(ndof + 1)?, g.alloc::<i32>(nnz.max(1))?);
    let (ptr, from) = (g.alloc::<i32>(nnz + 1)?, g.alloc::<i32>(contributions.max(1))?);
    let cursor = g.zeros::<i32>(pairs.max(1))?;
    launch!(
        "map_rows", node_grid, BLOCK, &nodes64, &nn32, &dpn32, &ne64, &d.conn, &elem_ptr, &elems, &nbr_ptr, &nbr, &counts,
        &cursor, &row_ptr, &col, &diag, &ptr, &from
    );
    Ok(Map { nbr_ptr, nbr, row_ptr, col, diag, ptr, from })
}

/// values[at[i]] += s h[i] for each dof i (convection on the diagonal).
pub fn diagonal_add(
    g: &Gpu,
    n: usize,
    at: &DeviceBuffer<i32>,
    s: f64,
    h: &DeviceBuffer<f64>,
    values: &DeviceBuffer<f64>,
) -> crate::error::Result<()> {
    let f = g.kernel("fem", SOURCE, "diagonal_add")?;
    let n64 = n as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64).arg(at).arg(&s).arg(h).arg(values);
    g.launch("diagonal_add", l, vector_grid(n), (256, 1, 1), 0)
}

/// f += the body load (b: dpn values per element) into a zeroed `f`; Err(first
/// bad element) as `stiffness`.
pub fn body_load(g: &Gpu, set: &ElementSet, d: &DeviceSet, b: &DeviceBuffer<f64>, f: &DeviceBuffer<f64>) -> Result<(), Failure> {
    let name = format!("body_load_{}", suffix(set));
    let func = element_kernel(g, set, &name)?;
    let bad = crate::sparse::cuda::upload(g, &[i32::MAX])?;
    let (ne, order) = (set.elements as i64, set.order as i32);
    let mut l = g.launcher(&func);
    l.arg(&ne).arg(&d.coords).arg(&d.conn).arg(b).arg(&order).arg(f).arg(&bad);
    g.launch(&name, l, element_grid(set), (BLOCK, 1, 1), 0)?;
    let mut first_bad = [0i32];
    g.download(&bad, 0, &mut first_bad)?;
    match first_bad[0] {
        i32::MAX => Ok(()),
        e => Err(Failure::Element(e as usize)),
    }
}

/// f += the face integrals (kernels/fem.cu `face_load`); convection's face
/// matrices into `hf`.
#[allow(clippy::too_many_arguments)]
pub fn face_load(
    g: &Gpu,
    set: &ElementSet,
    d: &DeviceSet,
    fnodes: usize,
    faces: &DeviceBuffer<i32>,
    nf: usize,
    kind: super::loads::FaceKind,
    values: &DeviceBuffer<f64>,
    f: &DeviceBuffer<f64>,
    hf: Option<&DeviceBuffer<f64>>,
) -> crate::error::Result<()> {
    let face = match (set.element.dim(), fnodes) {
        (2, 2) => "edge",
        (2, _) => "edge3",
        (_, 3) => "tri",
        (_, 4) => "quad",
        (_, 6) => "tri6",
        _ => "quad8",
    };
    let name = format!("face_load_{face}");
    let func = element_kernel(g, set, &name)?;
    let (nf64, kind) = (nf as i64, kind as i32);
    let mut l = g.launcher(&func);
    l.arg(&nf64).arg(&d.coords).arg(faces).arg(&kind).arg(values).arg(f);
    arg_or_null(&mut l, hf);
    g.launch(&name, l, ((nf as u32).div_ceil(BLOCK).max(1), 1, 1), (BLOCK, 1, 1), 0)
}

/// values[at[i]] += s hf[i] for every packed face-matrix entry i.
pub fn face_matrix_add(
    g: &Gpu,
    total: usize,
    at: &DeviceBuffer<i32>,
    s: f64,
    hf: &DeviceBuffer<f64>,
    values: &DeviceBuffer<f64>,
) -> crate::error::Result<()> {
    let f = g.kernel("fem", SOURCE, "face_matrix_add")?;
    let n64 = total as i64;
    let mut l = g.launcher(&f);
    l.arg(&n64).arg(at).arg(&s).arg(hf).arg(values);
    g.launch("face_matrix_add", l, vector_grid(total), (256, 1, 1), 0)
}

/// f += s f_int(u), the total Lagrangian internal forces (kernels/fem.cu `tl_force`).
pub fn tl_force(
    g: &Gpu,
    set: &ElementSet,
    d: &DeviceSet,
    props: &DeviceBuffer<f64>,
    u: &DeviceBuffer<f64>,
    s: f64,
    f: &DeviceBuffer<f64>,
) -> crate::error::Result<()> {
    let name = format!("tl_force_{}", suffix(set));
    let func = g.kernel("fem", SOURCE, &name)?;
    let (ne, order) = (set.elements as i64, set.order as i32);
    let mut l = g.launcher(&func);
    l.arg(&ne).arg(&d.coords).arg(&d.conn).arg(&d.material).arg(props).arg(&order).arg(u).arg(&s).arg(f);
    g.launch(&name, l, element_grid(set), (BLOCK, 1, 1), 0)
}

/// Global values from unit-modulus element matrices scaled per element.
#[allow(clippy::too_many_arguments)]
pub fn assemble_scaled(
    g: &Gpu,
    nnz: usize,
    ne: usize,
    ptr: &DeviceBuffer<i32>,
    from: &DeviceBuffer<i32>,
    ke: &DeviceBuffer<f64>,
    scale: &DeviceBuffer<f64>,
    values: &DeviceBuffer<f64>,
) -> crate::error::Result<()> {
    let f = g.kernel("fem", SOURCE, "assemble_scaled")?;
    let (n, ne) = (nnz as i64, ne as i64);
    let mut l = g.launcher(&f);
    l.arg(&n).arg(&ne).arg(ptr).arg(from).arg(ke).arg(scale).arg(values);
    g.launch("assemble_scaled", l, ((nnz as u32).div_ceil(256).max(1), 1, 1), (256, 1, 1), 0)
}

/// The device side of a thermal-stress pass (kernels/fem.cu `thermal_stress`).
pub struct StressBuffers<'a> {
    pub laws: &'a DeviceBuffer<f64>,
    pub stride: usize,
    pub terms: usize,
    pub nu: &'a DeviceBuffer<f64>,
    pub cast: &'a DeviceBuffer<f64>,
    pub t: f64,
    pub dt: f64,
    pub t_new: &'a DeviceBuffer<f64>,
    pub t_old: &'a DeviceBuffer<f64>,
    pub stress: &'a DeviceBuffer<f64>,
    pub w: &'a DeviceBuffer<f64>,
    pub ebar: &'a DeviceBuffer<f64>,
}

/// Without `du`: the step's load into `f` and the moduli; with it: the
/// stresses and creep state advanced.
pub fn thermal_stress(
    g: &Gpu,
    set: &ElementSet,
    d: &DeviceSet,
    s: &StressBuffers,
    f: Option<&DeviceBuffer<f64>>,
    du: Option<&DeviceBuffer<f64>>,
) -> crate::error::Result<()> {
    let name = format!("thermal_stress_{}", set.element.name());
    let func = g.kernel("fem", SOURCE, &name)?;
    let (ne, stride, terms, order) = (set.elements as i64, s.stride as i32, s.terms as i32, set.order as i32);
    let mut l = g.launcher(&func);
    l.arg(&ne).arg(&d.coords).arg(&d.conn).arg(&d.material).arg(s.laws).arg(&stride).arg(&terms).arg(s.nu).arg(s.cast);
    l.arg(&s.t).arg(&s.dt).arg(&order).arg(s.t_new).arg(s.t_old).arg(s.stress).arg(s.w).arg(s.ebar);
    arg_or_null(&mut l, f);
    arg_or_null(&mut l, du);
    g.launch(&name, l, element_grid(set), (BLOCK, 1, 1), 0)
}

/// Sums of the element-mean stresses and element counts per node.
pub fn stress_to_nodes(
    g: &Gpu,
    set: &ElementSet,
    d: &DeviceSet,
    points: usize,
    stress: &DeviceBuffer<f64>,
    sums: &DeviceBuffer<f64>,
    count: &DeviceBuffer<f64>,
) -> crate::error::Result<()> {
    let func = g.kernel("fem", SOURCE, "stress_to_nodes")?;
    let (ne, nn, pts) = (set.elements as i64, set.element.nodes() as i32, points as i32);
    let mut l = g.launcher(&func);
    l.arg(&ne).arg(&nn).arg(&pts).arg(&d.conn).arg(stress).arg(sums).arg(count);
    g.launch("stress_to_nodes", l, element_grid(set), (BLOCK, 1, 1), 0)
}

/// out += the HRZ lumped mass of quadratic elements from their mass matrices.
pub fn hrz_lump(
    g: &Gpu,
    set: &ElementSet,
    d: &DeviceSet,
    ce: &DeviceBuffer<f64>,
    out: &DeviceBuffer<f64>,
) -> crate::error::Result<()> {
    let name = format!("hrz_lump_{}", suffix(set));
    let func = element_kernel(g, set, &name)?;
    let ne = set.elements as i64;
    let mut l = g.launcher(&func);
    l.arg(&ne).arg(&d.conn).arg(ce).arg(out);
    g.launch(&name, l, element_grid(set), (BLOCK, 1, 1), 0)
}
