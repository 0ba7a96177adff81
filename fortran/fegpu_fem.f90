!> Finite elements: element sets and their integration, assembly, the
!> element-by-element CG solver, and the heat and elastodynamics steppers.
module fegpu_fem_m
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_int64_t, c_double
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use fegpu_types
  use fegpu_support
  implicit none
  private
  public :: fegpu_fem_create, fegpu_fem_integrate, fegpu_fem_set_integration, fegpu_fem_set_materials, fegpu_fem_set_density
  public :: fegpu_fem_assemble, fegpu_fem_stiffness, fegpu_fem_mass, fegpu_fem_packed_size, fegpu_fem_destroy, fegpu_fem_shape
  public :: fegpu_ebe_create, fegpu_ebe_solve, fegpu_ebe_destroy
  public :: fegpu_heat_create, fegpu_heat_step, fegpu_heat_set_convection, fegpu_heat_destroy
  public :: fegpu_dynamics_create, fegpu_dynamics_step, fegpu_dynamics_destroy
  public :: fegpu_fem_ebe_create, fegpu_fem_ebe_solve, fegpu_fem_ebe_destroy, fegpu_fem_heat_create &
       , fegpu_fem_heat_step, fegpu_fem_heat_set_convection, fegpu_fem_heat_destroy, fegpu_fem_dynamics_create &
       , fegpu_fem_dynamics_step, fegpu_fem_dynamics_destroy, fegpu_fem_stiffness_download, fegpu_fem_mass_download
  public :: fegpu_fem_dynamics_set_damping, fegpu_fem_dynamics_set_displacements, fegpu_fem_heat_set_fixed
  public :: fegpu_fem_heat_set_dt, fegpu_fem_body_load, fegpu_fem_face_load, fegpu_fem_internal_force
  public :: fegpu_fem_heat_set_convection_faces
  public :: fegpu_fem_stress_create, fegpu_fem_stress_step, fegpu_fem_stress_download, fegpu_fem_stress_displacements
  public :: fegpu_fem_stress_destroy

  !> The C names (fegpu.h); the shorter names are the older ones.
  interface fegpu_fem_ebe_create
    module procedure fegpu_ebe_create
  end interface
  interface fegpu_fem_ebe_solve
    module procedure fegpu_ebe_solve
  end interface
  interface fegpu_fem_ebe_destroy
    module procedure fegpu_ebe_destroy
  end interface
  interface fegpu_fem_heat_create
    module procedure fegpu_heat_create
  end interface
  interface fegpu_fem_heat_step
    module procedure fegpu_heat_step
  end interface
  interface fegpu_fem_heat_set_convection
    module procedure fegpu_heat_set_convection
  end interface
  interface fegpu_fem_heat_destroy
    module procedure fegpu_heat_destroy
  end interface
  interface fegpu_fem_dynamics_create
    module procedure fegpu_dynamics_create
  end interface
  interface fegpu_fem_dynamics_step
    module procedure fegpu_dynamics_step
  end interface
  interface fegpu_fem_dynamics_destroy
    module procedure fegpu_dynamics_destroy
  end interface
  interface fegpu_fem_stiffness_download
    module procedure fegpu_fem_stiffness
  end interface
  interface fegpu_fem_mass_download
    module procedure fegpu_fem_mass
  end interface

  interface
    integer(c_int32_t) function c_fem_packed_size(fem, size) bind(C, name='fegpu_fem_packed_size')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: fem
      integer(c_int64_t), intent(out) :: size
    end function
  end interface

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
    integer(c_int32_t) function c_element_shape(element, nodes, dim, face_nodes) bind(C, name='fegpu_element_shape')
      import :: c_int32_t
      integer(c_int32_t), value :: element
      integer(c_int32_t), intent(out) :: nodes, dim, face_nodes
    end function
    integer(c_int32_t) function c_fem_shape(fem, element, nodes, elements, materials) bind(C, name='fegpu_fem_shape')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: fem
      integer(c_int32_t), intent(out) :: element
      integer(c_int64_t), intent(out) :: nodes, elements, materials
    end function
    integer(c_int32_t) function c_heat_shape(heat, element, nodes, elements) bind(C, name='fegpu_fem_heat_shape')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: heat
      integer(c_int32_t), intent(out) :: element
      integer(c_int64_t), intent(out) :: nodes, elements
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
    integer(c_int32_t) function c_fem_mass_download(fem, ce, n) bind(C, name='fegpu_fem_mass_download')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      real(c_double), intent(out) :: ce(*)
    end function
    integer(c_int32_t) function c_fem_set_density(fem, n, rho) bind(C, name='fegpu_fem_set_density')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      real(c_double), intent(in) :: rho(*)
    end function
    integer(c_int32_t) function c_fem_destroy(fem) bind(C, name='fegpu_fem_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: fem
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
    integer(c_int32_t) function c_heat_set_fixed(heat, n, dofs, base, values) bind(C, name='fegpu_fem_heat_set_fixed')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: heat, n
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(in) :: dofs(*)
      real(c_double), intent(in) :: values(*)
    end function
    integer(c_int32_t) function c_heat_set_convection_faces(heat, n, faces, base, h, t_env) &
         bind(C, name='fegpu_fem_heat_set_convection_faces')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: heat, n
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(in) :: faces(*)
      real(c_double), intent(in) :: h(*), t_env(*)
    end function
    integer(c_int32_t) function c_body_load(fem, n, values, f) bind(C, name='fegpu_fem_body_load')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n, f
      real(c_double), intent(in) :: values(*)
    end function
    integer(c_int32_t) function c_face_load(fem, kind, n, faces, base, values, f) bind(C, name='fegpu_fem_face_load')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n, f
      integer(c_int32_t), value :: kind, base
      integer(c_int64_t), intent(in) :: faces(*)
      real(c_double), intent(in) :: values(*)
    end function
    integer(c_int32_t) function c_internal_force(fem, alpha, u, f) bind(C, name='fegpu_fem_internal_force')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, u, f
      real(c_double), value :: alpha
    end function
    integer(c_int32_t) function c_stress_create(fem, terms, laws, cast, t0, temperature, n, fixed, base, stress) &
         bind(C, name='fegpu_fem_stress_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem, n
      integer(c_int32_t), value :: terms, base
      real(c_double), intent(in) :: laws(*), cast(*), temperature(*)
      real(c_double), value :: t0
      integer(c_int64_t), intent(in) :: fixed(*)
      integer(c_int64_t), intent(out) :: stress
    end function
    integer(c_int32_t) function c_stress_step(stress, dt, t, load, tol, maxit, info) bind(C, name='fegpu_fem_stress_step')
      import :: c_int32_t, c_int64_t, c_double, solve_info
      integer(c_int64_t), value :: stress, t, load, maxit
      real(c_double), value :: dt, tol
      type(solve_info), intent(out) :: info
    end function
    integer(c_int32_t) function c_stress_download(stress, nodal, out, n) bind(C, name='fegpu_fem_stress_download')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: stress, n
      integer(c_int32_t), value :: nodal
      real(c_double), intent(out) :: out(*)
    end function
    integer(c_int32_t) function c_stress_displacements(stress, out, n) bind(C, name='fegpu_fem_stress_displacements')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: stress, n
      real(c_double), intent(out) :: out(*)
    end function
    integer(c_int32_t) function c_stress_destroy(stress) bind(C, name='fegpu_fem_stress_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: stress
    end function
    integer(c_int32_t) function c_heat_set_dt(heat, dt) bind(C, name='fegpu_fem_heat_set_dt')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: heat
      real(c_double), value :: dt
    end function
    integer(c_int32_t) function c_heat_destroy(heat) bind(C, name='fegpu_fem_heat_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: heat
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
    integer(c_int32_t) function c_dynamics_set_damping(dyn, alpha, beta) bind(C, name='fegpu_fem_dynamics_set_damping')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: dyn
      real(c_double), value :: alpha, beta
    end function
    integer(c_int32_t) function c_dynamics_set_displacements(dyn, values, n) &
         bind(C, name='fegpu_fem_dynamics_set_displacements')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: dyn, n
      real(c_double), intent(in) :: values(*)
    end function
    integer(c_int32_t) function c_dynamics_destroy(dyn) bind(C, name='fegpu_fem_dynamics_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: dyn
    end function
  end interface

contains

  !> An element set on ctx's backend: coords(dim, n_nodes), conn(nodes per
  !> element, n_elements) and material(n_elements) counted from index_base
  !> (default 1), props(2, n_materials): (k, rho c) for heat, (E, nu) for
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
    integer(c_int32_t) :: npe, dim, npf
    character(len=200) :: msg
    q = 2
    if (present(order)) q = i32(order)
    base = 1
    if (present(index_base)) base = i32(index_base)
    ! C reads dim x nodes, npe x elements, 2 x materials and elements values: the shapes are checked here
    npe = 0; dim = 0
    call check(c_element_shape(i32(element), npe, dim, npf), 'fegpu_fem_create', stat, errmsg)
    if (npe == 0) return
    if (size(coords, 1) /= dim .or. size(conn, 1) /= npe .or. size(props, 1) /= 2 .or. size(material) /= size(conn, 2)) then
      write (msg, '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a,i0)') 'coords(', dim, ', nodes), conn(', npe, &
           ', elements), props(2, materials) and material(elements) expected; got coords(', size(coords, 1), &
           ', :), conn(', size(conn, 1), ', ', size(conn, 2), '), props(', size(props, 1), ', :), material(', size(material)
      call size_error('fegpu_fem_create: ' // trim(msg) // ')', stat, errmsg)
      return
    end if
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
    if (size(props, 1) /= 2) then
      call size_error('fegpu_fem_set_materials: props(2, n_materials) expected', stat, errmsg)
      return
    end if
    call check(c_fem_set_materials(fem%handle, size(props, 2, c_int64_t), props), 'fegpu_fem_set_materials', stat, errmsg)
  end subroutine

  !> Densities rho(n_materials) of an elasticity set (integrate again after).
  subroutine fegpu_fem_set_density(fem, rho, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(in) :: rho(:)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_fem_set_density(fem%handle, size(rho, kind=c_int64_t), rho), 'fegpu_fem_set_density', stat, errmsg)
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

  !> The mass matrices, ce(packed size, n_elements): heat capacity (heat) or
  !> consistent mass (elasticity, with fegpu_fem_set_density).
  subroutine fegpu_fem_mass(fem, ce, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(out) :: ce(:, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_fem_mass_download(fem%handle, ce, size(ce, kind=c_int64_t)), 'fegpu_fem_mass', stat, errmsg)
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
    call solve_result(st, info, 'fegpu_ebe_solve', iterations, residual, true_residual, stat, errmsg)
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

  !> New fixed temperatures for the following steps (dofs not listed are free).
  subroutine fegpu_fem_heat_set_fixed(heat, dofs, values, index_base, stat, errmsg)
    type(fegpu_heat), intent(in) :: heat
    class(*), intent(in) :: dofs(:)
    real(real64), intent(in) :: values(:)
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: base
    if (size(values) /= size(dofs)) then
      call size_error('fegpu_fem_heat_set_fixed: dofs and values differ in size', stat, errmsg)
      return
    end if
    base = 1
    if (present(index_base)) base = i32(index_base)
    call check(c_heat_set_fixed(heat%handle, size(dofs, kind=c_int64_t), i64(dofs), base, values), &
         'fegpu_fem_heat_set_fixed', stat, errmsg)
  end subroutine

  !> Convection on element faces from the next step on: face i (its nodes
  !> faces(:, i), ordered as for fegpu_fem_face_load) exchanges
  !> h(i) * (t_env(i) - T) per unit area, integrated over the face. A new call
  !> replaces the previous faces (none removes them); the nodal form stays.
  subroutine fegpu_fem_heat_set_convection_faces(heat, faces, h, t_env, index_base, stat, errmsg)
    type(fegpu_heat), intent(in) :: heat
    class(*), intent(in) :: faces(:, :)
    real(real64), intent(in) :: h(:), t_env(:)
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: base, element, npe, dim, npf
    integer(c_int64_t) :: nodes, elements
    character(len=120) :: msg
    if (size(h) /= size(faces, 2) .or. size(t_env) /= size(faces, 2)) then
      call size_error('fegpu_fem_heat_set_convection_faces: faces(:, i), h and t_env differ in count', stat, errmsg)
      return
    end if
    ! C reads nodes-per-face x n_faces nodes: checked here
    npf = 0; element = 0
    call check(c_heat_shape(heat%handle, element, nodes, elements), 'fegpu_fem_heat_set_convection_faces', stat, errmsg)
    if (element > 0) call check(c_element_shape(element, npe, dim, npf), 'fegpu_fem_heat_set_convection_faces', &
         stat, errmsg)
    if (npf == 0) return
    if (size(faces, 1) /= npf) then
      write (msg, '(a,i0,a,i0,a)') 'faces(', npf, ', n_faces) expected; got faces(', size(faces, 1), ', :)'
      call size_error('fegpu_fem_heat_set_convection_faces: ' // trim(msg), stat, errmsg)
      return
    end if
    base = 1
    if (present(index_base)) base = i32(index_base)
    call check(c_heat_set_convection_faces(heat%handle, size(faces, 2, kind=c_int64_t), i64(faces), &
         base, h, t_env), 'fegpu_fem_heat_set_convection_faces', stat, errmsg)
  end subroutine

  !> f = f + the integral of N^T b over every element: values(:, e) is element
  !> e's body force per unit volume (dofs per node values; a heat source for
  !> heat sets). f: the set's load vector on the device.
  subroutine fegpu_fem_body_load(fem, values, f, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(in) :: values(:, :)
    type(fegpu_array), intent(in) :: f
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_body_load(fem%handle, size(values, kind=c_int64_t), values, f%handle), 'fegpu_fem_body_load', &
         stat, errmsg)
  end subroutine

  !> f = f + face integrals of kind FEGPU_FACE_TRACTION (values(1:dim, i)),
  !> FEGPU_FACE_PRESSURE or FEGPU_FACE_FLUX (values(1, i)) over the faces
  !> faces(:, i): 2 nodes per edge of a 2-D element (the body on the left),
  !> 3 per triangle of tet4, 4 per quadrilateral of hex8 (counter-clockwise
  !> seen from outside).
  subroutine fegpu_fem_face_load(fem, kind, faces, values, f, index_base, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    class(*), intent(in) :: kind
    class(*), intent(in) :: faces(:, :)
    real(real64), intent(in) :: values(:, :)
    type(fegpu_array), intent(in) :: f
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: base, element, npe, dim, npf, per_face
    integer(c_int64_t) :: nodes, elements, materials
    character(len=200) :: msg
    if (size(values, 2) /= size(faces, 2)) then
      call size_error('fegpu_fem_face_load: faces(:, i) and values(:, i) differ in count', stat, errmsg)
      return
    end if
    ! C reads nodes-per-face x n_faces nodes and dim (tractions) or 1 values a face: checked here
    npf = 0; element = 0
    call check(c_fem_shape(fem%handle, element, nodes, elements, materials), 'fegpu_fem_face_load', stat, errmsg)
    if (element > 0) call check(c_element_shape(element, npe, dim, npf), 'fegpu_fem_face_load', stat, errmsg)
    if (npf == 0) return
    per_face = 1
    if (i64(kind) == FEGPU_FACE_TRACTION) per_face = dim
    if (size(faces, 1) /= npf .or. size(values, 1) /= per_face) then
      write (msg, '(a,i0,a,i0,a,i0,a,i0,a)') 'faces(', npf, ', n_faces) and values(', per_face, &
           ', n_faces) expected; got faces(', size(faces, 1), ', :) and values(', size(values, 1), ', :)'
      call size_error('fegpu_fem_face_load: ' // trim(msg), stat, errmsg)
      return
    end if
    base = 1
    if (present(index_base)) base = i32(index_base)
    call check(c_face_load(fem%handle, i32(kind), size(faces, 2, kind=c_int64_t), i64(faces), &
         base, values, f%handle), 'fegpu_fem_face_load', stat, errmsg)
  end subroutine

  !> f = f + alpha * f_int(u): the total Lagrangian internal forces (St
  !> Venant-Kirchhoff, large rotations and strains) at the displacements u.
  subroutine fegpu_fem_internal_force(fem, alpha, u, f, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(in) :: alpha
    type(fegpu_array), intent(in) :: u, f
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_internal_force(fem%handle, alpha, u%handle, f%handle), 'fegpu_fem_internal_force', stat, errmsg)
  end subroutine

  !> An incremental thermal-stress solve on a 3-D elasticity set: laws(:, m)
  !> = [law, E0, a, b, alpha, g_inf, c, d, (f, g, q, r) per creep term] (law 0:
  !> E0 (1 - exp(-a tau^b)), 1: E0 tau / (a + tau), 2: E0; autogenous strain
  !> g_inf (1 - exp(-c tau^d)); creep (f + g tau^-q) (1 - exp(-r (t - tau)))),
  !> cast(e) each element's casting time, from t0 and the nodes' temperature;
  !> the dofs fixed stay at zero displacement.
  subroutine fegpu_fem_stress_create(fem, laws, cast, t0, temperature, fixed, stress, index_base, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    real(real64), intent(in) :: laws(:, :), cast(:), t0, temperature(:)
    class(*), intent(in) :: fixed(:)
    type(fegpu_stress), intent(out) :: stress
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: base, element
    integer(c_int64_t) :: nodes, elements, materials
    base = 1
    if (present(index_base)) base = i32(index_base)
    if (size(laws, 1) < 8 .or. mod(size(laws, 1) - 8, 4) /= 0) then
      call size_error('fegpu_fem_stress_create: laws(:, m) holds 8 + 4 x (creep terms) values', stat, errmsg)
      return
    end if
    ! C reads laws for every material, cast for every element, temperature for every node: checked here
    nodes = -1
    call check(c_fem_shape(fem%handle, element, nodes, elements, materials), 'fegpu_fem_stress_create', stat, errmsg)
    if (nodes < 0) return
    if (size(laws, 2) /= materials .or. size(cast) /= elements .or. size(temperature) /= nodes) then
      call size_error('fegpu_fem_stress_create: laws(:, n_materials), cast(n_elements) and temperature(n_nodes) expected', &
           stat, errmsg)
      return
    end if
    call check(c_stress_create(fem%handle, int((size(laws, 1) - 8) / 4, c_int32_t), laws, cast, t0, temperature, &
         size(fixed, kind=c_int64_t), i64(fixed), base, stress%handle), 'fegpu_fem_stress_create', stat, errmsg)
  end subroutine

  !> One step of dt to the temperatures t (the heat stepper's device array),
  !> with an optional increment of nodal loads.
  subroutine fegpu_fem_stress_step(stress, dt, t, load, tol, maxit, iterations, stat, errmsg)
    type(fegpu_stress), intent(in) :: stress
    real(real64), intent(in) :: dt
    type(fegpu_array), intent(in) :: t
    type(fegpu_array), intent(in), optional :: load
    real(real64), intent(in), optional :: tol
    class(*), intent(in), optional :: maxit
    class(*), intent(out), optional :: iterations
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    type(solve_info) :: info
    integer(c_int64_t) :: lh, its
    real(c_double) :: tl
    integer(c_int32_t) :: st
    lh = 0
    if (present(load)) lh = load%handle
    tl = 1d-10
    if (present(tol)) tl = tol
    its = 10000
    if (present(maxit)) its = i64(maxit)
    st = c_stress_step(stress%handle, dt, t%handle, lh, tl, its, info)
    if (present(iterations)) call put(iterations, info%iterations)
    call check(st, 'fegpu_fem_stress_step', stat, errmsg)
  end subroutine

  !> The stresses (xx yy zz xy yz zx): nodal = .true. the nodes' averages
  !> (out(6, nodes)), else every Gauss point's (out(6, points x elements)).
  subroutine fegpu_fem_stress_download(stress, nodal, out, stat, errmsg)
    type(fegpu_stress), intent(in) :: stress
    logical, intent(in) :: nodal
    real(real64), intent(out) :: out(:, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_stress_download(stress%handle, merge(1_c_int32_t, 0_c_int32_t, nodal), out, size(out, kind=c_int64_t)), &
         'fegpu_fem_stress_download', stat, errmsg)
  end subroutine

  !> The displacements accumulated since t0.
  subroutine fegpu_fem_stress_displacements(stress, out, stat, errmsg)
    type(fegpu_stress), intent(in) :: stress
    real(real64), intent(out) :: out(:)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_stress_displacements(stress%handle, out, size(out, kind=c_int64_t)), 'fegpu_fem_stress_displacements', &
         stat, errmsg)
  end subroutine

  subroutine fegpu_fem_stress_destroy(stress, stat, errmsg)
    type(fegpu_stress), intent(inout) :: stress
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_stress_destroy(stress%handle)
    if (st == FEGPU_OK) stress%handle = 0
    call check(st, 'fegpu_fem_stress_destroy', stat, errmsg)
  end subroutine

  !> A new time step for the following steps.
  subroutine fegpu_fem_heat_set_dt(heat, dt, stat, errmsg)
    type(fegpu_heat), intent(in) :: heat
    real(real64), intent(in) :: dt
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_heat_set_dt(heat%handle, dt), 'fegpu_fem_heat_set_dt', stat, errmsg)
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

  !> An elastodynamics stepper: scheme FEGPU_SCHEME_NEWMARK (beta, gamma:
  !> default 1/4, 1/2), FEGPU_SCHEME_CENTRAL_DIFFERENCE (lumped mass) or
  !> FEGPU_SCHEME_TOTAL_LAGRANGIAN (explicit, nonlinear, no assembly); the
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
  !> A Newmark step whose solve fails (stat FEGPU_ERR_NOT_CONVERGED, a breakdown)
  !> leaves u and the stepper as they were: retry it with a larger maxit.
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

  !> Rayleigh damping from the next step on: C = alpha M + beta K (Newmark),
  !> or alpha M_L for central differences (beta = 0 there: it stays explicit).
  subroutine fegpu_fem_dynamics_set_damping(dyn, alpha, beta, stat, errmsg)
    type(fegpu_dynamics), intent(in) :: dyn
    real(real64), intent(in) :: alpha, beta
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_dynamics_set_damping(dyn%handle, alpha, beta), 'fegpu_fem_dynamics_set_damping', stat, errmsg)
  end subroutine

  !> The clamped dofs' displacements (values(i) for clamped(i)) at the end of
  !> the next steps: for a time-dependent motion, call it before each step.
  subroutine fegpu_fem_dynamics_set_displacements(dyn, values, stat, errmsg)
    type(fegpu_dynamics), intent(in) :: dyn
    real(real64), intent(in) :: values(:)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_dynamics_set_displacements(dyn%handle, values, size(values, kind=c_int64_t)), &
         'fegpu_fem_dynamics_set_displacements', stat, errmsg)
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

  !> The packed size of one element matrix (the first extent of ke and ce in
  !> fegpu_fem_stiffness and fegpu_fem_mass): the upper triangle, nd*(nd+1)/2.
  subroutine fegpu_fem_packed_size(fem, size, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    class(*), intent(out) :: size
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: s
    s = 0
    call check(c_fem_packed_size(fem%handle, s), 'fegpu_fem_packed_size', stat, errmsg)
    call put(size, s)
  end subroutine

  !> The set's element type (FEGPU_ELEMENT_*) and its numbers of nodes, elements and materials.
  subroutine fegpu_fem_shape(fem, element, nodes, elements, materials, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    class(*), intent(out) :: element, nodes, elements, materials
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: e
    integer(c_int64_t) :: n(3)
    e = 0; n = 0
    call check(c_fem_shape(fem%handle, e, n(1), n(2), n(3)), 'fegpu_fem_shape', stat, errmsg)
    call put(element, int(e, c_int64_t))
    call put(nodes, n(1))
    call put(elements, n(2))
    call put(materials, n(3))
  end subroutine

end module fegpu_fem_m
