//! The Krylov methods' operations on the host (the CPU reference): the
//! vectors are `Vec<f64>` slots, the iterations run in `super::cg` and
//! `super::bicgstab`'s host loops.

use super::{Operator, Ops, Preconditioner, Slot, SLOTS};
use crate::array::vector as cpu;
use crate::array::Buffer;
use crate::error::Result;

pub struct CpuOps<'a> {
    pub op: &'a dyn Operator,
    pub pc: &'a dyn Preconditioner,
    /// A^T and M^T, for BiCG.
    pub transposed: Option<(&'a dyn Operator, &'a dyn Preconditioner)>,
    pub vecs: &'a mut Vec<Vec<f64>>,
    /// A split preconditioner's M_L (`super::Split::left`).
    pub left: Option<&'a dyn Operator>,
}

impl CpuOps<'_> {
    /// Takes slot `w` out so it can be written while others are read.
    fn with_out<T>(&mut self, w: Slot, f: impl FnOnce(&mut Vec<f64>, &Vec<Vec<f64>>) -> T) -> T {
        let mut out = std::mem::take(&mut self.vecs[w.index()]);
        let r = f(&mut out, self.vecs);
        self.vecs[w.index()] = out;
        r
    }
}

impl Ops for CpuOps<'_> {
    fn amax(&mut self, v: Slot) -> Result<f64> {
        Ok(cpu::amax(&self.vecs[v.index()]))
    }
    fn fetch(&mut self, v: Slot) -> Result<Vec<f64>> {
        Ok(self.vecs[v.index()].clone())
    }
    fn spmv(&mut self, x: Slot, y: Slot) -> Result<()> {
        self.apply(self.op, x, y)
    }
    fn apply(&mut self, a: &dyn Operator, x: Slot, y: Slot) -> Result<()> {
        self.with_out(y, |out, vecs| a.apply_host(&vecs[x.index()], out))
    }
    fn split_tolerance(&mut self, tol: f64) -> Result<Option<f64>> {
        let Some(left) = self.left else { return Ok(None) };
        super::split_tolerance(self, left, tol).map(Some)
    }
    fn is_split(&self) -> bool {
        self.left.is_some()
    }
    fn load(&mut self, v: Slot, from: &Buffer<f64>) -> Result<()> {
        self.vecs[v.index()].copy_from_slice(from.host()?);
        Ok(())
    }
    fn dots(&mut self, a: Slot, b: Slot, cd: Option<(Slot, Slot)>) -> Result<(f64, f64)> {
        let v = &self.vecs;
        let first = cpu::dot(&v[a.index()], &v[b.index()]);
        Ok((first, cd.map_or(0.0, |(c, d)| cpu::dot(&v[c.index()], &v[d.index()]))))
    }
    fn update(&mut self, w: Slot, a: f64, x: Slot, b: f64, y: Option<Slot>, c: f64) -> Result<()> {
        // x or y may be w itself: read them from the written vector's old copy
        let old = if Some(w) == y || w == x { Some(self.vecs[w.index()].clone()) } else { None };
        self.with_out(w, |out, vecs| {
            let pick = |s: Slot| if s == w { old.as_deref().unwrap() } else { &vecs[s.index()][..] };
            cpu::update(out, a, pick(x), b, y.map(pick), c)
        });
        Ok(())
    }
    fn precond(&mut self, r: Slot, z: Slot) -> Result<()> {
        if r == z {
            return Ok(()); // no preconditioner: z is r itself
        }
        let pc = self.pc;
        self.with_out(z, |out, vecs| pc.apply_host(&vecs[r.index()], out))
    }
    fn identity_precond(&self) -> bool {
        self.pc.is_identity()
    }
    fn spmv_transpose(&mut self, x: Slot, y: Slot) -> Result<()> {
        let (op, _) = self.transposed.ok_or_else(super::no_transpose)?;
        self.apply(op, x, y)
    }
    fn precond_transpose(&mut self, r: Slot, z: Slot) -> Result<()> {
        let (_, pc) = self.transposed.ok_or_else(super::no_transpose)?;
        self.with_out(z, |out, vecs| pc.apply_host(&vecs[r.index()], out))
    }
    fn reserve(&mut self, count: usize) -> Result<()> {
        let n = self.vecs[0].len();
        // the whole basis checked before its first vector: one at a time they all fit
        let missing = (SLOTS + count).saturating_sub(self.vecs.len()) as u128;
        crate::error::host_fits(missing * n as u128 * 8, &format!("GMRES basis ({count} vectors of {n})"))?;
        while self.vecs.len() < SLOTS + count {
            self.vecs.push(crate::error::host_vec(n, 0.0, "GMRES basis vector")?);
        }
        Ok(())
    }
}
