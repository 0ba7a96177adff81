! A legacy-style serial FEM code beside fegpu: steady heat conduction in a
! cross-section of a concrete block on a rock foundation (quad4, two
! materials, slightly distorted mesh), a uniform hydration-heat source in
! the concrete, fixed temperatures at the bottom of the rock and on the top
! of the block. The serial part integrates each element's conductivity by
! 2 x 2 Gauss points, assembles a dense matrix, applies the fixed
! temperatures symmetrically and solves by Jacobi-preconditioned CG, as the
! original code does. fegpu then does the same on the device: element
! matrices (compared with the serial ones), assembly, Dirichlet rows, CG on
! the assembled matrix and element-by-element CG. Required: element
! matrices to 1e-12, temperatures to the solver tolerance, and the serial
! iteration count within one of both fegpu solves.
program fem_serial
  use fegpu
  use checks, only: expect, finish
  use serial_fem
  use iso_fortran_env, only: real64
  implicit none
  integer, parameter :: nx = 24, ny = 12, nnode = (nx + 1) * (ny + 1), nel = nx * ny
  real(real64), parameter :: width = 12.0d0, height = 6.0d0, rock_depth = 2.0d0
  real(real64), parameter :: k_concrete = 2.5d0, k_rock = 3.2d0, q_hydration = 15.0d0
  real(real64), parameter :: t_rock = 12.0d0, t_air = 20.0d0, tol = 1.0d-10
  real(real64) :: xy(2, nnode), props(2, 2), f(nnode), kglob(nnode, nnode), t_serial(nnode)
  real(real64) :: ke_serial(4, 4, nel), ke_gpu(10, nel), t_fegpu(nnode), t_ebe(nnode), t_otf(nnode), kfull(nnode, nnode)
  integer :: conn(4, nel), mat(nel), e, i, j, a, b, n, nfix, its_serial, its_fegpu, its_ebe, its_otf
  integer, allocatable :: fixed(:)
  real(real64), allocatable :: fixed_t(:)
  type(fegpu_context) :: ctx
  type(fegpu_fem) :: set
  type(fegpu_csr) :: kmat
  type(fegpu_solver) :: solver
  type(fegpu_ebe) :: ebe, ebe_otf
  type(fegpu_array) :: rhs, temp
  real(real64) :: err, scale, diff, heat_out, lift(nnode), rhs_serial(nnode)

  ! ---- the mesh: nodes row by row, interior nodes moved a little ----
  do j = 0, ny
    do i = 0, nx
      n = j * (nx + 1) + i + 1
      xy(1, n) = width * i / nx
      xy(2, n) = height * j / ny
      if (i > 0 .and. i < nx .and. j > 0 .and. j < ny) then
        xy(1, n) = xy(1, n) + 0.08d0 * width / nx * sin(1.7d0 * n)
        xy(2, n) = xy(2, n) + 0.08d0 * height / ny * cos(2.3d0 * n)
      end if
    end do
  end do
  do j = 1, ny
    do i = 1, nx
      e = (j - 1) * nx + i
      n = (j - 1) * (nx + 1) + i
      conn(:, e) = [n, n + 1, n + nx + 2, n + nx + 1]
      mat(e) = merge(2, 1, height * (j - 0.5d0) / ny < rock_depth)   ! 1 concrete, 2 rock
    end do
  end do
  props(:, 1) = [k_concrete, 0.0d0]
  props(:, 2) = [k_rock, 0.0d0]

  ! ---- the serial code ----
  kglob = 0
  f = 0
  do e = 1, nel
    call element_conductivity(xy(:, conn(:, e)), props(1, mat(e)), ke_serial(:, :, e))
    do a = 1, 4
      do b = 1, 4
        kglob(conn(a, e), conn(b, e)) = kglob(conn(a, e), conn(b, e)) + ke_serial(a, b, e)
      end do
      if (mat(e) == 1) f(conn(a, e)) = f(conn(a, e)) + q_hydration * element_area(xy(:, conn(:, e))) / 4
    end do
  end do
  kfull = kglob
  nfix = 2 * (nx + 1)
  allocate (fixed(nfix), fixed_t(nfix))
  do i = 1, nx + 1
    fixed(i) = i                                ! bottom of the rock
    fixed_t(i) = t_rock
    fixed(nx + 1 + i) = ny * (nx + 1) + i       ! top of the block
    fixed_t(nx + 1 + i) = t_air
  end do
  call fix_rows(kglob, fixed, fixed_t, lift)
  rhs_serial = f - lift
  rhs_serial(fixed) = [(kglob(fixed(i), fixed(i)) * fixed_t(i), i = 1, nfix)]
  t_serial = 0
  call jacobi_cg(kglob, rhs_serial, t_serial, tol, its_serial)

  ! ---- fegpu ----
  call fegpu_context_create(ctx)
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_HEAT, xy, conn, props, mat, set)
  call fegpu_fem_set_integration(set, FEGPU_INTEGRATION_BLOCKED)  ! level IIa; every level gives the same matrices
  call fegpu_fem_integrate(set)
  call fegpu_fem_stiffness(set, ke_gpu)
  err = 0
  do e = 1, nel
    n = 0
    do a = 1, 4
      do b = a, 4
        n = n + 1
        err = max(err, abs(ke_gpu(n, e) - ke_serial(a, b, e)) / abs(ke_serial(a, a, e)))
      end do
    end do
  end do
  print '(a, es10.2)', 'element matrices: max relative difference ', err
  call expect(err <= 1d-12, 'element matrices agree with the serial routine')

  call fegpu_fem_assemble(set, kmat)
  call fegpu_array_create(ctx, f, rhs)
  t_fegpu = 0
  call fegpu_array_create(ctx, t_fegpu, temp)
  call fegpu_csr_apply_dirichlet(kmat, fixed, fixed_t, rhs)
  call fegpu_solver_create(kmat, FEGPU_METHOD_CG, FEGPU_PRECOND_JACOBI, solver)
  call fegpu_solve(solver, rhs, temp, tol, 10000, iterations=its_fegpu)
  call fegpu_array_download(temp, t_fegpu)

  call fegpu_array_upload(rhs, f)            ! element by element starts from the plain load
  t_ebe = 0
  call fegpu_array_upload(temp, t_ebe)
  call fegpu_ebe_create(set, fixed, fixed_t, ebe)
  call fegpu_ebe_solve(ebe, rhs, temp, tol, 10000, iterations=its_ebe)
  call fegpu_array_download(temp, t_ebe)
  ! the same with the element matrices recomputed in every product
  t_otf = 0
  call fegpu_array_upload(temp, t_otf)
  call fegpu_ebe_create(set, fixed, fixed_t, ebe_otf, on_the_fly=.true.)
  call fegpu_ebe_solve(ebe_otf, rhs, temp, tol, 10000, iterations=its_otf)
  call fegpu_array_download(temp, t_otf)
  call expect(its_otf == its_ebe .and. maxval(abs(t_otf - t_ebe)) <= 1d-12 * maxval(abs(t_ebe)), &
       'EBE with K^e recomputed matches EBE with stored K^e')

  scale = maxval(abs(t_serial))
  diff = maxval(abs(t_fegpu - t_serial)) / scale
  print '(a, i0, a, i0, a, i0)', 'CG iterations: serial ', its_serial, ', fegpu assembled ', its_fegpu, &
       ', fegpu element by element ', its_ebe
  print '(a, es10.2, a, es10.2)', 'temperatures: assembled vs serial ', diff, ', EBE vs serial ', &
       maxval(abs(t_ebe - t_serial)) / scale
  print '(a, f8.4, a, f8.4)', 'hottest point ', maxval(t_serial), ' C; fixed temperatures ', t_rock
  call expect(diff <= 1d-8, 'assembled temperatures agree with the serial solve')
  call expect(maxval(abs(t_ebe - t_serial)) / scale <= 1d-8, 'EBE temperatures agree with the serial solve')
  call expect(abs(its_fegpu - its_serial) <= 1 .and. abs(its_ebe - its_serial) <= 1, 'iteration counts agree')
  ! the heat balance: what the source generates leaves through the fixed boundaries
  ! (the reactions there, K T - f, add up to minus the total source)
  heat_out = sum(matmul(kfull(fixed, :), t_fegpu) - f(fixed))
  print '(a, f10.4, a, f10.4)', 'heat generated ', sum(f), ', reactions at the fixed nodes ', heat_out
  call expect(abs(heat_out + sum(f)) <= 1d-6 * sum(f), 'heat balance')
  call expect(maxval(t_serial) > t_air, 'the hydration heat makes the interior hottest')

  call dynamics_check()
  call fegpu_context_destroy(ctx)
  call finish()

contains

  !> The Fortran path of elastodynamics: a bar (plane stress, nu = 0) fixed
  !> at x = 0 and pulled suddenly at x = L rings between 0 and 2 P L / (E A).
  subroutine dynamics_check()
    integer, parameter :: m = 20, nn = 2 * (m + 1)
    real(real64) :: bxy(2, nn), bar_props(2, 1), load(2 * nn), u(2 * nn), tip, peak
    integer :: bconn(4, m), bmat(m), k, clamped(nn + 2)
    type(fegpu_fem) :: bar
    type(fegpu_csr) :: kbar
    type(fegpu_dynamics) :: dyn
    type(fegpu_array) :: du, df
    do k = 0, m
      bxy(:, k + 1) = [0.5d0 * k, 0d0]
      bxy(:, k + m + 2) = [0.5d0 * k, 1d0]
    end do
    do k = 1, m
      bconn(:, k) = [k, k + 1, k + m + 2, k + m + 1]
    end do
    bmat = 1
    bar_props(:, 1) = [1d0, 0d0]
    call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_PLANE_STRESS, bxy, bconn, bar_props, bmat, bar)
    call fegpu_fem_set_density(bar, [1d0])
    call fegpu_fem_integrate(bar)
    call fegpu_fem_assemble(bar, kbar)
    clamped(1:nn) = [(2 * k, k = 1, nn)]                       ! lateral motion
    clamped(nn + 1:) = [1, 2 * (m + 1) + 1]                      ! x = 0
    load = 0
    load(2 * (m + 1) - 1) = 0.5d0
    load(2 * nn - 1) = 0.5d0
    u = 0
    call fegpu_array_create(ctx, u, du)
    call fegpu_array_create(ctx, load, df)
    call fegpu_dynamics_create(bar, FEGPU_SCHEME_NEWMARK, 0.05d0, clamped, dyn)
    peak = 0
    do k = 1, 400                                                ! one period: 4 L / c = 40
      call fegpu_dynamics_step(dyn, du, f=df)
      call fegpu_array_download(du, u)
      tip = 0.5d0 * (u(2 * (m + 1) - 1) + u(2 * nn - 1))
      peak = max(peak, tip)
    end do
    print '(a, f8.4, a)', 'suddenly loaded bar: peak tip displacement ', peak, ' (2 P L / (E A) = 20)'
    call expect(abs(peak - 20d0) < 1.6d0, 'elastodynamics from Fortran: the bar rings to 2 P L / (E A)')
    call fegpu_dynamics_destroy(dyn)
    ! damped (alpha M: every mode decays as e^(-alpha t / 2)) with the end x = 0 moved
    ! to 1: the bar settles at the static tip P L / (E A) + 1 = 11
    u = 0
    call fegpu_array_upload(du, u)
    call fegpu_dynamics_create(bar, FEGPU_SCHEME_NEWMARK, 0.05d0, clamped, dyn)
    call fegpu_fem_dynamics_set_damping(dyn, 0.3d0, 0d0)
    call fegpu_fem_dynamics_set_displacements(dyn, [(0d0, k = 1, nn), 1d0, 1d0])
    do k = 1, 2000
      call fegpu_dynamics_step(dyn, du, f=df)
    end do
    call fegpu_array_download(du, u)
    tip = 0.5d0 * (u(2 * (m + 1) - 1) + u(2 * nn - 1))
    print '(a, f10.6, a)', 'damped bar, end moved by 1: tip at rest ', tip, ' (P L / (E A) + 1 = 11)'
    call expect(abs(tip - 11d0) < 1d-4 .and. abs(u(1) - 1d0) < 1d-12, &
         'damping and prescribed displacements from Fortran: the bar settles at the static tip')
    call fegpu_dynamics_destroy(dyn)
    call fegpu_fem_destroy(bar)
  end subroutine
end program fem_serial
