!> The legacy codes' own solver, as the CTest drivers run it beside fegpu:
!> Jacobi-preconditioned CG on a 1-based CSR matrix, stopping when
!> ||r|| <= tol ||b||.
module serial_krylov
  use, intrinsic :: iso_fortran_env, only: real64
  implicit none
  private
  public :: serial_cg
  integer, parameter :: dp = real64

contains

  !> The legacy code's own solver: Jacobi-preconditioned CG.
  subroutine serial_cg(rp, ci, v, b, x, tol, its)
    integer, intent(in) :: rp(:), ci(:)
    real(dp), intent(in) :: v(:), b(:), tol
    real(dp), intent(out) :: x(:)
    integer, intent(out) :: its
    real(dp) :: r(size(b)), z(size(b)), p(size(b)), q(size(b)), d(size(b)), rz, rz_old, alpha, bnorm
    integer :: i, kk
    do i = 1, size(b)
      do kk = rp(i), rp(i + 1) - 1
        if (ci(kk) == i) d(i) = v(kk)
      end do
    end do
    x = 0
    r = b
    bnorm = norm2(b)
    z = r / d
    p = z
    rz = dot_product(r, z)
    do its = 1, 100000
      do i = 1, size(b)
        q(i) = sum(v(rp(i):rp(i + 1) - 1) * p(ci(rp(i):rp(i + 1) - 1)))
      end do
      alpha = rz / dot_product(p, q)
      x = x + alpha * p
      r = r - alpha * q
      if (norm2(r) <= tol * bnorm) return
      z = r / d
      rz_old = rz
      rz = dot_product(r, z)
      p = z + (rz / rz_old) * p
    end do
  end subroutine
end module serial_krylov
