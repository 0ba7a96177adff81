!> CSR and block CSR (BSR) matrices on the device, SpMV, Dirichlet
!> conditions, and the Krylov solvers with their preconditioners.
module fegpu_sparse
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_int64_t, c_double, c_char, c_null_char
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use fegpu_types
  use fegpu_support
  implicit none
  private
  public :: fegpu_csr_create, fegpu_csr_read_mm, fegpu_csr_update_values, fegpu_csr_destroy, fegpu_csr_info
  public :: fegpu_bsr_create, fegpu_bsr_info
  public :: fegpu_csr_write_mm, fegpu_csr_download, fegpu_csr_apply_dirichlet, fegpu_spmv, fegpu_csr_spmv
  public :: fegpu_solver_create, fegpu_solver_create_gmres, fegpu_solve, fegpu_solver_solve, fegpu_solver_history, &
       fegpu_solver_destroy
  public :: fegpu_solver_create_amg, fegpu_rigid_body_modes, fegpu_solver_describe, fegpu_amg_options_default

  !> A CSR matrix from the caller's arrays (int32 or int64 indices, 1-based by default).
  interface fegpu_csr_create
    module procedure csr_create_i32, csr_create_i64
  end interface
  !> A block CSR matrix: row_ptr and col_ind over block rows and columns,
  !> values(block_size, block_size, nnzb), each block column-major as Fortran
  !> stores it. The result is a fegpu_csr of nb_rows * block_size rows.
  interface fegpu_bsr_create
    module procedure bsr_create_i32, bsr_create_i64
  end interface
  !> New values: values(:) as created for CSR, values(:, :, :) for blocks.
  interface fegpu_csr_update_values
    module procedure csr_update_values, bsr_update_values
  end interface
  !> The C names (fegpu.h); fegpu_spmv and fegpu_solve are the older ones.
  interface fegpu_csr_spmv
    module procedure fegpu_spmv
  end interface
  interface fegpu_solver_solve
    module procedure fegpu_solve
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
    integer(c_int32_t) function c_bsr_create_i32(ctx, nbr, nbc, k, nnzb, rp, ci, v, base, a) bind(C, name='fegpu_bsr_create_i32')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, nbr, nbc, k, nnzb
      integer(c_int32_t), intent(in) :: rp(*), ci(*)
      real(c_double), intent(in) :: v(*)
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(out) :: a
    end function
    integer(c_int32_t) function c_bsr_create_i64(ctx, nbr, nbc, k, nnzb, rp, ci, v, base, a) bind(C, name='fegpu_bsr_create_i64')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, nbr, nbc, k, nnzb
      integer(c_int64_t), intent(in) :: rp(*), ci(*)
      real(c_double), intent(in) :: v(*)
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(out) :: a
    end function
    integer(c_int32_t) function c_bsr_info(a, k, nbr, nbc, nnzb) bind(C, name='fegpu_bsr_info')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: a
      integer(c_int64_t), intent(out) :: k, nbr, nbc, nnzb
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
    integer(c_int32_t) function c_csr_apply_dirichlet(a, n, dofs, base, values, b) bind(C, name='fegpu_csr_apply_dirichlet')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a, n, b
      integer(c_int32_t), value :: base
      integer(c_int64_t), intent(in) :: dofs(*)
      real(c_double), intent(in) :: values(*)
    end function
    integer(c_int32_t) function c_amg_options_default(options) bind(C, name='fegpu_amg_options_default')
      import :: c_int32_t, fegpu_amg_options
      type(fegpu_amg_options), intent(out) :: options
    end function
    integer(c_int32_t) function c_solver_create_amg(a, method, options, nns, count, s) bind(C, name='fegpu_solver_create_amg')
      import :: c_int32_t, c_int64_t, c_double, fegpu_amg_options
      integer(c_int64_t), value :: a
      integer(c_int32_t), value :: method
      type(fegpu_amg_options), intent(in) :: options
      real(c_double), intent(in) :: nns(*)
      integer(c_int64_t), value :: count
      integer(c_int64_t), intent(out) :: s
    end function
    integer(c_int32_t) function c_rigid_body_modes(dim, n_nodes, coords, modes, len) bind(C, name='fegpu_rigid_body_modes')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int32_t), value :: dim
      integer(c_int64_t), value :: n_nodes
      real(c_double), intent(in) :: coords(*)
      real(c_double), intent(out) :: modes(*)
      integer(c_int64_t), value :: len
    end function
    integer(c_int32_t) function c_solver_describe(s, buf, len, needed) bind(C, name='fegpu_solver_describe')
      import :: c_int32_t, c_int64_t, c_char
      integer(c_int64_t), value :: s
      character(kind=c_char), intent(out) :: buf(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), intent(out) :: needed
    end function
    integer(c_int32_t) function c_solver_create(a, method, precond, s) bind(C, name='fegpu_solver_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: a
      integer(c_int32_t), value :: method, precond
      integer(c_int64_t), intent(out) :: s
    end function
    integer(c_int32_t) function c_solver_create_gmres(a, precond, restart, s) bind(C, name='fegpu_solver_create_gmres')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: a
      integer(c_int32_t), value :: precond, restart
      integer(c_int64_t), intent(out) :: s
    end function
    integer(c_int32_t) function c_solver_solve(s, b, x, tol, maxit, info) bind(C, name='fegpu_solver_solve')
      import :: c_int32_t, c_int64_t, c_double, solve_info
      integer(c_int64_t), value :: s, b, x, maxit
      real(c_double), value :: tol
      type(solve_info), intent(out) :: info
    end function
    integer(c_int32_t) function c_solver_history(s, h, len, count) bind(C, name='fegpu_solver_history')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: s
      real(c_double), intent(out) :: h(*)
      integer(c_int64_t), value :: len
      integer(c_int64_t), intent(out) :: count
    end function
    integer(c_int32_t) function c_solver_destroy(s) bind(C, name='fegpu_solver_destroy')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: s
    end function
  end interface

contains

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

  subroutine bsr_create_i32(ctx, nb_rows, nb_cols, row_ptr, col_ind, values, a, index_base, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(in) :: nb_rows, nb_cols
    integer(c_int32_t), intent(in) :: row_ptr(:), col_ind(:)
    real(real64), intent(in), contiguous :: values(:, :, :)
    type(fegpu_csr), intent(inout) :: a
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (bsr_sizes_bad(size(row_ptr, kind=c_int64_t), i64(nb_rows), size(col_ind, kind=c_int64_t), shape(values, kind=c_int64_t), &
         stat, errmsg)) return
    call check(c_bsr_create_i32(ctx%handle, i64(nb_rows), i64(nb_cols), size(values, 1, kind=c_int64_t), &
         size(col_ind, kind=c_int64_t), row_ptr, col_ind, values, base_of(index_base), a%handle), 'fegpu_bsr_create', stat, errmsg)
  end subroutine

  subroutine bsr_create_i64(ctx, nb_rows, nb_cols, row_ptr, col_ind, values, a, index_base, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(in) :: nb_rows, nb_cols
    integer(c_int64_t), intent(in) :: row_ptr(:), col_ind(:)
    real(real64), intent(in), contiguous :: values(:, :, :)
    type(fegpu_csr), intent(inout) :: a
    class(*), intent(in), optional :: index_base
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (bsr_sizes_bad(size(row_ptr, kind=c_int64_t), i64(nb_rows), size(col_ind, kind=c_int64_t), shape(values, kind=c_int64_t), &
         stat, errmsg)) return
    call check(c_bsr_create_i64(ctx%handle, i64(nb_rows), i64(nb_cols), size(values, 1, kind=c_int64_t), &
         size(col_ind, kind=c_int64_t), row_ptr, col_ind, values, base_of(index_base), a%handle), 'fegpu_bsr_create', stat, errmsg)
  end subroutine

  !> True (after reporting) when the block arrays disagree: row_ptr needs
  !> nb_rows + 1 entries, values square blocks, one per col_ind entry.
  logical function bsr_sizes_bad(nrp, nb_rows, nci, vshape, stat, errmsg)
    integer(c_int64_t), intent(in) :: nrp, nb_rows, nci, vshape(3)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(len=240) :: msg
    bsr_sizes_bad = nrp /= nb_rows + 1 .or. vshape(1) /= vshape(2) .or. vshape(3) /= nci
    if (.not. bsr_sizes_bad) return
    write (msg, '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a)') 'size(row_ptr) = ', nrp, ' (nb_rows + 1 = ', nb_rows + 1, &
         '), size(col_ind) = ', nci, ', shape(values) = [', vshape(1), ', ', vshape(2), ', ', vshape(3), &
         '] (block_size, block_size, nnzb)'
    call size_error('fegpu_bsr_create: ' // trim(msg), stat, errmsg)
  end function

  !> Block size (1 for CSR), block rows, block columns and stored blocks.
  subroutine fegpu_bsr_info(a, block_size, nb_rows, nb_cols, nnzb, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    class(*), intent(out) :: block_size, nb_rows, nb_cols, nnzb
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: k, r, c, z
    k = 0; r = 0; c = 0; z = 0
    call check(c_bsr_info(a%handle, k, r, c, z), 'fegpu_bsr_info', stat, errmsg)
    call put(block_size, k)
    call put(nb_rows, r)
    call put(nb_cols, c)
    call put(nnzb, z)
  end subroutine

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
  subroutine csr_update_values(a, values, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    real(real64), intent(in) :: values(:)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_csr_update_values(a%handle, values, size(values, kind=c_int64_t)), 'fegpu_csr_update_values', stat, errmsg)
  end subroutine

  !> New block values, shaped as the block matrix was created with.
  subroutine bsr_update_values(a, values, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    real(real64), intent(in), contiguous :: values(:, :, :)
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

  !> A solver for A: FEGPU_METHOD_CG (SPD A), _BICGSTAB, _GMRES (restart 30),
  !> _BICG or _CGS; FEGPU_PRECOND_NONE, _JACOBI, _ILU0, _ILU0_JACOBI,
  !> _ILU0_MULTICOLOUR, _ILU0_MULTICOLOUR_SPLIT or _AMG (default options;
  !> fegpu_solver_create_amg takes them).
  subroutine fegpu_solver_create(a, method, precond, s, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    class(*), intent(in) :: method, precond
    type(fegpu_solver), intent(inout) :: s
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_solver_create(a%handle, i32(method), i32(precond), s%handle), 'fegpu_solver_create', stat, errmsg)
  end subroutine

  !> A GMRES solver for A restarted every restart iterations, 1 to 10000 (its basis:
  !> restart + 1 vectors of the rows of A); precond as fegpu_solver_create's.
  subroutine fegpu_solver_create_gmres(a, precond, restart, s, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    class(*), intent(in) :: precond, restart
    type(fegpu_solver), intent(inout) :: s
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_solver_create_gmres(a%handle, i32(precond), i32(restart), s%handle), 'fegpu_solver_create_gmres', stat, errmsg)
  end subroutine

  !> The AMG defaults (the same as a fegpu_amg_options variable starts with).
  subroutine fegpu_amg_options_default(options, stat, errmsg)
    type(fegpu_amg_options), intent(out) :: options
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_amg_options_default(options), 'fegpu_amg_options_default', stat, errmsg)
  end subroutine

  !> A solver for A preconditioned by smoothed-aggregation AMG: method
  !> FEGPU_METHOD_CG (symmetric A) or _BICGSTAB; options (default: the
  !> defaults); near_null_space(n, k), e.g. from fegpu_rigid_body_modes with
  !> options%block_size = 2 or 3. The hierarchy is set up here; after
  !> fegpu_csr_update_values the next solve redoes only its values.
  subroutine fegpu_solver_create_amg(a, method, s, options, near_null_space, stat, errmsg)
    type(fegpu_csr), intent(in) :: a
    class(*), intent(in) :: method
    type(fegpu_solver), intent(inout) :: s
    type(fegpu_amg_options), intent(in), optional :: options
    real(real64), intent(in), optional, contiguous :: near_null_space(:, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    type(fegpu_amg_options) :: o
    real(c_double) :: none(1)
    integer(c_int64_t) :: nrows, ncols, nnz
    if (present(options)) o = options
    if (present(near_null_space)) then
      if (c_csr_info(a%handle, nrows, ncols, nnz) == FEGPU_OK) then
        if (size(near_null_space, 1, kind=c_int64_t) /= nrows) then
          call size_error('fegpu_solver_create_amg: near-null space: size(near_null_space, 1) must be the rows of A', &
               stat, errmsg)
          return
        end if
      end if
      call check(c_solver_create_amg(a%handle, i32(method), o, near_null_space, size(near_null_space, 2, kind=c_int64_t), &
           s%handle), 'fegpu_solver_create_amg', stat, errmsg)
    else
      none = 0
      call check(c_solver_create_amg(a%handle, i32(method), o, none, 0_c_int64_t, s%handle), 'fegpu_solver_create_amg', &
           stat, errmsg)
    end if
  end subroutine

  !> The rigid-body modes of nodes at coords(dim, n_nodes) (dim 2 or 3), for
  !> unknowns numbered node by node: modes(dim * n_nodes, 3 or 6).
  subroutine fegpu_rigid_body_modes(coords, modes, stat, errmsg)
    real(real64), intent(in), contiguous :: coords(:, :)
    real(real64), intent(out), contiguous :: modes(:, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(modes, 1) /= size(coords)) then
      call size_error('fegpu_rigid_body_modes: size(modes, 1) must be size(coords) (dim * n_nodes)', stat, errmsg)
      return
    end if
    call check(c_rigid_body_modes(int(size(coords, 1), c_int32_t), size(coords, 2, kind=c_int64_t), coords, modes, &
         size(modes, kind=c_int64_t)), 'fegpu_rigid_body_modes', stat, errmsg)
  end subroutine

  !> The solver's method and preconditioner, and for AMG its hierarchy
  !> (levels, rows, nonzeros, operator complexity), lines separated by new lines.
  subroutine fegpu_solver_describe(s, text, stat, errmsg)
    type(fegpu_solver), intent(in) :: s
    character(*), intent(out) :: text
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(kind=c_char) :: buf(len(text) + 1)
    integer(c_int64_t) :: needed
    buf = c_null_char
    call check(c_solver_describe(s%handle, buf, size(buf, kind=c_int64_t), needed), 'fegpu_solver_describe', stat, errmsg)
    call text_from_c(buf, text)
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
    call solve_result(st, info, 'fegpu_solve', iterations, residual, true_residual, stat, errmsg)
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

  subroutine fegpu_solver_destroy(s, stat, errmsg)
    type(fegpu_solver), intent(inout) :: s
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_solver_destroy(s%handle)
    if (st == FEGPU_OK) s%handle = 0
    call check(st, 'fegpu_solver_destroy', stat, errmsg)
  end subroutine

end module fegpu_sparse
