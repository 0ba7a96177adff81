!> Replicates the concrete-dam program's serial transpose and copy: its
!> do-loops run beside the fegpu calls on the same random data, and the
!> results must be identical (a transpose and a copy only move values).
program transpose_serial
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use fegpu
  use checks, only: check => expect, finish
  implicit none
  integer, parameter :: nsizes = 8
  integer, parameter :: sizes(2, nsizes) = reshape([1, 1, 1, 300, 300, 1, 31, 32, 33, 65, 1000, 37, 96, 96, &
       1024, 1024], [2, nsizes])
  integer, parameter :: variants(4) = [FEGPU_VARIANT_AUTO, FEGPU_VARIANT_NAIVE, FEGPU_VARIANT_TILE, FEGPU_VARIANT_PADDED]
  type(fegpu_context) :: ctx
  integer :: k, backend

  call fegpu_context_create(ctx)
  call fegpu_context_backend(ctx, backend)
  print '(a,a)', 'transpose_serial on backend ', merge('cuda', 'cpu ', backend == FEGPU_BACKEND_CUDA)
  do k = 1, nsizes
    call check_r64(sizes(1, k), sizes(2, k))
    call check_r32(sizes(1, k), sizes(2, k))
  end do
  call fegpu_context_destroy(ctx)
  call finish()

contains

  !> A check named with the matrix size.
  subroutine expect(ok, what, m, n)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    integer, intent(in) :: m, n
    character(len=40) :: size
    write (size, '(i0,a,i0)') m, ' x ', n
    call check(ok, what // trim(size))
  end subroutine

  ! The original serial code: transpose and copy as plain do-loops.
  subroutine serial_transpose_r64(a, at)
    real(real64), intent(in) :: a(:, :)
    real(real64), intent(out) :: at(:, :)
    integer :: i, j
    do j = 1, size(a, 2)
      do i = 1, size(a, 1)
        at(j, i) = a(i, j)
      end do
    end do
  end subroutine

  subroutine serial_copy_r64(a, b)
    real(real64), intent(in) :: a(:, :)
    real(real64), intent(out) :: b(:, :)
    integer :: i, j
    do j = 1, size(a, 2)
      do i = 1, size(a, 1)
        b(i, j) = a(i, j)
      end do
    end do
  end subroutine

  subroutine check_r64(m, n)
    integer, intent(in) :: m, n
    real(real64), allocatable :: a(:, :), at(:, :), want(:, :), b(:, :), wantb(:, :), sq(:, :), wantsq(:, :)
    type(fegpu_array) :: da, dt, db, dsq
    integer :: v
    allocate (a(m, n), at(n, m), want(n, m), b(m, n), wantb(m, n))
    call random_number(a)
    a = 2 * a - 1
    call serial_transpose_r64(a, want)
    call serial_copy_r64(a, wantb)
    call fegpu_array_create(ctx, a, da)
    call fegpu_array_create_empty(ctx, real64, n, m, dt)
    call fegpu_array_create_empty(ctx, real64, m, n, db)
    do v = 1, size(variants)
      at = huge(1.0_real64)
      call fegpu_array_upload(dt, at)            ! poison the output first
      call fegpu_transpose(da, dt, variants(v))
      call fegpu_array_download(dt, at)
      call expect(all(at == want), 'resident transpose r64 ', m, n)
      b = huge(1.0_real64)
      call fegpu_array_upload(db, b)
      call fegpu_copy(da, db, variants(v))
      call fegpu_array_download(db, b)
      call expect(all(b == wantb), 'copy r64 ', m, n)
    end do
    at = huge(1.0_real64)
    call fegpu_transpose_host(ctx, a, at)
    call expect(all(at == want), 'host transpose r64 ', m, n)
    ! one column back through a 1-based slice
    b(:, 1) = 0
    call fegpu_array_download(dt, b(1:min(m, n), 1), first=1)
    call expect(all(b(1:min(m, n), 1) == want(1:min(m, n), 1)), 'slice download r64 ', m, n)
    if (m == n) then
      allocate (sq(m, m), wantsq(m, m))
      call fegpu_array_create(ctx, a, dsq)
      call fegpu_transpose_in_place(dsq)
      call fegpu_array_download(dsq, sq)
      call expect(all(sq == want), 'in-place transpose r64 ', m, n)
      call fegpu_array_destroy(dsq)
      sq = a
      call fegpu_transpose_host_in_place(ctx, sq)
      call expect(all(sq == want), 'host in-place transpose r64 ', m, n)
    end if
    call fegpu_array_destroy(da)
    call fegpu_array_destroy(dt)
    call fegpu_array_destroy(db)
  end subroutine

  subroutine check_r32(m, n)
    integer, intent(in) :: m, n
    real(real32), allocatable :: a(:, :), at(:, :), want(:, :)
    type(fegpu_array) :: da, dt
    integer :: i, j, v
    allocate (a(m, n), at(n, m), want(n, m))
    call random_number(a)
    do j = 1, n
      do i = 1, m
        want(j, i) = a(i, j)
      end do
    end do
    call fegpu_array_create(ctx, a, da)
    call fegpu_array_create_empty(ctx, real32, n, m, dt)
    do v = 1, size(variants)
      at = huge(1.0_real32)
      call fegpu_array_upload(dt, at)
      call fegpu_transpose(da, dt, variants(v))
      call fegpu_array_download(dt, at)
      call expect(all(at == want), 'resident transpose r32 ', m, n)
    end do
    at = 0
    call fegpu_transpose_host(ctx, a, at)
    call expect(all(at == want), 'host transpose r32 ', m, n)
    call fegpu_array_destroy(da)
    call fegpu_array_destroy(dt)
  end subroutine

end program transpose_serial
