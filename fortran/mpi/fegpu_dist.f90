!> Distributed runs over the program's MPI job (the MPI build of fegpu:
!> target fegpu::fortran_mpi of find_package(fegpu)). Each rank creates its
!> context, passes the global rows it owns (a contiguous range, global column
!> numbers, 1-based by default) and solves with its part of b and x:
!>
!>   use mpi_f08
!>   use fegpu
!>   use fegpu_dist
!>   call fegpu_dist_context_create(MPI_COMM_WORLD, ctx)     ! GPU by node-local rank
!>   call fegpu_dist_csr_create(ctx, MPI_COMM_WORLD, n_global, first_row, &
!>                              row_ptr, col_ind, values, a)   ! this rank's rows
!>   call fegpu_dist_solver_create(a, FEGPU_METHOD_CG, FEGPU_PRECOND_JACOBI, s)
!>   do step = 1, nsteps
!>     ... assemble this rank's rows, call fegpu_dist_csr_update_values(a, values)
!>     call fegpu_array_upload(b, b_local)
!>     call fegpu_dist_solver_solve(s, b, x, 1d-8, 1000, iterations=its)
!>   end do
!>
!> A lattice-Boltzmann code split in z-slabs creates its part of the lattice
!> and then calls the fegpu_lbm procedures with its own planes:
!>
!>   call fegpu_dist_lattice_create(ctx, MPI_COMM_WORLD, nx, ny, nz, z_first, nz_own, tau, lat)
!>   call fegpu_lattice_set_flags(lat, flags)          ! flags(nx, ny, nz_own)
!>   call fegpu_lattice_step(lat, nsteps)              ! swaps the bordering planes each step
!>   call fegpu_lattice_fields(lat, rho, u, z_first=z_first)
!>
!> A FEM code that partitions its mesh by elements creates, on each rank,
!> the element set of its own elements over its own nodes, then one solver
!> over all ranks from the global number of each local node:
!>
!>   call fegpu_fem_create(ctx, FEGPU_ELEMENT_HEX8, FEGPU_PROBLEM_ELASTIC_3D, &
!>                         coords, conn, props, material, fem)   ! local nodes
!>   call fegpu_fem_integrate(fem)
!>   call fegpu_dist_ebe_create(fem, MPI_COMM_WORLD, global_node, dofs, values, ebe)
!>   call fegpu_ebe_solve(ebe, b, x, 1d-8, 1000)   ! b: this rank's loads; x at every local node
!>
!> The communicator is `type(MPI_Comm)` of mpi_f08 or the integer handle of
!> `use mpi` / mpif.h. Every procedure here is collective: all ranks call it
!> and all get the same status (a rank's refused argument is named on every
!> rank). A rank owning no rows passes empty arrays and, for b and x,
!> fegpu_array handles left at 0.
module fegpu_dist
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_int64_t, c_double, c_double_complex, c_char, c_null_char
  use, intrinsic :: iso_fortran_env, only: real64
  use mpi_f08, only: MPI_Comm
  use fegpu_types
  use fegpu_support
  implicit none
  private
  public :: fegpu_dist_context_create, fegpu_dist_csr_create, fegpu_dist_csr_update_values, fegpu_dist_csr_spmv
  public :: fegpu_dist_csr_info, fegpu_dist_csr_describe, fegpu_dist_csr_destroy
  public :: fegpu_dist_solver_create, fegpu_dist_solver_create_gmres, fegpu_dist_solver_solve, fegpu_dist_solver_history, &
       fegpu_dist_solver_destroy
  public :: fegpu_dist_lattice_create, fegpu_dist_lattice_describe, fegpu_dist_radfields_create, fegpu_dist_radfields_describe
  public :: fegpu_dist_ebe_create, fegpu_dist_ebe_describe

  !> A matrix whose rows are spread over the ranks of a communicator.
  type, bind(C), public :: fegpu_dist_csr
    integer(c_int64_t) :: handle
  end type fegpu_dist_csr

  !> CG or BiCGSTAB over a distributed matrix.
  type, bind(C), public :: fegpu_dist_solver
    integer(c_int64_t) :: handle
  end type fegpu_dist_solver

  interface fegpu_dist_context_create
    module procedure context_create_f08, context_create_int
  end interface
  interface fegpu_dist_csr_create
    module procedure csr_create_f08_i32, csr_create_f08_i64, csr_create_int_i32, csr_create_int_i64
  end interface
  interface fegpu_dist_lattice_create
    module procedure lattice_create_f08, lattice_create_int
  end interface
  interface fegpu_dist_radfields_create
    module procedure radfields_create_f08, radfields_create_int
  end interface
  interface fegpu_dist_ebe_create
    module procedure ebe_create_f08, ebe_create_int
  end interface

  !> The C describe calls: a handle's text into buf(len), needed its length.
  abstract interface
    integer(c_int32_t) function c_describe(handle, buf, len, needed) bind(C)
      import :: c_int32_t, c_int64_t, c_char
      integer(c_int64_t), value :: handle
      character(kind=c_char), intent(out) :: buf(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), intent(out) :: needed
    end function
  end interface

  interface
    integer(c_int32_t) function c_dist_csr_describe(handle, buf, len, needed) bind(C, name='fegpu_dist_csr_describe')
      import :: c_int32_t, c_int64_t, c_char
      integer(c_int64_t), value :: handle
      character(kind=c_char), intent(out) :: buf(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), intent(out) :: needed
    end function
    integer(c_int32_t) function c_dist_lattice_describe(handle, buf, len, needed) bind(C, name='fegpu_dist_lattice_describe')
      import :: c_int32_t, c_int64_t, c_char
      integer(c_int64_t), value :: handle
      character(kind=c_char), intent(out) :: buf(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), intent(out) :: needed
    end function
    integer(c_int32_t) function c_dist_radfields_describe(handle, buf, len, needed) bind(C, name='fegpu_dist_radfields_describe')
      import :: c_int32_t, c_int64_t, c_char
      integer(c_int64_t), value :: handle
      character(kind=c_char), intent(out) :: buf(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), intent(out) :: needed
    end function
    integer(c_int32_t) function c_dist_ebe_describe(handle, buf, len, needed) bind(C, name='fegpu_dist_ebe_describe')
      import :: c_int32_t, c_int64_t, c_char
      integer(c_int64_t), value :: handle
      character(kind=c_char), intent(out) :: buf(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), intent(out) :: needed
    end function
    integer(c_int32_t) function c_dist_context_create(comm, backend, device, ctx) bind(C, name='fegpu_dist_context_create')
      import :: c_int32_t, c_int64_t
      integer(c_int32_t), value :: comm, backend
      integer(c_int64_t), value :: device
      integer(c_int64_t), intent(out) :: ctx
    end function
    integer(c_int32_t) function c_dist_csr_create_i32(ctx, comm, n, first, nrows, rp, ci, v, base, a) &
         bind(C, name='fegpu_dist_csr_create_i32')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx
      integer(c_int32_t), value :: comm
      integer(c_int64_t), value :: n, first, nrows
      integer(c_int32_t), intent(in) :: rp(*), ci(*)
      real(c_double), intent(in) :: v(*)
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(out) :: a
    end function
    integer(c_int32_t) function c_dist_csr_create_i64(ctx, comm, n, first, nrows, rp, ci, v, base, a) &
         bind(C, name='fegpu_dist_csr_create_i64')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx
      integer(c_int32_t), value :: comm
      integer(c_int64_t), value :: n, first, nrows
      integer(c_int64_t), intent(in) :: rp(*), ci(*)
      real(c_double), intent(in) :: v(*)
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(out) :: a
    end function
    integer(c_int32_t) function c_dist_csr_update_values(a, v, nnz) bind(C, name='fegpu_dist_csr_update_values')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a
      real(c_double), intent(in) :: v(*)
      integer(c_int64_t), value :: nnz
    end function
    integer(c_int32_t) function c_dist_csr_spmv(a, x, y) bind(C, name='fegpu_dist_csr_spmv')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: a, x, y
    end function
    integer(c_int32_t) function c_dist_csr_info(a, n, first, nrows, neighbours) bind(C, name='fegpu_dist_csr_info')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: a
      integer(c_int64_t), intent(out) :: n, first, nrows, neighbours
    end function
    integer(c_int32_t) function c_dist_csr_destroy(a) bind(C, name='fegpu_dist_csr_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: a
    end function
    integer(c_int32_t) function c_dist_solver_create(a, method, precond, s) bind(C, name='fegpu_dist_solver_create')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: a
      integer(c_int32_t), value :: method, precond
      integer(c_int64_t), intent(out) :: s
    end function
    integer(c_int32_t) function c_dist_solver_create_gmres(a, precond, restart, s) &
         bind(C, name='fegpu_dist_solver_create_gmres')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: a
      integer(c_int32_t), value :: precond, restart
      integer(c_int64_t), intent(out) :: s
    end function
    integer(c_int32_t) function c_dist_solver_solve(s, b, x, tol, maxit, info) bind(C, name='fegpu_dist_solver_solve')
      import :: c_int32_t, c_int64_t, c_double, solve_info
      integer(c_int64_t), value :: s, b, x
      real(c_double), value :: tol
      integer(c_int64_t), value :: maxit
      type(solve_info), intent(out) :: info
    end function
    integer(c_int32_t) function c_dist_solver_history(s, h, len, count) bind(C, name='fegpu_dist_solver_history')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: s
      real(c_double), intent(out) :: h(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), intent(out) :: count
    end function
    integer(c_int32_t) function c_dist_solver_destroy(s) bind(C, name='fegpu_dist_solver_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: s
    end function
    integer(c_int32_t) function c_dist_lattice_create(ctx, comm, nx, ny, nz, z_first, nz_own, dtype, tau, periodic, lat) &
         bind(C, name='fegpu_dist_lattice_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx
      integer(c_int32_t), value :: comm
      integer(c_int64_t), value :: nx, ny, nz, z_first, nz_own
      integer(c_int32_t), value :: dtype
      real(c_double), value :: tau
      integer(c_int32_t), value :: periodic
      integer(c_int64_t), intent(out) :: lat
    end function
    integer(c_int32_t) function c_dist_ebe_create(fem, comm, n_nodes, global_node, base, n_fixed, dofs, values, otf, ebe) &
         bind(C, name='fegpu_dist_ebe_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: fem
      integer(c_int32_t), value :: comm
      integer(c_int64_t), value :: n_nodes
      integer(c_int64_t), intent(in) :: global_node(*)
      integer(c_int32_t), value :: base
      integer(c_int64_t), value :: n_fixed
      integer(c_int64_t), intent(in) :: dofs(*)
      real(c_double), intent(in) :: values(*)
      integer(c_int32_t), value :: otf
      integer(c_int64_t), intent(out) :: ebe
    end function
    integer(c_int32_t) function c_dist_radfields_create(ctx, comm, n_s, points, n_rhs, k, omega_mu, acc) &
         bind(C, name='fegpu_dist_radfields_create')
      import :: c_int32_t, c_int64_t, c_double, c_double_complex
      integer(c_int64_t), value :: ctx
      integer(c_int32_t), value :: comm
      integer(c_int64_t), value :: n_s
      real(c_double), intent(in) :: points(*)
      integer(c_int64_t), value :: n_rhs
      complex(c_double_complex), intent(in) :: k, omega_mu
      integer(c_int64_t), intent(out) :: acc
    end function
  end interface

contains

  !> This rank's context; without `device`, the GPU of index node-local
  !> rank modulo the node's GPUs (FEGPU_DEVICE overrides). Collective.
  subroutine context_create_f08(comm, ctx, backend, device, stat, errmsg)
    type(MPI_Comm), intent(in) :: comm
    type(fegpu_context), intent(inout) :: ctx
    class(*), intent(in), optional :: backend, device
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call context_create_int(comm%MPI_VAL, ctx, backend, device, stat, errmsg)
  end subroutine

  subroutine context_create_int(comm, ctx, backend, device, stat, errmsg)
    integer, intent(in) :: comm
    type(fegpu_context), intent(inout) :: ctx
    class(*), intent(in), optional :: backend, device
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: b
    integer(c_int64_t) :: d
    b = FEGPU_BACKEND_AUTO
    if (present(backend)) b = i32(backend)
    d = -1
    if (present(device)) d = i64(device)
    call check(c_dist_context_create(int(comm, c_int32_t), b, d, ctx%handle), 'fegpu_dist_context_create', stat, errmsg)
  end subroutine

  !> This rank's rows: row_ptr(nrows+1), global column numbers col_ind and
  !> values; the rank owns global rows first_row .. first_row + nrows - 1
  !> (index_base 1 by default, as its column numbers). Collective.
  subroutine csr_create_f08_i32(ctx, comm, n_global, first_row, row_ptr, col_ind, values, a, index_base, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    type(MPI_Comm), intent(in) :: comm
    class(*), intent(in) :: n_global, first_row
    integer(c_int32_t), intent(in) :: row_ptr(:), col_ind(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_dist_csr), intent(inout) :: a
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call csr_create_int_i32(ctx, comm%MPI_VAL, n_global, first_row, row_ptr, col_ind, values, a, index_base, stat, errmsg)
  end subroutine

  subroutine csr_create_f08_i64(ctx, comm, n_global, first_row, row_ptr, col_ind, values, a, index_base, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    type(MPI_Comm), intent(in) :: comm
    class(*), intent(in) :: n_global, first_row
    integer(c_int64_t), intent(in) :: row_ptr(:), col_ind(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_dist_csr), intent(inout) :: a
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call csr_create_int_i64(ctx, comm%MPI_VAL, n_global, first_row, row_ptr, col_ind, values, a, index_base, stat, errmsg)
  end subroutine

  subroutine csr_create_int_i32(ctx, comm, n_global, first_row, row_ptr, col_ind, values, a, index_base, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    integer, intent(in) :: comm
    class(*), intent(in) :: n_global, first_row
    integer(c_int32_t), intent(in) :: row_ptr(:), col_ind(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_dist_csr), intent(inout) :: a
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    ! row_ptr's length gives nrows; its last entry tells fegpu how many entries to read
    call check(c_dist_csr_create_i32(ctx%handle, int(comm, c_int32_t), i64(n_global), i64(first_row), &
         size(row_ptr, kind=c_int64_t) - 1, row_ptr, col_ind, values, base_of(index_base), a%handle), &
         'fegpu_dist_csr_create', stat, errmsg)
  end subroutine

  subroutine csr_create_int_i64(ctx, comm, n_global, first_row, row_ptr, col_ind, values, a, index_base, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    integer, intent(in) :: comm
    class(*), intent(in) :: n_global, first_row
    integer(c_int64_t), intent(in) :: row_ptr(:), col_ind(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_dist_csr), intent(inout) :: a
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_dist_csr_create_i64(ctx%handle, int(comm, c_int32_t), i64(n_global), i64(first_row), &
         size(row_ptr, kind=c_int64_t) - 1, row_ptr, col_ind, values, base_of(index_base), a%handle), &
         'fegpu_dist_csr_create', stat, errmsg)
  end subroutine

  !> New values for the same rows, in this rank's entry order. Collective.
  subroutine fegpu_dist_csr_update_values(a, values, stat, errmsg)
    type(fegpu_dist_csr), intent(in) :: a
    real(real64), intent(in) :: values(:)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_dist_csr_update_values(a%handle, values, size(values, kind=c_int64_t)), 'fegpu_dist_csr_update_values', &
         stat, errmsg)
  end subroutine

  !> y = A x over this rank's rows. Collective.
  subroutine fegpu_dist_csr_spmv(a, x, y, stat, errmsg)
    type(fegpu_dist_csr), intent(in) :: a
    type(fegpu_array), intent(in) :: x, y
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_dist_csr_spmv(a%handle, x%handle, y%handle), 'fegpu_dist_csr_spmv', stat, errmsg)
  end subroutine

  !> The global size, this rank's first row (1-based) and rows, its neighbours.
  subroutine fegpu_dist_csr_info(a, n_global, first_row, nrows, neighbours, stat, errmsg)
    type(fegpu_dist_csr), intent(in) :: a
    class(*), intent(out), optional :: n_global, first_row, nrows, neighbours
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n, f, r, nb
    call check(c_dist_csr_info(a%handle, n, f, r, nb), 'fegpu_dist_csr_info', stat, errmsg)
    if (present(n_global)) call put(n_global, n)
    if (present(first_row)) call put(first_row, f + 1)
    if (present(nrows)) call put(nrows, r)
    if (present(neighbours)) call put(neighbours, nb)
  end subroutine

  !> Ranks, this rank's rows and halo, and the exchange path, as text.
  subroutine fegpu_dist_csr_describe(a, text, stat, errmsg)
    type(fegpu_dist_csr), intent(in) :: a
    character(*), intent(out) :: text
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call describe(c_dist_csr_describe, a%handle, 'fegpu_dist_csr_describe', text, stat, errmsg)
  end subroutine

  subroutine fegpu_dist_csr_destroy(a, stat, errmsg)
    type(fegpu_dist_csr), intent(inout) :: a
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_dist_csr_destroy(a%handle), 'fegpu_dist_csr_destroy', stat, errmsg)
    a%handle = 0
  end subroutine

  !> method FEGPU_METHOD_CG, _BICGSTAB, _GMRES (restart 30) or _CGS; precond
  !> FEGPU_PRECOND_NONE, _JACOBI, _ILU0 (block Jacobi over the ranks) or _AMG
  !> (per rank). Collective.
  subroutine fegpu_dist_solver_create(a, method, precond, s, stat, errmsg)
    type(fegpu_dist_csr), intent(in) :: a
    class(*), intent(in) :: method, precond
    type(fegpu_dist_solver), intent(inout) :: s
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_dist_solver_create(a%handle, i32(method), i32(precond), s%handle), 'fegpu_dist_solver_create', stat, errmsg)
  end subroutine

  !> A distributed GMRES solver restarted every restart iterations (the same
  !> on every rank); precond as fegpu_dist_solver_create's. Collective.
  subroutine fegpu_dist_solver_create_gmres(a, precond, restart, s, stat, errmsg)
    type(fegpu_dist_csr), intent(in) :: a
    class(*), intent(in) :: precond, restart
    type(fegpu_dist_solver), intent(inout) :: s
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_dist_solver_create_gmres(a%handle, i32(precond), i32(restart), s%handle), 'fegpu_dist_solver_create_gmres', &
         stat, errmsg)
  end subroutine

  !> Solves A x = b; b and x hold this rank's rows (x: the initial guess on
  !> entry). tol and maxit must be the same on every rank. Collective.
  subroutine fegpu_dist_solver_solve(s, b, x, tol, maxit, iterations, residual, true_residual, stat, errmsg)
    type(fegpu_dist_solver), intent(in) :: s
    type(fegpu_array), intent(in) :: b, x
    real(real64), intent(in) :: tol
    class(*), intent(in) :: maxit
    class(*), intent(out), optional :: iterations
    real(real64), intent(out), optional :: residual, true_residual
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    type(solve_info) :: info
    integer(c_int32_t) :: st
    st = c_dist_solver_solve(s%handle, b%handle, x%handle, tol, i64(maxit), info)
    call solve_result(st, info, 'fegpu_dist_solver_solve', iterations, residual, true_residual, stat, errmsg)
  end subroutine

  !> The relative residuals of the last solve (the same on every rank).
  subroutine fegpu_dist_solver_history(s, history, count, stat, errmsg)
    type(fegpu_dist_solver), intent(in) :: s
    real(real64), intent(inout), contiguous :: history(:)
    class(*), intent(out), optional :: count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n
    n = 0
    call check(c_dist_solver_history(s%handle, history, size(history, kind=c_int64_t), n), 'fegpu_dist_solver_history', &
         stat, errmsg)
    if (present(count)) call put(count, n)
  end subroutine

  subroutine fegpu_dist_solver_destroy(s, stat, errmsg)
    type(fegpu_dist_solver), intent(inout) :: s
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_dist_solver_destroy(s%handle), 'fegpu_dist_solver_destroy', stat, errmsg)
    s%handle = 0
  end subroutine
  !> This rank's part of an nx x ny x nz D3Q19 lattice split over the ranks
  !> in z-slabs: planes z_first .. z_first + nz_own - 1 (1-based; the slabs,
  !> in rank order, tile 1 .. nz). tau, periodic and storage as for
  !> fegpu_lattice_create, the same on every rank. The result is a
  !> fegpu_lattice that every fegpu_lattice_* procedure takes with this
  !> rank's planes: flags(nx, ny, nz_own), f(0:18, nx, ny, nz_own), the
  !> boundary values of its own open sites, fields of planes within its
  !> slab (z_first= global). Calls that change the lattice (set_*,
  !> init_equilibrium, step, body_force) are collective; reads are not.
  !> Each step swaps the bordering planes with the neighbouring ranks.
  subroutine lattice_create_f08(ctx, comm, nx, ny, nz, z_first, nz_own, tau, lat, periodic, storage, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    type(MPI_Comm), intent(in) :: comm
    class(*), intent(in) :: nx, ny, nz, z_first, nz_own
    real(real64), intent(in) :: tau
    type(fegpu_lattice), intent(inout) :: lat
    class(*), intent(in), optional :: periodic, storage
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call lattice_create_int(ctx, comm%MPI_VAL, nx, ny, nz, z_first, nz_own, tau, lat, periodic, storage, stat, errmsg)
  end subroutine

  subroutine lattice_create_int(ctx, comm, nx, ny, nz, z_first, nz_own, tau, lat, periodic, storage, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    integer, intent(in) :: comm
    class(*), intent(in) :: nx, ny, nz, z_first, nz_own
    real(real64), intent(in) :: tau
    type(fegpu_lattice), intent(inout) :: lat
    class(*), intent(in), optional :: periodic, storage
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: bits, dtype
    bits = 0
    if (present(periodic)) bits = i32(periodic)
    dtype = FEGPU_DTYPE_F64
    if (present(storage)) dtype = i32(storage)
    call check(c_dist_lattice_create(ctx%handle, int(comm, c_int32_t), i64(nx), i64(ny), i64(nz), i64(z_first), i64(nz_own), &
         dtype, real(tau, c_double), bits, lat%handle), 'fegpu_dist_lattice_create', stat, errmsg)
  end subroutine

  !> The ranks, this rank's planes, the bytes swapped and the exchange path.
  subroutine fegpu_dist_lattice_describe(lat, text, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    character(*), intent(out) :: text
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call describe(c_dist_lattice_describe, lat%handle, 'fegpu_dist_lattice_describe', text, stat, errmsg)
  end subroutine

  !> rad_fields with the S points split over the ranks: every rank passes all
  !> the S points points(3, n_s), n_rhs, k and omega_mu (the same everywhere)
  !> and accumulates its slice on its own device. The result is a
  !> fegpu_radfields: every rank passes every batch of S' sources to
  !> fegpu_radfields_accumulate; fegpu_radfields_download (collective) gives
  !> every rank the fields of all the points. Collective.
  subroutine radfields_create_f08(ctx, comm, points, n_rhs, k, omega_mu, acc, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    type(MPI_Comm), intent(in) :: comm
    real(real64), intent(in) :: points(:, :)
    class(*), intent(in) :: n_rhs
    complex(c_double_complex), intent(in) :: k, omega_mu
    type(fegpu_radfields), intent(inout) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call radfields_create_int(ctx, comm%MPI_VAL, points, n_rhs, k, omega_mu, acc, stat, errmsg)
  end subroutine

  subroutine radfields_create_int(ctx, comm, points, n_rhs, k, omega_mu, acc, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    integer, intent(in) :: comm
    real(real64), intent(in) :: points(:, :)
    class(*), intent(in) :: n_rhs
    complex(c_double_complex), intent(in) :: k, omega_mu
    type(fegpu_radfields), intent(inout) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n_s
    ! points not (3, n_s): n_s = -1, refused on every rank (the call is collective)
    n_s = merge(size(points, 2, kind=c_int64_t), -1_c_int64_t, size(points, 1) == 3)
    call check(c_dist_radfields_create(ctx%handle, int(comm, c_int32_t), n_s, points, i64(n_rhs), k, omega_mu, acc%handle), &
         'fegpu_dist_radfields_create', stat, errmsg)
  end subroutine

  !> The ranks and this rank's S points.
  subroutine fegpu_dist_radfields_describe(acc, text, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    character(*), intent(out) :: text
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call describe(c_dist_radfields_describe, acc%handle, 'fegpu_dist_radfields_describe', text, stat, errmsg)
  end subroutine

  !> This rank's part of an element-by-element CG over the ranks: fem holds
  !> this rank's elements over its own nodes, global_node(i) the global
  !> number of its node i, x(dofs(i)) = values(i) the conditions on its
  !> dofs (dof = (node - 1) * dofs per node + component with index_base 1,
  !> the default). A condition given on one rank holding a node holds on
  !> all. fegpu_ebe_solve(ebe, b, x, ...) is then collective: b holds this
  !> rank's load contributions (summed at shared nodes), x the initial
  !> guess and, on return, the solution at every local node. Collective.
  subroutine ebe_create_f08(fem, comm, global_node, dofs, values, ebe, index_base, on_the_fly, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    type(MPI_Comm), intent(in) :: comm
    class(*), intent(in) :: global_node(:), dofs(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_ebe), intent(out) :: ebe
    class(*), intent(in), optional :: index_base
    logical, intent(in), optional :: on_the_fly
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call ebe_create_int(fem, comm%MPI_VAL, global_node, dofs, values, ebe, index_base, on_the_fly, stat, errmsg)
  end subroutine

  subroutine ebe_create_int(fem, comm, global_node, dofs, values, ebe, index_base, on_the_fly, stat, errmsg)
    type(fegpu_fem), intent(in) :: fem
    integer, intent(in) :: comm
    class(*), intent(in) :: global_node(:), dofs(:)
    real(real64), intent(in) :: values(:)
    type(fegpu_ebe), intent(out) :: ebe
    class(*), intent(in), optional :: index_base
    logical, intent(in), optional :: on_the_fly
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: base, otf
    integer(c_int64_t) :: n_fixed
    base = 1
    if (present(index_base)) base = i32(index_base)
    otf = 0
    if (present(on_the_fly)) otf = merge(1_c_int32_t, 0_c_int32_t, on_the_fly)
    ! dofs and values of different sizes: n_fixed = -1, refused on every rank (the call is collective)
    n_fixed = merge(size(dofs, kind=c_int64_t), -1_c_int64_t, size(dofs) == size(values))
    call check(c_dist_ebe_create(fem%handle, int(comm, c_int32_t), size(global_node, kind=c_int64_t), i64(global_node), base, &
         n_fixed, i64(dofs), values, otf, ebe%handle), 'fegpu_dist_ebe_create', stat, errmsg)
  end subroutine

  !> The ranks, this rank's owned and shared dofs, the values exchanged per product.
  subroutine fegpu_dist_ebe_describe(ebe, text, stat, errmsg)
    type(fegpu_ebe), intent(in) :: ebe
    character(*), intent(out) :: text
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call describe(c_dist_ebe_describe, ebe%handle, 'fegpu_dist_ebe_describe', text, stat, errmsg)
  end subroutine

  !> A handle's description into text (blank when refused).
  subroutine describe(c_fn, handle, name, text, stat, errmsg)
    procedure(c_describe) :: c_fn
    integer(c_int64_t), intent(in) :: handle
    character(*), intent(in) :: name
    character(*), intent(out) :: text
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(kind=c_char) :: buf(len(text) + 1)
    integer(c_int64_t) :: needed
    buf = c_null_char
    call check(c_fn(handle, buf, size(buf, kind=c_int64_t), needed), name, stat, errmsg)
    call text_from_c(buf, text)
  end subroutine

end module fegpu_dist
