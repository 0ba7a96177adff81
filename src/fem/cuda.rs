//! CUDA launches for `kernels/fem.cu`.

use super::{DeviceSet, ElementSet, Problem};
use crate::error::Error;
use crate::gpu::{DeviceBuffer, Gpu, KernelArg};

pub const SOURCE: &str = include_str!("../../kernels/fem.cu");

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

/// Every K^e into a new device buffer, one thread per element.
pub fn stiffness(g: &Gpu, set: &ElementSet, d: &DeviceSet, props: &DeviceBuffer<f64>, total: usize) -> Result<DeviceBuffer<f64>, Failure> {
    let physics = if set.problem == Problem::Heat { "heat" } else { "elastic" };
    let name = format!("stiffness_{}_{physics}", set.element.name());
    let f = g.kernel("fem", SOURCE, &name)?;
    let ke = g.alloc::<f64>(total.max(1))?;
    let bad = crate::sparse::cuda::upload(g, &[i32::MAX])?;
    let (ne, plane_strain, order) = (set.elements as i64, (set.problem == Problem::PlaneStrain) as i32, set.order as i32);
    let mut l = g.launcher(&f);
    l.arg(&ne).arg(&d.coords).arg(&d.conn).arg(&d.material).arg(props).arg(&plane_strain).arg(&order).arg(&ke).arg(&bad);
    g.launch(&name, l, ((set.elements as u32).div_ceil(BLOCK), 1, 1), (BLOCK, 1, 1), 0)?;
    let mut first_bad = [0i32];
    g.download(&bad, 0, &mut first_bad)?;
    if first_bad[0] != i32::MAX {
        return Err(Failure::Element(first_bad[0] as usize));
    }
    Ok(ke)
}

/// Global values by the assembly map, one thread per stored entry.
pub fn assemble(g: &Gpu, nnz: usize, ptr: &DeviceBuffer<i32>, from: &DeviceBuffer<i32>, ke: &DeviceBuffer<f64>, values: &mut DeviceBuffer<f64>) -> crate::error::Result<()> {
    let f = g.kernel("fem", SOURCE, "assemble")?;
    let n = nnz as i64;
    let mut l = g.launcher(&f);
    l.arg(&n).arg(ptr).arg(from).arg(ke).arg(values);
    g.launch("assemble", l, ((nnz as u32).div_ceil(256).max(1), 1, 1), (256, 1, 1), 0)
}
