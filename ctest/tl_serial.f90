! A serial nonlinear explicit-dynamics code beside fegpu: FEStudio's
! Algorithm 1 (total Lagrangian, Green-Lagrange strain, St Venant-Kirchhoff,
! internal forces element by element, lumped mass, central differences with
! mass-proportional damping), as a legacy code writes it, on a hex8 bar whose
! end x = 0 is turned by 90 degrees about the z axis over 40 s (slowly
! against the bar's bending period, about 7 s). fegpu runs the same steps
! with FEGPU_SCHEME_TOTAL_LAGRANGIAN. Required: fegpu's displacements equal
! the serial code's to rounding every 100 steps; the bar turns without
! spurious strain (its length kept to 1e-3, its free end where the rigid
! rotation puts it, to 2% of the length); and the forces of a rigid rotation
! are zero through fegpu_fem_internal_force. Also the loads: a uniform
! pressure on the bar's closed surface sums to zero, gravity to rho g V.
program tl_serial
  use fegpu
  use checks, only: expect, finish
  use serial_fem, only: hex8_point
  use iso_fortran_env, only: real64
  implicit none
  integer, parameter :: nx = 6, nnode = 4 * (nx + 1), nel = nx, ndof = 3 * nnode, steps = 8000
  real(real64), parameter :: young = 1000d0, nu = 0.3d0, rho = 1d0, dt = 0.005d0, alpha = 0.2d0
  real(real64), parameter :: length = nx, duration = steps * dt, pi = 3.14159265358979324d0
  real(real64) :: xyz(3, nnode), props(2, 1), grad(3, 8, 8, nel), wdet(8, nel), shape(8, 8)
  real(real64) :: lumped(ndof), u(ndof), u_prev(ndof), u_new(ndof), f(ndof), u_gpu(ndof), prescribed(12)
  real(real64) :: lambda, mu, c, worst, size_u, theta, centre(3), tip(3), want(3), ends(3, 2)
  integer :: conn(8, nel), clamped(12), e, i, j, k, a, step, ncl
  logical :: free(ndof)
  type(fegpu_context) :: ctx
  type(fegpu_fem) :: bar
  type(fegpu_dynamics) :: dyn
  type(fegpu_array) :: du, df

  ! ---- the mesh: unit cubes along x; node (i, j, k) ----
  do k = 0, 1
    do j = 0, 1
      do i = 0, nx
        xyz(:, node(i, j, k)) = [real(i, real64), real(j, real64), real(k, real64)]
      end do
    end do
  end do
  do e = 1, nel
    i = e - 1
    conn(:, e) = [node(i, 0, 0), node(i + 1, 0, 0), node(i + 1, 1, 0), node(i, 1, 0), &
                  node(i, 0, 1), node(i + 1, 0, 1), node(i + 1, 1, 1), node(i, 1, 1)]
  end do
  props(:, 1) = [young, nu]
  lambda = young * nu / ((1 + nu) * (1 - 2 * nu))
  mu = young / (2 * (1 + nu))
  ncl = 0
  free = .true.
  do a = 1, nnode
    if (xyz(1, a) == 0d0) then
      do i = 1, 3
        ncl = ncl + 1
        clamped(ncl) = 3 * (a - 1) + i
        free(3 * (a - 1) + i) = .false.
      end do
    end if
  end do
  centre = [0d0, 0.5d0, 0.5d0]

  ! ---- the serial code: reference gradients, lumped mass ----
  call reference_geometry()
  lumped = 0
  do e = 1, nel
    do k = 1, 8
      do a = 1, 8
        lumped(3 * conn(a, e) - 2:3 * conn(a, e)) = lumped(3 * conn(a, e) - 2:3 * conn(a, e)) + rho * wdet(k, e) * shape(a, k)
      end do
    end do
  end do
  u = 0
  call internal_force(u, f)
  u_prev = u + 0.5d0 * dt**2 * merge(-f / lumped, 0d0, free)   ! at rest: a0 = M^-1 (0 - f_int)

  ! ---- fegpu: the same bar, no integration or assembly needed ----
  call fegpu_context_create(ctx)
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_HEX8, FEGPU_PROBLEM_ELASTIC_3D, xyz, conn, props, [(1, e = 1, nel)], bar)
  call fegpu_fem_set_density(bar, [rho])
  call fegpu_dynamics_create(bar, FEGPU_SCHEME_TOTAL_LAGRANGIAN, dt, clamped, dyn)
  call fegpu_fem_dynamics_set_damping(dyn, alpha, 0d0)
  u_gpu = 0
  call fegpu_array_create(ctx, u_gpu, du)

  worst = 0
  c = 1 / (1 + 0.5d0 * alpha * dt)
  do step = 1, steps
    theta = 0.5d0 * pi * angle(step * dt / duration)
    do i = 1, ncl / 3
      a = (clamped(3 * i) - 1) / 3 + 1
      prescribed(3 * i - 2:3 * i) = rotated(xyz(:, a), theta) - xyz(:, a)
    end do
    ! serial: (1 + alpha dt / 2) u' = 2 u - (1 - alpha dt / 2) u_prev + dt^2 M^-1 (0 - f_int(u))
    call internal_force(u, f)
    u_new = 2 * c * u - c * (1 - 0.5d0 * alpha * dt) * u_prev + c * dt**2 * merge(-f / lumped, 0d0, free)
    u_new(clamped) = prescribed
    u_prev = u
    u = u_new
    ! fegpu
    call fegpu_fem_dynamics_set_displacements(dyn, prescribed)
    call fegpu_dynamics_step(dyn, du)
    if (mod(step, 100) == 0) then
      call fegpu_array_download(du, u_gpu)
      size_u = maxval(abs(u))
      worst = max(worst, maxval(abs(u_gpu - u)) / size_u)
    end if
  end do
  print '(a, es9.2)', 'fegpu against the serial Algorithm 1, worst relative difference every 100 steps: ', worst
  call expect(worst < 1d-9, 'total Lagrangian dynamics equals the serial code to rounding')

  ! no spurious strain: the bar turned 90 degrees keeps its length; its free end sits where the rotation puts it
  do i = 1, 2
    ends(:, i) = 0
    do a = 1, nnode
      if (xyz(1, a) == merge(0d0, length, i == 1)) ends(:, i) = ends(:, i) + 0.25d0 * (xyz(:, a) + u_gpu(3 * a - 2:3 * a))
    end do
  end do
  tip = ends(:, 2)
  want = rotated([length, 0.5d0, 0.5d0], 0.5d0 * pi)
  print '(a, f9.6, a, 3f9.4, a, 3f9.4)', 'bar turned 90 degrees: length ', norm2(ends(:, 2) - ends(:, 1)), &
       ', free end at', tip, ', rigid rotation', want
  call expect(abs(norm2(ends(:, 2) - ends(:, 1)) - length) < 1d-3 * length, 'the turned bar keeps its length')
  call expect(norm2(tip - want) < 2d-2 * length, 'the free end follows the rigid rotation')
  call fegpu_dynamics_destroy(dyn)

  ! the forces of a rigid rotation by 90 degrees, through fegpu_fem_internal_force: none
  do a = 1, nnode
    u(3 * a - 2:3 * a) = rotated(xyz(:, a), 0.5d0 * pi) - xyz(:, a)
  end do
  call fegpu_array_upload(du, u)
  f = 0
  call fegpu_array_create(ctx, f, df)
  call fegpu_fem_internal_force(bar, 1d0, du, df)
  call fegpu_array_download(df, f)
  print '(a, es9.2)', 'internal forces of a rigid rotation by 90 degrees: ', maxval(abs(f))
  call expect(maxval(abs(f)) < 1d-10 * young, 'a rigid rotation has no internal forces')

  call load_checks()
  call fegpu_array_destroy(du)
  call fegpu_array_destroy(df)
  call fegpu_fem_destroy(bar)
  call fegpu_context_destroy(ctx)
  call finish()

contains

  integer function node(i, j, k)
    integer, intent(in) :: i, j, k
    node = i + (nx + 1) * (j + 2 * k) + 1
  end function

  !> A smooth turn from 0 to 1 with zero speed at both ends.
  real(real64) function angle(s)
    real(real64), intent(in) :: s
    angle = s - sin(2 * pi * s) / (2 * pi)
  end function

  !> x turned by theta about the z axis through the clamped end's centre.
  function rotated(x, theta) result(y)
    real(real64), intent(in) :: x(3), theta
    real(real64) :: y(3)
    y(1) = centre(1) + cos(theta) * (x(1) - centre(1)) - sin(theta) * (x(2) - centre(2))
    y(2) = centre(2) + sin(theta) * (x(1) - centre(1)) + cos(theta) * (x(2) - centre(2))
    y(3) = x(3)
  end function

  !> dN/dX and w det J0 at the 2 x 2 x 2 Gauss points of every element, and N there.
  subroutine reference_geometry()
    do e = 1, nel
      do k = 1, 8
        call hex8_point(xyz(:, conn(:, e)), k, shape(:, k), grad(:, :, k, e), wdet(k, e))   ! the weights are 1
      end do
    end do
  end subroutine

  !> The internal forces: per element and Gauss point F = I + du/dX,
  !> E = (F^T F - I) / 2, S = lambda tr(E) I + 2 mu E, f_a += F S dN_a/dX w det J0.
  subroutine internal_force(u, f)
    real(real64), intent(in) :: u(ndof)
    real(real64), intent(out) :: f(ndof)
    real(real64) :: ue(3, 8), def(3, 3), strain(3, 3), stress(3, 3), eye(3, 3)
    integer :: p
    eye = 0
    do p = 1, 3
      eye(p, p) = 1
    end do
    f = 0
    do e = 1, nel
      do p = 1, 8
        ue(:, p) = u(3 * conn(p, e) - 2:3 * conn(p, e))
      end do
      do k = 1, 8
        def = eye + matmul(ue, transpose(grad(:, :, k, e)))
        strain = 0.5d0 * (matmul(transpose(def), def) - eye)
        stress = 2 * mu * strain + lambda * (strain(1, 1) + strain(2, 2) + strain(3, 3)) * eye
        stress = matmul(def, stress) * wdet(k, e)
        do p = 1, 8
          f(3 * conn(p, e) - 2:3 * conn(p, e)) = f(3 * conn(p, e) - 2:3 * conn(p, e)) + matmul(stress, grad(:, p, k, e))
        end do
      end do
    end do
  end subroutine

  !> Loads through the Fortran bindings: a uniform pressure on the bar's
  !> whole closed surface sums to zero; gravity as a body force to rho g V.
  subroutine load_checks()
    integer :: faces(4, 4 * nx + 2), nf, total
    real(real64) :: load(ndof), gravity(3, nel), sums(3)
    type(fegpu_array) :: fl
    nf = 0
    do i = 0, nx - 1                                 ! the four long sides, counter-clockwise seen from outside
      faces(:, nf + 1) = [node(i, 0, 0), node(i + 1, 0, 0), node(i + 1, 0, 1), node(i, 0, 1)]   ! y = 0
      faces(:, nf + 2) = [node(i, 1, 0), node(i, 1, 1), node(i + 1, 1, 1), node(i + 1, 1, 0)]   ! y = 1
      faces(:, nf + 3) = [node(i, 0, 0), node(i, 1, 0), node(i + 1, 1, 0), node(i + 1, 0, 0)]   ! z = 0
      faces(:, nf + 4) = [node(i, 0, 1), node(i + 1, 0, 1), node(i + 1, 1, 1), node(i, 1, 1)]   ! z = 1
      nf = nf + 4
    end do
    faces(:, nf + 1) = [node(0, 0, 0), node(0, 0, 1), node(0, 1, 1), node(0, 1, 0)]             ! x = 0
    faces(:, nf + 2) = [node(nx, 0, 0), node(nx, 1, 0), node(nx, 1, 1), node(nx, 0, 1)]         ! x = L
    nf = nf + 2
    load = 0
    call fegpu_array_create(ctx, load, fl)
    call fegpu_fem_face_load(bar, FEGPU_FACE_PRESSURE, faces, reshape([(3d0, i = 1, nf)], [1, nf]), fl)
    call fegpu_array_download(fl, load)
    sums = [sum(load(1::3)), sum(load(2::3)), sum(load(3::3))]
    print '(a, 3es10.2, a, f8.4)', 'pressure 3 on the closed surface: total', sums, '; on node 1 (a corner): ', &
         norm2(load(1:3))
    call expect(maxval(abs(sums)) < 1d-12, 'a uniform pressure on a closed surface sums to zero')
    call expect(all(abs(load(1:3) - [0.75d0, 0.75d0, 0.75d0]) < 1d-13), 'a corner takes a quarter of each of its three faces')
    gravity = 0
    gravity(3, :) = -9.81d0 * rho
    load = 0
    call fegpu_array_upload(fl, load)
    call fegpu_fem_body_load(bar, gravity, fl)
    call fegpu_array_download(fl, load)
    total = nx
    print '(a, f10.4, a, f10.4)', 'gravity: total ', sum(load(3::3)), ', rho g V = ', -9.81d0 * rho * total
    call expect(abs(sum(load(3::3)) + 9.81d0 * rho * total) < 1d-12 * total, 'gravity sums to rho g V')
    call fegpu_array_destroy(fl)
  end subroutine
end program tl_serial
