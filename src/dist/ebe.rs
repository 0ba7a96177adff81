//! Element-by-element CG over ranks, as FEStudio's multi-GPU CG: each rank
//! passes its own elements (an element set over its local nodes) and the
//! global number of each local node. A node several ranks hold is owned by
//! the lowest of them; the others hold it as a ghost. Each product
//! multiplies the rank's elements, sends the partial sums at its ghosts to
//! their owners, which add them, and before the next one the owners send
//! the values back to the ghosts. The solve is `fem::ebe`'s, through
//! `SharedDofs`.

use super::comm::{runs, Comm};
use crate::error::{Error, Result};
use crate::fem::ebe::{constraints, EbeSolver, SharedDofs};
use crate::fem::ElementSet;
use crate::gpu::{DeviceBuffer, Gpu};
use crate::krylov::GlobalSum;
use crate::sparse::cuda::upload;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// How the shared values travel between ranks (reported by `describe`).
pub const EXCHANGE_PATH: &str = "MPI point-to-point through host buffers";

/// A rank's shared dofs and the plan of their exchange, built once.
pub struct SharedNodes {
    comm: Arc<Comm>,
    /// (rank, count): the ghosts' dofs by their owner, in runs.
    owner_runs: Vec<(usize, usize)>,
    ghost_dofs: Vec<usize>,
    /// (rank, count): the owned dofs each other rank holds as ghosts, in
    /// runs in that rank's order of its ghosts.
    holder_runs: Vec<(usize, usize)>,
    /// Each holder entry's place in `shared_owned`.
    slot: Vec<usize>,
    /// The distinct owned dofs other ranks hold, ascending.
    shared_owned: Vec<usize>,
    nodes_global: usize,
    owned_dofs: usize,
    /// Host buffers: owned shared values, values in holder order, ghost values.
    staging: Mutex<(Vec<f64>, Vec<f64>, Vec<f64>)>,
    device: Option<Mutex<DeviceLists>>,
}

/// The dof lists on the device and the buffers their values pass through.
struct DeviceLists {
    ghost_dofs: DeviceBuffer<i32>,
    shared_owned: DeviceBuffer<i32>,
    ghost_values: DeviceBuffer<f64>,
    owned_values: DeviceBuffer<f64>,
}

/// Creates this rank's part of a distributed element-by-element CG over
/// `set` (the rank's elements; `global_node[i]` the global number of its
/// node i, counted from `base`) with the conditions x[dofs[i]] = values[i]
/// on local dofs, a condition given on any rank that holds the dof.
/// Collective: every rank succeeds or every rank fails.
pub fn create(
    comm: Arc<Comm>,
    set: Arc<ElementSet>,
    global_node: &[i64],
    base: i64,
    (dofs, dof_base, values): (&[i64], i64, &[f64]),
    on_the_fly: bool,
) -> Result<EbeSolver> {
    let shared = SharedNodes::new(comm.clone(), &set, global_node, base)?;
    let (fixed, g) = comm.agree(constraints(&set, dofs, dof_base, values))?;
    let (fixed, g) = shared.union_of_conditions(fixed, g, global_node, base)?;
    comm.agree(EbeSolver::with_constraints(set, fixed, g, on_the_fly, Some(Arc::new(shared))))
}

impl SharedNodes {
    /// Collective: finds each node's owner and builds the exchange plan.
    fn new(comm: Arc<Comm>, set: &ElementSet, global_node: &[i64], base: i64) -> Result<SharedNodes> {
        let ids = comm.agree(check_numbers(set.nodes, global_node, base))?;
        let dpn = set.problem.dofs_per_node(set.element.dim());
        let [dpns] = comm.gather_all([dpn as i64]);
        if let Some(r) = dpns.iter().position(|&d| d != dpns[0]) {
            return Err(Error::invalid(format!(
                "rank {r}'s element set has {} dofs a node but rank 0's has {}: every rank must solve the same problem",
                dpns[r], dpns[0]
            )));
        }
        let size = comm.size;
        // owners through a directory: node g's home rank g % size hears
        // every rank that holds g and answers the lowest
        let home = |g: i64| (g as usize) % size;
        let mut asks: Vec<usize> = (0..ids.len()).collect();
        asks.sort_by_key(|&i| (home(ids[i]), ids[i]));
        let mut counts = vec![0i32; size];
        asks.iter().for_each(|&i| counts[home(ids[i])] += 1);
        let asked_ids: Vec<i64> = asks.iter().map(|&i| ids[i]).collect();
        let (heard, heard_counts) = comm.all_to_all(&asked_ids, &counts);
        let mut lowest: HashMap<i64, i64> = HashMap::with_capacity(heard.len());
        let mut from = heard_counts.iter().enumerate().flat_map(|(r, &c)| std::iter::repeat_n(r as i64, c as usize));
        for &g in &heard {
            let r = from.next().unwrap_or_else(|| unreachable!("one rank per id heard"));
            lowest.entry(g).or_insert(r); // ranks come in ascending order
        }
        let answers: Vec<i64> = heard.iter().map(|g| lowest[g]).collect();
        let (owners, _) = comm.all_to_all(&answers, &heard_counts);
        let mut owner = vec![0usize; ids.len()];
        asks.iter().zip(&owners).for_each(|(&i, &r)| owner[i] = r as usize);
        // each ghost asked of its owner, in (owner, global number) order
        let mut ghosts: Vec<usize> = (0..ids.len()).filter(|&i| owner[i] != comm.rank).collect();
        ghosts.sort_by_key(|&i| (owner[i], ids[i]));
        let mut ghost_counts = vec![0i32; size];
        ghosts.iter().for_each(|&i| ghost_counts[owner[i]] += 1);
        let wanted: Vec<i64> = ghosts.iter().map(|&i| ids[i]).collect();
        let (held, held_counts) = comm.all_to_all(&wanted, &ghost_counts);
        let local: HashMap<i64, usize> = ids.iter().enumerate().map(|(i, &g)| (g, i)).collect();
        // a rank asks only the lowest holder, which is this rank: the node is here
        let holder_nodes: Vec<usize> = held.iter().map(|g| local[g]).collect();
        let dofs_of = |nodes: &[usize]| nodes.iter().flat_map(|&n| (0..dpn).map(move |c| n * dpn + c)).collect::<Vec<_>>();
        let ghost_dofs = dofs_of(&ghosts);
        let holder_dofs = dofs_of(&holder_nodes);
        let mut shared_owned = holder_dofs.clone();
        shared_owned.sort_unstable();
        shared_owned.dedup();
        let slot = holder_dofs.iter().map(|d| shared_owned.binary_search(d).unwrap_or_else(|_| unreachable!())).collect();
        let owned_nodes = ids.len() - ghosts.len();
        let [owned_all] = comm.gather_all([owned_nodes as i64]);
        let device = match set.ctx.gpu() {
            None => None,
            Some(g) => Some(comm.agree(DeviceLists::new(g, &ghost_dofs, &shared_owned))?),
        };
        let staging = Mutex::new((vec![0.0; shared_owned.len()], vec![0.0; holder_dofs.len()], vec![0.0; ghost_dofs.len()]));
        Ok(SharedNodes {
            owner_runs: runs(&ghost_counts, dpn),
            holder_runs: runs(&held_counts, dpn),
            ghost_dofs,
            slot,
            shared_owned,
            nodes_global: owned_all.iter().sum::<i64>() as usize,
            owned_dofs: owned_nodes * dpn,
            staging,
            device: device.map(Mutex::new),
            comm,
        })
    }

    /// Every rank's conditions on a dof joined: a dof one rank fixes is
    /// fixed everywhere, to its value; two different values are refused.
    /// Collective.
    fn union_of_conditions(
        &self,
        mut fixed: Vec<u8>,
        mut g: Vec<f64>,
        global_node: &[i64],
        base: i64,
    ) -> Result<(Vec<u8>, Vec<f64>)> {
        let comm = &*self.comm;
        let ghost_side = |v: &dyn Fn(usize) -> f64| self.ghost_dofs.iter().map(|&d| v(d)).collect::<Vec<_>>();
        let n_held = self.slot.len();
        let (mut flags_in, mut values_in) = (vec![0.0; n_held], vec![0.0; n_held]);
        self.to_owners(&ghost_side(&|d| f64::from(fixed[d])), &mut flags_in)?;
        self.to_owners(&ghost_side(&|d| g[d]), &mut values_in)?;
        let mut conflict = Ok(());
        let from = self.holder_runs.iter().flat_map(|&(r, c)| std::iter::repeat_n(r, c));
        for ((k, r), &s) in (0..n_held).zip(from).zip(&self.slot) {
            let d = self.shared_owned[s];
            if flags_in[k] == 0.0 {
                continue;
            }
            if fixed[d] != 0 && g[d] != values_in[k] {
                let dpn = fixed.len() / global_node.len();
                conflict = Err(Error::invalid(format!(
                    "global node {} component {}: fixed to {} on rank {} and to {} on rank {r}: a shared dof takes one value",
                    global_node[d / dpn],
                    d % dpn + base as usize,
                    g[d],
                    comm.rank,
                    values_in[k]
                )));
            }
            (fixed[d], g[d]) = (1, values_in[k]);
        }
        let holders = |v: &dyn Fn(usize) -> f64| self.slot.iter().map(|&s| v(self.shared_owned[s])).collect::<Vec<_>>();
        let (mut flags_out, mut values_out) = (vec![0.0; self.ghost_dofs.len()], vec![0.0; self.ghost_dofs.len()]);
        self.to_holders(&holders(&|d| f64::from(fixed[d])), &mut flags_out)?;
        self.to_holders(&holders(&|d| g[d]), &mut values_out)?;
        for (k, &d) in self.ghost_dofs.iter().enumerate() {
            (fixed[d], g[d]) = (u8::from(flags_out[k] != 0.0), values_out[k]);
        }
        comm.agree(conflict)?;
        Ok((fixed, g))
    }

    /// Sends values of the ghost dofs (in `ghost_dofs` order) to their
    /// owners, receiving the holders' values of owned dofs (holder order).
    fn to_owners(&self, ghosts: &[f64], held: &mut [f64]) -> Result<()> {
        self.comm.exchange(ghosts, &self.owner_runs, held, &self.holder_runs, || Ok(()))
    }

    /// The reverse of `to_owners`: owned values in holder order out, ghost values in.
    fn to_holders(&self, held: &[f64], ghosts: &mut [f64]) -> Result<()> {
        self.comm.exchange(held, &self.holder_runs, ghosts, &self.owner_runs, || Ok(()))
    }

    /// Sends the owned shared values (`owned`, in `shared_owned` order) to
    /// the ghosts' holders, receiving this rank's ghost values.
    fn forward(&self, st: &mut (Vec<f64>, Vec<f64>, Vec<f64>)) -> Result<()> {
        let (owned, held, ghosts) = st;
        held.iter_mut().zip(&self.slot).for_each(|(h, &s)| *h = owned[s]);
        self.to_holders(held, ghosts)
    }

    /// Sends the ghost values to their owners, leaving in `owned` the sum
    /// of what every holder sent for each owned shared dof (in rank order).
    fn backward(&self, st: &mut (Vec<f64>, Vec<f64>, Vec<f64>)) -> Result<()> {
        let (owned, held, ghosts) = st;
        self.to_owners(ghosts, held)?;
        owned.fill(0.0);
        held.iter().zip(&self.slot).for_each(|(&h, &s)| owned[s] += h);
        Ok(())
    }

    fn staging(&self) -> std::sync::MutexGuard<'_, (Vec<f64>, Vec<f64>, Vec<f64>)> {
        self.staging.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn device(&self) -> Result<std::sync::MutexGuard<'_, DeviceLists>> {
        Ok(self.device.as_ref().ok_or_else(crate::array::mixed_backends)?.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl DeviceLists {
    fn new(g: &Gpu, ghost_dofs: &[usize], shared_owned: &[usize]) -> Result<DeviceLists> {
        let to_i32 = |v: &[usize]| v.iter().map(|&d| d as i32).collect::<Vec<_>>();
        Ok(DeviceLists {
            ghost_dofs: upload(g, &to_i32(ghost_dofs))?,
            shared_owned: upload(g, &to_i32(shared_owned))?,
            ghost_values: g.alloc(ghost_dofs.len().max(1))?,
            owned_values: g.alloc(shared_owned.len().max(1))?,
        })
    }
}

/// The global numbers 0-based, each non-negative and each once on the rank.
fn check_numbers(nodes: usize, global_node: &[i64], base: i64) -> Result<Vec<i64>> {
    if base != 0 && base != 1 {
        return Err(Error::invalid(format!("index_base = {base}: must be 0 or 1")));
    }
    if global_node.len() != nodes {
        return Err(Error::size(format!("n_nodes = {}: the element set has {nodes} nodes", global_node.len())));
    }
    let mut seen = HashMap::with_capacity(nodes);
    global_node
        .iter()
        .enumerate()
        .map(|(i, &g)| {
            if g < base || g - base >= i32::MAX as i64 {
                return Err(Error::invalid(format!(
                    "{} = {g}: a global node number runs from {base} (index_base) below 2^31",
                    crate::error::at("global_node", i)
                )));
            }
            if let Some(j) = seen.insert(g, i) {
                return Err(Error::invalid(format!(
                    "{} = {} = {g}: a node appears once on a rank",
                    crate::error::at("global_node", i),
                    crate::error::at("global_node", j)
                )));
            }
            Ok(g - base)
        })
        .collect()
}

impl GlobalSum for SharedNodes {
    fn sum(&self, v: &mut [f64]) -> Result<()> {
        self.comm.sum(v)
    }
    fn max(&self, v: &mut [f64]) -> Result<()> {
        self.comm.max(v)
    }
}

impl SharedDofs for SharedNodes {
    fn ghosts(&self) -> &[usize] {
        &self.ghost_dofs
    }

    fn fill_ghosts(&self, v: &mut [f64]) -> Result<()> {
        let mut st = self.staging();
        st.0.iter_mut().zip(&self.shared_owned).for_each(|(o, &d)| *o = v[d]);
        self.forward(&mut st)?;
        self.ghost_dofs.iter().zip(&st.2).for_each(|(&d, &x)| v[d] = x);
        Ok(())
    }

    fn sum_to_owners(&self, v: &mut [f64]) -> Result<()> {
        let mut st = self.staging();
        st.2.iter_mut().zip(&self.ghost_dofs).for_each(|(x, &d)| *x = v[d]);
        self.backward(&mut st)?;
        self.shared_owned.iter().zip(&st.0).for_each(|(&d, &s)| v[d] += s);
        self.ghost_dofs.iter().for_each(|&d| v[d] = 0.0);
        Ok(())
    }

    fn fill_ghosts_device(&self, g: &Gpu, v: &DeviceBuffer<f64>) -> Result<()> {
        let (mut st, mut dl) = (self.staging(), self.device()?);
        let dl = &mut *dl;
        if !self.shared_owned.is_empty() {
            crate::array::cuda::gather(g, self.shared_owned.len(), v, &dl.shared_owned, &dl.owned_values)?;
            g.download(&dl.owned_values, 0, &mut st.0)?;
        }
        self.forward(&mut st)?;
        if !self.ghost_dofs.is_empty() {
            g.upload(&st.2, &mut dl.ghost_values, 0)?;
        }
        crate::array::cuda::scatter(g, self.ghost_dofs.len(), Some(&dl.ghost_values), &dl.ghost_dofs, v, false)
    }

    fn sum_to_owners_device(&self, g: &Gpu, v: &DeviceBuffer<f64>) -> Result<()> {
        let (mut st, mut dl) = (self.staging(), self.device()?);
        let dl = &mut *dl;
        if !self.ghost_dofs.is_empty() {
            crate::array::cuda::gather(g, self.ghost_dofs.len(), v, &dl.ghost_dofs, &dl.ghost_values)?;
            g.download(&dl.ghost_values, 0, &mut st.2)?;
        }
        self.backward(&mut st)?;
        if !self.shared_owned.is_empty() {
            g.upload(&st.0, &mut dl.owned_values, 0)?;
        }
        crate::array::cuda::scatter(g, self.shared_owned.len(), Some(&dl.owned_values), &dl.shared_owned, v, true)?;
        crate::array::cuda::scatter(g, self.ghost_dofs.len(), None, &dl.ghost_dofs, v, false)
    }

    fn zero_ghosts_device(&self, g: &Gpu, v: &DeviceBuffer<f64>) -> Result<()> {
        let dl = self.device()?;
        crate::array::cuda::scatter(g, self.ghost_dofs.len(), None, &dl.ghost_dofs, v, false)
    }

    fn agree(&self, local: Result<()>, scalars: &[f64]) -> Result<()> {
        let same = self.comm.same_everywhere("(tol, maxit)", scalars);
        self.comm.agree(local.and(same))
    }

    fn describe(&self) -> String {
        format!(
            "{} nodes over {} ranks; rank {} owns {} dofs, holds {} ghost dofs owned by {} ranks and owns {} dofs \
             that {} ranks hold; each product sends and receives {} values; exchange: {EXCHANGE_PATH}",
            self.nodes_global,
            self.comm.size,
            self.comm.rank,
            self.owned_dofs,
            self.ghost_dofs.len(),
            self.owner_runs.len(),
            self.shared_owned.len(),
            self.holder_runs.len(),
            self.ghost_dofs.len() + self.slot.len()
        )
    }
}
