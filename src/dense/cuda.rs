//! CUDA launches for `kernels/dense.cu`.

use super::Variant;
use crate::array::{Dtype, Real};
use crate::error::Result;
use crate::gpu::{DeviceBuffer, Gpu, KernelArg, Queue};

/// kernels/dense.cu after the prelude that lets its kernels compile one at a time.
pub const SOURCE: &str = concat!(include_str!("../../kernels/one_kernel.cuh"), include_str!("../../kernels/dense.cu"));

/// A tile kernel's shape: a TILE x ROWS thread block moving a TILE x (JT*TILE) panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub tile: u32,
    pub rows: u32,
    pub jt: u32,
}

/// Every out-of-place transpose shape compiled in `kernels/dense.cu`.
pub const SHAPES: [Shape; 7] = [
    Shape { tile: 32, rows: 8, jt: 1 },
    Shape { tile: 32, rows: 16, jt: 1 },
    Shape { tile: 32, rows: 32, jt: 1 },
    Shape { tile: 64, rows: 16, jt: 1 },
    Shape { tile: 32, rows: 8, jt: 2 },
    Shape { tile: 32, rows: 8, jt: 4 },
    Shape { tile: 32, rows: 16, jt: 2 },
];

/// The shape of the in-place and copy kernels.
const SQUARE_SHAPE: Shape = Shape { tile: 32, rows: 8, jt: 1 };

/// The default transpose shape, chosen by `fegpu bench transpose` on the H100
/// (BENCHMARKS.md): f32 needs two tiles per block to keep enough loads in
/// flight (93.7% of copy at 8192^2 against 86.7% with one); f64 does not.
pub fn default_shape<T: Real>() -> Shape {
    match T::DTYPE {
        Dtype::F32 => Shape { tile: 32, rows: 16, jt: 2 },
        Dtype::F64 => Shape { tile: 32, rows: 8, jt: 1 },
    }
}

fn grid_y(tiles: usize) -> u32 {
    tiles.clamp(1, 65535) as u32
}

fn tiled_name<T: Real>(kind: &str, v: Variant, s: Shape) -> String {
    format!(
        "{kind}_{}_t{}r{}{}_{}",
        v.name(),
        s.tile,
        s.rows,
        if kind == "transpose" { format!("j{}", s.jt) } else { String::new() },
        T::DTYPE.name()
    )
}

pub fn transpose<T: Real>(
    g: &Gpu,
    v: Variant,
    shape: Option<Shape>,
    m: usize,
    n: usize,
    a: &DeviceBuffer<T>,
    b: &mut DeviceBuffer<T>,
) -> Result<()> {
    transpose_on(g, g, v, shape, m, n, a, b)
}

/// `transpose` queued on `q` (a pipeline's lane) instead of fegpu's main stream.
#[allow(clippy::too_many_arguments)]
pub fn transpose_on<T: Real>(
    g: &Gpu,
    q: &impl Queue,
    v: Variant,
    shape: Option<Shape>,
    m: usize,
    n: usize,
    a: &DeviceBuffer<T>,
    b: &mut DeviceBuffer<T>,
) -> Result<()> {
    let (name, grid, block) = match v {
        Variant::Naive => {
            (format!("transpose_naive_{}", T::DTYPE.name()), (m.div_ceil(32) as u32, grid_y(n.div_ceil(8)), 1), (32, 8, 1))
        }
        _ => {
            let s = shape.unwrap_or_else(default_shape::<T>);
            let t = s.tile as usize;
            (
                tiled_name::<T>("transpose", v, s),
                (m.div_ceil(t) as u32, grid_y(n.div_ceil(t * s.jt as usize)), 1),
                (s.tile, s.rows, 1),
            )
        }
    };
    let f = g.kernel("dense", SOURCE, &name)?;
    let (m, n) = (m as i64, n as i64);
    let mut l = q.launcher(&f);
    l.arg(a).arg(b).arg(&m).arg(&n);
    q.launch(&name, l, grid, block, 0)
}

pub fn transpose_square_in_place<T: Real>(g: &Gpu, v: Variant, n: usize, a: &mut DeviceBuffer<T>) -> Result<()> {
    let (name, grid, block) = match v {
        Variant::Naive => {
            (format!("transpose_square_naive_{}", T::DTYPE.name()), (n.div_ceil(32) as u32, grid_y(n.div_ceil(8)), 1), (32, 8, 1))
        }
        _ => {
            let s = SQUARE_SHAPE;
            let tiles = n.div_ceil(s.tile as usize);
            (tiled_name::<T>("transpose_square", v, s), (tiles as u32, grid_y(tiles), 1), (s.tile, s.rows, 1))
        }
    };
    let f = g.kernel("dense", SOURCE, &name)?;
    let n = n as i64;
    let mut l = g.launcher(&f);
    l.arg(a).arg(&n);
    g.launch(&name, l, grid, block, 0)
}

pub fn copy<T: Real>(g: &Gpu, v: Variant, m: usize, n: usize, a: &DeviceBuffer<T>, b: &mut DeviceBuffer<T>) -> Result<()> {
    let (name, grid, block) = match v {
        Variant::Naive => {
            (format!("copy_naive_{}", T::DTYPE.name()), (m.div_ceil(32) as u32, grid_y(n.div_ceil(8)), 1), (32, 8, 1))
        }
        _ => {
            let s = SQUARE_SHAPE;
            let t = s.tile as usize;
            (
                format!("copy_tile_t{}r{}_{}", s.tile, s.rows, T::DTYPE.name()),
                (m.div_ceil(t) as u32, grid_y(n.div_ceil(t)), 1),
                (s.tile, s.rows, 1),
            )
        }
    };
    let f = g.kernel("dense", SOURCE, &name)?;
    let (m, n) = (m as i64, n as i64);
    let mut l = g.launcher(&f);
    l.arg(a).arg(b).arg(&m).arg(&n);
    g.launch(&name, l, grid, block, 0)
}
