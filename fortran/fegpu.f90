!> fegpu: GPU kernels with device-resident data, for legacy Fortran codes.
!>
!>   use fegpu
!>   type(fegpu_context) :: ctx
!>   type(fegpu_array)   :: da, dt
!>   call fegpu_context_create(ctx)              ! AUTO: CUDA if present, else CPU
!>   call fegpu_array_create(ctx, a, da)         ! upload once
!>   call fegpu_array_create_empty(ctx, real64, n, m, dt)
!>   do step = 1, nsteps
!>     call fegpu_transpose(da, dt)              ! stays on the device
!>   end do
!>   call fegpu_array_download(dt, at)           ! copy back once
!>   call fegpu_context_destroy(ctx)
!>
!> Every procedure takes optional `stat` and `errmsg`. Without `stat`, an
!> error prints its message and stops the program (as Fortran intrinsics do);
!> with it, `stat` receives the fegpu status (FEGPU_OK = 0) and `errmsg` the
!> message, and nothing was changed. Arrays are column-major as in Fortran.
!> Standard Fortran 2018 (iso_c_binding, assumed rank); no preprocessor.
!>
!> This umbrella re-exports the topic modules, which may also be used alone:
!>   fegpu_types      status codes, FEGPU_* constants, handle types, kinds
!>   fegpu_context_m  contexts, version, the pipelines' profile
!>   fegpu_dense      device arrays, transposes, copies, vector algebra, pipelines
!>                    (real32/real64 bodies once in dense_kind.inc, through
!>                    fegpu_real32 and fegpu_real64)
!>   fegpu_sparse     CSR matrices, SpMV, Dirichlet conditions, Krylov solvers
!>   fegpu_fem_m      element sets, EBE CG, heat and elastodynamics steppers
!>   fegpu_lbm        D3Q19 lattice Boltzmann
!>   fegpu_radfields_m  FE-IIEE rad_fields accumulators
!> Each procedure carries its C name (fegpu.h); the shorter names of earlier
!> releases (fegpu_transpose, fegpu_dot, fegpu_ebe_solve, ...) remain.
module fegpu
  use fegpu_types
  use fegpu_support, only: fegpu_last_error
  use fegpu_context_m
  use fegpu_dense
  use fegpu_sparse
  use fegpu_fem_m
  use fegpu_lbm
  use fegpu_radfields_m
  implicit none
  public
end module fegpu
