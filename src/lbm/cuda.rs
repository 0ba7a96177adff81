//! CUDA launches for `kernels/lbm.cu`.

use super::Params;
use super::storage::Stored;
use crate::error::Result;
use crate::gpu::{DeviceBuffer, Gpu, KernelArg};

pub const SOURCE: &str = include_str!("../../kernels/lbm.cu");

pub const BLOCK: u32 = 256;

fn grid(n: usize) -> (u32, u32, u32) {
    (n.div_ceil(BLOCK as usize) as u32, 1, 1)
}

/// One site per thread; `block` threads per block (<= 256; 256 unless
/// `fegpu bench lbm` compares).
pub fn step<T: Stored>(g: &Gpu, p: &Params, block: u32, flags: &DeviceBuffer<u8>, fin: &DeviceBuffer<T>, fout: &mut DeviceBuffer<T>) -> Result<()> {
    let name = format!("lbm_step_{}{}", if p.magic > 0.0 { "trt_" } else { "" }, T::NAME);
    let f = g.kernel("lbm", SOURCE, &name)?;
    let [nx, ny, nz] = p.dims.map(|d| d as i32);
    let (omega, omega_minus) = (T::arith(1.0 / p.tau), T::arith(p.omega_minus()));
    let force = p.force.map(T::arith);
    let wall = p.wall_velocity.map(T::arith);
    let mut l = g.launcher(&f);
    l.arg(fin)
        .arg(fout)
        .arg(flags)
        .arg(&nx)
        .arg(&ny)
        .arg(&nz)
        .arg(&p.periodic)
        .arg(&omega)
        .arg(&omega_minus);
    l.arg(&force[0]).arg(&force[1]).arg(&force[2]).arg(&wall[0]).arg(&wall[1]).arg(&wall[2]);
    g.launch(&name, l, (p.sites().div_ceil(block as usize) as u32, 1, 1), (block, 1, 1), 0)
}

pub fn equilibrium<T: Stored>(g: &Gpu, f: &mut DeviceBuffer<T>, n: usize, rho: f64, u: [f64; 3]) -> Result<()> {
    let name = format!("lbm_equilibrium_{}", T::NAME);
    let k = g.kernel("lbm", SOURCE, &name)?;
    let (n64, rho) = (n as i64, T::arith(rho));
    let u = u.map(T::arith);
    let mut l = g.launcher(&k);
    l.arg(f).arg(&n64).arg(&rho).arg(&u[0]).arg(&u[1]).arg(&u[2]);
    g.launch(&name, l, grid(n), (BLOCK, 1, 1), 0)
}

pub fn fields<T: Stored>(g: &Gpu, p: &Params, flags: &DeviceBuffer<u8>, f: &DeviceBuffer<T>, first: usize, rho: &mut [f64], u: &mut [f64]) -> Result<()> {
    let name = format!("lbm_fields_{}", T::NAME);
    let k = g.kernel("lbm", SOURCE, &name)?;
    let count = rho.len();
    let mut rho_d = g.alloc::<f64>(count)?;
    let mut u_d = g.alloc::<f64>(3 * count)?;
    let (n, first64, count64) = (p.sites() as i64, first as i64, count as i64);
    let force = p.force.map(T::arith);
    let mut l = g.launcher(&k);
    l.arg(f)
        .arg(flags)
        .arg(&n)
        .arg(&first64)
        .arg(&count64)
        .arg(&force[0])
        .arg(&force[1])
        .arg(&force[2])
        .arg(&mut rho_d)
        .arg(&mut u_d);
    g.launch(&name, l, grid(count), (BLOCK, 1, 1), 0)?;
    g.download(&rho_d, 0, rho)?;
    g.download(&u_d, 0, u)
}
