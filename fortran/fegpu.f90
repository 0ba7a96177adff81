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
module fegpu
  use, intrinsic :: iso_c_binding, only: c_int8_t, c_int32_t, c_int64_t, c_double, c_double_complex, c_ptr, c_null_ptr, c_loc, &
       c_char, c_null_char
  use, intrinsic :: iso_fortran_env, only: int8, int16, int32, int64, real32, real64, error_unit
  implicit none
  private

  ! Status codes (as in fegpu.h).
  integer, parameter, public :: FEGPU_OK = 0, FEGPU_ERR_INVALID_ARGUMENT = 1, FEGPU_ERR_INVALID_HANDLE = 2, &
       FEGPU_ERR_SIZE_MISMATCH = 3, FEGPU_ERR_OUT_OF_DEVICE_MEMORY = 4, FEGPU_ERR_DEVICE = 5, &
       FEGPU_ERR_NOT_CONVERGED = 6, FEGPU_ERR_BREAKDOWN = 7, FEGPU_ERR_UNSUPPORTED = 8, &
       FEGPU_ERR_INTERNAL = 9, FEGPU_ERR_NO_DEVICE = 10, FEGPU_ERR_OUT_OF_MEMORY = 11
  integer, parameter, public :: FEGPU_BACKEND_AUTO = 0, FEGPU_BACKEND_CPU = 1, FEGPU_BACKEND_CUDA = 2
  integer, parameter, public :: FEGPU_VARIANT_AUTO = 0, FEGPU_VARIANT_NAIVE = 1, FEGPU_VARIANT_TILE = 2, &
       FEGPU_VARIANT_PADDED = 3
  integer(c_int32_t), parameter :: DTYPE_F32 = 1, DTYPE_F64 = 2, DTYPE_F16 = 3
  !> What a non-integer (or, for a C int, an out-of-range) actual argument
  !> reads as: a value every fegpu call refuses by the argument's name.
  integer(c_int64_t), parameter :: NOT_AN_INTEGER = -huge(1_c_int64_t)
  integer(c_int32_t), parameter :: NOT_AN_INT32 = -huge(1_c_int32_t)
  !> The kinds the examples use, so `use fegpu` alone is enough.
  public :: int32, int64, real32, real64
  !> storage= of fegpu_lattice_create (as fegpu.h): f16 (f32 arithmetic), f32 or f64 populations.
  integer, parameter, public :: FEGPU_DTYPE_F32 = 1, FEGPU_DTYPE_F64 = 2, FEGPU_DTYPE_F16 = 3
  !> The older kind= form's f16 sentinel: kind=real32 or real64 otherwise.
  !> Under compilers whose kind numbers are not byte sizes (NAG: real64 = 2)
  !> it collides with a real kind, so use storage= instead.
  integer, parameter, public :: FEGPU_KIND_F16 = 2

  !> fegpu_solve_info of fegpu.h.
  type, bind(C) :: solve_info
    integer(c_int64_t) :: iterations = 0
    real(c_double) :: relative_residual = 0, true_relative_residual = 0, setup_seconds = 0, solve_seconds = 0
  end type solve_info

  !> A context: one backend (CPU reference or one CUDA device) owning arrays.
  type, bind(C), public :: fegpu_context
    integer(c_int64_t) :: handle
  end type fegpu_context

  !> A device-resident array (rows x cols, column-major, real32 or real64).
  type, bind(C), public :: fegpu_array
    integer(c_int64_t) :: handle
  end type fegpu_array

  !> A CSR sparse matrix kept on the device.
  type, bind(C), public :: fegpu_csr
    integer(c_int64_t) :: handle
  end type fegpu_csr

  !> A Krylov solver (CG or BiCGSTAB) with its preconditioner, for one matrix.
  type, bind(C), public :: fegpu_solver
    integer(c_int64_t) :: handle
  end type fegpu_solver

  !> A finite-element set: nodes, connectivity, materials and element matrices on the device.
  type, bind(C), public :: fegpu_fem
    integer(c_int64_t) :: handle
  end type fegpu_fem

  !> An element-by-element CG solver for an element set, with Dirichlet conditions.
  type, bind(C), public :: fegpu_ebe
    integer(c_int64_t) :: handle
  end type fegpu_ebe

  !> An elastodynamics stepper (Newmark or central differences) with its state on the device.
  type, bind(C), public :: fegpu_dynamics
    integer(c_int64_t) :: handle
  end type fegpu_dynamics

  !> A transient heat-conduction stepper (theta method) with its matrices on the device.
  type, bind(C), public :: fegpu_heat
    integer(c_int64_t) :: handle
  end type fegpu_heat

  !> A D3Q19 lattice-Boltzmann lattice with its populations on the device.
  type, bind(C), public :: fegpu_lattice
    integer(c_int64_t) :: handle
  end type fegpu_lattice

  !> The FE-IIEE rad_fields accumulator: S points and fields on the device(s).
  type, bind(C), public :: fegpu_radfields
    integer(c_int64_t) :: handle
  end type fegpu_radfields

  integer, parameter, public :: FEGPU_PIPELINE_AUTO = 0, FEGPU_PIPELINE_SERIAL = 1, FEGPU_PIPELINE_PER_CHUNK = 2, &
       FEGPU_PIPELINE_STAGED = 3
  public :: fegpu_pipeline_axpby, fegpu_pipeline_column_dots, fegpu_profile_enable, fegpu_profile_report
  public :: fegpu_pipeline_gemm, fegpu_pipeline_gemv, fegpu_pipeline_transpose

  integer, parameter, public :: FEGPU_RADFIELDS_AUTO = 0, FEGPU_RADFIELDS_DIRECT = 1, FEGPU_RADFIELDS_TILED = 2

  !> fegpu_radfields_create(ctx, points, n_rhs, k, omega_mu, acc): ctx one
  !> context, or an array of CUDA contexts (one per device) to split S across GPUs.
  interface fegpu_radfields_create
    module procedure radfields_create_one, radfields_create_many
  end interface
  public :: fegpu_radfields_create

  integer, parameter, public :: FEGPU_PERIODIC_X = 1, FEGPU_PERIODIC_Y = 2, FEGPU_PERIODIC_Z = 4
  integer, parameter, public :: FEGPU_FLUID = 0, FEGPU_WALL = 1, FEGPU_MOVING_WALL = 2

  integer, parameter, public :: FEGPU_METHOD_CG = 1, FEGPU_METHOD_BICGSTAB = 2
  integer, parameter, public :: FEGPU_PRECOND_NONE = 0, FEGPU_PRECOND_JACOBI = 1, FEGPU_PRECOND_ILU0 = 2

  public :: fegpu_csr_create, fegpu_csr_read_mm, fegpu_csr_update_values, fegpu_csr_destroy, fegpu_csr_info
  public :: fegpu_spmv, fegpu_dot, fegpu_axpby, fegpu_nrm2, fegpu_version
  public :: fegpu_csr_write_mm, fegpu_csr_download, fegpu_solver_history
  public :: fegpu_solver_create, fegpu_solve, fegpu_solver_destroy
  public :: fegpu_context_create, fegpu_context_destroy, fegpu_context_backend, fegpu_context_synchronize
  public :: fegpu_array_create, fegpu_array_create_empty, fegpu_array_destroy, fegpu_array_shape
  public :: fegpu_array_upload, fegpu_array_download
  public :: fegpu_host_register, fegpu_host_unregister
  public :: fegpu_transpose, fegpu_transpose_in_place, fegpu_copy
  public :: fegpu_transpose_host, fegpu_transpose_host_in_place
  public :: fegpu_lattice_create, fegpu_lattice_set_flags, fegpu_lattice_set_force, fegpu_lattice_set_wall_velocity
  public :: fegpu_lattice_init_equilibrium, fegpu_lattice_set_populations, fegpu_lattice_get_populations
  public :: fegpu_lattice_step, fegpu_lattice_fields, fegpu_lattice_destroy, fegpu_lattice_set_trt
  public :: fegpu_radfields_accumulate, fegpu_radfields_download, fegpu_radfields_reset
  public :: fegpu_radfields_excluded, fegpu_radfields_set_variant, fegpu_radfields_destroy, fegpu_radfields_compute
  public :: fegpu_last_error
  integer, parameter, public :: FEGPU_ELEMENT_TRI3 = 1, FEGPU_ELEMENT_QUAD4 = 2, FEGPU_ELEMENT_TET4 = 3, FEGPU_ELEMENT_HEX8 = 4
  integer, parameter, public :: FEGPU_PROBLEM_HEAT = 1, FEGPU_PROBLEM_PLANE_STRESS = 2, FEGPU_PROBLEM_PLANE_STRAIN = 3, &
       FEGPU_PROBLEM_ELASTIC_3D = 4
  public :: fegpu_fem_create, fegpu_fem_integrate, fegpu_fem_set_materials, fegpu_fem_assemble, fegpu_fem_stiffness
  public :: fegpu_fem_destroy, fegpu_csr_apply_dirichlet, fegpu_ebe_create, fegpu_ebe_solve, fegpu_ebe_destroy
  public :: fegpu_fem_mass, fegpu_heat_create, fegpu_heat_step, fegpu_heat_destroy, fegpu_heat_set_convection
  public :: fegpu_fem_set_density, fegpu_dynamics_create, fegpu_dynamics_step, fegpu_dynamics_destroy
  integer, parameter, public :: FEGPU_SCHEME_NEWMARK = 1, FEGPU_SCHEME_CENTRAL_DIFFERENCE = 2
  integer, parameter, public :: FEGPU_INTEGRATION_AUTO = 0, FEGPU_INTEGRATION_ELEMENT = 1, FEGPU_INTEGRATION_POINT = 2, &
       FEGPU_INTEGRATION_BLOCKED = 3
  public :: fegpu_fem_set_integration

  !> Creates an array holding a copy of a real32/real64 array of any rank
  !> (rank 1 becomes n x 1; rank 2 keeps its shape).
  interface fegpu_array_create
    module procedure array_create_r32, array_create_r64
  end interface
  !> Overwrites the array (or, with `first`, the elements first..first+size(a)-1, 1-based).
  interface fegpu_array_upload
    module procedure array_upload_r32, array_upload_r64
  end interface
  !> Copies the array (or, with `first`, elements first..first+size(a)-1, 1-based) into `a`.
  interface fegpu_array_download
    module procedure array_download_r32, array_download_r64
  end interface
  !> Page-locks a host array so transfers from and to it run at pinned speed.
  interface fegpu_host_register
    module procedure host_register_r32, host_register_r64
  end interface
  interface fegpu_host_unregister
    module procedure host_unregister_r32, host_unregister_r64
  end interface
  !> at = transpose(a) for host arrays through the context's backend.
  interface fegpu_transpose_host
    module procedure transpose_host_r32, transpose_host_r64
  end interface
  interface fegpu_transpose_host_in_place
    module procedure transpose_host_in_place_r32, transpose_host_in_place_r64
  end interface

  !> A CSR matrix from the caller's arrays (int32 or int64 indices, 1-based by default).
  interface fegpu_csr_create
    module procedure csr_create_i32, csr_create_i64
  end interface

  interface
    integer(c_int32_t) function c_csr_create_i32(ctx, nrows, ncols, nnz, rp, ci, v, base, a) bind(C, name='fegpu_csr_create_i32')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, nrows, ncols, nnz
      integer(c_int32_t), intent(in) :: rp(*), ci(*)
      real(c_double), intent(in) :: v(*)
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(out) :: a
    end function
    integer(c_int32_t) function c_csr_create_i64(ctx, nrows, ncols, nnz, rp, ci, v, base, a) bind(C, name='fegpu_csr_create_i64')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, nrows, ncols, nnz
      integer(c_int64_t), intent(in) :: rp(*), ci(*)
      real(c_double), intent(in) :: v(*)
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(out) :: a
    end function
    integer(c_int32_t) function c_csr_read_mm(ctx, path, a) bind(C, name='fegpu_csr_read_mm')
      import :: c_int32_t, c_int64_t, c_char, c_double
      integer(c_int64_t), value :: ctx
      character(kind=c_char), intent(in) :: path(*)
      integer(c_int64_t), intent(out) :: a
    end function
    integer(c_int32_t) function c_csr_update_values(a, v, nnz) bind(C, name='fegpu_csr_update_values')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a, nnz
      real(c_double), intent(in) :: v(*)
    end function
    integer(c_int32_t) function c_csr_write_mm(a, path) bind(C, name='fegpu_csr_write_mm')
      import :: c_int32_t, c_int64_t, c_char
      integer(c_int64_t), value :: a
      character(kind=c_char), intent(in) :: path(*)
    end function
    integer(c_int32_t) function c_csr_download(a, rp, ci, v, base) bind(C, name='fegpu_csr_download')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a
      integer(c_int64_t), intent(out) :: rp(*), ci(*)
      real(c_double), intent(out) :: v(*)
      integer(c_int32_t), value :: base
    end function
    integer(c_int32_t) function c_vector_nrm2(x, r) bind(C, name='fegpu_vector_nrm2')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: x
      real(c_double), intent(out) :: r
    end function
    integer(c_int32_t) function c_solver_history(s, h, len, count) bind(C, name='fegpu_solver_history')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: s
      real(c_double), intent(out) :: h(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), intent(out) :: count
    end function
    integer(c_int32_t) function c_version(major, minor, patch) bind(C, name='fegpu_version')
      import :: c_int32_t
      integer(c_int32_t), intent(out) :: major, minor, patch
    end function
    integer(c_int32_t) function c_csr_info(a, nrows, ncols, nnz) bind(C, name='fegpu_csr_info')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a
      integer(c_int64_t), intent(out) :: nrows, ncols, nnz
    end function
    integer(c_int32_t) function c_csr_destroy(a) bind(C, name='fegpu_csr_destroy')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a
    end function
    integer(c_int32_t) function c_csr_spmv(a, alpha, x, beta, y) bind(C, name='fegpu_csr_spmv')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a, x, y
      real(c_double), value :: alpha, beta
    end function
    integer(c_int32_t) function c_vector_dot(x, y, r) bind(C, name='fegpu_vector_dot')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: x, y
      real(c_double), intent(out) :: r
    end function
    integer(c_int32_t) function c_vector_axpby(alpha, x, beta, y) bind(C, name='fegpu_vector_axpby')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: x, y
      real(c_double), value :: alpha, beta
    end function
    integer(c_int32_t) function c_solver_create(a, method, precond, s) bind(C, name='fegpu_solver_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a
      integer(c_int32_t), value :: method, precond
      integer(c_int64_t), intent(out) :: s
    end function
    integer(c_int32_t) function c_solver_solve(s, b, x, tol, maxit, info) bind(C, name='fegpu_solver_solve')
      import :: c_int32_t, c_int64_t, c_double, solve_info
      integer(c_int64_t), value :: s, b, x, maxit
      real(c_double), value :: tol
      type(solve_info), intent(out) :: info
    end function
    integer(c_int32_t) function c_solver_destroy(s) bind(C, name='fegpu_solver_destroy')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: s
    end function
  end interface

  ! Finite elements (fegpu.h, fegpu_fem_*, fegpu_csr_apply_dirichlet).
  interface
    integer(c_int32_t) function c_fem_create(ctx, element, problem, n_nodes, coords, n_elements, conn, base, &
         n_materials, props, material, order, fem) bind(C, name='fegpu_fem_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, n_nodes, n_elements, n_materials
      integer(c_int32_t), value :: element, problem, base, order
      real(c_double), intent(in) :: coords(*), props(*)
      integer(c_int64_t), intent(in) :: conn(*), material(*)
      integer(c_int64_t), intent(out) :: fem
    end function
    integer(c_int32_t) function c_fem_set_integration(fem, level) bind(C, name='fegpu_fem_set_integration')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: fem
      integer(c_int32_t), value :: level
    end function
    integer(c_int32_t) function c_fem_integrate(fem) bind(C, name='fegpu_fem_integrate')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: fem
    end function
    integer(c_int32_t) function c_fem_set_materials(fem, n, props) bind(C, name='fegpu_fem_set_materials')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      real(c_double), intent(in) :: props(*)
    end function
    integer(c_int32_t) function c_fem_assemble(fem, a) bind(C, name='fegpu_fem_assemble')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: fem
      integer(c_int64_t), intent(out) :: a
    end function
    integer(c_int32_t) function c_fem_stiffness_download(fem, ke, n) bind(C, name='fegpu_fem_stiffness_download')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      real(c_double), intent(out) :: ke(*)
    end function
    integer(c_int32_t) function c_fem_set_density(fem, n, rho) bind(C, name='fegpu_fem_set_density')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      real(c_double), intent(in) :: rho(*)
    end function
    integer(c_int32_t) function c_dynamics_create(fem, scheme, dt, beta, gamma, n, clamped, base, dyn) &
         bind(C, name='fegpu_fem_dynamics_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      integer(c_int32_t), value :: scheme, base
      real(c_double), value :: dt, beta, gamma
      integer(c_int64_t), intent(in) :: clamped(*)
      integer(c_int64_t), intent(out) :: dyn
    end function
    integer(c_int32_t) function c_dynamics_step(dyn, u, f, tol, maxit) bind(C, name='fegpu_fem_dynamics_step')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: dyn, u, f, maxit
      real(c_double), value :: tol
    end function
    integer(c_int32_t) function c_dynamics_destroy(dyn) bind(C, name='fegpu_fem_dynamics_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: dyn
    end function
    integer(c_int32_t) function c_fem_mass_download(fem, ce, n) bind(C, name='fegpu_fem_mass_download')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      real(c_double), intent(out) :: ce(*)
    end function
    integer(c_int32_t) function c_heat_create(fem, dt, theta, n, dofs, base, values, heat) bind(C, name='fegpu_fem_heat_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      real(c_double), value :: dt, theta
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(in) :: dofs(*)
      real(c_double), intent(in) :: values(*)
      integer(c_int64_t), intent(out) :: heat
    end function
    integer(c_int32_t) function c_heat_step(heat, t, f, tol, maxit, info) bind(C, name='fegpu_fem_heat_step')
      import :: c_int32_t, c_int64_t, c_double, solve_info
      integer(c_int64_t), value :: heat, t, f, maxit
      real(c_double), value :: tol
      type(solve_info), intent(out) :: info
    end function
    integer(c_int32_t) function c_heat_set_convection(heat, n, nodes, base, h_area, t_env) &
         bind(C, name='fegpu_fem_heat_set_convection')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: heat, n
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(in) :: nodes(*)
      real(c_double), intent(in) :: h_area(*), t_env(*)
    end function
    integer(c_int32_t) function c_heat_destroy(heat) bind(C, name='fegpu_fem_heat_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: heat
    end function
    integer(c_int32_t) function c_fem_destroy(fem) bind(C, name='fegpu_fem_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: fem
    end function
    integer(c_int32_t) function c_csr_apply_dirichlet(a, n, dofs, base, values, b) bind(C, name='fegpu_csr_apply_dirichlet')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a, n, b
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(in) :: dofs(*)
      real(c_double), intent(in) :: values(*)
    end function
    integer(c_int32_t) function c_ebe_create(fem, n, dofs, base, values, otf, ebe) bind(C, name='fegpu_fem_ebe_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      integer(c_int32_t), value :: base, otf
      integer(c_int64_t), intent(in) :: dofs(*)
      real(c_double), intent(in) :: values(*)
      integer(c_int64_t), intent(out) :: ebe
    end function
    integer(c_int32_t) function c_ebe_solve(ebe, b, x, tol, maxit, info) bind(C, name='fegpu_fem_ebe_solve')
      import :: c_int32_t, c_int64_t, c_double, solve_info
      integer(c_int64_t), value :: ebe, b, x, maxit
      real(c_double), value :: tol
      type(solve_info), intent(out) :: info
    end function
    integer(c_int32_t) function c_ebe_destroy(ebe) bind(C, name='fegpu_fem_ebe_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ebe
    end function
  end interface

  ! The pipelines and the profile (fegpu.h, fegpu_pipeline_*, fegpu_profile_*).
  interface
    integer(c_int32_t) function c_pipeline_axpby(ctx, n, a, x, b, y, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_axpby')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, n, n_streams, n_chunks
      real(c_double), value :: a, b
      real(c_double), intent(in) :: x(*)
      real(c_double), intent(inout) :: y(*)
      integer(c_int32_t), value :: strategy
    end function
    integer(c_int32_t) function c_pipeline_column_dots(ctx, m, ncols, a, b, out, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_column_dots')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, m, ncols, n_streams, n_chunks
      real(c_double), intent(in) :: a(*), b(*)
      real(c_double), intent(out) :: out(*)
      integer(c_int32_t), value :: strategy
    end function
    integer(c_int32_t) function c_pipeline_gemm(ctx, m, n, k, alpha, a, b, beta, c, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_gemm')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, m, n, k, n_streams, n_chunks
      real(c_double), value :: alpha, beta
      real(c_double), intent(in) :: a(*), b(*)
      real(c_double), intent(inout) :: c(*)
      integer(c_int32_t), value :: strategy
    end function
    integer(c_int32_t) function c_pipeline_gemv(ctx, m, n, alpha, a, x, beta, y, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_gemv')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, m, n, n_streams, n_chunks
      real(c_double), value :: alpha, beta
      real(c_double), intent(in) :: a(*), x(*)
      real(c_double), intent(inout) :: y(*)
      integer(c_int32_t), value :: strategy
    end function
    integer(c_int32_t) function c_pipeline_transpose(ctx, m, n, a, at, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_transpose')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, m, n, n_streams, n_chunks
      real(c_double), intent(in) :: a(*)
      real(c_double), intent(out) :: at(*)
      integer(c_int32_t), value :: strategy
    end function
    integer(c_int32_t) function c_profile_enable(ctx, on) bind(C, name='fegpu_profile_enable')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx
      integer(c_int32_t), value :: on
    end function
    integer(c_int32_t) function c_profile_report(ctx, path) bind(C, name='fegpu_profile_report')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx
      type(c_ptr), value :: path
    end function
  end interface

  ! The rad_fields C surface (fegpu.h, fegpu_radfields_*); complex arrays are complex(c_double_complex).
  interface
    integer(c_int32_t) function c_radfields_create_multi(n_ctx, ctxs, n_s, points, n_rhs, k, omega_mu, acc) &
         bind(C, name='fegpu_radfields_create_multi')
      import :: c_int32_t, c_int64_t, c_double, c_double_complex
      integer(c_int64_t), value :: n_ctx, n_s, n_rhs
      integer(c_int64_t), intent(in) :: ctxs(*)
      real(c_double), intent(in) :: points(*)
      complex(c_double_complex), intent(in) :: k, omega_mu
      integer(c_int64_t), intent(out) :: acc
    end function
    integer(c_int32_t) function c_radfields_accumulate(acc, n_p, points, weights, currents) &
         bind(C, name='fegpu_radfields_accumulate')
      import :: c_int32_t, c_int64_t, c_double, c_double_complex
      integer(c_int64_t), value :: acc, n_p
      real(c_double), intent(in) :: points(*), weights(*)
      complex(c_double_complex), intent(in) :: currents(*)
    end function
    integer(c_int32_t) function c_radfields_download(acc, fields, n) bind(C, name='fegpu_radfields_download')
      import :: c_int32_t, c_int64_t, c_double_complex
      integer(c_int64_t), value :: acc, n
      complex(c_double_complex), intent(out) :: fields(*)
    end function
    integer(c_int32_t) function c_radfields_reset(acc) bind(C, name='fegpu_radfields_reset')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: acc
    end function
    integer(c_int32_t) function c_radfields_excluded(acc, count) bind(C, name='fegpu_radfields_excluded')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: acc
      integer(c_int64_t), intent(out) :: count
    end function
    integer(c_int32_t) function c_radfields_set_variant(acc, variant) bind(C, name='fegpu_radfields_set_variant')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: acc
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_radfields_destroy(acc) bind(C, name='fegpu_radfields_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: acc
    end function
    integer(c_int32_t) function c_radfields_compute(ctx, n_s, s_points, n_p, p_points, weights, currents, n_rhs, k, &
         omega_mu, fields) bind(C, name='fegpu_radfields_compute')
      import :: c_int32_t, c_int64_t, c_double, c_double_complex
      integer(c_int64_t), value :: ctx, n_s, n_p, n_rhs
      real(c_double), intent(in) :: s_points(*), p_points(*), weights(*)
      complex(c_double_complex), intent(in) :: currents(*), k, omega_mu
      complex(c_double_complex), intent(out) :: fields(*)
    end function
  end interface

  ! The lattice-Boltzmann C surface (fegpu.h, fegpu_lattice_*).
  interface
    integer(c_int32_t) function c_lattice_create(ctx, nx, ny, nz, dtype, tau, periodic, lat) &
         bind(C, name='fegpu_lattice_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, nx, ny, nz
      integer(c_int32_t), value :: dtype, periodic
      real(c_double), value :: tau
      integer(c_int64_t), intent(out) :: lat
    end function
    integer(c_int32_t) function c_lattice_set_flags(lat, flags, n) bind(C, name='fegpu_lattice_set_flags')
      import :: c_int32_t, c_int64_t, c_int8_t
      integer(c_int64_t), value :: lat, n
      integer(c_int8_t), intent(in) :: flags(*)
    end function
    integer(c_int32_t) function c_lattice_vector(lat, x, y, z) bind(C, name='fegpu_lattice_set_force')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat
      real(c_double), value :: x, y, z
    end function
    integer(c_int32_t) function c_lattice_wall(lat, x, y, z) bind(C, name='fegpu_lattice_set_wall_velocity')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat
      real(c_double), value :: x, y, z
    end function
    integer(c_int32_t) function c_lattice_trt(lat, magic) bind(C, name='fegpu_lattice_set_trt')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat
      real(c_double), value :: magic
    end function
    integer(c_int32_t) function c_lattice_equilibrium(lat, rho, x, y, z) bind(C, name='fegpu_lattice_init_equilibrium')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat
      real(c_double), value :: rho, x, y, z
    end function
    integer(c_int32_t) function c_lattice_set_populations(lat, f, n) bind(C, name='fegpu_lattice_set_populations')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat, n
      real(c_double), intent(in) :: f(*)
    end function
    integer(c_int32_t) function c_lattice_get_populations(lat, f, n) bind(C, name='fegpu_lattice_get_populations')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat, n
      real(c_double), intent(out) :: f(*)
    end function
    integer(c_int32_t) function c_lattice_step(lat, n) bind(C, name='fegpu_lattice_step')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: lat, n
    end function
    integer(c_int32_t) function c_lattice_fields(lat, z_first, z_count, rho, u) bind(C, name='fegpu_lattice_fields')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat, z_first, z_count
      real(c_double), intent(out) :: rho(*), u(*)
    end function
    integer(c_int32_t) function c_lattice_destroy(lat) bind(C, name='fegpu_lattice_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: lat
    end function
  end interface

  interface
    integer(c_int32_t) function c_last_error_message(buf, len) bind(C, name='fegpu_last_error_message')
      import :: c_int32_t, c_int64_t, c_char
      character(kind=c_char), intent(out) :: buf(*)
      integer(c_int64_t), value :: len
    end function
    integer(c_int32_t) function c_messages_set_index_base(index_base) bind(C, name='fegpu_messages_set_index_base')
      import :: c_int32_t
      integer(c_int32_t), value :: index_base
    end function
    integer(c_int32_t) function c_context_create(backend, device, ctx) bind(C, name='fegpu_context_create')
      import :: c_int32_t, c_int64_t
      integer(c_int32_t), value :: backend
      integer(c_int64_t), value :: device
      integer(c_int64_t), intent(out) :: ctx
    end function
    integer(c_int32_t) function c_context_destroy(ctx) bind(C, name='fegpu_context_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx
    end function
    integer(c_int32_t) function c_context_backend(ctx, backend) bind(C, name='fegpu_context_backend')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx
      integer(c_int32_t), intent(out) :: backend
    end function
    integer(c_int32_t) function c_context_synchronize(ctx) bind(C, name='fegpu_context_synchronize')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx
    end function
    integer(c_int32_t) function c_host_register(ctx, ptr, bytes) bind(C, name='fegpu_host_register')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, bytes
      type(c_ptr), value :: ptr
    end function
    integer(c_int32_t) function c_host_unregister(ctx, ptr) bind(C, name='fegpu_host_unregister')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx
      type(c_ptr), value :: ptr
    end function
    integer(c_int32_t) function c_array_create_f32(ctx, rows, cols, host, arr) bind(C, name='fegpu_array_create_f32')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, rows, cols
      type(c_ptr), value :: host
      integer(c_int64_t), intent(out) :: arr
    end function
    integer(c_int32_t) function c_array_create_f64(ctx, rows, cols, host, arr) bind(C, name='fegpu_array_create_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, rows, cols
      type(c_ptr), value :: host
      integer(c_int64_t), intent(out) :: arr
    end function
    integer(c_int32_t) function c_array_create_empty(ctx, dtype, rows, cols, arr) bind(C, name='fegpu_array_create_empty')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx, rows, cols
      integer(c_int32_t), value :: dtype
      integer(c_int64_t), intent(out) :: arr
    end function
    integer(c_int32_t) function c_array_destroy(arr) bind(C, name='fegpu_array_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: arr
    end function
    integer(c_int32_t) function c_array_shape(arr, rows, cols, dtype) bind(C, name='fegpu_array_shape')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: arr
      integer(c_int64_t), intent(out) :: rows, cols
      integer(c_int32_t), intent(out) :: dtype
    end function
    integer(c_int32_t) function c_upload_slice_f32(arr, first, count, host, base) bind(C, name='fegpu_array_upload_slice_f32')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, first, count
      type(c_ptr), value :: host
      integer(c_int32_t), value :: base
    end function
    integer(c_int32_t) function c_upload_slice_f64(arr, first, count, host, base) bind(C, name='fegpu_array_upload_slice_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, first, count
      type(c_ptr), value :: host
      integer(c_int32_t), value :: base
    end function
    integer(c_int32_t) function c_upload_f32(arr, host, count) bind(C, name='fegpu_array_upload_f32')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, count
      type(c_ptr), value :: host
    end function
    integer(c_int32_t) function c_upload_f64(arr, host, count) bind(C, name='fegpu_array_upload_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, count
      type(c_ptr), value :: host
    end function
    integer(c_int32_t) function c_download_slice_f32(arr, first, count, host, base) &
         bind(C, name='fegpu_array_download_slice_f32')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, first, count
      type(c_ptr), value :: host
      integer(c_int32_t), value :: base
    end function
    integer(c_int32_t) function c_download_slice_f64(arr, first, count, host, base) &
         bind(C, name='fegpu_array_download_slice_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, first, count
      type(c_ptr), value :: host
      integer(c_int32_t), value :: base
    end function
    integer(c_int32_t) function c_download_f32(arr, host, count) bind(C, name='fegpu_array_download_f32')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, count
      type(c_ptr), value :: host
    end function
    integer(c_int32_t) function c_download_f64(arr, host, count) bind(C, name='fegpu_array_download_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, count
      type(c_ptr), value :: host
    end function
    integer(c_int32_t) function c_transpose(src, dst, variant) bind(C, name='fegpu_dense_transpose')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: src, dst
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_transpose_in_place(a, variant) bind(C, name='fegpu_dense_transpose_in_place')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: a
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_copy(src, dst, variant) bind(C, name='fegpu_dense_copy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: src, dst
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_transpose_host_f32(ctx, m, n, a, at, variant) bind(C, name='fegpu_dense_transpose_host_f32')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, m, n
      type(c_ptr), value :: a, at
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_transpose_host_f64(ctx, m, n, a, at, variant) bind(C, name='fegpu_dense_transpose_host_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, m, n
      type(c_ptr), value :: a, at
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_transpose_host_in_place_f32(ctx, n, a, variant) &
         bind(C, name='fegpu_dense_transpose_host_in_place_f32')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, n
      type(c_ptr), value :: a
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_transpose_host_in_place_f64(ctx, n, a, variant) &
         bind(C, name='fegpu_dense_transpose_host_in_place_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, n
      type(c_ptr), value :: a
      integer(c_int32_t), value :: variant
    end function
  end interface

contains

  !> The calling thread's last error message.
  function fegpu_last_error() result(msg)
    character(len=:), allocatable :: msg
    character(kind=c_char) :: buf(1024)
    integer :: i, st
    st = c_last_error_message(buf, int(size(buf), c_int64_t))
    msg = ''
    do i = 1, size(buf)
      if (buf(i) == c_null_char) exit
      msg = msg // buf(i)
    end do
  end function fegpu_last_error

  !> An integer argument of any kind as int64 (elemental: arrays too): the
  !> procedures take their integer arguments as class(*), so one module serves code built with
  !> default 4-byte integers and with -fdefault-integer-8 (or integer*8
  !> declarations). A non-integer reads as NOT_AN_INTEGER, which fegpu
  !> refuses naming the argument.
  elemental function i64(x) result(v)
    class(*), intent(in) :: x
    integer(c_int64_t) :: v
    select type (x)
    type is (integer(int8))
      v = x
    type is (integer(int16))
      v = x
    type is (integer(int32))
      v = x
    type is (integer(int64))
      v = x
    class default
      v = NOT_AN_INTEGER
    end select
  end function

  !> An integer argument of any kind as a C int (out-of-range values and
  !> non-integers become NOT_AN_INT32, which fegpu refuses by name).
  elemental function i32(x) result(v)
    class(*), intent(in) :: x
    integer(c_int32_t) :: v
    integer(c_int64_t) :: w
    w = i64(x)
    v = NOT_AN_INT32
    if (abs(w) <= huge(v)) v = int(w, c_int32_t)
  end function

  !> Stores v into an integer result argument of whatever kind the caller declared.
  subroutine put(x, v)
    class(*), intent(out) :: x
    integer(c_int64_t), intent(in) :: v
    select type (x)
    type is (integer(int8))
      x = int(v, int8)
    type is (integer(int16))
      x = int(v, int16)
    type is (integer(int32))
      x = int(v, int32)
    type is (integer(int64))
      x = v
    end select
  end subroutine

  !> Reports a status the Fortran way: into stat/errmsg when present,
  !> otherwise print the message and stop.
  subroutine check(status, where, stat, errmsg)
    integer(c_int32_t), intent(in) :: status
    character(*), intent(in) :: where
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(len=:), allocatable :: msg
    if (present(stat)) call put(stat, int(status, c_int64_t))
    if (status == FEGPU_OK) return
    msg = where // ': ' // fegpu_last_error()
    call refuse(status, msg, stat, errmsg)
  end subroutine check

  !> A failed call the Fortran way: `status` into stat and `msg` into errmsg
  !> when present, otherwise the message on error_unit and a stop.
  subroutine refuse(status, msg, stat, errmsg)
    integer(c_int32_t), intent(in) :: status
    character(*), intent(in) :: msg
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (present(stat)) call put(stat, int(status, c_int64_t))
    if (present(errmsg)) errmsg = msg
    if (.not. present(stat)) call fail(msg)
  end subroutine refuse

  !> Without stat=: the message goes to standard error, flushed, before the
  !> program stops, so a batch log shows it ahead of any backtrace.
  subroutine fail(msg)
    character(*), intent(in) :: msg
    write (error_unit, '(a)') 'fegpu: ' // msg
    flush (error_unit)
    error stop 1
  end subroutine

  !> A data pointer for C to the n elements of `a`, or NULL when n = 0
  !> (fegpu then names the size).
  function data_ptr32(a, n) result(p)
    real(real32), intent(in), contiguous, target :: a(..)
    integer(c_int64_t), intent(in) :: n
    type(c_ptr) :: p
    p = c_null_ptr
    if (n > 0) p = c_loc(a)
  end function
  function data_ptr64(a, n) result(p)
    real(real64), intent(in), contiguous, target :: a(..)
    integer(c_int64_t), intent(in) :: n
    type(c_ptr) :: p
    p = c_null_ptr
    if (n > 0) p = c_loc(a)
  end function

  !> The element count of an array argument: count= when given (the only way
  !> to pass a legacy assumed-size A(*) array whole), else its size, which is
  !> negative for an assumed-size actual argument.
  integer(c_int64_t) function elements(size_a, count)
    integer(c_int64_t), intent(in) :: size_a
    class(*), intent(in), optional :: count
    elements = size_a
    if (present(count)) elements = i64(count)
    if (present(count) .and. elements < 0) elements = 0  ! fegpu names the bad count
  end function

  subroutine assumed_size_error(where, stat, errmsg)
    character(*), intent(in) :: where
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(len=:), allocatable :: msg
    msg = where // ': a is an assumed-size array (its size is unknown here): pass count= (the number of elements)' // &
         ' or a section such as a(1:n)'
    call refuse(int(FEGPU_ERR_INVALID_ARGUMENT, c_int32_t), msg, stat, errmsg)
  end subroutine

  !> rows x cols of an array of any rank: rank 1 is n x 1, higher ranks fold
  !> their trailing dimensions into the columns.
  subroutine matrix_shape(rnk, n, n1, rows, cols)
    integer, intent(in) :: rnk
    integer(c_int64_t), intent(in) :: n, n1
    integer(c_int64_t), intent(out) :: rows, cols
    rows = n; cols = 1
    if (rnk >= 1 .and. n1 > 0) then
      rows = n1; cols = n / n1
    end if
  end subroutine

  subroutine fegpu_context_create(ctx, backend, device, stat, errmsg)
    type(fegpu_context), intent(out) :: ctx
    class(*), intent(in), optional :: backend, device
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: b
    integer(c_int64_t) :: d
    b = FEGPU_BACKEND_AUTO; d = 0
    if (present(backend)) b = i32(backend)
    if (present(device)) d = i64(device)
    ! messages name positions as Fortran counts them: values(1), not values[0]
    call check(c_messages_set_index_base(1_c_int32_t), 'fegpu_context_create', stat, errmsg)
    call check(c_context_create(b, d, ctx%handle), 'fegpu_context_create', stat, errmsg)
  end subroutine

  subroutine fegpu_context_destroy(ctx, stat, errmsg)
    type(fegpu_context), intent(inout) :: ctx
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_context_destroy(ctx%handle)
    if (st == FEGPU_OK) ctx%handle = 0
    call check(st, 'fegpu_context_destroy', stat, errmsg)
  end subroutine

  !> The backend the context runs on (FEGPU_BACKEND_CPU or FEGPU_BACKEND_CUDA).
  subroutine fegpu_context_backend(ctx, backend, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(out) :: backend
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: b
    b = -1
    call check(c_context_backend(ctx%handle, b), 'fegpu_context_backend', stat, errmsg)
    call put(backend, int(b, c_int64_t))
  end subroutine

  subroutine fegpu_context_synchronize(ctx, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_context_synchronize(ctx%handle), 'fegpu_context_synchronize', stat, errmsg)
  end subroutine

  subroutine array_create_r32(ctx, a, arr, count, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real32), intent(in), contiguous, target :: a(..)
    type(fegpu_array), intent(inout) :: arr
    class(*), intent(in), optional :: count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: rows, cols, n, n1
    n = elements(size(a, kind=c_int64_t), count)
    if (n < 0) then
      call assumed_size_error('fegpu_array_create', stat, errmsg)
      return
    end if
    n1 = 0
    if (rank(a) >= 1 .and. .not. present(count)) n1 = size(a, 1, kind=c_int64_t)
    call matrix_shape(rank(a), n, n1, rows, cols)
    call check(c_array_create_f32(ctx%handle, rows, cols, data_ptr32(a, n), arr%handle), 'fegpu_array_create', stat, errmsg)
  end subroutine

  subroutine array_create_r64(ctx, a, arr, count, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in), contiguous, target :: a(..)
    type(fegpu_array), intent(inout) :: arr
    class(*), intent(in), optional :: count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: rows, cols, n, n1
    n = elements(size(a, kind=c_int64_t), count)
    if (n < 0) then
      call assumed_size_error('fegpu_array_create', stat, errmsg)
      return
    end if
    n1 = 0
    if (rank(a) >= 1 .and. .not. present(count)) n1 = size(a, 1, kind=c_int64_t)
    call matrix_shape(rank(a), n, n1, rows, cols)
    call check(c_array_create_f64(ctx%handle, rows, cols, data_ptr64(a, n), arr%handle), 'fegpu_array_create', stat, errmsg)
  end subroutine

  !> An uninitialised rows x cols array; `kind` is real32 or real64.
  subroutine fegpu_array_create_empty(ctx, kind, rows, cols, arr, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(in) :: kind, rows, cols
    type(fegpu_array), intent(inout) :: arr
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: dtype
    dtype = 0
    if (i64(kind) == real32) dtype = DTYPE_F32
    if (i64(kind) == real64) dtype = DTYPE_F64
    call check(c_array_create_empty(ctx%handle, dtype, i64(rows), i64(cols), arr%handle), &
         'fegpu_array_create_empty', stat, errmsg)
  end subroutine

  subroutine fegpu_array_destroy(arr, stat, errmsg)
    type(fegpu_array), intent(inout) :: arr
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_array_destroy(arr%handle)
    if (st == FEGPU_OK) arr%handle = 0
    call check(st, 'fegpu_array_destroy', stat, errmsg)
  end subroutine

  !> rows, cols and kind (real32 or real64) of an array.
  subroutine fegpu_array_shape(arr, rows, cols, kind, stat, errmsg)
    type(fegpu_array), intent(in) :: arr
    class(*), intent(out) :: rows, cols
    class(*), intent(out), optional :: kind
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: r, c
    integer(c_int32_t) :: d
    r = 0; c = 0; d = 0
    call check(c_array_shape(arr%handle, r, c, d), 'fegpu_array_shape', stat, errmsg)
    call put(rows, r)
    call put(cols, c)
    if (present(kind)) call put(kind, int(merge(real64, real32, d == DTYPE_F64), c_int64_t))
  end subroutine

  subroutine array_upload_r32(arr, a, first, count, stat, errmsg)
    type(fegpu_array), intent(in) :: arr
    real(real32), intent(in), contiguous, target :: a(..)
    class(*), intent(in), optional :: first, count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n
    n = elements(size(a, kind=c_int64_t), count)
    if (n < 0) then
      call assumed_size_error('fegpu_array_upload', stat, errmsg)
    else if (present(first)) then
      call check(c_upload_slice_f32(arr%handle, i64(first), n, data_ptr32(a, n), 1_c_int32_t), &
           'fegpu_array_upload', stat, errmsg)
    else
      call check(c_upload_f32(arr%handle, data_ptr32(a, n), n), 'fegpu_array_upload', stat, errmsg)
    end if
  end subroutine

  subroutine array_upload_r64(arr, a, first, count, stat, errmsg)
    type(fegpu_array), intent(in) :: arr
    real(real64), intent(in), contiguous, target :: a(..)
    class(*), intent(in), optional :: first, count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n
    n = elements(size(a, kind=c_int64_t), count)
    if (n < 0) then
      call assumed_size_error('fegpu_array_upload', stat, errmsg)
    else if (present(first)) then
      call check(c_upload_slice_f64(arr%handle, i64(first), n, data_ptr64(a, n), 1_c_int32_t), &
           'fegpu_array_upload', stat, errmsg)
    else
      call check(c_upload_f64(arr%handle, data_ptr64(a, n), n), 'fegpu_array_upload', stat, errmsg)
    end if
  end subroutine

  subroutine array_download_r32(arr, a, first, count, stat, errmsg)
    type(fegpu_array), intent(in) :: arr
    real(real32), intent(inout), contiguous, target :: a(..)
    class(*), intent(in), optional :: first, count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n
    n = elements(size(a, kind=c_int64_t), count)
    if (n < 0) then
      call assumed_size_error('fegpu_array_download', stat, errmsg)
    else if (present(first)) then
      call check(c_download_slice_f32(arr%handle, i64(first), n, data_ptr32(a, n), 1_c_int32_t), &
           'fegpu_array_download', stat, errmsg)
    else
      call check(c_download_f32(arr%handle, data_ptr32(a, n), n), 'fegpu_array_download', stat, errmsg)
    end if
  end subroutine

  subroutine array_download_r64(arr, a, first, count, stat, errmsg)
    type(fegpu_array), intent(in) :: arr
    real(real64), intent(inout), contiguous, target :: a(..)
    class(*), intent(in), optional :: first, count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n
    n = elements(size(a, kind=c_int64_t), count)
    if (n < 0) then
      call assumed_size_error('fegpu_array_download', stat, errmsg)
    else if (present(first)) then
      call check(c_download_slice_f64(arr%handle, i64(first), n, data_ptr64(a, n), 1_c_int32_t), &
           'fegpu_array_download', stat, errmsg)
    else
      call check(c_download_f64(arr%handle, data_ptr64(a, n), n), 'fegpu_array_download', stat, errmsg)
    end if
  end subroutine

  subroutine host_register_r32(ctx, a, count, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real32), intent(in), contiguous, target :: a(..)
    class(*), intent(in), optional :: count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n
    n = elements(size(a, kind=c_int64_t), count)
    if (n < 0) then
      call assumed_size_error('fegpu_host_register', stat, errmsg)
      return
    end if
    call check(c_host_register(ctx%handle, data_ptr32(a, n), n * 4), 'fegpu_host_register', stat, errmsg)
  end subroutine

  subroutine host_register_r64(ctx, a, count, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in), contiguous, target :: a(..)
    class(*), intent(in), optional :: count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n
    n = elements(size(a, kind=c_int64_t), count)
    if (n < 0) then
      call assumed_size_error('fegpu_host_register', stat, errmsg)
      return
    end if
    call check(c_host_register(ctx%handle, data_ptr64(a, n), n * 8), 'fegpu_host_register', stat, errmsg)
  end subroutine

  subroutine host_unregister_r32(ctx, a, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real32), intent(in), contiguous, target :: a(..)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_host_unregister(ctx%handle, data_ptr32(a, 1_c_int64_t)), 'fegpu_host_unregister', stat, errmsg)
  end subroutine

  subroutine host_unregister_r64(ctx, a, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in), contiguous, target :: a(..)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_host_unregister(ctx%handle, data_ptr64(a, 1_c_int64_t)), 'fegpu_host_unregister', stat, errmsg)
  end subroutine

  !> dst = transpose(src) on the device (src m x n, dst n x m).
  subroutine fegpu_transpose(src, dst, variant, stat, errmsg)
    type(fegpu_array), intent(in) :: src, dst
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_transpose(src%handle, dst%handle, variant_code(variant)), 'fegpu_transpose', stat, errmsg)
  end subroutine

  !> a = transpose(a) on the device for a square array.
  subroutine fegpu_transpose_in_place(a, variant, stat, errmsg)
    type(fegpu_array), intent(in) :: a
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_transpose_in_place(a%handle, variant_code(variant)), 'fegpu_transpose_in_place', stat, errmsg)
  end subroutine

  !> dst = src on the device (same shape and kind).
  subroutine fegpu_copy(src, dst, variant, stat, errmsg)
    type(fegpu_array), intent(in) :: src, dst
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_copy(src%handle, dst%handle, variant_code(variant)), 'fegpu_copy', stat, errmsg)
  end subroutine

  subroutine transpose_host_r32(ctx, a, at, variant, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real32), intent(in), contiguous, target :: a(:, :)
    real(real32), intent(inout), contiguous, target :: at(:, :)
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(at, 1) /= size(a, 2) .or. size(at, 2) /= size(a, 1)) then
      call shape_error(shape(a), shape(at), stat, errmsg)
      return
    end if
    call check(c_transpose_host_f32(ctx%handle, size(a, 1, kind=c_int64_t), size(a, 2, kind=c_int64_t), &
         data_ptr32(a, size(a, kind=c_int64_t)), &
         data_ptr32(at, size(at, kind=c_int64_t)), variant_code(variant)), 'fegpu_transpose_host', stat, errmsg)
  end subroutine

  subroutine transpose_host_r64(ctx, a, at, variant, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in), contiguous, target :: a(:, :)
    real(real64), intent(inout), contiguous, target :: at(:, :)
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(at, 1) /= size(a, 2) .or. size(at, 2) /= size(a, 1)) then
      call shape_error(shape(a), shape(at), stat, errmsg)
      return
    end if
    call check(c_transpose_host_f64(ctx%handle, size(a, 1, kind=c_int64_t), size(a, 2, kind=c_int64_t), &
         data_ptr64(a, size(a, kind=c_int64_t)), &
         data_ptr64(at, size(at, kind=c_int64_t)), variant_code(variant)), 'fegpu_transpose_host', stat, errmsg)
  end subroutine

  subroutine transpose_host_in_place_r32(ctx, a, variant, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real32), intent(inout), contiguous, target :: a(:, :)
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(a, 1) /= size(a, 2)) then
      call shape_error(shape(a), [size(a, 2), size(a, 1)], stat, errmsg)
      return
    end if
    call check(c_transpose_host_in_place_f32(ctx%handle, size(a, 1, kind=c_int64_t), &
         data_ptr32(a, size(a, kind=c_int64_t)), variant_code(variant)), &
         'fegpu_transpose_host_in_place', stat, errmsg)
  end subroutine

  subroutine transpose_host_in_place_r64(ctx, a, variant, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(inout), contiguous, target :: a(:, :)
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(a, 1) /= size(a, 2)) then
      call shape_error(shape(a), [size(a, 2), size(a, 1)], stat, errmsg)
      return
    end if
    call check(c_transpose_host_in_place_f64(ctx%handle, size(a, 1, kind=c_int64_t), &
         data_ptr64(a, size(a, kind=c_int64_t)), variant_code(variant)), &
         'fegpu_transpose_host_in_place', stat, errmsg)
  end subroutine

  subroutine shape_error(sa, sat, stat, errmsg)
    integer, intent(in) :: sa(2), sat(2)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(len=200) :: msg
    write (msg, '(a,i0,a,i0,a,i0,a,i0)') 'a is ', sa(1), ' x ', sa(2), ' so at must be its transpose, but at is ', &
         sat(1), ' x ', sat(2)
    call size_error('fegpu_transpose_host: ' // trim(msg), stat, errmsg)
  end subroutine

  !> A size mismatch found on the Fortran side (before any C call), reported as check does.
  subroutine size_error(msg, stat, errmsg)
    character(*), intent(in) :: msg
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call refuse(int(FEGPU_ERR_SIZE_MISMATCH, c_int32_t), msg, stat, errmsg)
  end subroutine

  integer(c_int32_t) function variant_code(variant)
    class(*), intent(in), optional :: variant
    variant_code = FEGPU_VARIANT_AUTO
    if (present(variant)) variant_code = i32(variant)
  end function

  ! ---- sparse matrices and solvers ----

  subroutine csr_create_i32(ctx, nrows, ncols, row_ptr, col_ind, values, a, index_base, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(in) :: nrows, ncols
    integer(c_int32_t), intent(in) :: row_ptr(:), col_ind(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_csr), intent(inout) :: a
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(row_ptr) /= i64(nrows) + 1 .or. size(col_ind) /= size(values)) then
      call csr_size_error(size(row_ptr, kind=c_int64_t), i64(nrows), size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), &
           stat, errmsg)
      return
    end if
    call check(c_csr_create_i32(ctx%handle, i64(nrows), i64(ncols), size(values, kind=c_int64_t), &
         row_ptr, col_ind, values, base_of(index_base), a%handle), 'fegpu_csr_create', stat, errmsg)
  end subroutine

  subroutine csr_create_i64(ctx, nrows, ncols, row_ptr, col_ind, values, a, index_base, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(in) :: nrows, ncols
    integer(c_int64_t), intent(in) :: row_ptr(:), col_ind(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_csr), intent(inout) :: a
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(row_ptr) /= i64(nrows) + 1 .or. size(col_ind) /= size(values)) then
      call csr_size_error(size(row_ptr, kind=c_int64_t), i64(nrows), size(col_ind, kind=c_int64_t), size(values, kind=c_int64_t), &
           stat, errmsg)
      return
    end if
    call check(c_csr_create_i64(ctx%handle, i64(nrows), i64(ncols), size(values, kind=c_int64_t), &
         row_ptr, col_ind, values, base_of(index_base), a%handle), 'fegpu_csr_create', stat, errmsg)
  end subroutine

  subroutine csr_size_error(nrp, nrows, nci, nv, stat, errmsg)
    integer(c_int64_t), intent(in) :: nrp, nrows, nci, nv
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(len=200) :: msg
    write (msg, '(a,i0,a,i0,a,i0,a,i0)') 'size(row_ptr) = ', nrp, ' (nrows + 1 = ', nrows + 1, '), size(col_ind) = ', nci, &
         ', size(values) = ', nv
    call size_error('fegpu_csr_create: ' // trim(msg), stat, errmsg)
  end subroutine

  integer(c_int32_t) function base_of(index_base)
    class(*), intent(in), optional :: index_base
    base_of = 1
    if (present(index_base)) base_of = i32(index_base)
  end function

  !> Reads a Matrix Market coordinate file into a new matrix.
  subroutine fegpu_csr_read_mm(ctx, path, a, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    character(*), intent(in) :: path
    type(fegpu_csr), intent(inout) :: a
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_csr_read_mm(ctx%handle, trim(path) // c_null_char, a%handle), 'fegpu_csr_read_mm', stat, errmsg)
  end subroutine

  !> New values for the same pattern, in the order the matrix was created with.
  subroutine fegpu_csr_update_values(a, values, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    real(real64), intent(in) :: values(:)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_csr_update_values(a%handle, values, size(values, kind=c_int64_t)), 'fegpu_csr_update_values', stat, errmsg)
  end subroutine

  !> Rows, columns and stored entries.
  subroutine fegpu_csr_info(a, nrows, ncols, nnz, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    class(*), intent(out) :: nrows, ncols, nnz
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: r, c, z
    r = 0; c = 0; z = 0
    call check(c_csr_info(a%handle, r, c, z), 'fegpu_csr_info', stat, errmsg)
    call put(nrows, r)
    call put(ncols, c)
    call put(nnz, z)
  end subroutine

  !> Writes the matrix as a Matrix Market coordinate file (1-based, real general).
  subroutine fegpu_csr_write_mm(a, path, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    character(*), intent(in) :: path
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_csr_write_mm(a%handle, trim(path) // c_null_char), 'fegpu_csr_write_mm', stat, errmsg)
  end subroutine

  !> The stored matrix back on the host: row_ptr(nrows + 1), col_ind(nnz) and
  !> values(nnz) (sorted rows, duplicates summed), 1-based unless index_base = 0.
  subroutine fegpu_csr_download(a, row_ptr, col_ind, values, index_base, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    integer(int64), intent(inout), contiguous :: row_ptr(:), col_ind(:)
    real(real64), intent(inout), contiguous :: values(:)
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: r, c, z
    character(len=200) :: msg
    r = 0; c = 0; z = 0
    call check(c_csr_info(a%handle, r, c, z), 'fegpu_csr_download', stat, errmsg)
    if (r == 0) return
    if (size(row_ptr, kind=c_int64_t) /= r + 1 .or. size(col_ind, kind=c_int64_t) /= z .or. size(values, kind=c_int64_t) /= z) then
      write (msg, '(a,i0,a,i0,a,i0,a,i0,a,i0)') 'fegpu_csr_download: the matrix has ', r, ' rows and ', z, &
           ' entries, but size(row_ptr) = ', size(row_ptr), ', size(col_ind) = ', size(col_ind), ', size(values) = ', size(values)
      call size_error(trim(msg), stat, errmsg)
      return
    end if
    call check(c_csr_download(a%handle, row_ptr, col_ind, values, base_of(index_base)), 'fegpu_csr_download', stat, errmsg)
  end subroutine

  !> The relative residuals of the solver's last solve, one per iteration
  !> (history(1) before the first); `count` says how many there were.
  subroutine fegpu_solver_history(s, history, count, stat, errmsg)
    type(fegpu_solver), intent(in) :: s
    real(real64), intent(inout), contiguous :: history(:)
    class(*), intent(out), optional :: count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n
    n = 0
    call check(c_solver_history(s%handle, history, size(history, kind=c_int64_t), n), 'fegpu_solver_history', stat, errmsg)
    if (present(count)) call put(count, n)
  end subroutine

  !> ||x||_2 of a device array, without underflow or overflow.
  real(real64) function fegpu_nrm2(x, stat, errmsg)
    type(fegpu_array), intent(in) :: x
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    real(c_double) :: r
    r = 0
    call check(c_vector_nrm2(x%handle, r), 'fegpu_nrm2', stat, errmsg)
    fegpu_nrm2 = r
  end function

  !> The library's version (major.minor.patch).
  subroutine fegpu_version(major, minor, patch, stat, errmsg)
    class(*), intent(out) :: major, minor, patch
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: v(3)
    v = 0
    call check(c_version(v(1), v(2), v(3)), 'fegpu_version', stat, errmsg)
    call put(major, int(v(1), c_int64_t))
    call put(minor, int(v(2), c_int64_t))
    call put(patch, int(v(3), c_int64_t))
  end subroutine

  subroutine fegpu_csr_destroy(a, stat, errmsg)
    type(fegpu_csr), intent(inout) :: a
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_csr_destroy(a%handle)
    if (st == FEGPU_OK) a%handle = 0
    call check(st, 'fegpu_csr_destroy', stat, errmsg)
  end subroutine

  !> y = alpha*A*x + beta*y on device arrays (alpha = 1, beta = 0 by default).
  subroutine fegpu_spmv(a, x, y, alpha, beta, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    type(fegpu_array), intent(in) :: x, y
    real(real64), intent(in), optional :: alpha, beta
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    real(c_double) :: al, be
    al = 1; be = 0
    if (present(alpha)) al = alpha
    if (present(beta)) be = beta
    call check(c_csr_spmv(a%handle, al, x%handle, be, y%handle), 'fegpu_spmv', stat, errmsg)
  end subroutine

  !> x . y of two device arrays (only the scalar comes back).
  real(real64) function fegpu_dot(x, y, stat, errmsg)
    type(fegpu_array), intent(in) :: x, y
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    real(c_double) :: r
    r = 0
    call check(c_vector_dot(x%handle, y%handle, r), 'fegpu_dot', stat, errmsg)
    fegpu_dot = r
  end function

  !> y = alpha*x + beta*y on device arrays.
  subroutine fegpu_axpby(alpha, x, beta, y, stat, errmsg)
    real(real64), intent(in) :: alpha, beta
    type(fegpu_array), intent(in) :: x, y
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_vector_axpby(alpha, x%handle, beta, y%handle), 'fegpu_axpby', stat, errmsg)
  end subroutine

  !> A solver for A: FEGPU_METHOD_CG or _BICGSTAB, FEGPU_PRECOND_NONE, _JACOBI or _ILU0.
  subroutine fegpu_solver_create(a, method, precond, s, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    class(*), intent(in) :: method, precond
    type(fegpu_solver), intent(inout) :: s
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_solver_create(a%handle, i32(method), i32(precond), s%handle), &
         'fegpu_solver_create', stat, errmsg)
  end subroutine

  !> Solves A x = b on the device (x: initial guess in, solution out). Not
  !> converging or breaking down is an error (stat FEGPU_ERR_NOT_CONVERGED or
  !> FEGPU_ERR_BREAKDOWN); iterations and residuals are returned in every case.
  subroutine fegpu_solve(s, b, x, tol, maxit, iterations, residual, true_residual, stat, errmsg)
    type(fegpu_solver), intent(in) :: s
    type(fegpu_array), intent(in) :: b, x
    real(real64), intent(in) :: tol
    class(*), intent(in) :: maxit
    class(*), intent(out), optional :: iterations
    real(real64), intent(out), optional :: residual, true_residual
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    type(solve_info) :: info
    integer(c_int32_t) :: st
    st = c_solver_solve(s%handle, b%handle, x%handle, tol, i64(maxit), info)
    if (present(iterations)) call put(iterations, info%iterations)
    if (present(residual)) residual = info%relative_residual
    if (present(true_residual)) true_residual = info%true_relative_residual
    call check(st, 'fegpu_solve', stat, errmsg)
  end subroutine

  subroutine fegpu_solver_destroy(s, stat, errmsg)
    type(fegpu_solver), intent(inout) :: s
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_solver_destroy(s%handle)
    if (st == FEGPU_OK) s%handle = 0
    call check(st, 'fegpu_solver_destroy', stat, errmsg)
  end subroutine

  ! ---- Finite elements ----

  !> An element set on ctx's backend: coords(dim, n_nodes), conn(nodes per
  !> element, n_elements) and material(n_elements) counted from index_base
  !> (default 1), props(2, n_materials): (k, unused) for heat, (E, nu) for
  !> elasticity. order: Gauss points per direction for quad4/hex8 (default 2).
  subroutine fegpu_fem_create(ctx, element, problem, coords, conn, props, material, fem, order, index_base, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(in) :: element, problem
    real(real64), intent(in) :: coords(:, :), props(:, :)
    class(*), intent(in) :: conn(:, :), material(:)
    type(fegpu_fem), intent(out) :: fem
    class(*), intent(in), optional :: order, index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: q, base
    q = 2
    if (present(order)) q = i32(order)
    base = 1
    if (present(index_base)) base = i32(index_base)
    call check(c_fem_create(ctx%handle, i32(element), i32(problem), size(coords, 2, c_int64_t), &
         coords, size(conn, 2, c_int64_t), i64(conn), base, size(props, 2, c_int64_t), props, &
         i64(material), q, fem%handle), 'fegpu_fem_create', stat, errmsg)
  end subroutine

  !> Integrates every element matrix on the set's device (an inverted or
  !> degenerate element is named in the error).
  subroutine fegpu_fem_integrate(fem, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_fem_integrate(fem%handle), 'fegpu_fem_integrate', stat, errmsg)
  end subroutine

  !> The integration strategy: FEGPU_INTEGRATION_AUTO (default), _ELEMENT
  !> (level I), _POINT (level II) or _BLOCKED (level IIa).
  subroutine fegpu_fem_set_integration(fem, level, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    class(*), intent(in) :: level
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_fem_set_integration(fem%handle, i32(level)), 'fegpu_fem_set_integration', stat, errmsg)
  end subroutine

  !> New material parameters props(2, n_materials); integrate and assemble again after.
  subroutine fegpu_fem_set_materials(fem, props, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(in) :: props(:, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_fem_set_materials(fem%handle, size(props, 2, c_int64_t), props), 'fegpu_fem_set_materials', stat, errmsg)
  end subroutine

  !> The global matrix assembled on the device into a (the same matrix on
  !> every call: solvers created for it stay valid).
  subroutine fegpu_fem_assemble(fem, a, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    type(fegpu_csr), intent(inout) :: a
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_fem_assemble(fem%handle, a%handle), 'fegpu_fem_assemble', stat, errmsg)
  end subroutine

  !> The element matrices, ke(packed size, n_elements): each the upper triangle row by row.
  subroutine fegpu_fem_stiffness(fem, ke, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(out) :: ke(:, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_fem_stiffness_download(fem%handle, ke, size(ke, kind=c_int64_t)), 'fegpu_fem_stiffness', stat, errmsg)
  end subroutine

  subroutine fegpu_fem_destroy(fem, stat, errmsg)
    type(fegpu_fem), intent(inout) :: fem
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_fem_destroy(fem%handle)
    if (st == FEGPU_OK) fem%handle = 0
    call check(st, 'fegpu_fem_destroy', stat, errmsg)
  end subroutine

  !> The mass matrices, ce(packed size, n_elements): heat capacity (heat) or
  !> consistent mass (elasticity, with fegpu_fem_set_density).
  subroutine fegpu_fem_mass(fem, ce, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(out) :: ce(:, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_fem_mass_download(fem%handle, ce, size(ce, kind=c_int64_t)), 'fegpu_fem_mass', stat, errmsg)
  end subroutine

  !> Densities rho(n_materials) of an elasticity set (integrate again after).
  subroutine fegpu_fem_set_density(fem, rho, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(in) :: rho(:)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_fem_set_density(fem%handle, size(rho, kind=c_int64_t), rho), 'fegpu_fem_set_density', stat, errmsg)
  end subroutine

  !> An elastodynamics stepper: scheme FEGPU_SCHEME_NEWMARK (beta, gamma:
  !> default 1/4, 1/2) or FEGPU_SCHEME_CENTRAL_DIFFERENCE (lumped mass); the
  !> clamped dofs stay at zero; the first step starts from rest.
  subroutine fegpu_dynamics_create(fem, scheme, dt, clamped, dyn, beta, gamma, index_base, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    class(*), intent(in) :: scheme
    real(real64), intent(in) :: dt
    class(*), intent(in) :: clamped(:)
    type(fegpu_dynamics), intent(out) :: dyn
    real(real64), intent(in), optional :: beta, gamma
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    real(c_double) :: b, g
    integer(c_int32_t) :: base
    b = 0.25d0
    g = 0.5d0
    if (present(beta)) b = beta
    if (present(gamma)) g = gamma
    base = 1
    if (present(index_base)) base = i32(index_base)
    call check(c_dynamics_create(fem%handle, i32(scheme), dt, b, g, size(clamped, kind=c_int64_t), &
         i64(clamped), base, dyn%handle), 'fegpu_dynamics_create', stat, errmsg)
  end subroutine

  !> One step: u (device displacements) advances by dt under the load f (optional).
  subroutine fegpu_dynamics_step(dyn, u, f, tol, maxit, stat, errmsg)
    type(fegpu_dynamics), intent(in) :: dyn
    type(fegpu_array), intent(in) :: u
    type(fegpu_array), intent(in), optional :: f
    real(real64), intent(in), optional :: tol
    class(*), intent(in), optional :: maxit
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: fh, its
    real(c_double) :: t
    fh = 0
    if (present(f)) fh = f%handle
    t = 1d-10
    if (present(tol)) t = tol
    its = 10000
    if (present(maxit)) its = i64(maxit)
    call check(c_dynamics_step(dyn%handle, u%handle, fh, t, its), 'fegpu_dynamics_step', stat, errmsg)
  end subroutine

  subroutine fegpu_dynamics_destroy(dyn, stat, errmsg)
    type(fegpu_dynamics), intent(inout) :: dyn
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_dynamics_destroy(dyn%handle)
    if (st == FEGPU_OK) dyn%handle = 0
    call check(st, 'fegpu_dynamics_destroy', stat, errmsg)
  end subroutine

  !> A theta-method stepper for an integrated and assembled heat set: each
  !> step solves (C/dt + theta K) T' = (C/dt - (1 - theta) K) T + F on the
  !> device with T(dofs(i)) = values(i) held (theta 1: backward Euler, 0.5:
  !> Crank-Nicolson).
  subroutine fegpu_heat_create(fem, dt, theta, dofs, values, heat, index_base, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(in) :: dt, theta
    class(*), intent(in) :: dofs(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_heat), intent(out) :: heat
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: base
    if (size(values) /= size(dofs)) then
      call size_error('fegpu_heat_create: dofs and values differ in size', stat, errmsg)
      return
    end if
    base = 1
    if (present(index_base)) base = i32(index_base)
    call check(c_heat_create(fem%handle, dt, theta, size(dofs, kind=c_int64_t), i64(dofs), base, values, &
         heat%handle), 'fegpu_heat_create', stat, errmsg)
  end subroutine

  !> One step: t (device temperatures) advances by dt in place; f (optional)
  !> is the nodal heat load over the step.
  subroutine fegpu_heat_step(heat, t, tol, maxit, f, iterations, stat, errmsg)
    type(fegpu_heat), intent(in) :: heat
    type(fegpu_array), intent(in) :: t
    real(real64), intent(in) :: tol
    class(*), intent(in) :: maxit
    type(fegpu_array), intent(in), optional :: f
    class(*), intent(out), optional :: iterations
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    type(solve_info) :: info
    integer(c_int64_t) :: fh
    integer(c_int32_t) :: st
    fh = 0
    if (present(f)) fh = f%handle
    st = c_heat_step(heat%handle, t%handle, fh, tol, i64(maxit), info)
    if (present(iterations)) call put(iterations, info%iterations)
    call check(st, 'fegpu_heat_step', stat, errmsg)
  end subroutine

  !> Convective boundaries from the next step on (lumped): node nodes(i)
  !> exchanges h_area(i) * (t_env(i) - T); a new call replaces the previous set.
  subroutine fegpu_heat_set_convection(heat, nodes, h_area, t_env, index_base, stat, errmsg)
    type(fegpu_heat), intent(in) :: heat
    class(*), intent(in) :: nodes(:)
    real(real64), intent(in) :: h_area(:), t_env(:)
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: base
    if (size(h_area) /= size(nodes) .or. size(t_env) /= size(nodes)) then
      call size_error('fegpu_heat_set_convection: nodes, h_area and t_env differ in size', stat, errmsg)
      return
    end if
    base = 1
    if (present(index_base)) base = i32(index_base)
    call check(c_heat_set_convection(heat%handle, size(nodes, kind=c_int64_t), i64(nodes), base, h_area, t_env), &
         'fegpu_heat_set_convection', stat, errmsg)
  end subroutine

  subroutine fegpu_heat_destroy(heat, stat, errmsg)
    type(fegpu_heat), intent(inout) :: heat
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_heat_destroy(heat%handle)
    if (st == FEGPU_OK) heat%handle = 0
    call check(st, 'fegpu_heat_destroy', stat, errmsg)
  end subroutine

  !> Dirichlet conditions x(dofs(i)) = values(i) on A x = b, symmetrically
  !> (dofs counted from index_base, default 1; dof = (node - 1) * dofs per node + component).
  subroutine fegpu_csr_apply_dirichlet(a, dofs, values, b, index_base, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    class(*), intent(in) :: dofs(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_array), intent(in) :: b
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: base
    if (size(values) /= size(dofs)) then
      call size_error('fegpu_csr_apply_dirichlet: dofs and values differ in size', stat, errmsg)
      return
    end if
    base = 1
    if (present(index_base)) base = i32(index_base)
    call check(c_csr_apply_dirichlet(a%handle, size(dofs, kind=c_int64_t), i64(dofs), base, values, b%handle), &
         'fegpu_csr_apply_dirichlet', stat, errmsg)
  end subroutine

  !> An element-by-element CG solver (Jacobi) for the set's element matrices
  !> with x(dofs(i)) = values(i); on_the_fly: recompute K^e in every product.
  subroutine fegpu_ebe_create(fem, dofs, values, ebe, index_base, on_the_fly, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    class(*), intent(in) :: dofs(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_ebe), intent(out) :: ebe
    class(*), intent(in), optional :: index_base
    logical, intent(in), optional :: on_the_fly
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: base, otf
    if (size(values) /= size(dofs)) then
      call size_error('fegpu_ebe_create: dofs and values differ in size', stat, errmsg)
      return
    end if
    base = 1
    if (present(index_base)) base = i32(index_base)
    otf = 0
    if (present(on_the_fly)) otf = merge(1_c_int32_t, 0_c_int32_t, on_the_fly)
    call check(c_ebe_create(fem%handle, size(dofs, kind=c_int64_t), i64(dofs), base, values, otf, ebe%handle), &
         'fegpu_ebe_create', stat, errmsg)
  end subroutine

  !> Solves K x = b element by element (x: initial guess in, solution out; b unchanged).
  subroutine fegpu_ebe_solve(ebe, b, x, tol, maxit, iterations, residual, true_residual, stat, errmsg)
    type(fegpu_ebe), intent(in) :: ebe
    type(fegpu_array), intent(in) :: b, x
    real(real64), intent(in) :: tol
    class(*), intent(in) :: maxit
    class(*), intent(out), optional :: iterations
    real(real64), intent(out), optional :: residual, true_residual
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    type(solve_info) :: info
    integer(c_int32_t) :: st
    st = c_ebe_solve(ebe%handle, b%handle, x%handle, tol, i64(maxit), info)
    if (present(iterations)) call put(iterations, info%iterations)
    if (present(residual)) residual = info%relative_residual
    if (present(true_residual)) true_residual = info%true_relative_residual
    call check(st, 'fegpu_ebe_solve', stat, errmsg)
  end subroutine

  subroutine fegpu_ebe_destroy(ebe, stat, errmsg)
    type(fegpu_ebe), intent(inout) :: ebe
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_ebe_destroy(ebe%handle)
    if (st == FEGPU_OK) ebe%handle = 0
    call check(st, 'fegpu_ebe_destroy', stat, errmsg)
  end subroutine

  ! ---- Lattice Boltzmann (D3Q19) ----

  !> An nx x ny x nz D3Q19 lattice, BGK relaxation time tau (> 0.5), all fluid
  !> at rest with density 1. periodic: FEGPU_PERIODIC_X|Y|Z bits summed (other
  !> faces are resting walls); storage=FEGPU_DTYPE_F64 (default), _F32 or _F16 (kind=real64,
  !> real32 or FEGPU_KIND_F16 is the older form).
  subroutine fegpu_lattice_create(ctx, nx, ny, nz, tau, lat, periodic, kind, stat, errmsg, storage)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(in) :: nx, ny, nz
    real(real64), intent(in) :: tau
    type(fegpu_lattice), intent(out) :: lat
    class(*), intent(in), optional :: periodic, kind, storage
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: dtype, bits
    dtype = DTYPE_F64
    if (present(kind)) then
      if (i64(kind) == real32) dtype = DTYPE_F32
      if (i64(kind) == FEGPU_KIND_F16) dtype = DTYPE_F16
    end if
    ! storage= (FEGPU_DTYPE_F16, _F32 or _F64) says it without kind numbers;
    ! fegpu refuses any other value by name
    if (present(storage)) dtype = i32(storage)
    bits = 0
    if (present(periodic)) bits = i32(periodic)
    call check(c_lattice_create(ctx%handle, i64(nx), i64(ny), i64(nz), dtype, &
         real(tau, c_double), bits, lat%handle), 'fegpu_lattice_create', stat, errmsg)
  end subroutine

  !> flags(nx, ny, nz): FEGPU_FLUID, FEGPU_WALL or FEGPU_MOVING_WALL per site.
  subroutine fegpu_lattice_set_flags(lat, flags, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    integer(c_int8_t), intent(in) :: flags(:, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_set_flags(lat%handle, flags, size(flags, kind=c_int64_t)), 'fegpu_lattice_set_flags', stat, errmsg)
  end subroutine

  !> Body force per unit volume, force(3), on every fluid site.
  subroutine fegpu_lattice_set_force(lat, force, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: force(3)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_vector(lat%handle, force(1), force(2), force(3)), 'fegpu_lattice_set_force', stat, errmsg)
  end subroutine

  !> Velocity u(3) of the FEGPU_MOVING_WALL sites.
  subroutine fegpu_lattice_set_wall_velocity(lat, u, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: u(3)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_wall(lat%handle, u(1), u(2), u(3)), 'fegpu_lattice_set_wall_velocity', stat, errmsg)
  end subroutine

  !> TRT collision with magic parameter magic > 0 (3/16: walls exactly midway
  !> in Poiseuille flow; 1/4: most stable); 0 returns to BGK.
  subroutine fegpu_lattice_set_trt(lat, magic, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: magic
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_trt(lat%handle, magic), 'fegpu_lattice_set_trt', stat, errmsg)
  end subroutine

  !> Every site at the equilibrium of density rho and velocity u(3).
  subroutine fegpu_lattice_init_equilibrium(lat, rho, u, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: rho, u(3)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_equilibrium(lat%handle, rho, u(1), u(2), u(3)), 'fegpu_lattice_init_equilibrium', stat, errmsg)
  end subroutine

  !> f(0:18, nx, ny, nz): the serial code's populations (after streaming), Palabos order.
  subroutine fegpu_lattice_set_populations(lat, f, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: f(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_set_populations(lat%handle, f, size(f, kind=c_int64_t)), 'fegpu_lattice_set_populations', stat, errmsg)
  end subroutine

  subroutine fegpu_lattice_get_populations(lat, f, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(out) :: f(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_get_populations(lat%handle, f, size(f, kind=c_int64_t)), 'fegpu_lattice_get_populations', stat, errmsg)
  end subroutine

  !> nsteps collide-and-stream steps on the device; returns once they are queued.
  subroutine fegpu_lattice_step(lat, nsteps, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    class(*), intent(in) :: nsteps
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_step(lat%handle, i64(nsteps)), 'fegpu_lattice_step', stat, errmsg)
  end subroutine

  !> Density rho(nx, ny, k) and velocity u(3, nx, ny, k) of the k planes from
  !> z = z_first (default 1); k = size(rho, 3). Wall sites report 0.
  subroutine fegpu_lattice_fields(lat, rho, u, z_first, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(out) :: rho(:, :, :), u(:, :, :, :)
    class(*), intent(in), optional :: z_first
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: z0
    z0 = 1
    if (present(z_first)) z0 = i64(z_first)
    if (size(u) /= 3 * size(rho)) then
      call check(c_lattice_fields(lat%handle, z0, -1_c_int64_t, rho, u), 'fegpu_lattice_fields (u must be 3 x size(rho))', &
           stat, errmsg)
      return
    end if
    call check(c_lattice_fields(lat%handle, z0, size(rho, 3, kind=c_int64_t), rho, u), 'fegpu_lattice_fields', stat, errmsg)
  end subroutine

  subroutine fegpu_lattice_destroy(lat, stat, errmsg)
    type(fegpu_lattice), intent(inout) :: lat
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_lattice_destroy(lat%handle)
    if (st == FEGPU_OK) lat%handle = 0
    call check(st, 'fegpu_lattice_destroy', stat, errmsg)
  end subroutine


  ! ---- FE-IIEE rad_fields ----

  !> An accumulator on ctx for the S points points(3, n_s), n_rhs right-hand
  !> sides, wavenumber k and omega*mu (complex for lossy media). With ctx an
  !> array of CUDA contexts on distinct devices, the S points are split across them.
  subroutine radfields_create_one(ctx, points, n_rhs, k, omega_mu, acc, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: points(:, :)
    class(*), intent(in) :: n_rhs
    complex(c_double_complex), intent(in) :: k, omega_mu
    type(fegpu_radfields), intent(out) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call radfields_create_many([ctx], points, n_rhs, k, omega_mu, acc, stat, errmsg)
  end subroutine

  subroutine radfields_create_many(ctx, points, n_rhs, k, omega_mu, acc, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx(:)
    real(real64), intent(in) :: points(:, :)
    class(*), intent(in) :: n_rhs
    complex(c_double_complex), intent(in) :: k, omega_mu
    type(fegpu_radfields), intent(out) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: handles(size(ctx))
    if (size(points, 1) /= 3) then
      call size_error('fegpu_radfields_create: points must be (3, n_s)', stat, errmsg)
      return
    end if
    handles = ctx%handle
    call check(c_radfields_create_multi(size(handles, kind=c_int64_t), handles, size(points, 2, kind=c_int64_t), points, &
         i64(n_rhs), k, omega_mu, acc%handle), 'fegpu_radfields_create', stat, errmsg)
  end subroutine

  !> Adds one S' element (or a batch): points(3, n_p), weights(n_p),
  !> currents(3, 2, n_p, n_rhs) (J then M). Returns without waiting for the
  !> device; the arrays may be overwritten at once.
  subroutine fegpu_radfields_accumulate(acc, points, weights, currents, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    real(real64), intent(in) :: points(:, :), weights(:)
    complex(c_double_complex), intent(in) :: currents(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(points, 1) /= 3 .or. size(points, 2) /= size(weights) .or. size(currents, 1) /= 3 .or. &
         size(currents, 2) /= 2 .or. size(currents, 3) /= size(weights)) then
      call size_error('fegpu_radfields_accumulate: points must be (3, n_p), weights (n_p), currents (3, 2, n_p, n_rhs)', &
           stat, errmsg)
      return
    end if
    call check(c_radfields_accumulate(acc%handle, size(weights, kind=c_int64_t), points, weights, currents), &
         'fegpu_radfields_accumulate', stat, errmsg)
  end subroutine

  !> fields(3, 2, n_s, n_rhs): E then curl E, after every queued accumulation.
  subroutine fegpu_radfields_download(acc, fields, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    complex(c_double_complex), intent(out) :: fields(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_radfields_download(acc%handle, fields, size(fields, kind=c_int64_t)), 'fegpu_radfields_download', stat, errmsg)
  end subroutine

  !> Zeroes the fields for the next FE-IIEE iteration.
  subroutine fegpu_radfields_reset(acc, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_radfields_reset(acc%handle), 'fegpu_radfields_reset', stat, errmsg)
  end subroutine

  !> Pairs of coincident S and S' points skipped since creation or the last reset.
  subroutine fegpu_radfields_excluded(acc, count, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    integer(c_int64_t), intent(out) :: count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_radfields_excluded(acc%handle, count), 'fegpu_radfields_excluded', stat, errmsg)
  end subroutine

  !> FEGPU_RADFIELDS_AUTO (default), _DIRECT or _TILED.
  subroutine fegpu_radfields_set_variant(acc, variant, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    class(*), intent(in) :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_radfields_set_variant(acc%handle, i32(variant)), 'fegpu_radfields_set_variant', stat, errmsg)
  end subroutine

  subroutine fegpu_radfields_destroy(acc, stat, errmsg)
    type(fegpu_radfields), intent(inout) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_radfields_destroy(acc%handle)
    if (st == FEGPU_OK) acc%handle = 0
    call check(st, 'fegpu_radfields_destroy', stat, errmsg)
  end subroutine

  !> The one-call form: fields(3, 2, n_s, n_rhs) radiated by all of S' at once.
  subroutine fegpu_radfields_compute(ctx, s_points, p_points, weights, currents, k, omega_mu, fields, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: s_points(:, :), p_points(:, :), weights(:)
    complex(c_double_complex), intent(in) :: currents(:, :, :, :), k, omega_mu
    complex(c_double_complex), intent(out) :: fields(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(s_points, 1) /= 3 .or. size(p_points, 1) /= 3 .or. size(p_points, 2) /= size(weights) .or. &
         any(shape(currents) /= [3, 2, size(weights), size(currents, 4)]) .or. &
         any(shape(fields) /= [3, 2, size(s_points, 2), size(currents, 4)])) then
      call size_error('fegpu_radfields_compute: s_points must be (3, n_s), p_points (3, n_p), weights (n_p), '// &
           'currents (3, 2, n_p, n_rhs), fields (3, 2, n_s, n_rhs)', stat, errmsg)
      return
    end if
    call check(c_radfields_compute(ctx%handle, size(s_points, 2, kind=c_int64_t), s_points, size(weights, kind=c_int64_t), &
         p_points, weights, currents, size(currents, 4, kind=c_int64_t), k, omega_mu, fields), 'fegpu_radfields_compute', &
         stat, errmsg)
  end subroutine


  ! ---- Pipelines on host arrays and the profile ----

  !> y = a x + b y on host arrays, pipelined through the device in chunks.
  !> strategy: FEGPU_PIPELINE_AUTO (default), _SERIAL, _PER_CHUNK or _STAGED;
  !> n_streams 1..16 (default: the overlap model's choice); n_chunks (default
  !> one per stream). Register x and y with fegpu_host_register for full speed.
  subroutine fegpu_pipeline_axpby(ctx, a, x, b, y, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: a, b, x(:)
    real(real64), intent(inout) :: y(:)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(x) /= size(y)) then
      call size_error('fegpu_pipeline_axpby: x and y must have the same size', stat, errmsg)
      return
    end if
    call check(c_pipeline_axpby(ctx%handle, size(y, kind=c_int64_t), a, x, b, y, opt32(strategy), opt64(n_streams), &
         opt64(n_chunks)), 'fegpu_pipeline_axpby', stat, errmsg)
  end subroutine

  !> out(j) = dot_product(a(:, j), b(:, j)) for every column, pipelined by columns.
  subroutine fegpu_pipeline_column_dots(ctx, a, b, out, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: a(:, :), b(:, :)
    real(real64), intent(out) :: out(:)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (any(shape(a) /= shape(b)) .or. size(out) /= size(a, 2)) then
      call size_error('fegpu_pipeline_column_dots: a and b must have the same shape and out one element per column', &
           stat, errmsg)
      return
    end if
    call check(c_pipeline_column_dots(ctx%handle, size(a, 1, kind=c_int64_t), size(a, 2, kind=c_int64_t), a, b, out, &
         opt32(strategy), opt64(n_streams), opt64(n_chunks)), 'fegpu_pipeline_column_dots', stat, errmsg)
  end subroutine

  !> c = alpha a b + beta c (cuBLAS); a goes to the device once, b and c in column panels.
  subroutine fegpu_pipeline_gemm(ctx, alpha, a, b, beta, c, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: alpha, beta, a(:, :), b(:, :)
    real(real64), intent(inout) :: c(:, :)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(a, 2) /= size(b, 1) .or. size(c, 1) /= size(a, 1) .or. size(c, 2) /= size(b, 2)) then
      call size_error('fegpu_pipeline_gemm: a (m x k), b (k x n), c (m x n) do not agree', stat, errmsg)
      return
    end if
    call check(c_pipeline_gemm(ctx%handle, size(a, 1, kind=c_int64_t), size(b, 2, kind=c_int64_t), size(a, 2, kind=c_int64_t), &
         alpha, a, b, beta, c, opt32(strategy), opt64(n_streams), opt64(n_chunks)), 'fegpu_pipeline_gemm', stat, errmsg)
  end subroutine

  !> y = alpha a x + beta y (cuBLAS); a moves in row panels, x once.
  subroutine fegpu_pipeline_gemv(ctx, alpha, a, x, beta, y, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: alpha, beta, a(:, :), x(:)
    real(real64), intent(inout) :: y(:)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(a, 2) /= size(x) .or. size(a, 1) /= size(y)) then
      call size_error('fegpu_pipeline_gemv: a (m x n), x (n), y (m) do not agree', stat, errmsg)
      return
    end if
    call check(c_pipeline_gemv(ctx%handle, size(a, 1, kind=c_int64_t), size(a, 2, kind=c_int64_t), alpha, a, x, beta, y, &
         opt32(strategy), opt64(n_streams), opt64(n_chunks)), 'fegpu_pipeline_gemv', stat, errmsg)
  end subroutine

  !> at = transpose(a), in column panels of a.
  subroutine fegpu_pipeline_transpose(ctx, a, at, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: a(:, :)
    real(real64), intent(out) :: at(:, :)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(at, 1) /= size(a, 2) .or. size(at, 2) /= size(a, 1)) then
      call size_error('fegpu_pipeline_transpose: at must be the transpose shape of a', stat, errmsg)
      return
    end if
    call check(c_pipeline_transpose(ctx%handle, size(a, 1, kind=c_int64_t), size(a, 2, kind=c_int64_t), a, at, &
         opt32(strategy), opt64(n_streams), opt64(n_chunks)), 'fegpu_pipeline_transpose', stat, errmsg)
  end subroutine

  integer(c_int32_t) function opt32(v)
    class(*), intent(in), optional :: v
    opt32 = 0
    if (present(v)) opt32 = i32(v)
  end function
  integer(c_int64_t) function opt64(v)
    class(*), intent(in), optional :: v
    opt64 = 0
    if (present(v)) opt64 = i64(v)
  end function

  !> Records where the context's time goes (as FEGPU_PROFILE=1 does).
  subroutine fegpu_profile_enable(ctx, on, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    logical, intent(in) :: on
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: flag
    flag = 0
    if (on) flag = 1
    call check(c_profile_enable(ctx%handle, flag), 'fegpu_profile_enable', stat, errmsg)
  end subroutine

  !> Prints the profile table; with json_path, also writes it as JSON.
  subroutine fegpu_profile_report(ctx, json_path, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    character(*), intent(in), optional :: json_path
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(kind=c_char, len=:), allocatable, target :: path
    if (present(json_path)) then
      path = trim(json_path) // c_null_char
      call check(c_profile_report(ctx%handle, c_loc(path)), 'fegpu_profile_report', stat, errmsg)
    else
      call check(c_profile_report(ctx%handle, c_null_ptr), 'fegpu_profile_report', stat, errmsg)
    end if
  end subroutine

end module fegpu
