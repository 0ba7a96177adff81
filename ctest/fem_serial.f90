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
  use iso_fortran_env, only: real64, error_unit
  implicit none
  integer, parameter :: nx = 24, ny = 12, nnode = (nx + 1) * (ny + 1), nel = nx * ny
  real(real64), parameter :: width = 12.0d0, height = 6.0d0, rock_depth = 2.0d0
  real(real64), parameter :: k_concrete = 2.5d0, k_rock = 3.2d0, q_hydration = 15.0d0
  real(real64), parameter :: t_rock = 12.0d0, t_air = 20.0d0, tol = 1.0d-10
  real(real64) :: xy(2, nnode), props(2, 2), f(nnode), kglob(nnode, nnode), t_serial(nnode)
  real(real64) :: ke_serial(4, 4, nel), ke_gpu(10, nel), t_fegpu(nnode), t_ebe(nnode), kfull(nnode, nnode)
  integer :: conn(4, nel), mat(nel), e, i, j, a, b, n, nfix, its_serial, its_fegpu, its_ebe, failures
  integer, allocatable :: fixed(:)
  real(real64), allocatable :: fixed_t(:)
  type(fegpu_context) :: ctx
  type(fegpu_fem) :: set
  type(fegpu_csr) :: kmat
  type(fegpu_solver) :: solver
  type(fegpu_ebe) :: ebe
  type(fegpu_array) :: rhs, temp
  real(real64) :: err, scale, diff, heat_out

  failures = 0
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
  call serial_solve(kglob, f, fixed, fixed_t, t_serial, its_serial)

  ! ---- fegpu ----
  call fegpu_context_create(ctx)
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_HEAT, xy, conn, props, mat, set)
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
  if (err > 1d-12) call fail('element matrices differ')

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

  scale = maxval(abs(t_serial))
  diff = maxval(abs(t_fegpu - t_serial)) / scale
  print '(a, i0, a, i0, a, i0)', 'CG iterations: serial ', its_serial, ', fegpu assembled ', its_fegpu, &
       ', fegpu element by element ', its_ebe
  print '(a, es10.2, a, es10.2)', 'temperatures: assembled vs serial ', diff, ', EBE vs serial ', &
       maxval(abs(t_ebe - t_serial)) / scale
  print '(a, f8.4, a, f8.4)', 'hottest point ', maxval(t_serial), ' C; fixed temperatures ', t_rock
  if (diff > 1d-8) call fail('assembled temperatures differ')
  if (maxval(abs(t_ebe - t_serial)) / scale > 1d-8) call fail('EBE temperatures differ')
  if (abs(its_fegpu - its_serial) > 1 .or. abs(its_ebe - its_serial) > 1) call fail('iteration counts differ')
  ! the heat balance: what the source generates leaves through the fixed boundaries
  ! (the reactions there, K T - f, add up to minus the total source)
  heat_out = sum(matmul(kfull(fixed, :), t_fegpu) - f(fixed))
  print '(a, f10.4, a, f10.4)', 'heat generated ', sum(f), ', reactions at the fixed nodes ', heat_out
  if (abs(heat_out + sum(f)) > 1d-6 * sum(f)) call fail('heat balance')
  if (maxval(t_serial) <= t_air) call fail('the hydration heat should make the interior hottest')

  call fegpu_context_destroy(ctx)
  if (failures > 0) then
    write (error_unit, '(i0, a)') failures, ' check(s) failed'
    error stop 1
  end if
  print '(a)', '6 passed, 0 failed'

contains

  subroutine fail(what)
    character(*), intent(in) :: what
    write (error_unit, '(a)') 'FAILED: ' // what
    failures = failures + 1
  end subroutine

  ! The legacy element routine: bilinear shape functions, 2 x 2 Gauss points.
  subroutine element_conductivity(x, cond, ke)
    real(real64), intent(in) :: x(2, 4), cond
    real(real64), intent(out) :: ke(4, 4)
    real(real64), parameter :: g = 0.577350269189625764d0
    real(real64), parameter :: sx(4) = [-1d0, 1d0, 1d0, -1d0], sy(4) = [-1d0, -1d0, 1d0, 1d0]
    real(real64) :: xi, eta, dn(2, 4), jac(2, 2), det, inv(2, 2), dx(2, 4)
    integer :: ig, jg, p
    ke = 0
    do ig = 1, 2
      do jg = 1, 2
        xi = merge(-g, g, ig == 1)
        eta = merge(-g, g, jg == 1)
        do p = 1, 4
          dn(1, p) = 0.25d0 * sx(p) * (1 + sy(p) * eta)
          dn(2, p) = 0.25d0 * sy(p) * (1 + sx(p) * xi)
        end do
        jac = matmul(dn, transpose(x))
        det = jac(1, 1) * jac(2, 2) - jac(1, 2) * jac(2, 1)
        inv = reshape([jac(2, 2), -jac(2, 1), -jac(1, 2), jac(1, 1)], [2, 2]) / det
        dx = matmul(inv, dn)
        ke = ke + cond * det * matmul(transpose(dx), dx)
      end do
    end do
  end subroutine

  real(real64) function element_area(x)
    real(real64), intent(in) :: x(2, 4)
    element_area = 0.5d0 * abs((x(1, 3) - x(1, 1)) * (x(2, 4) - x(2, 2)) - (x(1, 4) - x(1, 2)) * (x(2, 3) - x(2, 1)))
  end function

  ! Fixed temperatures kept symmetric (move the known columns to the right,
  ! zero the rows and columns, keep the diagonal), then Jacobi CG from zero.
  subroutine serial_solve(k, load, dofs, values, x, iterations)
    real(real64), intent(inout) :: k(:, :)
    real(real64), intent(in) :: load(:), values(:)
    integer, intent(in) :: dofs(:)
    real(real64), intent(out) :: x(:)
    integer, intent(out) :: iterations
    real(real64) :: b(size(load)), r(size(load)), z(size(load)), p(size(load)), q(size(load)), g(size(load))
    real(real64) :: rz, rz_new, alpha, bnorm
    logical :: is_fixed(size(load))
    integer :: i, j, it
    is_fixed = .false.
    g = 0
    do i = 1, size(dofs)
      is_fixed(dofs(i)) = .true.
      g(dofs(i)) = values(i)
    end do
    b = load - matmul(k, g)
    do i = 1, size(load)
      if (is_fixed(i)) then
        k(i, :) = merge(k(i, i), 0d0, [(j == i, j = 1, size(load))])
        k(:, i) = merge(k(i, i), 0d0, [(j == i, j = 1, size(load))])
      end if
    end do
    do i = 1, size(load)
      if (is_fixed(i)) b(i) = k(i, i) * g(i)
    end do
    x = 0
    r = b
    bnorm = norm2(b)
    z = r / [(k(i, i), i = 1, size(load))]
    p = z
    rz = dot_product(r, z)
    iterations = 0
    do it = 1, 10000
      q = matmul(k, p)
      alpha = rz / dot_product(p, q)
      x = x + alpha * p
      r = r - alpha * q
      iterations = it
      if (norm2(r) / bnorm <= tol) exit
      z = r / [(k(i, i), i = 1, size(load))]
      rz_new = dot_product(r, z)
      p = z + (rz_new / rz) * p
      rz = rz_new
    end do
  end subroutine
end program fem_serial
