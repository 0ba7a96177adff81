!> The serial FEM routines of the legacy heat-conduction codes the CTest
!> drivers replicate: bilinear quad4 element conductivity and capacity by
!> 2 x 2 Gauss points, dense assembly, fixed temperatures kept symmetric,
!> and Jacobi-preconditioned CG, written as such codes are; and the hex8
!> Gauss point the serial thermal-stress and nonlinear-dynamics codes share.
module serial_fem
  use iso_fortran_env, only: real64
  implicit none
  private
  public :: element_conductivity, element_capacity, element_area, fix_rows, jacobi_cg, hex8_point

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
  !> At Gauss point p (1..8, x fastest, -g first) of the hex8 with nodes x:
  !> N, the physical gradients dN/dx (grad(c, a)) and det J (the weights are 1).
  subroutine hex8_point(x, p, n, grad, det)
    real(real64), intent(in) :: x(3, 8)
    integer, intent(in) :: p
    real(real64), intent(out) :: n(8), grad(3, 8), det
    real(real64) :: xi(3), s(3), dn(3, 8), jac(3, 3), inv(3, 3)
    integer :: a, c, r, r1, r2, c1, c2
    xi = [merge(g, -g, btest(p - 1, 0)), merge(g, -g, btest(p - 1, 1)), merge(g, -g, btest(p - 1, 2))]
    do a = 1, 8
      s = [merge(1d0, -1d0, mod(a - 1, 4) == 1 .or. mod(a - 1, 4) == 2), merge(1d0, -1d0, mod(a - 1, 4) >= 2), &
           merge(1d0, -1d0, a >= 5)]
      n(a) = 0.125d0 * (1 + s(1) * xi(1)) * (1 + s(2) * xi(2)) * (1 + s(3) * xi(3))
      dn(1, a) = 0.125d0 * s(1) * (1 + s(2) * xi(2)) * (1 + s(3) * xi(3))
      dn(2, a) = 0.125d0 * s(2) * (1 + s(1) * xi(1)) * (1 + s(3) * xi(3))
      dn(3, a) = 0.125d0 * s(3) * (1 + s(1) * xi(1)) * (1 + s(2) * xi(2))
    end do
    jac = matmul(dn, transpose(x))   ! jac(r, c) = dx_c / dxi_r
    det = jac(1, 1) * (jac(2, 2) * jac(3, 3) - jac(2, 3) * jac(3, 2)) &
        - jac(1, 2) * (jac(2, 1) * jac(3, 3) - jac(2, 3) * jac(3, 1)) &
        + jac(1, 3) * (jac(2, 1) * jac(3, 2) - jac(2, 2) * jac(3, 1))
    do r = 1, 3
      do c = 1, 3
        r1 = mod(r, 3) + 1
        r2 = mod(r + 1, 3) + 1
        c1 = mod(c, 3) + 1
        c2 = mod(c + 1, 3) + 1
        inv(c, r) = (jac(r1, c1) * jac(r2, c2) - jac(r1, c2) * jac(r2, c1)) / det
      end do
    end do
    grad = matmul(inv, dn)
  end subroutine

end module serial_fem
