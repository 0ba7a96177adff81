!> A legacy MPI code's pressure solve (use mpi_f08): each rank assembles
!> its own block of rows of a 2-D five-point diffusion operator with a
!> heterogeneous coefficient (four decades; 1-based CSR, global column numbers) and its
!> part of b; fegpu solves distributed with Jacobi-CG. The serial code's
!> own Jacobi-CG on the whole system (each rank runs it) is the reference:
!> the same iteration count within two and the same x. Then the
!> coefficient changes (a time step): new values, solve again, compare
!> again. The communicator goes in both as type(MPI_Comm) and as the
!> integer handle of `use mpi`.
program dist_solve_f08
  use, intrinsic :: iso_fortran_env, only: real64
  use mpi_f08
  use fegpu
  use fegpu_dist
  use checks, only: expect, finish
  use serial_krylov, only: serial_cg
  implicit none
  integer, parameter :: dp = real64, m = 30, n = m * m
  real(dp), parameter :: tol = 1.0e-9_dp
  type(fegpu_context) :: ctx
  type(fegpu_dist_csr) :: a
  type(fegpu_dist_solver) :: s
  type(fegpu_array) :: db, dx
  integer, allocatable :: rp(:), ci(:), rp_all(:), ci_all(:)
  real(dp), allocatable :: v(:), v_all(:), b(:), x(:), xs(:)
  integer :: rank, size, first, last, step, its, its_serial, ierr, nrows, nb, i
  character(len=512) :: text

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  ! the integer handle of `use mpi`, as an older code would hold it
  call fegpu_dist_context_create(MPI_COMM_WORLD%MPI_VAL, ctx)
  ! contiguous blocks of rows, the last rank taking the remainder
  first = rank * (n / size) + 1
  last = merge(n, first + n / size - 1, rank == size - 1)
  nrows = last - first + 1
  allocate (b(n), xs(n), x(nrows))
  b = [(1.0_dp + sin(0.3_dp * i), i = 1, n)]
  call fegpu_array_create(ctx, b(first:last), db)
  x = 0
  call fegpu_array_create(ctx, x, dx)
  do step = 1, 2
    call assemble(step, first, last, rp, ci, v)
    call assemble(step, 1, n, rp_all, ci_all, v_all)
    call serial_cg(rp_all, ci_all, v_all, b, xs, tol, its_serial)
    if (step == 1) then
      call fegpu_dist_csr_create(ctx, MPI_COMM_WORLD, n, first, rp, ci, v, a)
      call fegpu_dist_solver_create(a, FEGPU_METHOD_CG, FEGPU_PRECOND_JACOBI, s)
    else
      call fegpu_dist_csr_update_values(a, v)
    end if
    x = 0
    call fegpu_array_upload(dx, x)
    call fegpu_dist_solver_solve(s, db, dx, tol, 5000, iterations=its)
    call fegpu_array_download(dx, x)
    ! the sums run in another order over the ranks: CG may stop an iteration
    ! earlier or later on this system of contrast 1e4
    call expect(abs(its - its_serial) <= 2, 'the serial code''s iteration count')
    call expect(maxval(abs(x - xs(first:last))) <= 1.0e-7_dp * maxval(abs(xs)), 'the serial code''s x')
    if (rank == 0) print '(a,i0,a,i0,a,i0,a,i0,a)', 'step ', step, ': ', its, ' iterations on ', size, ' ranks (serial: ', &
         its_serial, ')'
  end do
  call fegpu_dist_csr_info(a, nrows=nrows, neighbours=nb)
  call expect(nrows == last - first + 1, 'the rank owns its rows')
  call expect(nb == merge(0, merge(1, 2, rank == 0 .or. rank == size - 1), size == 1), 'neighbours: the blocks next to it')
  call fegpu_dist_csr_describe(a, text)
  if (rank == 0) print '(a)', trim(text)
  call fegpu_dist_solver_destroy(s)
  call fegpu_dist_csr_destroy(a)
  call fegpu_context_destroy(ctx)
  call finish()
  call MPI_Finalize(ierr)

contains

  !> Rows first..last of the operator: face coefficients are harmonic means
  !> of a cell coefficient that varies over four decades (and with the step).
  subroutine assemble(step, first, last, rp, ci, v)
    integer, intent(in) :: step, first, last
    integer, allocatable, intent(out) :: rp(:), ci(:)
    real(dp), allocatable, intent(out) :: v(:)
    integer :: i, ix, iy, k, j, d
    integer, parameter :: dx(4) = [-1, 1, 0, 0], dy(4) = [0, 0, -1, 1]
    real(dp) :: t, diag
    allocate (rp(last - first + 2), ci(5 * (last - first + 1)), v(5 * (last - first + 1)))
    k = 0
    rp(1) = 1
    do i = first, last
      ix = mod(i - 1, m)
      iy = (i - 1) / m
      diag = 0
      do d = 1, 4
        ! a neighbour inside the grid couples; outside, a fixed value at the wall
        j = i + dx(d) + m * dy(d)
        t = 2 / (1 / coef(step, i) + 1 / coef(step, j))
        if (ix + dx(d) < 0 .or. ix + dx(d) >= m .or. iy + dy(d) < 0 .or. iy + dy(d) >= m) then
          t = coef(step, i)
        else
          k = k + 1
          ci(k) = j
          v(k) = -t
        end if
        diag = diag + t
      end do
      k = k + 1
      ci(k) = i
      v(k) = diag
      rp(i - first + 2) = k + 1
    end do
    ci = ci(:k)
    v = v(:k)
  end subroutine

  real(dp) function coef(step, i)
    integer, intent(in) :: step, i
    coef = 10.0_dp ** (sin(0.7_dp * mod(i, 17) + step) + cos(0.013_dp * i))
  end function
end program dist_solve_f08
