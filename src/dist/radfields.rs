//! rad_fields over ranks: every rank passes all the S points (as a
//! replicated-data FE-IIEE code holds them) and every batch of S' sources;
//! each accumulates the contiguous slice of S points that its rank number
//! gives it, on its own device, and `download` gathers the slices on every
//! rank. The same program runs from one GPU to many nodes: the work per
//! rank is n_s / ranks x n_p.

use super::Comm;
use crate::context::Context;
use crate::error::{Error, Result};
use crate::radfields::{place_slice, Accumulator, Kernel, Medium, RadFieldsApi, Sources};
use num_complex::Complex64;
use std::sync::Arc;

pub struct DistRadFields {
    pub comm: Arc<Comm>,
    pub n_s: usize,
    pub n_rhs: usize,
    /// Every rank's first S point, and the end (ranks + 1 entries).
    starts: Vec<usize>,
    /// This rank's slice (None: more ranks than S points, none left for it).
    local: Option<Accumulator>,
}

impl DistRadFields {
    /// Collective: every rank passes the same S points (3, n_s), n_rhs and
    /// medium.
    pub fn new(comm: Arc<Comm>, ctx: Arc<Context>, points: &[f64], n_rhs: usize, medium: Medium) -> Result<DistRadFields> {
        let n_s = points.len() / 3;
        let (k, wm) = (medium.k, medium.omega_mu);
        comm.same_everywhere("(n_s, n_rhs, k, omega_mu)", &[n_s as f64, n_rhs as f64, k.re, k.im, wm.re, wm.im])?;
        // every rank holds every point: a bad one is refused by its global number on all ranks
        if let Some(i) = points.iter().position(|v| !v.is_finite()) {
            return Err(Error::invalid(format!("{} = {}: not finite", crate::error::at2("points", i % 3, i / 3, 3), points[i])));
        }
        let starts: Vec<usize> = (0..=comm.size).map(|r| n_s * r / comm.size).collect();
        let (first, end) = (starts[comm.rank], starts[comm.rank + 1]);
        let local = comm.agree(if first < end || n_s == 0 {
            Accumulator::new(vec![ctx], points.get(3 * first..3 * end).unwrap_or(points), n_rhs, medium).map(Some)
        } else {
            Ok(None)
        })?;
        Ok(DistRadFields { comm, n_s, n_rhs, starts, local })
    }

    /// Ranks and this rank's S points.
    pub fn describe(&self) -> String {
        let (first, end) = (self.starts[self.comm.rank], self.starts[self.comm.rank + 1]);
        format!(
            "{} S points over {} ranks; rank {} accumulates points {}..{} ({}); download gathers every rank's slice",
            self.n_s,
            self.comm.size,
            self.comm.rank,
            first + 1,
            end,
            end - first
        )
    }
}

impl RadFieldsApi for DistRadFields {
    fn sizes(&self) -> (usize, usize) {
        (self.n_s, self.n_rhs)
    }

    fn set_variant(&self, variant: Option<Kernel>) {
        if let Some(a) = &self.local {
            a.set_variant(variant)
        }
    }

    fn accumulate(&self, src: &Sources) -> Result<()> {
        self.local.as_ref().map_or(Ok(()), |a| a.accumulate(src))
    }

    /// Collective.
    fn download(&self, out: Result<&mut [Complex64]>) -> Result<()> {
        let want = 6 * self.n_s * self.n_rhs;
        let out = self.comm.agree(out.and_then(|o| match o.len() == want {
            true => Ok(o),
            false => Err(Error::size(format!(
                "fields has {} elements; n_s = {} and n_rhs = {} need {want}",
                o.len(),
                self.n_s,
                self.n_rhs
            ))),
        }))?;
        let (first, end) = (self.starts[self.comm.rank], self.starts[self.comm.rank + 1]);
        let mut mine = vec![Complex64::default(); 6 * (end - first) * self.n_rhs];
        self.comm.agree(self.local.as_ref().map_or(Ok(()), |a| a.download(&mut mine)))?;
        let flat: Vec<f64> = mine.iter().flat_map(|c| [c.re, c.im]).collect();
        let all: Vec<Complex64> =
            self.comm.gather_all_varcount(&flat).chunks_exact(2).map(|c| Complex64::new(c[0], c[1])).collect();
        // the ranks' slices one after another, each (3, 2, count_r, n_rhs)
        let mut at = 0;
        for r in 0..self.comm.size {
            let (first, count) = (self.starts[r], self.starts[r + 1] - self.starts[r]);
            let len = 6 * count * self.n_rhs;
            place_slice(out, &all[at..at + len], (first, count), self.n_s);
            at += len;
        }
        Ok(())
    }

    fn reset(&self) -> Result<()> {
        self.local.as_ref().map_or(Ok(()), |a| a.reset())
    }

    /// Collective: the pairs skipped on every rank.
    fn excluded(&self) -> Result<u64> {
        let mine = self.comm.agree(self.local.as_ref().map_or(Ok(0), |a| a.excluded()))?;
        let mut total = [mine as f64];
        crate::krylov::GlobalSum::sum(&*self.comm, &mut total)?;
        Ok(total[0] as u64)
    }
}
