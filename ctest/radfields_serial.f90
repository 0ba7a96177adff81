! The FE-IIEE rad_fields loop as the serial code has it (outer loop over the
! S' elements, then the S points, then the right-hand sides, with the dyadic
! Green's function formed as a 3x3 matrix), and fegpu called element by element
! from the same outer loop; the accumulated fields must agree to rounding for
! N_S / n_RHS = 200 / 1, 150 / 10 and 60 / 100, lossless and lossy.
program radfields_serial
  use, intrinsic :: iso_c_binding, only: c_double_complex
  use, intrinsic :: iso_fortran_env, only: real64
  use fegpu
  implicit none
  integer, parameter :: dp = real64
  integer, parameter :: n_theta = 4, n_phi = 8, gauss = 2   ! S': 32 quad elements, 2 x 2 Gauss points each
  integer, parameter :: npe = gauss * gauss
  real(dp), parameter :: pi = 3.14159265358979323846_dp
  type(fegpu_context) :: ctx
  integer :: cases(2, 3), ic, ilossy, failures
  complex(dp) :: k, omega_mu

  cases = reshape([200, 1, 150, 10, 60, 100], [2, 3])
  failures = 0
  call fegpu_context_create(ctx)
  do ilossy = 0, 1
    k = cmplx(2 * pi, -0.2_dp * ilossy, dp)
    omega_mu = cmplx(2 * pi * 1.1_dp, 0.05_dp * ilossy, dp)
    do ic = 1, 3
      call run_case(cases(1, ic), cases(2, ic))
    end do
  end do
  call fegpu_context_destroy(ctx)
  if (failures > 0) then
    print '(i0,a)', failures, ' case(s) failed'
    error stop 1
  end if
  print '(a)', 'radfields_serial: all cases agree'

contains

  subroutine run_case(n_s, n_rhs)
    integer, intent(in) :: n_s, n_rhs
    real(dp), allocatable :: s_pts(:, :), pts(:, :), w(:)
    complex(c_double_complex), allocatable :: cur(:, :, :, :), ref(:, :, :, :), got(:, :, :, :)
    type(fegpu_radfields) :: acc
    integer :: ie, it, ip, is
    real(dp) :: err, scale

    allocate (s_pts(3, n_s), pts(3, npe), w(npe), cur(3, 2, npe, n_rhs))
    allocate (ref(3, 2, n_s, n_rhs), got(3, 2, n_s, n_rhs))
    do is = 1, n_s   ! S: a spiral of points on the sphere of radius 1
      s_pts(3, is) = 1 - 2 * (is - 0.5_dp) / n_s
      s_pts(1, is) = sqrt(1 - s_pts(3, is)**2) * cos(2.399963_dp * is)
      s_pts(2, is) = sqrt(1 - s_pts(3, is)**2) * sin(2.399963_dp * is)
    end do
    ref = 0
    got = cmplx(huge(1.0_dp), 0, dp)   ! poison: download must overwrite all
    call fegpu_radfields_create(ctx, s_pts, n_rhs, k, omega_mu, acc)
    ie = 0
    do it = 1, n_theta        ! the host's outer loop over S' elements
      do ip = 1, n_phi
        ie = ie + 1
        call element(it, ip, ie, n_rhs, pts, w, cur)
        call serial_rad_fields(s_pts, pts, w, cur, ref)
        call fegpu_radfields_accumulate(acc, pts, w, cur)
      end do
    end do
    call fegpu_radfields_download(acc, got)
    call fegpu_radfields_destroy(acc)
    scale = maxval(abs(ref))
    err = maxval(abs(got - ref)) / scale
    print '(a,i4,a,i4,a,l1,a,es9.2)', 'N_S ', n_s, '  n_RHS ', n_rhs, '  lossy ', aimag(k) /= 0, &
         '  max |fegpu - serial| / max |serial| = ', err
    if (.not. (err < 1e-12_dp) .or. scale == 0) failures = failures + 1
  end subroutine

  !> Sample points, weights and (made-up, smooth) currents of S' element (it, ip):
  !> a patch of the sphere of radius 0.5, 2 x 2 Gauss points in (theta, phi).
  subroutine element(it, ip, ie, n_rhs, pts, w, cur)
    integer, intent(in) :: it, ip, ie, n_rhs
    real(dp), intent(out) :: pts(3, npe), w(npe)
    complex(c_double_complex), intent(out) :: cur(3, 2, npe, n_rhs)
    real(dp), parameter :: a = 0.5_dp, g(2) = [-1 / sqrt(3.0_dp), 1 / sqrt(3.0_dp)]
    real(dp) :: dth, dph, th, ph
    integer :: i, j, n, r, c, m
    dth = pi / n_theta
    dph = 2 * pi / n_phi
    n = 0
    do i = 1, gauss
      do j = 1, gauss
        n = n + 1
        th = (it - 0.5_dp + 0.5_dp * g(i)) * dth
        ph = (ip - 0.5_dp + 0.5_dp * g(j)) * dph
        pts(:, n) = a * [sin(th) * cos(ph), sin(th) * sin(ph), cos(th)]
        w(n) = a**2 * sin(th) * (dth / 2) * (dph / 2)
        do r = 1, n_rhs
          do m = 1, 2
            do c = 1, 3
              cur(c, m, n, r) = cmplx(cos(ie + 0.7_dp * c + 1.3_dp * m + 0.11_dp * r + n), sin(0.5_dp * ie - c + r * 0.3_dp), dp)
            end do
          end do
        end do
      end do
    end do
  end subroutine

  !> The original triple loop for one S' element: S points, then right-hand sides.
  subroutine serial_rad_fields(s_pts, pts, w, cur, fields)
    real(dp), intent(in) :: s_pts(:, :), pts(:, :), w(:)
    complex(dp), intent(in) :: cur(:, :, :, :)
    complex(dp), intent(inout) :: fields(:, :, :, :)
    complex(dp), parameter :: j = (0.0_dp, 1.0_dp)
    complex(dp) :: g, dg(3), gbar(3, 3), p3, q1
    real(dp) :: rv(3), r, rh(3)
    integer :: is, ip, irhs, a, b
    do is = 1, size(s_pts, 2)
      do ip = 1, size(pts, 2)
        rv = s_pts(:, is) - pts(:, ip)
        r = norm2(rv)
        rh = rv / r
        g = exp(-j * k * r) / (4 * pi * r)
        dg = -(1 + j * k * r) / r * g * rh
        p3 = 3 + 3 * j * k * r - (k * r)**2
        q1 = 1 + j * k * r
        do a = 1, 3
          do b = 1, 3
            gbar(a, b) = g / (k * r)**2 * p3 * rh(a) * rh(b)
          end do
          gbar(a, a) = gbar(a, a) + g - g / (k * r)**2 * q1
        end do
        do irhs = 1, size(cur, 4)
          fields(:, 1, is, irhs) = fields(:, 1, is, irhs) + w(ip) * &
               (-j * omega_mu * matmul(gbar, cur(:, 1, ip, irhs)) - cross(dg, cur(:, 2, ip, irhs)))
          fields(:, 2, is, irhs) = fields(:, 2, is, irhs) + w(ip) * &
               (-j * omega_mu * cross(dg, cur(:, 1, ip, irhs)) - k**2 * matmul(gbar, cur(:, 2, ip, irhs)))
        end do
      end do
    end do
  end subroutine

  pure function cross(u, v) result(c)
    complex(dp), intent(in) :: u(3), v(3)
    complex(dp) :: c(3)
    c = [u(2) * v(3) - u(3) * v(2), u(3) * v(1) - u(1) * v(3), u(1) * v(2) - u(2) * v(1)]
  end function

end program radfields_serial
