!> Without `stat`, an error prints the message and stops, as intrinsics do
!> (CTest expects the message and a failing exit).
program error_stop
  use, intrinsic :: iso_fortran_env, only: real64
  use fegpu
  implicit none
  type(fegpu_context) :: ctx
  type(fegpu_array) :: a, b
  real(real64) :: x(3, 4)
  x = 1
  call fegpu_context_create(ctx)
  call fegpu_array_create(ctx, x, a)
  call fegpu_array_create(ctx, x, b)
  call fegpu_transpose(a, b)
  print '(a)', 'not reached'
end program error_stop
