//! How populations are stored: f64, f32, or f16 with f32 arithmetic. The f16
//! form keeps f_i − w_i (the population minus its rest-state weight), as
//! FluidX3D does, so the 11-bit mantissa resolves the small deviations
//! that carry the flow rather than the large constant part.

use crate::gpu::DeviceScalar;

/// A storage type of the populations.
pub trait Stored: DeviceScalar {
    /// The kernel-name suffix (kernels/lbm.cu).
    const NAME: &'static str;
    /// Bytes per population, for the bandwidth roofline.
    const BYTES: usize;
    /// Written into unset host storage so an unwritten element shows.
    const POISON: Self;
    /// The type the kernels compute in.
    type Arith: DeviceScalar;
    fn arith(v: f64) -> Self::Arith;
    /// The stored form of population value `v` of a direction with weight `w`.
    fn store(v: f64, w: f64) -> Self;
    /// The population value of a stored `self` of a direction with weight `w`.
    fn load(self, w: f64) -> f64;
}

impl Stored for f64 {
    const NAME: &'static str = "f64";
    const BYTES: usize = 8;
    const POISON: Self = f64::NAN;
    type Arith = f64;
    fn arith(v: f64) -> f64 {
        v
    }
    fn store(v: f64, _: f64) -> Self {
        v
    }
    fn load(self, _: f64) -> f64 {
        self
    }
}

impl Stored for f32 {
    const NAME: &'static str = "f32";
    const BYTES: usize = 4;
    const POISON: Self = f32::NAN;
    type Arith = f32;
    fn arith(v: f64) -> f32 {
        v as f32
    }
    fn store(v: f64, _: f64) -> Self {
        v as f32
    }
    fn load(self, _: f64) -> f64 {
        self as f64
    }
}

/// IEEE binary16, as the kernels store it (`half_bits` in kernels/lbm.cu).
pub use half::f16 as Half;

impl Stored for Half {
    const NAME: &'static str = "f16";
    const BYTES: usize = 2;
    const POISON: Self = Half::NAN;
    type Arith = f32;
    fn arith(v: f64) -> f32 {
        v as f32
    }
    fn store(v: f64, w: f64) -> Self {
        Half::from_f32((v - w) as f32)
    }
    fn load(self, w: f64) -> f64 {
        self.to_f32() as f64 + w
    }
}

#[cfg(test)]
mod tests {
    use super::{Half, Stored};

    #[test]
    fn f16_storage_keeps_the_deviation_from_the_weight() {
        let w = 1.0 / 3.0;
        // near rest the deviation is tiny: f16 resolves it far better than f - w would need
        let v = w + 1.0e-4;
        let back = Half::store(v, w).load(w);
        assert!((back - v).abs() < 1e-7, "{back} vs {v}");
        assert!(Half::POISON.load(w).is_nan());
        // the rounding is to nearest even, as the device's cvt.rn.f16.f32
        assert_eq!(Half::from_f32(1.0 + 1.0 / 2048.0).to_bits(), 0x3c00);
        assert_eq!(Half::from_f32(1.0 + 3.0 / 2048.0).to_bits(), 0x3c02);
    }
}
