//! Where a context's time goes: per operation, the calls, the bytes moved each
//! way and the time spent moving them, the kernel time (device events), the
//! wall time, and the serial host time of the same work (the CPU reference,
//! timed once per operation). From these: the extra cost of offloading
//! T_e = wall − kernel (transfers and launches the overlap did not hide), the
//! share of the copy time hidden, the speedup T_s / wall and the seed's bound
//! T_s / T_e (what infinitely fast kernels would still leave).
//!
//! Off unless `FEGPU_PROFILE=1` or `fegpu_profile_enable`: when off, an
//! operation checks one flag and records nothing. When on, every call counts
//! its bytes and wall time, and the device phases of the first
//! `TIMED_FIRST` calls of an operation and of one call in `TIMED_EVERY` after
//! them are timed with events; phase totals are scaled to all calls.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Calls of an operation whose phases are all timed before sampling starts.
pub const TIMED_FIRST: u64 = 4;
/// After them, one call in this many is timed.
pub const TIMED_EVERY: u64 = 8;

#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct OpStats {
    pub calls: u64,
    /// Calls whose phases were timed: the phase seconds below are theirs.
    pub timed_calls: u64,
    pub h2d_bytes: u64,
    pub d2h_bytes: u64,
    pub h2d_seconds: f64,
    pub d2h_seconds: f64,
    pub kernel_seconds: f64,
    pub wall_seconds: f64,
    /// Seconds the copies and kernels ran at the same time, from the calls' own events.
    pub overlapped_seconds: f64,
    /// The CPU reference's time for the same work (0 when not measured).
    pub serial_seconds: f64,
}

impl OpStats {
    fn add(&mut self, o: &OpStats) {
        self.calls += o.calls;
        self.timed_calls += o.timed_calls;
        self.h2d_bytes += o.h2d_bytes;
        self.d2h_bytes += o.d2h_bytes;
        self.h2d_seconds += o.h2d_seconds;
        self.d2h_seconds += o.d2h_seconds;
        self.kernel_seconds += o.kernel_seconds;
        self.wall_seconds += o.wall_seconds;
        self.overlapped_seconds += o.overlapped_seconds;
        self.serial_seconds += o.serial_seconds;
    }
    /// The phase seconds scaled from the timed calls to all calls.
    pub fn estimated(&self) -> OpStats {
        let scale = if self.timed_calls > 0 { self.calls as f64 / self.timed_calls as f64 } else { 0.0 };
        OpStats {
            timed_calls: self.calls,
            h2d_seconds: self.h2d_seconds * scale,
            d2h_seconds: self.d2h_seconds * scale,
            kernel_seconds: self.kernel_seconds * scale,
            overlapped_seconds: self.overlapped_seconds * scale,
            ..*self
        }
    }
    /// T_e: the wall time not spent in kernels.
    pub fn extra_seconds(&self) -> f64 {
        (self.wall_seconds - self.kernel_seconds).max(0.0)
    }
    /// The share of the copy time that overlapped with other work.
    pub fn overlap(&self) -> f64 {
        let copies = self.h2d_seconds + self.d2h_seconds;
        if copies == 0.0 {
            return 0.0;
        }
        (self.overlapped_seconds / copies).clamp(0.0, 1.0)
    }
    pub fn speedup(&self) -> f64 {
        self.serial_seconds / self.wall_seconds
    }
    pub fn speedup_bound(&self) -> f64 {
        self.serial_seconds / self.extra_seconds()
    }
}

pub struct Profile {
    enabled: AtomicBool,
    /// Time every call's phases (`fegpu bench pipeline` measures with them).
    every_call: AtomicBool,
    ops: Mutex<BTreeMap<String, OpStats>>,
}

impl Profile {
    pub fn from_env() -> Profile {
        let on = std::env::var("FEGPU_PROFILE").is_ok_and(|v| v == "1");
        Profile { enabled: AtomicBool::new(on), every_call: AtomicBool::new(false), ops: Mutex::new(BTreeMap::new()) }
    }

    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    pub fn set_every_call(&self, on: bool) {
        self.every_call.store(on, Ordering::Relaxed);
    }

    /// Whether the next call of `op` should time its phases (profile on).
    pub fn times_next(&self, op: &str) -> bool {
        let calls = self.ops.lock().unwrap_or_else(|p| p.into_inner()).get(op).map_or(0, |s| s.calls);
        self.every_call.load(Ordering::Relaxed) || calls < TIMED_FIRST || calls.is_multiple_of(TIMED_EVERY)
    }

    pub fn record(&self, op: &str, stats: &OpStats) {
        let mut ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        ops.entry(op.to_string()).or_default().add(stats);
    }

    /// The operation's totals, phase times scaled to all calls.
    pub fn op(&self, op: &str) -> Option<OpStats> {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).get(op).map(OpStats::estimated)
    }

    pub fn is_empty(&self) -> bool {
        self.ops.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
    }

    pub fn table(&self) -> String {
        let ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        let mut t = String::from("fegpu profile\n");
        let _ = writeln!(
            t,
            "{:<14} {:>6} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9}",
            "operation",
            "calls",
            "H2D MB",
            "D2H MB",
            "H2D ms",
            "D2H ms",
            "kernel ms",
            "wall ms",
            "T_e ms",
            "overlap",
            "speedup",
            "bound"
        );
        for (name, s) in ops.iter().map(|(n, s)| (n, s.estimated())) {
            let _ = writeln!(
                t,
                "{:<14} {:>6} {:>10.1} {:>10.1} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7.0}% {:>8.1}x {:>8.1}x",
                name,
                s.calls,
                s.h2d_bytes as f64 / 1e6,
                s.d2h_bytes as f64 / 1e6,
                s.h2d_seconds * 1e3,
                s.d2h_seconds * 1e3,
                s.kernel_seconds * 1e3,
                s.wall_seconds * 1e3,
                s.extra_seconds() * 1e3,
                100.0 * s.overlap(),
                s.speedup(),
                s.speedup_bound()
            );
        }
        t
    }

    pub fn json(&self) -> String {
        let ops = self.ops.lock().unwrap_or_else(|p| p.into_inner());
        let num = |v: f64| if v.is_finite() { format!("{v:e}") } else { "null".into() };
        let rows: Vec<String> = ops
            .iter()
            .map(|(name, s)| (name, s.estimated()))
            .map(|(name, s)| {
                format!(
                    "{{\"operation\": \"{name}\", \"calls\": {}, \"h2d_bytes\": {}, \"d2h_bytes\": {}, \"h2d_seconds\": {}, \"d2h_seconds\": {}, \"kernel_seconds\": {}, \"wall_seconds\": {}, \"overlapped_seconds\": {}, \"serial_seconds\": {}, \"extra_seconds\": {}, \"copy_overlap\": {}, \"speedup\": {}, \"speedup_bound\": {}}}",
                    s.calls,
                    s.h2d_bytes,
                    s.d2h_bytes,
                    num(s.h2d_seconds),
                    num(s.d2h_seconds),
                    num(s.kernel_seconds),
                    num(s.wall_seconds),
                    num(s.overlapped_seconds),
                    num(s.serial_seconds),
                    num(s.extra_seconds()),
                    num(s.overlap()),
                    num(s.speedup()),
                    num(s.speedup_bound())
                )
            })
            .collect();
        format!("{{\"operations\": [\n  {}\n]}}\n", rows.join(",\n  "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_phase_times_scale_to_all_calls_and_bytes_do_not() {
        let s = OpStats {
            calls: 10,
            timed_calls: 2,
            h2d_bytes: 800,
            kernel_seconds: 1.0,
            h2d_seconds: 0.5,
            wall_seconds: 9.0,
            ..OpStats::default()
        };
        let e = s.estimated();
        assert_eq!((e.calls, e.h2d_bytes, e.wall_seconds), (10, 800, 9.0));
        assert_eq!((e.kernel_seconds, e.h2d_seconds), (5.0, 2.5));
        let p = Profile::from_env();
        p.set_enabled(true);
        let one = OpStats { calls: 1, timed_calls: 1, ..OpStats::default() };
        let timed: Vec<bool> = (0..20)
            .map(|_| {
                let t = p.times_next("op");
                p.record("op", &one);
                t
            })
            .collect();
        // The first TIMED_FIRST calls, then every TIMED_EVERY-th.
        let want: Vec<bool> = (0..20u64).map(|c| c < TIMED_FIRST || c % TIMED_EVERY == 0).collect();
        assert_eq!(timed, want);
    }
}
