! The concrete-dam study's pipelined kernels from Fortran: the serial loops
! (an element-wise update and the column-pair inner products) beside
! fegpu's pipelines on the same host arrays, registered and not, for every
! strategy and 1..16 chunks; the results must agree (the update exactly,
! the inner products to rounding). Then the profile's table and JSON.
program pipeline_serial
  use, intrinsic :: iso_fortran_env, only: real64
  use fegpu
  use checks, only: expect, finish
  implicit none
  integer, parameter :: n = 100003, m = 257, ncols = 389
  type(fegpu_context) :: ctx
  real(real64), allocatable, target :: x(:), y0(:), y(:), want(:), a(:, :), b(:, :), dots(:), want_dots(:)
  integer :: i, j, strategy, chunks, reg, unit, ios
  character(len=256) :: line
  logical :: found

  allocate (x(n), y0(n), y(n), want(n), a(m, ncols), b(m, ncols), dots(ncols), want_dots(ncols))
  do i = 1, n
    x(i) = sin(0.001_real64 * i)
    y0(i) = cos(0.002_real64 * i)
  end do
  do j = 1, ncols
    do i = 1, m
      a(i, j) = sin(0.01_real64 * (i + 3 * j))
      b(i, j) = cos(0.02_real64 * (2 * i - j))
    end do
  end do
  ! The serial code's loops.
  do i = 1, n
    want(i) = 1.5_real64 * x(i) - 0.25_real64 * y0(i)
  end do
  do j = 1, ncols
    want_dots(j) = 0
    do i = 1, m
      want_dots(j) = want_dots(j) + a(i, j) * b(i, j)
    end do
  end do

  call fegpu_context_create(ctx)
  call fegpu_profile_enable(ctx, .true.)
  do reg = 0, 1
    if (reg == 1) then
      call fegpu_host_register(ctx, x)
      call fegpu_host_register(ctx, y)
      call fegpu_host_register(ctx, a)
      call fegpu_host_register(ctx, b)
    end if
    do strategy = FEGPU_PIPELINE_SERIAL, FEGPU_PIPELINE_STAGED
      do chunks = 1, 16
        y = y0
        call fegpu_pipeline_axpby(ctx, 1.5_real64, x, -0.25_real64, y, strategy=strategy, n_streams=4, n_chunks=chunks)
        call expect(maxval(abs(y - want)) <= 1e-15_real64 * maxval(abs(want)), 'axpby')
        dots = huge(1.0_real64)
        call fegpu_pipeline_column_dots(ctx, a, b, dots, strategy=strategy, n_streams=3, n_chunks=chunks)
        call expect(maxval(abs(dots - want_dots)) <= 1e-13_real64 * maxval(abs(want_dots)), 'column dots')
      end do
    end do
    if (reg == 1) then
      call fegpu_host_unregister(ctx, x)
      call fegpu_host_unregister(ctx, y)
      call fegpu_host_unregister(ctx, a)
      call fegpu_host_unregister(ctx, b)
    end if
  end do
  call products()
  y = y0   ! automatic: the first two calls measure, the next ones follow the model
  call fegpu_pipeline_axpby(ctx, 1.5_real64, x, -0.25_real64, y)
  call expect(maxval(abs(y - want)) <= 1e-15_real64 * maxval(abs(want)), 'axpby, automatic')
  call fegpu_profile_report(ctx, json_path='pipeline_serial_profile.json')
  open (newunit=unit, file='pipeline_serial_profile.json', status='old', action='read', iostat=ios)
  call expect(ios == 0, 'the profile JSON was written')
  found = .false.
  do while (ios == 0)
    read (unit, '(a)', iostat=ios) line
    if (ios == 0) found = found .or. index(line, '"operation": "axpby", "calls": 97') > 0
  end do
  close (unit, status='delete')
  call expect(found, 'the profile counted 97 axpby calls')
  call fegpu_profile_enable(ctx, .false.)   ! else destroy prints the table and writes fegpu-profile-<pid>.json
  call fegpu_context_destroy(ctx)
  call finish()
contains

  !> Matrix products and the transpose against the intrinsics.
  subroutine products()
    real(real64) :: p(61, 37), q(37, 45), r(61, 45), r0(61, 45), v(37), w(61), pt(37, 61)
    integer :: s
    call random_number(p)
    call random_number(q)
    call random_number(r0)
    call random_number(v)
    do s = FEGPU_PIPELINE_SERIAL, FEGPU_PIPELINE_STAGED
      r = r0
      call fegpu_pipeline_gemm(ctx, 2.0_real64, p, q, -1.0_real64, r, strategy=s, n_streams=3, n_chunks=5)
      call expect(maxval(abs(r - (2 * matmul(p, q) - r0))) < 1e-12_real64, 'gemm')
      w = r0(:, 1)
      call fegpu_pipeline_gemv(ctx, 1.0_real64, p, v, 0.5_real64, w, strategy=s, n_streams=2, n_chunks=4)
      call expect(maxval(abs(w - (matmul(p, v) + 0.5_real64 * r0(:, 1)))) < 1e-12_real64, 'gemv')
      call fegpu_pipeline_transpose(ctx, p, pt, strategy=s, n_streams=4, n_chunks=6)
      call expect(all(pt == transpose(p)), 'transpose in panels')
    end do
  end subroutine

end program pipeline_serial
