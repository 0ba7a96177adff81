!> A separate project using the installed package: find_package(fegpu).
program fortran_consumer
  use, intrinsic :: iso_fortran_env, only: real64
  use fegpu
  implicit none
  type(fegpu_context) :: ctx
  type(fegpu_array) :: da, dt
  real(real64) :: a(2, 3), at(3, 2)
  a = reshape([1, 2, 3, 4, 5, 6], [2, 3])
  call fegpu_context_create(ctx)
  call fegpu_array_create(ctx, a, da)
  call fegpu_array_create_empty(ctx, real64, 3, 2, dt)
  call fegpu_transpose(da, dt)
  call fegpu_array_download(dt, at)
  call fegpu_context_destroy(ctx)
  if (any(at /= transpose(a))) error stop 'Fortran consumer: wrong transpose'
  print '(a)', 'Fortran consumer: transpose correct'
end program fortran_consumer
