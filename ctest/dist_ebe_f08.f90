!> A legacy MPI FEM loop (use mpi_f08): a 2-D conduction problem whose
!> elements the ranks split into uneven vertical strips, each rank building
!> its own nodes (numbered 1.. locally), its elements and its boundary
!> conditions, and solving element by element over all ranks. The plate is
!> layered (conductivity 1, 40 and 3 in horizontal bands) and its columns of
!> nodes are wavy, held at T = 0 on the left and T = 1 on the right: the
!> exact temperature is T = x / L, which bilinear elements reproduce (the
!> patch test), so every rank's nodes must carry it to the solver's
!> tolerance. Checked against the one-process EBE CG too.
program dist_ebe_f08
  use, intrinsic :: iso_fortran_env, only: real64
  use mpi_f08
  use fegpu
  use fegpu_dist
  use checks, only: expect, finish
  implicit none
  integer, parameter :: dp = real64, ex = 23, ey = 9, nxn = ex + 1, nyn = ey + 1
  real(dp), parameter :: length = 4.0_dp, tol = 1.0e-11_dp
  type(fegpu_context) :: ctx
  integer :: rank, nranks, ierr, first_col, last_col, its_split, its_whole
  real(dp) :: err_exact, err_whole
  real(dp), allocatable :: t_split(:), t_plate(:)
  integer, allocatable :: gnode(:), g_plate(:)
  character(len=300) :: text

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, nranks)
  call fegpu_dist_context_create(MPI_COMM_WORLD, ctx)
  ! rank r owns element columns first_col..last_col: r + 1 shares of ex
  first_col = nint(ex * real(rank * (rank + 1) / 2, dp) / (nranks * (nranks + 1) / 2)) + 1
  last_col = nint(ex * real((rank + 1) * (rank + 2) / 2, dp) / (nranks * (nranks + 1) / 2))
  call solve(first_col, last_col, .true., t_split, gnode, its_split)
  ! the whole plate by this rank alone: its nodes are numbered as the global ones
  call solve(1, ex, .false., t_plate, g_plate, its_whole)
  err_exact = maxval(abs(t_split - x_of(gnode) / length))
  err_whole = maxval(abs(t_split - t_plate(gnode)))
  if (rank == 0) print '(a,i0,a,i0,a,es9.2,a,es9.2)', 'iterations: one process ', its_whole, ', split ', its_split, &
       '; max |T - x/L| = ', err_exact, '; max |T - T_one| = ', err_whole
  call expect(err_exact <= 1.0e-8_dp, 'T = x / L at every node of the rank')
  call expect(err_whole <= 1.0e-9_dp, 'T as the one-process solve''s')
  call expect(abs(its_split - its_whole) <= max(1, its_whole / 50), 'iterations as the one-process solve''s')
  call fegpu_context_destroy(ctx)
  call finish()
  call MPI_Finalize(ierr)

contains

  !> The wavy column position of global node g (1-based, row by row).
  elemental real(dp) function x_of(g)
    integer, intent(in) :: g
    integer :: i, j
    i = mod(g - 1, nxn)
    j = (g - 1) / nxn
    x_of = length * i / ex
    if (i > 0 .and. i < ex) x_of = x_of + 0.04_dp * sin(1.7_dp * j + i)
  end function

  !> The strip of element columns c0..c1 solved over all ranks (split: each
  !> rank its strip) or by this rank alone (the whole plate): T at the
  !> strip's nodes, their global numbers, the iterations.
  subroutine solve(c0, c1, split, t, gnode, its)
    integer, intent(in) :: c0, c1
    logical, intent(in) :: split
    real(dp), allocatable, intent(out) :: t(:)
    integer, allocatable, intent(out) :: gnode(:)
    integer, intent(out) :: its
    type(fegpu_fem) :: fem
    type(fegpu_ebe) :: ebe
    type(fegpu_array) :: b, x
    real(dp), allocatable :: coords(:, :), values(:)
    integer, allocatable :: conn(:, :), material(:), dofs(:)
    real(dp) :: props(2, 3)
    integer :: cols, n, e, i, j, l, nf
    cols = c1 - c0 + 1
    n = (cols + 1) * nyn
    allocate (coords(2, n), gnode(n), conn(4, cols * ey), material(cols * ey), t(n), dofs(n), values(n))
    nf = 0
    do j = 0, ey
      do i = c0 - 1, c1
        l = (i - c0 + 1) + (cols + 1) * j + 1
        gnode(l) = i + nxn * j + 1
        coords(:, l) = [x_of(gnode(l)), 0.5_dp * j]
        if (i == 0 .or. i == ex) then
          nf = nf + 1
          dofs(nf) = l
          values(nf) = merge(0.0_dp, 1.0_dp, i == 0)
        end if
      end do
    end do
    do j = 1, ey
      do i = 1, cols
        e = i + cols * (j - 1)
        l = i + (cols + 1) * (j - 1)
        conn(:, e) = [l, l + 1, l + cols + 2, l + cols + 1]
        material(e) = 1 + merge(1, 0, j > 3) + merge(1, 0, j > 6)
      end do
    end do
    props = reshape([1.0_dp, 1.0_dp, 40.0_dp, 1.0_dp, 3.0_dp, 1.0_dp], [2, 3])
    call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_HEAT, coords, conn, props, material, fem)
    call fegpu_fem_integrate(fem)
    if (split) then
      call fegpu_dist_ebe_create(fem, MPI_COMM_WORLD, gnode, dofs(:nf), values(:nf), ebe)
      call fegpu_dist_ebe_describe(ebe, text)
      if (rank == 0) print '(a)', trim(text)
    else
      call fegpu_ebe_create(fem, dofs(:nf), values(:nf), ebe)
    end if
    t = 0
    call fegpu_array_create(ctx, t, b)
    call fegpu_array_create(ctx, t, x)
    call fegpu_ebe_solve(ebe, b, x, tol, 2000, iterations=its)
    call fegpu_array_download(x, t)
    call fegpu_array_destroy(b)
    call fegpu_array_destroy(x)
    call fegpu_ebe_destroy(ebe)
    call fegpu_fem_destroy(fem)
  end subroutine

end program dist_ebe_f08
