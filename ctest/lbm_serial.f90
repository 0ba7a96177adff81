!> Replicates a Palabos-like serial D3Q19 code: BGK collision with Guo
!> forcing, then the swap-based streaming of the seed (each fluid site swaps
!> its half of the directions with its neighbours; a swap toward a wall is
!> skipped, which is halfway bounce-back, with Ladd's term for a moving lid).
!> fegpu, given the same populations in the same layout f(0:18, nx, ny, nz),
!> must produce the same populations after N steps to rounding.
program lbm_serial
  use, intrinsic :: iso_fortran_env, only: real64, int8
  use fegpu
  use checks, only: expect, finish
  implicit none
  integer, parameter :: nx = 12, ny = 10, nz = 6, nsteps = 60
  real(real64), parameter :: tau = 0.7_real64, force(3) = [2e-5_real64, 0.0_real64, -1e-5_real64], &
       lid(3) = [0.08_real64, 0.0_real64, 0.01_real64]
  integer :: c(3, 0:18)
  real(real64) :: w(0:18), f(0:18, nx, ny, nz), g(0:18, nx, ny, nz), r(0:18, nx, ny, nz)
  integer(int8) :: flag(nx, ny, nz)
  type(fegpu_context) :: ctx
  type(fegpu_lattice) :: lat
  integer :: backend, step, i

  c = reshape([0, 0, 0, -1, 0, 0, 0, -1, 0, 0, 0, -1, -1, -1, 0, -1, 1, 0, -1, 0, -1, -1, 0, 1, 0, -1, -1, 0, -1, 1, &
       1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, -1, 0, 1, 0, 1, 1, 0, -1, 0, 1, 1, 0, 1, -1], [3, 19])
  w = [1.0_real64 / 3, (1.0_real64 / 18, i = 1, 3), (1.0_real64 / 36, i = 4, 9), (1.0_real64 / 18, i = 10, 12), &
       (1.0_real64 / 36, i = 13, 18)]

  ! A cavity periodic in z: walls beyond the x and y faces, a moving lid in
  ! the top plane, a small obstacle inside.
  flag = FEGPU_FLUID
  flag(:, ny, :) = FEGPU_MOVING_WALL
  flag(5:6, 4:5, 2:4) = FEGPU_WALL
  call random_number(r)
  do i = 0, 18
    f(i, :, :, :) = w(i) * (1 + 0.1_real64 * (2 * r(i, :, :, :) - 1))
  end do

  call fegpu_context_create(ctx)
  call fegpu_context_backend(ctx, backend)
  print '(a,a)', 'lbm_serial on backend ', merge('cuda', 'cpu ', backend == FEGPU_BACKEND_CUDA)
  call fegpu_lattice_create(ctx, nx, ny, nz, tau, lat, periodic=FEGPU_PERIODIC_Z)
  call fegpu_lattice_set_flags(lat, flag)
  call fegpu_lattice_set_populations(lat, f)
  call fegpu_lattice_set_force(lat, force)
  call fegpu_lattice_set_wall_velocity(lat, lid)
  call fegpu_lattice_step(lat, nsteps)
  g = -huge(1.0_real64)
  call fegpu_lattice_get_populations(lat, g)

  do step = 1, nsteps
    call serial_step(f)
  end do
  print '(a,es10.3)', 'max |fegpu - serial| after 60 steps: ', maxval(abs(g - f))
  call expect(maxval(abs(g - f)) < 1e-12_real64, 'populations equal the serial swap-streaming code to rounding')
  call expect(all(g > 0), 'every population written (poisoned with -huge before the download)')
  call check_mass_closed_box()
  call fegpu_lattice_destroy(lat)
  call fegpu_context_destroy(ctx)
  call finish()

contains

  real(real64) function fluid_mass(f)
    real(real64), intent(in) :: f(0:, :, :, :)
    integer :: x, y, z
    fluid_mass = 0
    do z = 1, nz
      do y = 1, ny
        do x = 1, nx
          if (flag(x, y, z) == FEGPU_FLUID) fluid_mass = fluid_mass + sum(f(:, x, y, z))
        end do
      end do
    end do
  end function

  !> The neighbour of (x, y, z) along c(:, i): wrapped in z, 0 beyond the x and y faces.
  logical function fluid_neighbour(x, y, z, i, n)
    integer, intent(in) :: x, y, z, i
    integer, intent(out) :: n(3)
    n = [x, y, z] + c(:, i)
    n(3) = modulo(n(3) - 1, nz) + 1
    fluid_neighbour = .false.
    if (n(1) < 1 .or. n(1) > nx .or. n(2) < 1 .or. n(2) > ny) return
    fluid_neighbour = flag(n(1), n(2), n(3)) == FEGPU_FLUID
  end function

  !> Ladd's moving-wall term for a population leaving (x, y, z) along c(:, i)
  !> into the wall site n (zero for a resting wall or beyond a face).
  real(real64) function wall_term(n, i, rho)
    integer, intent(in) :: n(3), i
    real(real64), intent(in) :: rho
    wall_term = 0
    if (n(1) < 1 .or. n(1) > nx .or. n(2) < 1 .or. n(2) > ny) return
    if (flag(n(1), n(2), n(3)) == FEGPU_MOVING_WALL) wall_term = 6 * w(i) * rho * dot_product(real(c(:, i), real64), lid)
  end function

  subroutine serial_step(f)
    real(real64), intent(inout) :: f(0:, :, :, :)
    real(real64) :: rho(nx, ny, nz), u(3), cu, cf, uf, feq, omega, tmp
    integer :: x, y, z, i, n(3), m(3)
    omega = 1 / tau
    ! Collide, then swap each site's opposite populations in place.
    do z = 1, nz
      do y = 1, ny
        do x = 1, nx
          if (flag(x, y, z) /= FEGPU_FLUID) cycle
          rho(x, y, z) = sum(f(:, x, y, z))
          do i = 1, 3
            u(i) = (sum(c(i, :) * f(:, x, y, z)) + force(i) / 2) / rho(x, y, z)
          end do
          uf = dot_product(u, force)
          do i = 0, 18
            cu = dot_product(real(c(:, i), real64), u)
            cf = dot_product(real(c(:, i), real64), force)
            feq = w(i) * rho(x, y, z) * (1 + 3 * cu + 4.5_real64 * cu * cu - 1.5_real64 * dot_product(u, u))
            f(i, x, y, z) = f(i, x, y, z) - omega * (f(i, x, y, z) - feq) + (1 - omega / 2) * w(i) * (3 * (cf - uf) + 9 * cu * cf)
          end do
          do i = 1, 9
            tmp = f(i, x, y, z)
            f(i, x, y, z) = f(i + 9, x, y, z)
            f(i + 9, x, y, z) = tmp
          end do
        end do
      end do
    end do
    ! Stream by swapping with the neighbour; toward a wall, the swapped
    ! population stays: it is the bounced one.
    do z = 1, nz
      do y = 1, ny
        do x = 1, nx
          if (flag(x, y, z) /= FEGPU_FLUID) cycle
          do i = 1, 9
            if (fluid_neighbour(x, y, z, i, n)) then
              tmp = f(i + 9, x, y, z)
              f(i + 9, x, y, z) = f(i, n(1), n(2), n(3))
              f(i, n(1), n(2), n(3)) = tmp
            else
              f(i + 9, x, y, z) = f(i + 9, x, y, z) - wall_term(n, i, rho(x, y, z))
            end if
            if (.not. fluid_neighbour(x, y, z, i + 9, m)) f(i, x, y, z) = f(i, x, y, z) - wall_term(m, i + 9, rho(x, y, z))
          end do
        end do
      end do
    end do
  end subroutine

  !> With the lid at rest and no force, the fluid mass is conserved to rounding.
  subroutine check_mass_closed_box()
    real(real64) :: h(0:18, nx, ny, nz), rho(nx, ny, nz), u(3, nx, ny, nz)
    call fegpu_lattice_set_force(lat, [0.0_real64, 0.0_real64, 0.0_real64])
    call fegpu_lattice_set_wall_velocity(lat, [0.0_real64, 0.0_real64, 0.0_real64])
    call fegpu_lattice_set_populations(lat, g)
    call fegpu_lattice_step(lat, 500)
    call fegpu_lattice_fields(lat, rho, u)
    h = -huge(1.0_real64)
    call expect(abs(sum(rho) - fluid_mass(g)) < 1e-12_real64 * fluid_mass(g), 'mass conserved over 500 steps (fields)')
    call fegpu_lattice_get_populations(lat, h)
    call expect(abs(fluid_mass(h) - fluid_mass(g)) < 1e-12_real64 * fluid_mass(g), 'mass conserved over 500 steps (populations)')
  end subroutine

end program lbm_serial
