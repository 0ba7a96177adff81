!> A replicated-data FE-IIEE loop over MPI (use mpi_f08): every rank holds
!> the S points and the S' sources; fegpu splits the S points over the
!> ranks and each rank gets every point's fields back. Checked against the
!> one-process accumulator (which radfields_serial checks against the
!> seed's serial loop), bit for bit on the CPU backend.
program dist_radfields_f08
  use, intrinsic :: iso_fortran_env, only: real64
  use, intrinsic :: iso_c_binding, only: c_double_complex
  use mpi_f08
  use fegpu
  use fegpu_dist
  use checks, only: expect, finish
  implicit none
  integer, parameter :: dp = real64, n_s = 37, n_p = 29, n_rhs = 2
  complex(c_double_complex), parameter :: k = (6.0_dp, 0.02_dp), omega_mu = (1.7_dp, 0.0_dp)
  type(fegpu_context) :: ctx
  type(fegpu_radfields) :: split, whole
  real(dp) :: s(3, n_s), p(3, n_p), w(n_p), tol
  complex(c_double_complex) :: cur(3, 2, n_p, n_rhs), e(3, 2, n_s, n_rhs), e_whole(3, 2, n_s, n_rhs)
  integer :: rank, ierr, i, backend
  character(len=256) :: text

  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank)
  call fegpu_dist_context_create(MPI_COMM_WORLD, ctx)
  call fegpu_context_backend(ctx, backend)
  tol = merge(0.0_dp, 1.0e-12_dp, backend == FEGPU_BACKEND_CPU)
  ! S inside the unit ball, S' on a sphere of radius 1.4 (no coincident pair)
  s = reshape([(0.6_dp * sin(0.7_dp * i + [0.0_dp, 1.1_dp, 2.3_dp]), i = 1, n_s)], [3, n_s])
  p = reshape([(1.4_dp * [cos(0.9_dp * i) * sin(0.4_dp * i + 0.2_dp), sin(0.9_dp * i) * sin(0.4_dp * i + 0.2_dp), &
       cos(0.4_dp * i + 0.2_dp)], i = 1, n_p)], [3, n_p])
  w = 0.02_dp
  cur = reshape([(cmplx(sin(0.31_dp * i), cos(0.17_dp * i), dp), i = 1, size(cur))], shape(cur))
  call fegpu_dist_radfields_create(ctx, MPI_COMM_WORLD, s, n_rhs, k, omega_mu, split)
  call fegpu_radfields_create(ctx, s, n_rhs, k, omega_mu, whole)
  call fegpu_radfields_accumulate(split, p, w, cur)
  call fegpu_radfields_accumulate(whole, p, w, cur)
  call fegpu_radfields_download(split, e)
  call fegpu_radfields_download(whole, e_whole)
  call expect(maxval(abs(e - e_whole)) <= tol * maxval(abs(e_whole)), 'the one-process fields on every rank')
  if (rank == 0) then
    call fegpu_dist_radfields_describe(split, text)
    print '(a)', trim(text)
  end if
  call fegpu_radfields_destroy(split)
  call fegpu_radfields_destroy(whole)
  call fegpu_context_destroy(ctx)
  call finish()
  call MPI_Finalize(ierr)
end program dist_radfields_f08
