//! cuBLAS on a lane: gemm and gemv for the host-array pipelines.

use super::*;

impl Lane {
    fn blas(&self) -> Result<&CudaBlas> {
        // SAFETY: probing for the library has no preconditions.
        if !unsafe { cudarc::cublas::sys::is_culib_present() } {
            return Err(Error::new(
                crate::error::ErrorKind::NoDevice,
                "cuBLAS (libcublas.so) not found: matrix products need it",
            ));
        }
        self.blas
            .get_or_try_init(|| CudaBlas::new(self.stream.clone()))
            .map_err(|e| Error::new(crate::error::ErrorKind::Device, format!("creating a cuBLAS handle: {e:?}")))
    }

    /// C = alpha A B + beta C for column-major A (m x k, leading dimension lda),
    /// B (k x n, ldb) and C (m x n, ldc) on the device, through cuBLAS on this lane.
    #[allow(clippy::too_many_arguments)] // BLAS's own argument list
    pub fn gemm(
        &self,
        m: usize,
        n: usize,
        k: usize,
        alpha: f64,
        a: &DeviceBuffer<f64>,
        lda: usize,
        b: &DeviceBuffer<f64>,
        ldb: usize,
        beta: f64,
        c: &mut DeviceBuffer<f64>,
        ldc: usize,
    ) -> Result<()> {
        let n_op = cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N;
        let cfg = GemmConfig {
            transa: n_op,
            transb: n_op,
            m: m as i32,
            n: n as i32,
            k: k as i32,
            alpha,
            lda: lda as i32,
            ldb: ldb as i32,
            beta,
            ldc: ldc as i32,
        };
        // SAFETY: the buffers hold the matrices the leading dimensions describe (checked by the callers).
        unsafe { self.blas()?.gemm(cfg, a, b, c) }
            .map_err(|e| Error::new(crate::error::ErrorKind::Device, format!("cublasDgemm: {e:?}")))?;
        self.checked("cublasDgemm")
    }

    /// y = alpha A x + beta y for a column-major m x n A (leading dimension lda).
    #[allow(clippy::too_many_arguments)] // BLAS's own argument list
    pub fn gemv(
        &self,
        m: usize,
        n: usize,
        alpha: f64,
        a: &DeviceBuffer<f64>,
        lda: usize,
        x: &DeviceBuffer<f64>,
        beta: f64,
        y: &mut DeviceBuffer<f64>,
    ) -> Result<()> {
        let cfg = GemvConfig {
            trans: cudarc::cublas::sys::cublasOperation_t::CUBLAS_OP_N,
            m: m as i32,
            n: n as i32,
            alpha,
            lda: lda as i32,
            incx: 1,
            beta,
            incy: 1,
        };
        // SAFETY: as in gemm.
        unsafe { self.blas()?.gemv(cfg, a, x, y) }
            .map_err(|e| Error::new(crate::error::ErrorKind::Device, format!("cublasDgemv: {e:?}")))?;
        self.checked("cublasDgemv")
    }
}
