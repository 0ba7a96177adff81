//! The handle registry: objects cross the ABI as 64-bit integers.
//!
//! A handle is `kind << 56 | serial`; serials are never reused, so a destroyed
//! handle can never alias a live object, and the kind byte lets an error name
//! what a stale or foreign handle was.

use crate::error::{Error, Result};
use once_cell::sync::Lazy;
use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub type Handle = u64;

/// Object types known to the registry; the value is the handle's top byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Context = 1,
    Array = 2,
    Csr = 3,
    Solver = 4,
    Lattice = 5,
    RadFields = 6,
    ElementSet = 7,
    EbeSolver = 8,
    HeatStepper = 9,
    DynamicsStepper = 10,
    DistCsr = 11,
    DistSolver = 12,
    ThermalStress = 13,
    DistLattice = 14,
    DistRadFields = 15,
}

impl Kind {
    pub fn from_handle(h: Handle) -> Option<Kind> {
        match (h >> 56) as u8 {
            1 => Some(Kind::Context),
            2 => Some(Kind::Array),
            3 => Some(Kind::Csr),
            4 => Some(Kind::Solver),
            5 => Some(Kind::Lattice),
            6 => Some(Kind::RadFields),
            7 => Some(Kind::ElementSet),
            8 => Some(Kind::EbeSolver),
            9 => Some(Kind::HeatStepper),
            10 => Some(Kind::DynamicsStepper),
            11 => Some(Kind::DistCsr),
            12 => Some(Kind::DistSolver),
            13 => Some(Kind::ThermalStress),
            14 => Some(Kind::DistLattice),
            15 => Some(Kind::DistRadFields),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::Context => "fegpu_context_t",
            Kind::Array => "fegpu_array_t",
            Kind::Csr => "fegpu_csr_t",
            Kind::Solver => "fegpu_solver_t",
            Kind::Lattice => "fegpu_lattice_t",
            Kind::RadFields => "fegpu_radfields_t",
            Kind::ElementSet => "fegpu_fem_t",
            Kind::EbeSolver => "fegpu_ebe_t",
            Kind::HeatStepper => "fegpu_heat_t",
            Kind::DynamicsStepper => "fegpu_dynamics_t",
            Kind::DistCsr => "fegpu_dist_csr_t",
            Kind::DistSolver => "fegpu_dist_solver_t",
            Kind::ThermalStress => "fegpu_stress_t",
            Kind::DistLattice => "fegpu_lattice_t (split over ranks)",
            Kind::DistRadFields => "fegpu_radfields_t (split over ranks)",
        }
    }
}

/// Implemented by every type the registry hands out.
pub trait Object: Any + Send + Sync {
    const KIND: Kind;
}

struct Entry {
    object: Arc<dyn Any + Send + Sync>,
    /// The context this object lives in (0 for contexts themselves).
    owner: Handle,
}

static NEXT_SERIAL: AtomicU64 = AtomicU64::new(1);
static TABLE: Lazy<Mutex<HashMap<Handle, Entry>>> = Lazy::new(|| Mutex::new(HashMap::new()));

fn table() -> std::sync::MutexGuard<'static, HashMap<Handle, Entry>> {
    // A panic while the lock was held cannot leave the map inconsistent
    // (every mutation is a single insert/remove), so poisoning is ignored.
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn insert<T: Object>(object: Arc<T>, owner: Handle) -> Handle {
    let serial = NEXT_SERIAL.fetch_add(1, Ordering::Relaxed) & ((1 << 56) - 1);
    let h = ((T::KIND as u64) << 56) | serial;
    table().insert(h, Entry { object, owner });
    h
}

fn describe_missing(h: Handle, want: Kind, arg: &str) -> Error {
    if h == 0 {
        return Error::handle(format!("{arg}: the null handle 0 is never valid (expected a {})", want.name()));
    }
    match Kind::from_handle(h) {
        Some(k) if k != want => Error::handle(format!("{arg} = {h:#x} is a {}, expected a {}", k.name(), want.name())),
        Some(_) if (h & ((1 << 56) - 1)) >= NEXT_SERIAL.load(Ordering::Relaxed) => Error::handle(format!(
            "{arg} = {h:#x} was never created by fegpu (an uninitialised or corrupted {} handle)",
            want.name()
        )),
        Some(_) => {
            let or_context = if want == Kind::Context { "" } else { " (or its context was)" };
            Error::handle(format!("{arg} = {h:#x}: this {} was destroyed{or_context}", want.name()))
        }
        None => Error::handle(format!("{arg} = {h:#x} is not a fegpu handle (expected a {})", want.name())),
    }
}

/// Looks a handle up; `arg` names the argument in the error message.
pub fn get<T: Object>(h: Handle, arg: &str) -> Result<Arc<T>> {
    let found = table().get(&h).map(|e| e.object.clone());
    match found {
        Some(obj) if Kind::from_handle(h) == Some(T::KIND) => {
            obj.downcast::<T>().map_err(|_| Error::handle(format!("{arg} = {h:#x}: registry type confusion")))
        }
        _ => Err(describe_missing(h, T::KIND, arg)),
    }
}

/// The live handle of `object`, if it has one (an object handed out before).
pub fn handle_of<T: Object>(object: &Arc<T>) -> Option<Handle> {
    let target = Arc::as_ptr(object) as *const ();
    table()
        .iter()
        .find(|(&h, e)| Kind::from_handle(h) == Some(T::KIND) && Arc::as_ptr(&e.object) as *const () == target)
        .map(|(&h, _)| h)
}

pub fn owner_of(h: Handle) -> Option<Handle> {
    table().get(&h).map(|e| e.owner)
}

/// Removes a handle; for a context, every object it owns goes with it.
pub fn remove<T: Object>(h: Handle, arg: &str) -> Result<()> {
    get::<T>(h, arg)?;
    let mut t = table();
    t.remove(&h);
    if T::KIND == Kind::Context {
        t.retain(|_, e| e.owner != h);
    }
    Ok(())
}

// The objects the ABI hands out, each with the kind its handles carry.
impl Object for crate::radfields::Accumulator {
    const KIND: Kind = Kind::RadFields;
}
impl Object for crate::array::Array {
    const KIND: Kind = Kind::Array;
}
impl Object for crate::sparse::solver::Solver {
    const KIND: Kind = Kind::Solver;
}
impl Object for crate::sparse::Csr {
    const KIND: Kind = Kind::Csr;
}
impl Object for crate::fem::heat::HeatStepper {
    const KIND: Kind = Kind::HeatStepper;
}
impl Object for crate::fem::dynamics::DynamicsStepper {
    const KIND: Kind = Kind::DynamicsStepper;
}
impl Object for crate::fem::stress::ThermalStress {
    const KIND: Kind = Kind::ThermalStress;
}
impl Object for crate::fem::ElementSet {
    const KIND: Kind = Kind::ElementSet;
}
impl Object for crate::fem::ebe::EbeSolver {
    const KIND: Kind = Kind::EbeSolver;
}
impl Object for crate::context::Context {
    const KIND: Kind = Kind::Context;
}
impl Object for crate::lbm::Lattice {
    const KIND: Kind = Kind::Lattice;
}
