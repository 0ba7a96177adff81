! A legacy-style serial incremental thermal-stress code beside fegpu: a
! two-lift concrete dam section on a rock foundation (hex8, one element
! thick, held in z: plane strain), lift 2 cast 5 days after lift 1. The
! temperatures come from fegpu's heat stepper (hydration heat decaying with
! age, fixed rock bottom) and stay on the device for fegpu's stress solve;
! the serial code, as a dam code writes it, integrates the unit-modulus
! element stiffness at 2 x 2 x 2 Gauss points, takes each element's modulus
! from its age (exponential law), its creep from a two-term aging Dirichlet
! series (Zhu Bofang's incremental method: the stress increment at the
! middle of the step), thermal and autogenous strain as initial strains,
! assembles a dense matrix, fixes the supports and solves by Cholesky.
! Required: fegpu's Gauss-point stresses equal the serial code's to
! rounding at every step, and the displacements too.
program dam_stress
  use fegpu
  use checks, only: expect, finish
  use serial_fem, only: hex8_point
  use iso_fortran_env, only: real64
  implicit none
  integer, parameter :: nxg = 12, nyg = 6, terms = 2, stride = 8 + 4 * terms, steps = 24
  real(real64), parameter :: dt = 0.5d0, t0 = 5.1d0
  integer :: idx(0:nxg, 0:nyg, 0:1), nnode, nel, e, i, j, k, a, b, step, p, q, m
  real(real64), allocatable :: xyz(:, :), kunit(:, :, :), sig(:, :, :), w(:, :, :, :), kglob(:, :), f(:), du(:), u(:)
  real(real64), allocatable :: t_old(:), t_new(:), cast(:), ebar(:), sig_gpu(:, :), source(:, :), u_gpu(:), nodal(:, :)
  integer, allocatable :: conn(:, :), mat(:), fixed(:)
  real(real64) :: laws(stride, 2), props_e(2, 2), props_h(2, 2), d1(6, 6), bmat(6, 24), n8(8), wdet, worst, worst_u
  real(real64) :: t, tau, em, qsum, dg, v(6), sv(6), envelope(2)
  type(fegpu_context) :: ctx
  type(fegpu_fem) :: heat_set, solid
  type(fegpu_csr) :: kh
  type(fegpu_heat) :: heat
  type(fegpu_stress) :: stress
  type(fegpu_array) :: temp, load

  ! ---- the section: rock rows 0-1 over the whole width, lifts 1 (rows 2-3) and 2 (rows 4-5) on columns 3-8 ----
  idx = 0
  nnode = 0
  nel = 0
  do k = 0, 1
    do j = 0, nyg
      do i = 0, nxg
        if (j <= 2 .or. (i >= 3 .and. i <= 9)) then
          nnode = nnode + 1
          idx(i, j, k) = nnode
        end if
      end do
    end do
  end do
  allocate (xyz(3, nnode))
  do k = 0, 1
    do j = 0, nyg
      do i = 0, nxg
        if (idx(i, j, k) > 0) xyz(:, idx(i, j, k)) = [real(i, real64), 0.8d0 * j + 0.05d0 * sin(1.0d0 * i * j), 1d0 * k]
      end do
    end do
  end do
  nel = 2 * nxg + 4 * 6
  allocate (conn(8, nel), mat(nel), cast(nel))
  e = 0
  do j = 0, nyg - 1
    do i = 0, nxg - 1
      if (j >= 2 .and. (i < 3 .or. i > 8)) cycle
      e = e + 1
      conn(:, e) = [idx(i, j, 0), idx(i + 1, j, 0), idx(i + 1, j + 1, 0), idx(i, j + 1, 0), &
                    idx(i, j, 1), idx(i + 1, j, 1), idx(i + 1, j + 1, 1), idx(i, j + 1, 1)]
      mat(e) = merge(1, 2, j < 2)                      ! 1 rock, 2 concrete
      cast(e) = merge(-100d0, merge(0d0, 5d0, j < 4), j < 2)
    end do
  end do
  ! supports: the rock's bottom held, every node held in z (plane strain)
  allocate (fixed(0))
  do a = 1, nnode
    if (xyz(2, a) == 0d0) fixed = [fixed, 3 * a - 2, 3 * a - 1]
    fixed = [fixed, 3 * a]
  end do
  ! laws: rock (constant modulus, no creep), concrete (aging modulus, autogenous shrinkage, two aging creep terms)
  laws(:, 1) = [2d0, 40d3, 0d0, 0d0, 0.8d-5, 0d0, 0d0, 0d0, 0d0, 0d0, 0d0, 1d0, 0d0, 0d0, 0d0, 1d0]
  laws(:, 2) = [0d0, 30d3, 0.40d0, 0.34d0, 1d-5, -50d-6, 0.4d0, 0.5d0, &
                5d-6, 1d-5, 0.45d0, 0.3d0, 3d-6, 5d-6, 0.45d0, 0.005d0]
  props_e(:, 1) = [40d3, 0.25d0]
  props_e(:, 2) = [30d3, 0.167d0]
  props_h(:, 1) = [0.25d0, 2.0d0]
  props_h(:, 2) = [0.2d0, 2.4d0]

  ! ---- fegpu: temperatures by the heat stepper, stresses from them on the device ----
  call fegpu_context_create(ctx)
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_HEX8, FEGPU_PROBLEM_HEAT, xyz, conn, props_h, mat, heat_set)
  call fegpu_fem_integrate(heat_set)
  call fegpu_fem_assemble(heat_set, kh)
  allocate (t_old(nnode), t_new(nnode), source(1, nel))
  t_old = 15d0
  call fegpu_heat_create(heat_set, dt, 1d0, pack([(a, a = 1, nnode)], xyz(2, :) == 0d0), &
       [(15d0, a = 1, count(xyz(2, :) == 0d0))], heat)
  call fegpu_array_create(ctx, t_old, temp)
  call fegpu_array_create(ctx, 0 * t_old, load)
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_HEX8, FEGPU_PROBLEM_ELASTIC_3D, xyz, conn, props_e, mat, solid)
  call fegpu_fem_stress_create(solid, laws, cast, t0, t_old, fixed, stress)

  ! ---- the serial code's set-up: unit-modulus element matrices ----
  allocate (kunit(24, 24, nel), sig(6, 8, nel), w(6, 8, terms, nel), kglob(3 * nnode, 3 * nnode), f(3 * nnode))
  allocate (du(3 * nnode), u(3 * nnode), ebar(nel), sig_gpu(6, 8 * nel), u_gpu(3 * nnode), nodal(6, nnode))
  do e = 1, nel
    d1 = unit_d(props_e(2, mat(e)))
    kunit(:, :, e) = 0
    do p = 1, 8
      call gauss_point(e, p, bmat, n8, wdet)
      kunit(:, :, e) = kunit(:, :, e) + wdet * matmul(transpose(bmat), matmul(d1, bmat))
    end do
  end do
  sig = 0
  w = 0
  u = 0
  t = t0
  worst = 0
  worst_u = 0
  envelope = [huge(1d0), -huge(1d0)]
  do step = 1, steps
    ! temperatures: hydration heat in the concrete, decaying with age
    do e = 1, nel
      source(1, e) = merge(0d0, 6d0 * exp(-0.4d0 * (t + 0.5d0 * dt - cast(e))), mat(e) == 1)
    end do
    call fegpu_array_upload(load, 0 * t_old)
    call fegpu_fem_body_load(heat_set, source, load)
    call fegpu_heat_step(heat, temp, 1d-13, 2000, f=load)
    call fegpu_array_download(temp, t_new)
    ! fegpu's stress step on the same device temperatures
    call fegpu_fem_stress_step(stress, dt, temp, tol=1d-14, maxit=20000)
    ! the serial step
    kglob = 0
    f = 0
    do e = 1, nel
      m = mat(e)
      tau = t + 0.5d0 * dt - cast(e)
      em = modulus(laws(:, m), tau)
      qsum = 0
      do q = 1, terms
        qsum = qsum + psi(laws(:, m), q, tau) * (1 - exp(-laws(12 + 4 * (q - 1), m) * 0.5d0 * dt))
      end do
      ebar(e) = em / (1 + em * qsum)
      dg = autogenous(laws(:, m), t + dt - cast(e)) - autogenous(laws(:, m), t - cast(e))
      d1 = unit_d(props_e(2, m))
      call add_block(e, ebar(e) * kunit(:, :, e))
      do p = 1, 8
        call gauss_point(e, p, bmat, n8, wdet)
        v = past_and_initial(e, m, p, n8, dg)
        call add_load(e, wdet * matmul(transpose(bmat), ebar(e) * matmul(d1, v)))
      end do
    end do
    do i = 1, size(fixed)
      kglob(fixed(i), :) = 0
      kglob(:, fixed(i)) = 0
      kglob(fixed(i), fixed(i)) = 1
      f(fixed(i)) = 0
    end do
    call cholesky_solve(kglob, f, du)
    do e = 1, nel
      m = mat(e)
      tau = t + 0.5d0 * dt - cast(e)
      dg = autogenous(laws(:, m), t + dt - cast(e)) - autogenous(laws(:, m), t - cast(e))
      d1 = unit_d(props_e(2, m))
      do p = 1, 8
        call gauss_point(e, p, bmat, n8, wdet)
        v = past_and_initial(e, m, p, n8, dg)
        v = matmul(bmat, [(du(3 * conn((b - 1) / 3 + 1, e) - 2 + mod(b - 1, 3)), b = 1, 24)]) - v
        sv = ebar(e) * matmul(d1, v)
        sig(:, p, e) = sig(:, p, e) + sv
        do q = 1, terms
          w(:, p, q, e) = exp(-laws(12 + 4 * (q - 1), m) * dt) * w(:, p, q, e) &
               + psi(laws(:, m), q, tau) * exp(-laws(12 + 4 * (q - 1), m) * 0.5d0 * dt) * ebar(e) * v
        end do
      end do
    end do
    u = u + du
    t = t + dt
    t_old = t_new
    ! compare
    call fegpu_fem_stress_download(stress, .false., sig_gpu)
    call fegpu_fem_stress_displacements(stress, u_gpu)
    worst = max(worst, maxval(abs(sig_gpu - reshape(sig, [6, 8 * nel]))) / maxval(abs(sig)))
    worst_u = max(worst_u, maxval(abs(u_gpu - u)) / maxval(abs(u)))
    call fegpu_fem_stress_download(stress, .true., nodal)
    envelope = [min(envelope(1), minval(nodal(1, :))), max(envelope(2), maxval(nodal(1, :)))]
  end do
  print '(a, i0, a, es9.2, a, es9.2)', 'two-lift dam section, ', steps, ' steps: stresses against the serial code ', &
       worst, ', displacements ', worst_u
  print '(a, f8.4, a, f8.4, a, f6.2)', 'horizontal stress envelope at the nodes: ', envelope(1), ' to ', envelope(2), &
       ' MPa; peak temperature ', maxval(t_new)
  call expect(worst < 1d-8, 'thermal stress with age and creep equals the serial code at every step')
  call expect(worst_u < 1d-8, 'the displacements equal the serial code''s')
  call expect(maxval(t_new) > 16d0 .and. envelope(2) > 0.01d0 .and. envelope(1) < -0.01d0, &
       'the hydration heat warms the lifts and stresses them both ways')
  call fegpu_fem_stress_destroy(stress)
  call fegpu_heat_destroy(heat)
  call fegpu_array_destroy(temp)
  call fegpu_array_destroy(load)
  call fegpu_fem_destroy(solid)
  call fegpu_fem_destroy(heat_set)
  call fegpu_context_destroy(ctx)
  call finish()

contains

  real(real64) function modulus(law, tau)
    real(real64), intent(in) :: law(:), tau
    select case (nint(law(1)))
    case (0)
      modulus = law(2) * (1 - exp(-law(3) * tau**law(4)))
    case (1)
      modulus = law(2) * tau / (law(3) + tau)
    case default
      modulus = law(2)
    end select
  end function

  real(real64) function autogenous(law, tau)
    real(real64), intent(in) :: law(:), tau
    autogenous = 0
    if (tau > 0) autogenous = law(6) * (1 - exp(-law(7) * tau**law(8)))
  end function

  real(real64) function psi(law, q, tau)
    real(real64), intent(in) :: law(:), tau
    integer, intent(in) :: q
    psi = law(9 + 4 * (q - 1)) + law(10 + 4 * (q - 1)) * tau**(-law(11 + 4 * (q - 1)))
  end function

  !> The strains the step imposes at Gauss point p of element e: the creep
  !> the past stresses add (eta), the thermal and the autogenous strain.
  function past_and_initial(e, m, p, n, dg) result(v)
    integer, intent(in) :: e, m, p
    real(real64), intent(in) :: n(8), dg
    real(real64) :: v(6), dtemp
    integer :: j
    dtemp = dot_product(n, t_new(conn(:, e)) - t_old(conn(:, e)))
    v = 0
    do j = 1, terms
      v = v + (1 - exp(-laws(12 + 4 * (j - 1), m) * dt)) * w(:, p, j, e)
    end do
    v(1:3) = v(1:3) + laws(5, m) * dtemp + dg
  end function

  !> The unit-modulus isotropic D (Voigt xx yy zz xy yz zx, engineering shears).
  function unit_d(nu) result(d)
    real(real64), intent(in) :: nu
    real(real64) :: d(6, 6), lambda, mu
    lambda = nu / ((1 + nu) * (1 - 2 * nu))
    mu = 1 / (2 * (1 + nu))
    d = 0
    d(1:3, 1:3) = lambda
    do i = 1, 3
      d(i, i) = lambda + 2 * mu
      d(i + 3, i + 3) = mu
    end do
  end function

  !> B (6 x 24), N and w det J at Gauss point p of element e (x fastest).
  subroutine gauss_point(e, p, bm, n, wd)
    integer, intent(in) :: e, p
    real(real64), intent(out) :: bm(6, 24), n(8), wd
    real(real64) :: gr(3, 8)
    integer :: c
    call hex8_point(xyz(:, conn(:, e)), p, n, gr, wd)   ! the weights are 1
    bm = 0
    do c = 1, 8
      bm(1, 3 * c - 2) = gr(1, c)
      bm(2, 3 * c - 1) = gr(2, c)
      bm(3, 3 * c) = gr(3, c)
      bm(4, 3 * c - 2) = gr(2, c)
      bm(4, 3 * c - 1) = gr(1, c)
      bm(5, 3 * c - 1) = gr(3, c)
      bm(5, 3 * c) = gr(2, c)
      bm(6, 3 * c) = gr(1, c)
      bm(6, 3 * c - 2) = gr(3, c)
    end do
  end subroutine

  integer function dof(e, r)
    integer, intent(in) :: e, r
    dof = 3 * conn((r - 1) / 3 + 1, e) - 2 + mod(r - 1, 3)
  end function

  subroutine add_block(e, ke)
    integer, intent(in) :: e
    real(real64), intent(in) :: ke(24, 24)
    integer :: r, c
    do c = 1, 24
      do r = 1, 24
        kglob(dof(e, r), dof(e, c)) = kglob(dof(e, r), dof(e, c)) + ke(r, c)
      end do
    end do
  end subroutine

  subroutine add_load(e, fe)
    integer, intent(in) :: e
    real(real64), intent(in) :: fe(24)
    integer :: r
    do r = 1, 24
      f(dof(e, r)) = f(dof(e, r)) + fe(r)
    end do
  end subroutine

  !> x = A^-1 b by a dense Cholesky factorization (A symmetric positive definite).
  subroutine cholesky_solve(am, bv, x)
    real(real64), intent(in) :: am(:, :), bv(:)
    real(real64), intent(out) :: x(:)
    real(real64), allocatable :: l(:, :)
    integer :: n, r, c
    n = size(bv)
    l = am
    do c = 1, n
      l(c, c) = sqrt(l(c, c) - dot_product(l(c, 1:c - 1), l(c, 1:c - 1)))
      do r = c + 1, n
        l(r, c) = (l(r, c) - dot_product(l(r, 1:c - 1), l(c, 1:c - 1))) / l(c, c)
      end do
    end do
    do r = 1, n
      x(r) = (bv(r) - dot_product(l(r, 1:r - 1), x(1:r - 1))) / l(r, r)
    end do
    do r = n, 1, -1
      x(r) = (x(r) - dot_product(l(r + 1:n, r), x(r + 1:n))) / l(r, r)
    end do
  end subroutine
end program dam_stress
