!> Replicates a TOUGHREACT-like non-isothermal flow simulator: two equations
!> per grid block (mass and energy; unknowns pressure and temperature) on a
!> 3-D grid with heterogeneous permeability, implicit time steps, each a
!> Newton loop that assembles its Jacobian in 2 x 2 blocks (upwinded
!> fluxes, so nonsymmetric) and solves J dx = -R. Every Newton system is
!> solved twice: by the code's own serial block ILU(0)-BiCGSTAB (written
!> here, pivot blocks inverted by Gauss-Jordan) and by fegpu on a block
!> matrix whose values are refreshed in place each step. Required: the
!> Jacobian equals the residual's finite differences; both solves converge
!> with iteration counts within a small margin and the same correction;
!> Newton converges quadratically; mass is conserved (the residuals'
!> internal fluxes cancel, so the stored mass changes by the boundary
!> inflow); temperature stays within its boundary values (upwinding).
!> Arguments: nx ny nz [time steps] [Newton steps] (default 16 12 8 2 12);
!> with fewer Newton steps than convergence needs (a timing run on a large
!> grid) only the linear solves are checked. Wall times of both solvers are
!> printed, never asserted.
program toughreact_newton
  use, intrinsic :: iso_fortran_env, only: real64, int64
  use fegpu
  use checks, only: expect, finish
  implicit none
  integer, parameter :: dp = real64, k = 2
  real(dp), parameter :: tol = 1.0e-10_dp
  ! fluid and rock: density 1 + cp p - beta T, mobility exp(mob T)
  real(dp), parameter :: phi = 0.2_dp, cp = 0.05_dp, beta = 0.3_dp, mob = 0.8_dp, heatcap = 1.0_dp, cw = 1.0_dp, &
       kappa = 0.1_dp, dt = 0.5_dp, p_in = 1.0_dp, t_in = 1.0_dp, p_out = 0.0_dp, t_out = 0.0_dp
  integer :: nx, ny, nz, ncell, nnzb, nsteps, max_newton, backend
  integer, allocatable :: rp(:), ci(:), slot(:, :)
  real(dp), allocatable :: perm(:), jac(:, :, :), res(:, :), x(:, :), xold(:, :)
  real(dp) :: serial_s, fegpu_s, swept_s
  integer :: serial_its, fegpu_its, swept_its
  type(fegpu_context) :: ctx
  type(fegpu_csr) :: a
  type(fegpu_solver) :: s, swept
  type(fegpu_array) :: db, dx

  call arguments()
  ncell = nx * ny * nz
  call fegpu_context_create(ctx)
  call fegpu_context_backend(ctx, backend)
  print '(a,a,a,i0,a,i0,a,i0,a,i0,a)', 'toughreact_newton on backend ', merge('cuda', 'cpu ', backend == FEGPU_BACKEND_CUDA), &
       ': ', nx, ' x ', ny, ' x ', nz, ' grid blocks, ', k * ncell, ' unknowns'
  call build_grid()
  allocate (jac(k, k, nnzb), res(k, ncell), x(k, ncell), xold(k, ncell))
  x(1, :) = p_out
  x(2, :) = t_out
  call check_jacobian()
  call assemble(x, x, jac, res)
  call fegpu_bsr_create(ctx, ncell, ncell, rp, ci, jac, a)
  call fegpu_solver_create(a, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_ILU0, s)
  call fegpu_solver_create(a, FEGPU_METHOD_BICGSTAB, FEGPU_PRECOND_ILU0_JACOBI, swept)
  call fegpu_array_create(ctx, reshape(res, [k * ncell]), db)
  call fegpu_array_create(ctx, reshape(res, [k * ncell]), dx)
  call run()
  print '(a,i0,a,i0,a)', 'iterations over all Newton steps: serial ', serial_its, ', fegpu ', fegpu_its, ' (block ILU(0)-BiCGSTAB)'
  print '(a,f10.3,a,f10.3,a,f7.2,a)', 'linear solves, wall s: serial', serial_s, ', fegpu', fegpu_s, ' (', serial_s / fegpu_s, 'x)'
  print '(a,i0,a,f10.3,a,f7.2,a)', 'fegpu with Jacobi-swept block triangles: ', swept_its, ' iterations, wall s', swept_s, &
       ' (', serial_s / swept_s, 'x the serial code)'
  call fegpu_solver_destroy(s)
  call fegpu_solver_destroy(swept)
  call fegpu_csr_destroy(a)
  call fegpu_array_destroy(db)
  call fegpu_array_destroy(dx)
  call fegpu_context_destroy(ctx)
  call finish()

contains

  subroutine arguments()
    character(len=32) :: arg
    integer :: i, v(5)
    v = [16, 12, 8, 2, 12]
    do i = 1, 5
      call get_command_argument(i, arg)
      if (len_trim(arg) > 0) read (arg, *) v(i)
    end do
    nx = v(1); ny = v(2); nz = v(3); nsteps = v(4); max_newton = v(5)
  end subroutine

  ! ---- the serial simulator ----

  !> The 7-point block pattern (1-based CSR over grid blocks, columns sorted),
  !> slot(d, c): where block row c keeps its neighbour d (1..7: -z, -y, -x,
  !> itself, +x, +y, +z; 0 outside the grid), and a layered, log-random
  !> permeability (contrast about 10^4).
  subroutine build_grid()
    integer :: c, i, j, l, d, offs(7)
    integer(int64) :: state
    allocate (rp(ncell + 1), ci(7 * ncell), slot(7, ncell), perm(ncell))
    offs = [-nx * ny, -nx, -1, 0, 1, nx, nx * ny]
    state = 12345
    nnzb = 0
    rp(1) = 1
    do l = 1, nz
      do j = 1, ny
        do i = 1, nx
          c = i + nx * (j - 1 + ny * (l - 1))
          do d = 1, 7
            slot(d, c) = 0
            if (inside(i, j, l, d)) then
              nnzb = nnzb + 1
              ci(nnzb) = c + offs(d)
              slot(d, c) = nnzb
            end if
          end do
          rp(c + 1) = nnzb + 1
          perm(c) = 10.0_dp ** (3.0_dp * modulo(l, 3) / 2.0_dp + uniform(state))
        end do
      end do
    end do
    ci = ci(1:nnzb)
  end subroutine

  logical function inside(i, j, l, d)
    integer, intent(in) :: i, j, l, d
    select case (d)
    case (1); inside = l > 1
    case (2); inside = j > 1
    case (3); inside = i > 1
    case (5); inside = i < nx
    case (6); inside = j < ny
    case (7); inside = l < nz
    case default; inside = .true.
    end select
  end function

  real(dp) function uniform(state)
    integer(int64), intent(inout) :: state
    state = modulo(state * 16807_int64, 2147483647_int64)
    uniform = real(state, dp) / 2147483647.0_dp
  end function

  real(dp) function rho(xc)
    real(dp), intent(in) :: xc(k)
    rho = 1 + cp * xc(1) - beta * xc(2)
  end function

  !> Mass and energy flux from state xa to state xb through transmissibility
  !> t (upwinded by the pressure drop), and their derivatives by xa and xb.
  subroutine face(xa, xb, t, f, g, dfa, dfb, dga, dgb)
    real(dp), intent(in) :: xa(k), xb(k), t
    real(dp), intent(out) :: f, g, dfa(k), dfb(k), dga(k), dgb(k)
    real(dp) :: drop, xu(k), r, lam, dfu(k)
    logical :: from_a
    drop = xa(1) - xb(1)
    from_a = drop >= 0
    xu = merge(xa, xb, from_a)
    r = rho(xu)
    lam = exp(mob * xu(2))
    f = t * r * lam * drop
    dfu = [t * cp * lam * drop, t * drop * lam * (-beta + r * mob)]
    dfa = [t * r * lam, 0.0_dp]
    dfb = -dfa
    if (from_a) then
      dfa = dfa + dfu
    else
      dfb = dfb + dfu
    end if
    g = cw * xu(2) * f + kappa * t * (xa(2) - xb(2))
    dga = cw * xu(2) * dfa + [0.0_dp, kappa * t]
    dgb = cw * xu(2) * dfb - [0.0_dp, kappa * t]
    if (from_a) then
      dga(2) = dga(2) + cw * f
    else
      dgb(2) = dgb(2) + cw * f
    end if
  end subroutine

  !> Residual R(x) of the implicit step from xold, and its Jacobian in 2 x 2
  !> blocks jac(i, j, slot) = dR_i(row) / dx_j(column).
  subroutine assemble(xs, xo, jm, r)
    real(dp), intent(in) :: xs(:, :), xo(:, :)
    real(dp), intent(out) :: jm(:, :, :), r(:, :)
    integer :: c, n, d
    real(dp) :: f, g, dfa(k), dfb(k), dga(k), dgb(k), t
    jm = 0
    do c = 1, ncell
      r(1, c) = phi * (rho(xs(:, c)) - rho(xo(:, c))) / dt
      r(2, c) = heatcap * (xs(2, c) - xo(2, c)) / dt
      jm(1, :, slot(4, c)) = [phi * cp / dt, -phi * beta / dt]
      jm(2, 2, slot(4, c)) = heatcap / dt
    end do
    do c = 1, ncell
      do d = 5, 7                                                  ! each internal face once
        if (slot(d, c) == 0) cycle
        n = ci(slot(d, c))
        t = 2 * perm(c) * perm(n) / (perm(c) + perm(n))
        call face(xs(:, c), xs(:, n), t, f, g, dfa, dfb, dga, dgb)
        r(:, c) = r(:, c) + [f, g]
        r(:, n) = r(:, n) - [f, g]
        call add_block(jm(:, :, slot(4, c)), dfa, dga, 1.0_dp)
        call add_block(jm(:, :, slot(d, c)), dfb, dgb, 1.0_dp)
        call add_block(jm(:, :, slot(4, n)), dfb, dgb, -1.0_dp)
        call add_block(jm(:, :, slot(8 - d, n)), dfa, dga, -1.0_dp)
      end do
      if (slot(3, c) == 0) call boundary(c, [p_in, t_in], xs, jm, r)    ! x = 0: the injection side
      if (slot(5, c) == 0) call boundary(c, [p_out, t_out], xs, jm, r)  ! x = nx: the production side
    end do
  end subroutine

  !> A face of cell c to a fixed boundary state (half a cell away).
  subroutine boundary(c, xb, xs, jm, r)
    integer, intent(in) :: c
    real(dp), intent(in) :: xb(k), xs(:, :)
    real(dp), intent(inout) :: jm(:, :, :), r(:, :)
    real(dp) :: f, g, dfa(k), dfb(k), dga(k), dgb(k)
    call face(xs(:, c), xb, 2 * perm(c), f, g, dfa, dfb, dga, dgb)
    r(:, c) = r(:, c) + [f, g]
    call add_block(jm(:, :, slot(4, c)), dfa, dga, 1.0_dp)
  end subroutine

  !> The mass entering through the boundary faces per unit time at state xs.
  real(dp) function boundary_inflow(xs)
    real(dp), intent(in) :: xs(:, :)
    integer :: c
    real(dp) :: f, g, d(k), e(k), h(k), q(k)
    boundary_inflow = 0
    do c = 1, ncell
      if (slot(3, c) == 0) then
        call face(xs(:, c), [p_in, t_in], 2 * perm(c), f, g, d, e, h, q)
        boundary_inflow = boundary_inflow - f
      end if
      if (slot(5, c) == 0) then
        call face(xs(:, c), [p_out, t_out], 2 * perm(c), f, g, d, e, h, q)
        boundary_inflow = boundary_inflow - f
      end if
    end do
  end function

  subroutine add_block(blk, row1, row2, sgn)
    real(dp), intent(inout) :: blk(k, k)
    real(dp), intent(in) :: row1(k), row2(k), sgn
    blk(1, :) = blk(1, :) + sgn * row1
    blk(2, :) = blk(2, :) + sgn * row2
  end subroutine

  !> y = J x over the blocks.
  subroutine block_matvec(jm, xv, y)
    real(dp), intent(in) :: jm(k, k, nnzb), xv(k, ncell)
    real(dp), intent(out) :: y(k, ncell)
    integer :: c, q
    do c = 1, ncell
      y(:, c) = 0
      do q = rp(c), rp(c + 1) - 1
        y(:, c) = y(:, c) + matmul(jm(:, :, q), xv(:, ci(q)))
      end do
    end do
  end subroutine

  !> The inverse of block m by Gauss-Jordan with partial pivoting; ok false when singular.
  subroutine invert(m, inv, ok)
    real(dp), intent(in) :: m(k, k)
    real(dp), intent(out) :: inv(k, k)
    logical, intent(out) :: ok
    real(dp) :: w(k, k), row(k)
    integer :: c, p, r, j
    w = m
    inv = 0
    do j = 1, k
      inv(j, j) = 1
    end do
    ok = .false.
    do c = 1, k
      p = c - 1 + maxloc(abs(w(c:, c)), 1)
      if (w(p, c) == 0) return
      row = w(c, :); w(c, :) = w(p, :); w(p, :) = row
      row = inv(c, :); inv(c, :) = inv(p, :); inv(p, :) = row
      inv(c, :) = inv(c, :) / w(c, c)
      w(c, :) = w(c, :) / w(c, c)
      do r = 1, k
        if (r /= c) then
          inv(r, :) = inv(r, :) - w(r, c) * inv(c, :)
          w(r, :) = w(r, :) - w(r, c) * w(c, :)
        end if
      end do
    end do
    ok = all(abs(inv) <= huge(1.0_dp))
  end subroutine

  !> Block ILU(0) in place (IKJ over block rows); the diagonal slots end
  !> holding their pivot blocks' inverses.
  subroutine block_ilu0(lu, ok)
    real(dp), intent(inout) :: lu(k, k, nnzb)
    logical, intent(out) :: ok
    integer :: i, q, c, jj, qq
    real(dp) :: l(k, k)
    do i = 1, ncell
      do q = rp(i), slot(4, i) - 1
        c = ci(q)
        l = matmul(lu(:, :, q), lu(:, :, slot(4, c)))
        lu(:, :, q) = l
        do jj = q + 1, rp(i + 1) - 1
          do qq = slot(4, c) + 1, rp(c + 1) - 1
            if (ci(qq) == ci(jj)) lu(:, :, jj) = lu(:, :, jj) - matmul(l, lu(:, :, qq))
          end do
        end do
      end do
      call invert(lu(:, :, slot(4, i)), l, ok)
      if (.not. ok) return
      lu(:, :, slot(4, i)) = l
    end do
  end subroutine

  subroutine block_ilu_apply(lu, r, z)
    real(dp), intent(in) :: lu(k, k, nnzb), r(k, ncell)
    real(dp), intent(out) :: z(k, ncell)
    integer :: i, q
    real(dp) :: t(k)
    do i = 1, ncell
      t = r(:, i)
      do q = rp(i), slot(4, i) - 1
        t = t - matmul(lu(:, :, q), z(:, ci(q)))
      end do
      z(:, i) = t
    end do
    do i = ncell, 1, -1
      t = z(:, i)
      do q = slot(4, i) + 1, rp(i + 1) - 1
        t = t - matmul(lu(:, :, q), z(:, ci(q)))
      end do
      z(:, i) = matmul(lu(:, :, slot(4, i)), t)
    end do
  end subroutine

  !> Block ILU(0)-preconditioned BiCGSTAB from x = 0 (the Templates book's,
  !> as bicgstab_serial's); iters = -1 on breakdown or no convergence.
  subroutine bicgstab(jm, lu, b, xs, iters)
    real(dp), intent(in) :: jm(k, k, nnzb), lu(k, k, nnzb), b(k, ncell)
    real(dp), intent(out) :: xs(k, ncell)
    integer, intent(out) :: iters
    real(dp), allocatable, dimension(:, :) :: r, rhat, p, ph, vv, sv, sh, t
    real(dp) :: rho_, rho_prev, alpha, omega, bnorm
    integer :: it
    allocate (r(k, ncell), rhat(k, ncell), p(k, ncell), ph(k, ncell), vv(k, ncell), sv(k, ncell), sh(k, ncell), t(k, ncell))
    xs = 0; r = b; rhat = r; p = 0; vv = 0
    bnorm = norm2(b)
    rho_prev = 1; alpha = 1; omega = 1
    iters = -1
    do it = 1, 5000
      rho_ = sum(rhat * r)
      if (rho_ == 0) return
      if (it == 1) then
        p = r
      else
        p = r + (rho_ / rho_prev) * (alpha / omega) * (p - omega * vv)
      end if
      call block_ilu_apply(lu, p, ph)
      call block_matvec(jm, ph, vv)
      alpha = rho_ / sum(rhat * vv)
      sv = r - alpha * vv
      if (norm2(sv) / bnorm <= tol) then
        xs = xs + alpha * ph
        iters = it
        return
      end if
      call block_ilu_apply(lu, sv, sh)
      call block_matvec(jm, sh, t)
      omega = sum(t * sv) / sum(t * t)
      xs = xs + alpha * ph + omega * sh
      r = sv - omega * t
      if (norm2(r) / bnorm <= tol) then
        iters = it
        return
      end if
      rho_prev = rho_
    end do
  end subroutine

  ! ---- the checks and the loop ----

  !> The assembled Jacobian against central differences of the residual, at
  !> a perturbed state, for every unknown of a few grid blocks.
  subroutine check_jacobian()
    real(dp), allocatable :: xs(:, :), xp(:, :), rplus(:, :), rminus(:, :), jm(:, :, :), scratch(:, :, :), col(:, :), e(:, :)
    real(dp), parameter :: h = 1.0e-6_dp
    real(dp) :: worst, scale
    integer :: c, j, pick
    integer(int64) :: state
    allocate (xs(k, ncell), xp(k, ncell), rplus(k, ncell), rminus(k, ncell), jm(k, k, nnzb), scratch(k, k, nnzb), col(k, ncell), &
         e(k, ncell))
    state = 777
    do c = 1, ncell
      xs(:, c) = [uniform(state), uniform(state)]
    end do
    call assemble(xs, x, jm, rplus)
    worst = 0
    do pick = 1, 6
      c = 1 + int(uniform(state) * (ncell - 1))
      do j = 1, k
        e = 0
        e(j, c) = 1
        call block_matvec(jm, e, col)
        xp = xs + h * e
        call assemble(xp, x, scratch, rplus)
        xp = xs - h * e
        call assemble(xp, x, scratch, rminus)
        scale = max(1.0_dp, maxval(abs(col)))
        worst = max(worst, maxval(abs((rplus - rminus) / (2 * h) - col)) / scale)
      end do
    end do
    print '(a,es9.2)', 'Jacobian against central differences: worst relative difference ', worst
    call expect(worst < 1.0e-5_dp, 'the assembled 2 x 2 blocks are the residual''s derivatives')
  end subroutine

  subroutine run()
    real(dp), allocatable :: lu(:, :, :), delta(:, :), dgpu(:), r0(:)
    real(dp) :: rnorm, rnorm0, mass_old, mass_new, inflow, prev_norm, serial_step, fegpu_step
    integer :: step, newton, its, gpu_its, st, c
    integer(int64) :: t0, t1, rate
    logical :: ok, quadratic, converged
    allocate (lu(k, k, nnzb), delta(k, ncell), dgpu(k * ncell), r0(k * ncell))
    serial_s = 0; fegpu_s = 0; swept_s = 0; serial_its = 0; fegpu_its = 0; swept_its = 0
    do step = 1, nsteps
      xold = x
      mass_old = sum([(phi * rho(xold(:, c)), c = 1, ncell)])
      quadratic = .true.
      prev_norm = -1
      do newton = 1, max_newton + 1
        call assemble(x, xold, jac, res)
        rnorm = maxval(abs(res))
        if (newton == 1) rnorm0 = rnorm
        print '(a,i0,a,i0,a,es10.3)', '  step ', step, ' Newton ', newton, ': max |R| = ', rnorm
        ! near the solution each step squares the residual (above the floor set by
        ! the linear solves' tolerance and the residual's own rounding)
        if (prev_norm > 1.0e-7_dp * rnorm0 .and. prev_norm < 1.0e-3_dp * rnorm0) &
             quadratic = quadratic .and. rnorm <= 1.0e2_dp * prev_norm**2 / rnorm0 + 1.0e-8_dp * prev_norm
        converged = rnorm <= 1.0e-11_dp * max(1.0_dp, rnorm0)
        if (converged .or. newton > max_newton) exit
        prev_norm = rnorm
        ! the serial code's solve
        call system_clock(t0, rate)
        lu = jac
        call block_ilu0(lu, ok)
        call expect(ok, 'serial block ILU(0) finds no singular pivot block')
        call bicgstab(jac, lu, -res, delta, its)
        call system_clock(t1)
        serial_step = real(t1 - t0, dp) / real(rate, dp)
        serial_s = serial_s + serial_step
        call expect(its > 0, 'the serial block ILU(0)-BiCGSTAB converges')
        serial_its = serial_its + its
        ! fegpu's: new values in place, the right-hand side up, the correction back
        r0 = -reshape(res, [k * ncell])
        call system_clock(t0, rate)
        call fegpu_csr_update_values(a, jac)
        call fegpu_array_upload(db, r0)
        call fegpu_array_upload(dx, 0 * r0)
        call fegpu_solver_solve(s, db, dx, tol, 5000, gpu_its, stat=st)
        call fegpu_array_download(dx, dgpu)
        call system_clock(t1)
        fegpu_step = real(t1 - t0, dp) / real(rate, dp)
        fegpu_s = fegpu_s + fegpu_step
        fegpu_its = fegpu_its + gpu_its
        print '(a,i0,a,i0,a,f9.3,a,f9.3)', '    iterations serial ', its, ', fegpu ', gpu_its, '; wall s serial', serial_step, &
             ', fegpu', fegpu_step
        call expect(st == FEGPU_OK, 'fegpu''s block ILU(0)-BiCGSTAB converges')
        call expect(abs(gpu_its - its) <= max(2, its / 10), 'iteration counts: serial and fegpu agree')
        call expect(norm2(dgpu - reshape(delta, [k * ncell])) <= 1.0e-6_dp * norm2(delta), &
             'fegpu''s Newton correction is the serial code''s')
        ! the approximate variant on the same values (already on the device)
        call system_clock(t0, rate)
        call fegpu_array_upload(dx, 0 * r0)
        call fegpu_solver_solve(swept, db, dx, tol, 5000, its, stat=st)
        call fegpu_array_download(dx, r0)
        call system_clock(t1)
        swept_s = swept_s + real(t1 - t0, dp) / real(rate, dp)
        swept_its = swept_its + its
        call expect(st == FEGPU_OK .and. norm2(r0 - dgpu) <= 1.0e-6_dp * norm2(dgpu), &
             'fegpu with Jacobi-swept block triangles gives the same correction')
        x = x + reshape(dgpu, [k, ncell])
      end do
      if (.not. converged .and. max_newton < 12) then
        print '(a,i0,a)', 'a timing run: Newton stopped after ', max_newton, ' steps, its checks skipped'
        cycle
      end if
      call expect(converged, 'Newton converges within 12 steps')
      call expect(quadratic, 'Newton converges quadratically near the solution')
      mass_new = sum([(phi * rho(x(:, c)), c = 1, ncell)])
      inflow = boundary_inflow(x)
      print '(a,i0,a,es12.5,a,es12.5)', 'step ', step, ': stored mass change ', mass_new - mass_old, ', boundary inflow x dt ', &
           inflow * dt
      call expect(abs(mass_new - mass_old - inflow * dt) <= 1.0e-9_dp * max(abs(inflow * dt), 1.0_dp), 'mass is conserved')
      call expect(minval(x(2, :)) >= t_out - 1.0e-9_dp .and. maxval(x(2, :)) <= t_in + 1.0e-9_dp, &
           'temperature stays within the boundary temperatures')
    end do
  end subroutine

end program toughreact_newton
