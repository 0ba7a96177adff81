! A concrete-dam temperature code in miniature, serial and with fegpu: a
! cross-section of rock with a concrete block placed on it in two lifts.
! Each lift generates hydration heat q(t) = rho c theta_inf a exp(-a (t -
! t_pour)) (the adiabatic temperature rise theta_inf (1 - exp(-a t))), is
! cooled by a water pipe (a node held at the water temperature) and loses
! heat through its exposed top by convection, h (T_air - T) (lumped: h times
! the edge length each top node stands for); the rock's base is at the
! ground temperature. Before the second lift is poured its elements are
! inactive (a placeholder material) and its nodes are held at the air
! temperature. Backward Euler, quad4, consistent capacity.
!
! The serial code integrates, assembles dense matrices, keeps the fixed
! temperatures symmetric and solves each step by Jacobi CG. fegpu does the
! same on the device (fegpu_fem_*, fegpu_heat_step), the second lift by new
! materials, a new integration and assembly. Required: the temperatures
! agree to the solver tolerance at every output step; the hydration heat
! warms the block above its placing temperature; the pipe cools it.
program dam_lifts
  use fegpu
  use checks, only: expect, finish
  use serial_fem
  use iso_fortran_env, only: real64
  implicit none
  integer, parameter :: nx = 16, n_rock = 3, n_lift = 4, ny = n_rock + 2 * n_lift
  integer, parameter :: nnode = (nx + 1) * (ny + 1), nel = nx * ny, steps_per_lift = 16
  real(real64), parameter :: hx = 0.75d0, hy = 0.5d0, dt = 0.25d0, tol = 1d-11
  real(real64), parameter :: t_ground = 12d0, t_air = 20d0, t_place = 15d0, t_water = 8d0
  real(real64), parameter :: theta_inf = 25d0, rate = 0.35d0, h_air = 1.2d0
  ! materials: 1 rock, 2 lift one, 3 lift two (a placeholder until it is poured)
  real(real64), parameter :: rock(2) = [3.0d0, 2.2d0], concrete(2) = [2.6d0, 2.4d0], placeholder(2) = [1d-2, 1d-2]
  real(real64) :: xy(2, nnode), props(2, 3), t_serial(nnode), t_gpu(nnode), f(nnode), worst, hottest
  integer :: conn(4, nel), mat(nel), e, i, j, n, lift, step, its
  integer, allocatable :: fixed(:), top(:)
  real(real64), allocatable :: fixed_t(:), top_ha(:)
  type(fegpu_context) :: ctx
  type(fegpu_fem) :: set
  type(fegpu_csr) :: kmat
  type(fegpu_heat) :: heat
  type(fegpu_array) :: temp, load
  real(real64) :: time, pour(2)

  do j = 0, ny
    do i = 0, nx
      n = j * (nx + 1) + i + 1
      xy(:, n) = [hx * i, hy * j]
    end do
  end do
  do j = 1, ny
    do i = 1, nx
      e = (j - 1) * nx + i
      n = (j - 1) * (nx + 1) + i
      conn(:, e) = [n, n + 1, n + nx + 2, n + nx + 1]
      if (j <= n_rock) then
        mat(e) = 1
      else if (j <= n_rock + n_lift) then
        mat(e) = 2
      else
        mat(e) = 3
      end if
    end do
  end do
  props(:, 1) = rock
  props(:, 2) = concrete
  props(:, 3) = placeholder
  t_serial = t_ground
  do n = 1, nnode
    if (xy(2, n) > hy * n_rock + 1d-9) t_serial(n) = t_place
  end do
  t_gpu = t_serial
  pour = [0d0, dt * steps_per_lift]

  call fegpu_context_create(ctx)
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_HEAT, xy, conn, props, mat, set)
  call fegpu_array_create(ctx, t_gpu, temp)
  f = 0
  call fegpu_array_create(ctx, f, load)
  worst = 0
  hottest = 0
  time = 0
  do lift = 1, 2
    if (lift == 2) props(:, 3) = concrete            ! the second lift is poured
    call fixed_nodes(lift, fixed, fixed_t)
    call exposed_top(lift, top, top_ha)
    ! fegpu: new materials, element matrices, assembly and stepper
    call fegpu_fem_set_materials(set, props)
    call fegpu_fem_integrate(set)
    call fegpu_fem_assemble(set, kmat)
    call fegpu_heat_create(set, dt, 1d0, fixed, fixed_t, heat)
    call fegpu_heat_set_convection(heat, top, top_ha, [(t_air, i = 1, size(top))])
    do step = 1, steps_per_lift
      time = time + dt
      f = hydration_load(time - dt / 2)             ! the source at the middle of the step
      call serial_step(f, fixed, fixed_t, top, top_ha, t_serial)
      call fegpu_array_upload(load, f)
      call fegpu_heat_step(heat, temp, tol, 1000, f=load, iterations=its)
      call fegpu_array_download(temp, t_gpu)
      worst = max(worst, maxval(abs(t_gpu - t_serial)))
      hottest = max(hottest, maxval(t_serial))
    end do
    print '(a, i0, a, f6.2, a, f8.4, a, es9.2)', 'lift ', lift, ': day ', time, ', hottest ', maxval(t_serial), &
         ' C, max |fegpu - serial| so far ', worst
    call fegpu_heat_destroy(heat)
  end do
  call expect(worst <= 1d-8 * hottest, 'fegpu and the serial code agree at every step')
  call expect(hottest > t_place + 5, 'the hydration heat warms the concrete above its placing temperature')
  ! the second lift's pipe: its neighbours are colder than the nodes a quarter of the block away at the same height
  n = fixed(size(fixed))
  print '(a, 2f9.4, a, 2f9.4)', 'beside the pipe ', t_serial(n - 1), t_serial(n + 1), ', a quarter away ', &
       t_serial(n - nx / 4), t_serial(n + nx / 4)
  call expect(max(t_serial(n - 1), t_serial(n + 1)) < min(t_serial(n - nx / 4), t_serial(n + nx / 4)), &
       'the pipe cools the concrete around it')
  call fegpu_context_destroy(ctx)
  call finish()

contains

  !> The ground under the rock, the nodes above the poured lifts (not yet
  !> concrete: held at the air temperature), and a cooling pipe in the middle
  !> of each poured lift.
  subroutine fixed_nodes(lifts, nodes, temps)
    integer, intent(in) :: lifts
    integer, allocatable, intent(out) :: nodes(:)
    real(real64), allocatable, intent(out) :: temps(:)
    real(real64) :: y_top
    integer :: k
    y_top = hy * (n_rock + lifts * n_lift)
    nodes = [integer ::]
    temps = [real(real64) ::]
    do k = 1, nnode
      if (xy(2, k) < 1d-9) then
        nodes = [nodes, k]
        temps = [temps, t_ground]
      else if (xy(2, k) > y_top + 1d-9) then
        nodes = [nodes, k]
        temps = [temps, t_air]
      end if
    end do
    do k = 1, lifts
      nodes = [nodes, (n_rock + (k - 1) * n_lift + n_lift / 2) * (nx + 1) + nx / 2 + 1]
      temps = [temps, t_water]
    end do
  end subroutine

  !> The top of the poured lifts, cooled by the air: each node stands for
  !> the edge length around it (half an element at the ends).
  subroutine exposed_top(lifts, nodes, h_area)
    integer, intent(in) :: lifts
    integer, allocatable, intent(out) :: nodes(:)
    real(real64), allocatable, intent(out) :: h_area(:)
    integer :: k
    nodes = [((n_rock + lifts * n_lift) * (nx + 1) + k, k = 1, nx + 1)]
    h_area = [(h_air * merge(hx / 2, hx, k == 1 .or. k == nx + 1), k = 1, nx + 1)]
  end subroutine

  !> Nodal hydration heat at time t: each poured lift's elements share
  !> rho c theta_inf a exp(-a (t - t_pour)) times their area equally among their nodes.
  function hydration_load(t) result(load_t)
    real(real64), intent(in) :: t
    real(real64) :: load_t(nnode), q
    integer :: k, lift_of
    load_t = 0
    do k = 1, nel
      lift_of = mat(k) - 1
      if (lift_of < 1) cycle
      if (t < pour(lift_of)) cycle
      q = concrete(2) * theta_inf * rate * exp(-rate * (t - pour(lift_of)))
      load_t(conn(:, k)) = load_t(conn(:, k)) + q * element_area(xy(:, conn(:, k))) / 4
    end do
  end function

  !> The serial backward-Euler step: (C/dt + K + H) T' = C/dt T + F + H T_air, fixed
  !> temperatures kept symmetric, Jacobi CG from T. Rebuilt each step from
  !> the element routines, as the serial code does.
  subroutine serial_step(load_t, nodes, temps, cooled, h_area, t)
    real(real64), intent(in) :: load_t(:), temps(:), h_area(:)
    integer, intent(in) :: nodes(:), cooled(:)
    real(real64), intent(inout) :: t(:)
    real(real64) :: a(nnode, nnode), c(nnode, nnode), ke(4, 4), ce(4, 4), b(nnode), lift_v(nnode)
    integer :: k, its_serial
    a = 0
    c = 0
    do k = 1, nel
      call element_conductivity(xy(:, conn(:, k)), props(1, mat(k)), ke)
      call element_capacity(xy(:, conn(:, k)), props(2, mat(k)), ce)
      a(conn(:, k), conn(:, k)) = a(conn(:, k), conn(:, k)) + ke + ce / dt
      c(conn(:, k), conn(:, k)) = c(conn(:, k), conn(:, k)) + ce / dt
    end do
    b = matmul(c, t) + load_t
    do k = 1, size(cooled)                          ! convection: h A on the diagonal, h A T_air in the load
      a(cooled(k), cooled(k)) = a(cooled(k), cooled(k)) + h_area(k)
      b(cooled(k)) = b(cooled(k)) + h_area(k) * t_air
    end do
    call fix_rows(a, nodes, temps, lift_v)
    b = b - lift_v
    b(nodes) = [(a(nodes(k), nodes(k)) * temps(k), k = 1, size(nodes))]
    call jacobi_cg(a, b, t, tol, its_serial)
  end subroutine
end program dam_lifts
