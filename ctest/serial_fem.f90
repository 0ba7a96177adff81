!> The serial FEM routines of the legacy heat-conduction codes the CTest
!> drivers replicate: bilinear quad4 element conductivity and capacity by
!> 2 x 2 Gauss points, dense assembly, fixed temperatures kept symmetric,
!> and Jacobi-preconditioned CG, written as such codes are.
module serial_fem
  use iso_fortran_env, only: real64
  implicit none
  private
  public :: element_conductivity, element_capacity, element_area, fix_rows, jacobi_cg

  real(real64), parameter :: g = 0.577350269189625764d0
  real(real64), parameter :: sx(4) = [-1d0, 1d0, 1d0, -1d0], sy(4) = [-1d0, -1d0, 1d0, 1d0]

contains

  !> Shape functions, their natural derivatives and det J at Gauss point (ig, jg).
  subroutine gauss_point(x, ig, jg, n, dx, det)
    real(real64), intent(in) :: x(2, 4)
    integer, intent(in) :: ig, jg
    real(real64), intent(out) :: n(4), dx(2, 4), det
    real(real64) :: xi, eta, dn(2, 4), jac(2, 2), inv(2, 2)
    integer :: p
    xi = merge(-g, g, ig == 1)
    eta = merge(-g, g, jg == 1)
    do p = 1, 4
      n(p) = 0.25d0 * (1 + sx(p) * xi) * (1 + sy(p) * eta)
      dn(1, p) = 0.25d0 * sx(p) * (1 + sy(p) * eta)
      dn(2, p) = 0.25d0 * sy(p) * (1 + sx(p) * xi)
    end do
    jac = matmul(dn, transpose(x))
    det = jac(1, 1) * jac(2, 2) - jac(1, 2) * jac(2, 1)
    inv = reshape([jac(2, 2), -jac(2, 1), -jac(1, 2), jac(1, 1)], [2, 2]) / det
    dx = matmul(inv, dn)
  end subroutine

  subroutine element_conductivity(x, cond, ke)
    real(real64), intent(in) :: x(2, 4), cond
    real(real64), intent(out) :: ke(4, 4)
    real(real64) :: n(4), dx(2, 4), det
    integer :: ig, jg
    ke = 0
    do ig = 1, 2
      do jg = 1, 2
        call gauss_point(x, ig, jg, n, dx, det)
        ke = ke + cond * det * matmul(transpose(dx), dx)
      end do
    end do
  end subroutine

  subroutine element_capacity(x, rho_c, ce)
    real(real64), intent(in) :: x(2, 4), rho_c
    real(real64), intent(out) :: ce(4, 4)
    real(real64) :: n(4), dx(2, 4), det
    integer :: ig, jg, a, b
    ce = 0
    do ig = 1, 2
      do jg = 1, 2
        call gauss_point(x, ig, jg, n, dx, det)
        do a = 1, 4
          do b = 1, 4
            ce(a, b) = ce(a, b) + rho_c * det * n(a) * n(b)
          end do
        end do
      end do
    end do
  end subroutine

  real(real64) function element_area(x)
    real(real64), intent(in) :: x(2, 4)
    element_area = 0.5d0 * abs((x(1, 3) - x(1, 1)) * (x(2, 4) - x(2, 2)) - (x(1, 4) - x(1, 2)) * (x(2, 3) - x(2, 1)))
  end function

  !> Fixed values kept symmetric: lift = A g (the known columns' pull on the
  !> free rows), then the fixed rows and columns zeroed but for the diagonal.
  subroutine fix_rows(a, fixed, values, lift)
    real(real64), intent(inout) :: a(:, :)
    integer, intent(in) :: fixed(:)
    real(real64), intent(in) :: values(:)
    real(real64), intent(out) :: lift(:)
    real(real64) :: gv(size(lift)), d
    integer :: i, d_row
    gv = 0
    gv(fixed) = values
    lift = matmul(a, gv)
    do i = 1, size(fixed)
      d_row = fixed(i)
      d = a(d_row, d_row)
      a(d_row, :) = 0
      a(:, d_row) = 0
      a(d_row, d_row) = d
    end do
  end subroutine

  !> Jacobi-preconditioned CG for the fixed-row matrix a, warm-started from x,
  !> to ||r|| / ||b|| <= tol.
  subroutine jacobi_cg(a, b, x, tol, iterations)
    real(real64), intent(in) :: a(:, :), b(:), tol
    real(real64), intent(inout) :: x(:)
    integer, intent(out) :: iterations
    real(real64) :: r(size(b)), z(size(b)), p(size(b)), q(size(b)), dinv(size(b)), rz, rz_new, alpha, bnorm
    integer :: i, it
    dinv = [(1 / a(i, i), i = 1, size(b))]
    r = b - matmul(a, x)
    bnorm = norm2(b)
    iterations = 0
    if (norm2(r) / bnorm <= tol) return
    z = dinv * r
    p = z
    rz = dot_product(r, z)
    do it = 1, 100000
      q = matmul(a, p)
      alpha = rz / dot_product(p, q)
      x = x + alpha * p
      r = r - alpha * q
      iterations = it
      if (norm2(r) / bnorm <= tol) exit
      z = dinv * r
      rz_new = dot_product(r, z)
      p = z + (rz_new / rz) * p
      rz = rz_new
    end do
  end subroutine
end module serial_fem
