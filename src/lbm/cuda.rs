//! CUDA launches for `kernels/lbm.cu`.

use super::storage::Stored;
use super::Params;
use crate::error::Result;
use crate::gpu::{DeviceBuffer, Gpu, KernelArg};

/// kernels/lbm.cu after the prelude that lets its kernels compile one at a time.
pub const SOURCE: &str = concat!(include_str!("../../kernels/one_kernel.cuh"), include_str!("../../kernels/lbm.cu"));

pub const BLOCK: u32 = 256;

/// Threads per block of a step: 256, but 128 for f16 storage's steps other
/// than the in-place odd step (on the H100 the f16 even and pull steps ran
/// 3% faster with 128, the odd step 6% faster with 256; BENCHMARKS.md).
/// f16's in-place steps over pairs: 64 (even) and 128 (odd, the most the
/// kernel's shared memory and launch bounds take), measured fastest.
fn step_block(name: &str, pass: Pass, pairs: bool) -> u32 {
    match (pairs, pass) {
        (true, Pass::Even) => 64,
        (true, _) => PAIR_BLOCK,
        _ if name == "f16" && pass != Pass::Odd => 128,
        _ => BLOCK,
    }
}

/// The most threads a block of the pair kernels takes.
const PAIR_BLOCK: u32 = 128;

/// Whether a pass runs two sites a thread: f16's in-place steps where rows
/// and the range start at even sites (kernels/lbm.cu `lbm_pairs_*`).
fn over_pairs(name: &str, pass: Pass, nx: usize, first: usize) -> bool {
    name == "f16" && matches!(pass, Pass::Even | Pass::Odd) && nx.is_multiple_of(2) && first.is_multiple_of(2)
}

fn grid(n: usize) -> (u32, u32, u32) {
    (n.div_ceil(BLOCK as usize) as u32, 1, 1)
}

/// The passes over the lattice (kernels/lbm.cu). Over two buffers: a push
/// step (collide, then push to the neighbours), a pull step (gather from the
/// neighbours, then collide), and the pull scheme's halves: collide only (to
/// enter it from populations after streaming) and stream only (to leave it).
/// In place, over one buffer: the even and odd steps, and the streaming an
/// even step leaves pending (settle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pass {
    Push,
    Pull,
    Collide,
    Stream,
    Even,
    Odd,
    Settle,
}

/// The populations a pass reads and writes: two buffers, or one in place.
pub enum Buffers<'a, T> {
    Two(&'a DeviceBuffer<T>, &'a mut DeviceBuffer<T>),
    One(&'a mut DeviceBuffer<T>),
}

/// One pass over sites first..first+count-1 (one site per thread, or two
/// where `over_pairs`; `block` threads per block, <= 256 (128 over pairs),
/// where `fegpu bench lbm` compares; else `step_block`).
#[allow(clippy::too_many_arguments)]
pub fn pass<T: Stored>(
    g: &Gpu,
    p: &Params,
    pass: Pass,
    block: Option<u32>,
    (flags, (open_sites, open_table), open_count): (&DeviceBuffer<u8>, (&DeviceBuffer<u32>, &DeviceBuffer<f64>), usize),
    f: Buffers<T>,
    first: usize,
    count: usize,
) -> Result<()> {
    // Without a body force the forcing terms are compiled out (fewer instructions: f16 is bound by them).
    let unforced = if p.force == [0.0; 3] { "_unforced" } else { "" };
    let pairs = over_pairs(T::NAME, pass, p.dims[0], first);
    // 32-bit indices where they reach every population: f16's odd pair step
    // and f32's in-place steps (fewer instructions; BENCHMARKS.md)
    let small = 19 * p.sites() < 1 << 32;
    let kind = match pass {
        Pass::Even if pairs => &format!("pairs_even{unforced}"),
        Pass::Odd if pairs && small => &format!("pairs32_odd{unforced}"),
        Pass::Odd if pairs => &format!("pairs_odd{unforced}"),
        Pass::Even if small && T::NAME == "f32" => &format!("even32{unforced}"),
        Pass::Odd if small && T::NAME == "f32" => &format!("odd32{unforced}"),
        Pass::Push => "push",
        Pass::Pull => &format!("pull{unforced}"),
        Pass::Collide => "collide",
        Pass::Stream => "stream",
        Pass::Even => &format!("even{unforced}"),
        Pass::Odd => &format!("odd{unforced}"),
        Pass::Settle => "settle",
    };
    let trt = if p.magic > 0.0 && !matches!(pass, Pass::Stream | Pass::Settle) { "trt_" } else { "" };
    let name = format!("lbm_{kind}_{trt}{}", T::NAME);
    let k = g.kernel("lbm", SOURCE, &name)?;
    let [nx, ny, nz] = p.dims.map(|d| d as i32);
    let (omega, omega_minus) = (T::arith(1.0 / p.tau), T::arith(p.omega_minus()));
    let force = p.force.map(T::arith);
    let wall = p.wall_velocity.map(T::arith);
    let (first, count64) = (first as i64, count as i64);
    let open_count = open_count as i32;
    // (each step waits for the kernel before it: kernels/lbm.cu follow_previous_kernel)
    let mut l = g.overlapped(&k);
    match &f {
        Buffers::Two(fin, fout) => l.buffer(fin).buffer(fout),
        Buffers::One(f) => l.buffer(f),
    };
    l.buffer(flags).value(&nx).value(&ny).value(&nz).value(&p.periodic);
    if pass != Pass::Settle {
        l.value(&omega).value(&omega_minus).value(&force[0]).value(&force[1]).value(&force[2]);
        l.value(&wall[0]).value(&wall[1]).value(&wall[2]);
    }
    l.value(&first).value(&count64);
    if pass != Pass::Settle {
        l.buffer(open_sites).buffer(open_table).value(&open_count);
    }
    let threads = if pairs { count.div_ceil(2) } else { count };
    let block = match block {
        Some(b) if pairs => b.min(PAIR_BLOCK),
        Some(b) => b,
        None => step_block(T::NAME, pass, pairs),
    };
    g.launch_overlapped(&name, &l, (threads.div_ceil(block as usize) as u32, 1, 1), (block, 1, 1))
}

/// Marks the fluid sites whose neighbours are all fluid (kernels/lbm.cu BULK),
/// after the flags or the periodicity change.
pub fn mark_bulk(g: &Gpu, p: &Params, flags: &mut DeviceBuffer<u8>) -> Result<()> {
    let k = g.kernel("lbm", SOURCE, "lbm_mark_bulk")?;
    let [nx, ny, nz] = p.dims.map(|d| d as i32);
    let mut l = g.launcher(&k);
    l.arg(flags).arg(&nx).arg(&ny).arg(&nz).arg(&p.periodic);
    g.launch("lbm_mark_bulk", l, grid(p.sites()), (BLOCK, 1, 1), 0)
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

pub fn fields<T: Stored>(
    g: &Gpu,
    p: &Params,
    flags: &DeviceBuffer<u8>,
    f: &DeviceBuffer<T>,
    first: usize,
    rho: &mut [f64],
    u: &mut [f64],
) -> Result<()> {
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

/// The momentum-exchange force on the `count` body sites listed in `body`
/// (src/lbm/cpu.rs body_force), from populations after streaming, over the
/// links from the fluid sites `own` (first, end).
pub fn body_force<T: Stored>(
    g: &Gpu,
    p: &Params,
    flags: &DeviceBuffer<u8>,
    f: &DeviceBuffer<T>,
    (body, count): (&DeviceBuffer<u32>, usize),
    own: (usize, usize),
) -> Result<[f64; 3]> {
    let name = format!("lbm_body_force_{}", T::NAME);
    let k = g.kernel("lbm", SOURCE, &name)?;
    let blocks = count.div_ceil(BLOCK as usize).max(1);
    let mut partial = g.alloc::<f64>(3 * blocks)?;
    let [nx, ny, nz] = p.dims.map(|d| d as i32);
    let uw = p.wall_velocity;
    let count32 = count as i32;
    let mut l = g.launcher(&k);
    l.arg(f).arg(flags).arg(&nx).arg(&ny).arg(&nz).arg(&p.periodic).arg(&uw[0]).arg(&uw[1]).arg(&uw[2]);
    let (own_first, own_end) = (own.0 as i64, own.1 as i64);
    l.arg(body).arg(&count32).arg(&own_first).arg(&own_end).arg(&mut partial);
    g.launch(&name, l, (blocks as u32, 1, 1), (BLOCK, 1, 1), 0)?;
    let mut sums = vec![0.0; 3 * blocks];
    g.download(&partial, 0, &mut sums)?;
    Ok(sums.chunks(3).fold([0.0; 3], |acc, b| [acc[0] + b[0], acc[1] + b[1], acc[2] + b[2]]))
}

/// Sites first..first+count-1 of the directions in the bit mask `dirs` (a
/// run of count each, in increasing direction) copied out of `f` into
/// `packed`, or from `packed` into `f` (`unpack`).
pub fn planes<T: Stored>(
    g: &Gpu,
    f: &mut DeviceBuffer<T>,
    packed: &mut DeviceBuffer<T>,
    (first, count): (usize, usize),
    dirs: u32,
    unpack: bool,
) -> Result<()> {
    let name = format!("lbm_planes_{}", T::NAME);
    let k = g.kernel("lbm", SOURCE, &name)?;
    let n = (f.len() / super::Q) as i64;
    let (first, count64, unpack) = (first as i64, count as i64, unpack as i32);
    let mut l = g.launcher(&k);
    l.arg(f).arg(packed).arg(&n).arg(&first).arg(&count64).arg(&dirs).arg(&unpack);
    g.launch(&name, l, grid(dirs.count_ones() as usize * count), (BLOCK, 1, 1), 0)
}
