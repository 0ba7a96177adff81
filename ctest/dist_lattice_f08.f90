!> A legacy MPI lattice-Boltzmann code (use mpi_f08): each rank owns a slab
!> of z-planes of a channel driven by a body force between two walls
!> (Poiseuille flow), sets the flags of its own planes, steps, and reads
!> its own planes back. Checked against the one-process lattice of the
!> whole channel (each rank runs it alone): the same populations, bit for
!> bit on the CPU backend; and against the analytic parabola, which TRT
!> with magic parameter 3/16 reproduces at steady state.
program dist_lattice_f08
  use, intrinsic :: iso_fortran_env, only: real64, int8
  use mpi_f08
  use fegpu
  use fegpu_dist
  use checks, only: expect, finish
  implicit none
  integer, parameter :: dp = real64, nx = 4, ny = 7, nz = 10, nsteps = 2500
  real(dp), parameter :: tau = 0.8_dp, g = 1.0e-6_dp
  type(fegpu_context) :: ctx
  type(fegpu_lattice) :: split, whole
  integer(int8), allocatable :: flags(:, :, :)
  real(dp), allocatable :: rho(:, :, :), u(:, :, :, :), f(:, :, :, :), f_whole(:, :, :, :)
  real(dp) :: nu, exact(ny), tol, worst
  integer :: rank, size, ierr, z_first, nz_own, last, y, backend, periodic
  character(len=512) :: text

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call MPI_Comm_size(MPI_COMM_WORLD, size)
  call fegpu_dist_context_create(MPI_COMM_WORLD, ctx)
  call fegpu_context_backend(ctx, backend)
  ! the two streaming schemes of CUDA round differently; on the CPU the step is one code
  tol = merge(0.0_dp, 1.0e-12_dp, backend == FEGPU_BACKEND_CPU)
  ! this rank's planes, nz split as evenly as it goes
  z_first = rank * nz / size + 1
  last = (rank + 1) * nz / size
  nz_own = last - z_first + 1
  periodic = FEGPU_PERIODIC_X + FEGPU_PERIODIC_Z
  call fegpu_dist_lattice_create(ctx, MPI_COMM_WORLD, nx, ny, nz, z_first, nz_own, tau, split, periodic=periodic)
  call fegpu_lattice_create(ctx, nx, ny, nz, tau, whole, periodic=periodic)
  ! walls beyond the y faces; the rank sets its own planes' flags
  allocate (flags(nx, ny, nz_own), rho(nx, ny, nz_own), u(3, nx, ny, nz_own))
  flags = FEGPU_FLUID
  call fegpu_lattice_set_flags(split, flags)
  call fegpu_lattice_set_trt(split, 3.0_dp / 16)
  call fegpu_lattice_set_trt(whole, 3.0_dp / 16)
  call fegpu_lattice_set_force(split, [g, 0.0_dp, 0.0_dp])
  call fegpu_lattice_set_force(whole, [g, 0.0_dp, 0.0_dp])
  call fegpu_lattice_step(split, nsteps)
  call fegpu_lattice_step(whole, nsteps)

  allocate (f(0:18, nx, ny, nz_own), f_whole(0:18, nx, ny, nz))
  call fegpu_lattice_get_populations(split, f)
  call fegpu_lattice_get_populations(whole, f_whole)
  worst = maxval(abs(f - f_whole(:, :, :, z_first:last)))
  if (worst > tol) print '(a,i0,a,es10.3)', 'rank ', rank, ': populations differ from one process by ', worst
  call expect(worst <= tol, 'the rank''s planes equal the one-process lattice''s')

  ! u(y) = g / (2 nu) (y - 1/2) (ny + 1/2 - y): halfway walls at y = 1/2 and ny + 1/2
  call fegpu_lattice_fields(split, rho, u, z_first=z_first)
  nu = (tau - 0.5_dp) / 3
  exact = [(g / (2 * nu) * (y - 0.5_dp) * (ny + 0.5_dp - y), y = 1, ny)]
  worst = 0
  do y = 1, ny
    worst = max(worst, maxval(abs(u(1, :, y, :) - exact(y))))
  end do
  call expect(worst <= 1.0e-9_dp * maxval(exact), 'the Poiseuille parabola')
  call expect(maxval(abs(u(2:3, :, :, :))) <= 1.0e-9_dp * maxval(exact), 'no cross flow')
  if (rank == 0) then
    call fegpu_dist_lattice_describe(split, text)
    print '(a,es10.3,a)', 'Poiseuille over the ranks: largest error against the parabola ', worst / maxval(exact), ' relative'
    print '(a)', trim(text)
  end if
  call fegpu_lattice_destroy(split)
  call fegpu_lattice_destroy(whole)
  call fegpu_context_destroy(ctx)
  call finish()
  call MPI_Finalize(ierr)
end program dist_lattice_f08
