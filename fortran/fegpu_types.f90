!> The codes, kinds and handle types of fegpu.h, shared by every topic module
!> (fegpu re-exports them all).
module fegpu_types
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_int64_t, c_double
  use, intrinsic :: iso_fortran_env, only: int32, int64, real32, real64
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
  !> The kinds the examples use, so `use fegpu` alone is enough.
  public :: int32, int64, real32, real64
  !> storage= of fegpu_lattice_create (as fegpu.h): f16 (f32 arithmetic), f32 or f64 populations.
  integer, parameter, public :: FEGPU_DTYPE_F32 = 1, FEGPU_DTYPE_F64 = 2, FEGPU_DTYPE_F16 = 3
  !> The older kind= form's f16 sentinel: kind=real32 or real64 otherwise.
  !> Where kind numbers are not byte sizes (NAG: real64 = 2) it equals a real
  !> kind and kind= means that kind; storage=FEGPU_DTYPE_F16 is the portable form.
  integer, parameter, public :: FEGPU_KIND_F16 = 2

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

  !> An incremental thermal-stress solve (age, creep) with its state on the device.
  type, bind(C), public :: fegpu_stress
    integer(c_int64_t) :: handle
  end type fegpu_stress

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

  integer, parameter, public :: FEGPU_RADFIELDS_AUTO = 0, FEGPU_RADFIELDS_DIRECT = 1, FEGPU_RADFIELDS_TILED = 2

  integer, parameter, public :: FEGPU_PERIODIC_X = 1, FEGPU_PERIODIC_Y = 2, FEGPU_PERIODIC_Z = 4
  integer, parameter, public :: FEGPU_FLUID = 0, FEGPU_WALL = 1, FEGPU_MOVING_WALL = 2, FEGPU_VELOCITY_BC = 3, &
       FEGPU_PRESSURE_BC = 4

  integer, parameter, public :: FEGPU_METHOD_CG = 1, FEGPU_METHOD_BICGSTAB = 2, FEGPU_METHOD_GMRES = 3, &
       FEGPU_METHOD_BICG = 4, FEGPU_METHOD_CGS = 5
  integer, parameter, public :: FEGPU_PRECOND_NONE = 0, FEGPU_PRECOND_JACOBI = 1, FEGPU_PRECOND_ILU0 = 2, FEGPU_PRECOND_AMG = 3, &
       FEGPU_PRECOND_ILU0_JACOBI = 4, FEGPU_PRECOND_ILU0_MULTICOLOUR = 5, FEGPU_PRECOND_ILU0_MULTICOLOUR_SPLIT = 6
  integer, parameter, public :: FEGPU_SMOOTHER_AUTO = 0, FEGPU_SMOOTHER_CHEBYSHEV = 1, FEGPU_SMOOTHER_L1_JACOBI = 2, &
       FEGPU_SMOOTHER_GAUSS_SEIDEL = 3
  integer, parameter, public :: FEGPU_CYCLE_V = 0, FEGPU_CYCLE_W = 1, FEGPU_CYCLE_HYBRID = 2
  integer, parameter, public :: FEGPU_AGGREGATION_GREEDY = 0, FEGPU_AGGREGATION_PARALLEL = 1

  !> fegpu_amg_options of fegpu.h, initialised to the defaults: change the
  !> fields you tune and pass it to fegpu_solver_create_amg.
  type, bind(C), public :: fegpu_amg_options
    !> Strength threshold theta in [0, 1] (0: every connection is strong).
    real(c_double) :: strength = 0
    !> FEGPU_SMOOTHER_AUTO (Chebyshev if A is symmetric, else l1-Jacobi), _CHEBYSHEV, _L1_JACOBI,
    !> _GAUSS_SEIDEL (symmetric, in the rows' order: fewest iterations on jumps and convection).
    integer(c_int32_t) :: smoother = FEGPU_SMOOTHER_AUTO
    !> Chebyshev degree or l1-Jacobi sweeps, 1 to 16; Gauss-Seidel sweeps, 1 to 8 (0: 2, or 1 for Gauss-Seidel).
    integer(c_int32_t) :: sweeps = 0
    !> Rows at which coarsening stops (the coarsest level, up to 4,096 rows, is inverted densely:
    !> O(n**3), seconds on the host at thousands); at most this many levels.
    integer(c_int64_t) :: coarsest = 256, max_levels = 20
    !> 1: smoothed aggregation; 0: plain aggregation.
    integer(c_int32_t) :: smooth_prolongator = 1
    !> Unknowns per node, numbered node by node (3 for 3-D elasticity).
    integer(c_int32_t) :: block_size = 1
    !> 1: the V-cycle reads its matrices' values rounded to f32 (a third fewer bytes a nonzero).
    integer(c_int32_t) :: f32_cycle = 0
    !> FEGPU_CYCLE_V, or FEGPU_CYCLE_W: each coarse level visited twice (fewer, dearer iterations),
    !> or FEGPU_CYCLE_HYBRID: twice only where a level has at most a quarter of the nonzeros of the one above.
    integer(c_int32_t) :: cycle = FEGPU_CYCLE_V
    !> FEGPU_AGGREGATION_GREEDY (pyamg's sweep, on the host), or FEGPU_AGGREGATION_PARALLEL: the same
    !> aggregates in parallel rounds; on the GPU a scalar system's whole setup runs there (a single solve).
    integer(c_int32_t) :: aggregation = FEGPU_AGGREGATION_GREEDY
  end type fegpu_amg_options

  integer, parameter, public :: FEGPU_ELEMENT_TRI3 = 1, FEGPU_ELEMENT_QUAD4 = 2, FEGPU_ELEMENT_TET4 = 3, FEGPU_ELEMENT_HEX8 = 4
  integer, parameter, public :: FEGPU_ELEMENT_TRI6 = 5, FEGPU_ELEMENT_QUAD8 = 6, FEGPU_ELEMENT_TET10 = 7, FEGPU_ELEMENT_HEX20 = 8
  integer, parameter, public :: FEGPU_PROBLEM_HEAT = 1, FEGPU_PROBLEM_PLANE_STRESS = 2, FEGPU_PROBLEM_PLANE_STRAIN = 3, &
       FEGPU_PROBLEM_ELASTIC_3D = 4
  integer, parameter, public :: FEGPU_SCHEME_NEWMARK = 1, FEGPU_SCHEME_CENTRAL_DIFFERENCE = 2, FEGPU_SCHEME_TOTAL_LAGRANGIAN = 3
  integer, parameter, public :: FEGPU_FACE_TRACTION = 1, FEGPU_FACE_PRESSURE = 2, FEGPU_FACE_FLUX = 3
  integer, parameter, public :: FEGPU_INTEGRATION_AUTO = 0, FEGPU_INTEGRATION_ELEMENT = 1, FEGPU_INTEGRATION_POINT = 2, &
       FEGPU_INTEGRATION_BLOCKED = 3


  !> fegpu_op_profile of fegpu.h: one pipelined operation's profile.
  type, bind(C), public :: fegpu_op_profile
    integer(c_int64_t) :: calls = 0, h2d_bytes = 0, d2h_bytes = 0
    real(c_double) :: h2d_seconds = 0, d2h_seconds = 0, kernel_seconds = 0, wall_seconds = 0
    !> The serial host loop's time for the same work.
    real(c_double) :: serial_seconds = 0
  end type fegpu_op_profile
end module fegpu_types
