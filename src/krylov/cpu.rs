//! The Krylov methods' operations on the host (the CPU reference): the
//! vectors are `Vec<f64>` slots, the iterations run in `super::cg` and
//! `super::bicgstab`'s host loops.

use super::{Operator, Ops, Preconditioner, Slot};
use crate::array::vector as cpu;
use crate::error::Result;

pub struct CpuOps<'a> {
    pub op: &'a dyn Operator,
    pub pc: &'a dyn Preconditioner,
    pub vecs: &'a mut Vec<Vec<f64>>,
}

impl CpuOps<'_> {
    /// Takes slot `w` out so it can be written while others are read.
    fn with_out<T>(&mut self, w: Slot, f: impl FnOnce(&mut Vec<f64>, &Vec<Vec<f64>>) -> T) -> T {
        let mut out = std::mem::take(&mut self.vecs[w as usize]);
        let r = f(&mut out, self.vecs);
        self.vecs[w as usize] = out;
        r
    }
}

impl Ops for CpuOps<'_> {
    fn amax(&mut self, v: Slot) -> Result<f64> {
        Ok(cpu::amax(&self.vecs[v as usize]))
    }
    fn fetch(&mut self, v: Slot) -> Result<Vec<f64>> {
        Ok(self.vecs[v as usize].clone())
    }
    fn spmv(&mut self, x: Slot, y: Slot) -> Result<()> {
        let op = self.op;
        self.with_out(y, |out, vecs| op.apply_host(&vecs[x as usize], out))
    }
    fn dots(&mut self, a: Slot, b: Slot, cd: Option<(Slot, Slot)>) -> Result<(f64, f64)> {
        let v = &self.vecs;
        let first = cpu::dot(&v[a as usize], &v[b as usize]);
        Ok((first, cd.map_or(0.0, |(c, d)| cpu::dot(&v[c as usize], &v[d as usize]))))
    }
    fn update(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64) -> Result<()> {
        // x or y may be w itself: read them from the written vector's old copy
        let old = if Some(w) == y || w == x { Some(self.vecs[w as usize].clone()) } else { None };
        self.with_out(w, |out, vecs| {
            let pick = |s: Slot| if s == w { old.as_deref().unwrap() } else { &vecs[s as usize][..] };
            cpu::update(out, a, pick(x), b, y.map(pick), c)
        });
        Ok(())
    }
    fn precond(&mut self, r: Slot, z: Slot) -> Result<()> {
        if r == z {
            return Ok(()); // no preconditioner: z is r itself
        }
        let pc = self.pc;
        self.with_out(z, |out, vecs| pc.apply_host(&vecs[r as usize], out))
    }
    fn identity_precond(&self) -> bool {
        self.pc.is_identity()
    }
}
