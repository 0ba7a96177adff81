!> D3Q19 lattice Boltzmann: lattices with their populations on the device.
module fegpu_lbm
  use, intrinsic :: iso_c_binding, only: c_int8_t, c_int32_t, c_int64_t, c_double
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use fegpu_types
  use fegpu_support
  implicit none
  private
  public :: fegpu_lattice_create, fegpu_lattice_set_flags, fegpu_lattice_set_force, fegpu_lattice_set_wall_velocity
  public :: fegpu_lattice_set_trt, fegpu_lattice_init_equilibrium, fegpu_lattice_set_populations
  public :: fegpu_lattice_get_populations, fegpu_lattice_step, fegpu_lattice_fields, fegpu_lattice_destroy
  public :: fegpu_lattice_directions, fegpu_lattice_set_boundary_values, fegpu_lattice_set_body
  public :: fegpu_lattice_body_force, fegpu_lattice_shape

  interface
    !> The number of directions (19: D3Q19), the first extent of the populations.
    integer(c_int32_t) function fegpu_lattice_directions() bind(C, name='fegpu_lattice_directions')
      import :: c_int32_t
    end function
  end interface

  interface
    integer(c_int32_t) function c_lattice_create(ctx, nx, ny, nz, dtype, tau, periodic, lat) &
         bind(C, name='fegpu_lattice_create')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, nx, ny, nz
      integer(c_int32_t), value :: dtype, periodic
      real(c_double), value :: tau
      integer(c_int64_t), intent(out) :: lat
    end function
    integer(c_int32_t) function c_lattice_set_flags(lat, flags, n) bind(C, name='fegpu_lattice_set_flags')
      import :: c_int32_t, c_int64_t, c_int8_t
      integer(c_int64_t), value :: lat, n
      integer(c_int8_t), intent(in) :: flags(*)
    end function
    integer(c_int32_t) function c_lattice_boundary_values(lat, values, n) bind(C, name='fegpu_lattice_set_boundary_values')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat, n
      real(c_double), intent(in) :: values(*)
    end function
    integer(c_int32_t) function c_lattice_vector(lat, x, y, z) bind(C, name='fegpu_lattice_set_force')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat
      real(c_double), value :: x, y, z
    end function
    integer(c_int32_t) function c_lattice_wall(lat, x, y, z) bind(C, name='fegpu_lattice_set_wall_velocity')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat
      real(c_double), value :: x, y, z
    end function
    integer(c_int32_t) function c_lattice_trt(lat, magic) bind(C, name='fegpu_lattice_set_trt')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat
      real(c_double), value :: magic
    end function
    integer(c_int32_t) function c_lattice_equilibrium(lat, rho, x, y, z) bind(C, name='fegpu_lattice_init_equilibrium')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat
      real(c_double), value :: rho, x, y, z
    end function
    integer(c_int32_t) function c_lattice_set_populations(lat, f, n) bind(C, name='fegpu_lattice_set_populations')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat, n
      real(c_double), intent(in) :: f(*)
    end function
    integer(c_int32_t) function c_lattice_get_populations(lat, f, n) bind(C, name='fegpu_lattice_get_populations')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat, n
      real(c_double), intent(out) :: f(*)
    end function
    integer(c_int32_t) function c_lattice_step(lat, n) bind(C, name='fegpu_lattice_step')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: lat, n
    end function
    integer(c_int32_t) function c_lattice_shape(lat, nx, ny, nz) bind(C, name='fegpu_lattice_shape')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: lat
      integer(c_int64_t), intent(out) :: nx, ny, nz
    end function
    integer(c_int32_t) function c_lattice_fields(lat, z_first, z_count, rho, u) bind(C, name='fegpu_lattice_fields')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat, z_first, z_count
      real(c_double), intent(out) :: rho(*), u(*)
    end function
    integer(c_int32_t) function c_lattice_set_body(lat, body, n) bind(C, name='fegpu_lattice_set_body')
      import :: c_int32_t, c_int64_t, c_int8_t
      integer(c_int64_t), value :: lat, n
      integer(c_int8_t), intent(in) :: body(*)
    end function
    integer(c_int32_t) function c_lattice_body_force(lat, force) bind(C, name='fegpu_lattice_body_force')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: lat
      real(c_double), intent(out) :: force(*)
    end function
    integer(c_int32_t) function c_lattice_destroy(lat) bind(C, name='fegpu_lattice_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: lat
    end function
  end interface

contains

  !> An nx x ny x nz D3Q19 lattice, BGK relaxation time tau (> 0.5), all fluid
  !> at rest with density 1. periodic: FEGPU_PERIODIC_X|Y|Z bits summed (other
  !> faces are resting walls); storage=FEGPU_DTYPE_F64 (default), _F32 or _F16 (kind=real64,
  !> real32 or FEGPU_KIND_F16 is the older form).
  subroutine fegpu_lattice_create(ctx, nx, ny, nz, tau, lat, periodic, kind, stat, errmsg, storage)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(in) :: nx, ny, nz
    real(real64), intent(in) :: tau
    type(fegpu_lattice), intent(out) :: lat
    class(*), intent(in), optional :: periodic, kind, storage
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: dtype, bits
    character(len=200) :: msg
    dtype = FEGPU_DTYPE_F64
    ! the real kinds first: where FEGPU_KIND_F16 equals a real kind (NAG's
    ! real64 = 2), kind= means that real kind, and storage= says f16
    if (present(kind)) then
      if (i64(kind) == real64) then
        dtype = FEGPU_DTYPE_F64
      else if (i64(kind) == real32) then
        dtype = FEGPU_DTYPE_F32
      else if (i64(kind) == FEGPU_KIND_F16) then
        dtype = FEGPU_DTYPE_F16
      else if (.not. present(storage)) then
        write (msg, '(a,i0,a,i0,a,i0,a,i0,a)') 'fegpu_lattice_create: kind = ', i64(kind), ': expected real64 (', &
             real64, '), real32 (', real32, ') or FEGPU_KIND_F16 (', FEGPU_KIND_F16, '), or give storage='
        call refuse(int(FEGPU_ERR_INVALID_ARGUMENT, c_int32_t), trim(msg), stat, errmsg)
        return
      end if
    end if
    ! storage= (FEGPU_DTYPE_F16, _F32 or _F64) says it without kind numbers;
    ! fegpu refuses any other value by name
    if (present(storage)) dtype = i32(storage)
    bits = 0
    if (present(periodic)) bits = i32(periodic)
    call check(c_lattice_create(ctx%handle, i64(nx), i64(ny), i64(nz), dtype, &
         real(tau, c_double), bits, lat%handle), 'fegpu_lattice_create', stat, errmsg)
  end subroutine

  !> flags(nx, ny, nz): FEGPU_FLUID, FEGPU_WALL, FEGPU_MOVING_WALL, FEGPU_VELOCITY_BC or
  !> FEGPU_PRESSURE_BC per site.
  subroutine fegpu_lattice_set_flags(lat, flags, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    integer(c_int8_t), intent(in) :: flags(:, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_set_flags(lat%handle, flags, size(flags, kind=c_int64_t)), 'fegpu_lattice_set_flags', stat, errmsg)
  end subroutine

  !> values(4, m): (rho, ux, uy, uz) of the m open boundary sites (FEGPU_VELOCITY_BC and
  !> FEGPU_PRESSURE_BC) in the order they come in flags(nx, ny, nz); a velocity site uses
  !> u, a pressure site rho (pressure rho / 3).
  subroutine fegpu_lattice_set_boundary_values(lat, values, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: values(:, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_boundary_values(lat%handle, values, size(values, kind=c_int64_t)), &
         'fegpu_lattice_set_boundary_values', stat, errmsg)
  end subroutine

  !> body(nx, ny, nz): nonzero where a site belongs to the body (an obstacle) whose
  !> force fegpu_lattice_body_force reports; its wall sites feel the force.
  subroutine fegpu_lattice_set_body(lat, body, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    integer(c_int8_t), intent(in) :: body(:, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_set_body(lat%handle, body, size(body, kind=c_int64_t)), 'fegpu_lattice_set_body', stat, errmsg)
  end subroutine

  !> force(3): the force the fluid exerts on the body after the last step, by momentum
  !> exchange (lattice units: drag along the flow, lift across it).
  subroutine fegpu_lattice_body_force(lat, force, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(out) :: force(3)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_body_force(lat%handle, force), 'fegpu_lattice_body_force', stat, errmsg)
  end subroutine

  !> Body force per unit volume, force(3), on every fluid site.
  subroutine fegpu_lattice_set_force(lat, force, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: force(3)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_vector(lat%handle, force(1), force(2), force(3)), 'fegpu_lattice_set_force', stat, errmsg)
  end subroutine

  !> Velocity u(3) of the FEGPU_MOVING_WALL sites.
  subroutine fegpu_lattice_set_wall_velocity(lat, u, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: u(3)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_wall(lat%handle, u(1), u(2), u(3)), 'fegpu_lattice_set_wall_velocity', stat, errmsg)
  end subroutine

  !> TRT collision with magic parameter magic > 0 (3/16: walls exactly midway
  !> in Poiseuille flow; 1/4: most stable); 0 returns to BGK.
  subroutine fegpu_lattice_set_trt(lat, magic, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: magic
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_trt(lat%handle, magic), 'fegpu_lattice_set_trt', stat, errmsg)
  end subroutine

  !> Every site at the equilibrium of density rho and velocity u(3).
  subroutine fegpu_lattice_init_equilibrium(lat, rho, u, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: rho, u(3)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_equilibrium(lat%handle, rho, u(1), u(2), u(3)), 'fegpu_lattice_init_equilibrium', stat, errmsg)
  end subroutine

  !> f(0:18, nx, ny, nz): the serial code's populations (after streaming), Palabos order.
  subroutine fegpu_lattice_set_populations(lat, f, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(in) :: f(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_set_populations(lat%handle, f, size(f, kind=c_int64_t)), 'fegpu_lattice_set_populations', stat, errmsg)
  end subroutine

  subroutine fegpu_lattice_get_populations(lat, f, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(out) :: f(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_get_populations(lat%handle, f, size(f, kind=c_int64_t)), 'fegpu_lattice_get_populations', stat, errmsg)
  end subroutine

  !> nsteps collide-and-stream steps on the device (0 to 2**31 - 1 a call); returns once they are queued.
  subroutine fegpu_lattice_step(lat, nsteps, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    class(*), intent(in) :: nsteps
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_lattice_step(lat%handle, i64(nsteps)), 'fegpu_lattice_step', stat, errmsg)
  end subroutine

  !> Density rho(nx, ny, k) and velocity u(3, nx, ny, k) of the k planes from
  !> z = z_first (default 1); k = size(rho, 3). Wall sites report 0.
  subroutine fegpu_lattice_fields(lat, rho, u, z_first, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    real(real64), intent(out) :: rho(:, :, :), u(:, :, :, :)
    class(*), intent(in), optional :: z_first
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: z0, nx, ny, nz
    character(len=200) :: msg
    z0 = 1
    if (present(z_first)) z0 = i64(z_first)
    ! the C side writes nx ny z_count values: the shapes are checked here, where they are known
    nx = 0; ny = 0; nz = 0
    call check(c_lattice_shape(lat%handle, nx, ny, nz), 'fegpu_lattice_fields', stat, errmsg)
    if (nx == 0) return
    if (size(rho, 1) /= nx .or. size(rho, 2) /= ny .or. size(u, 1) /= 3 .or. size(u, 2) /= nx .or. size(u, 3) /= ny &
        .or. size(u, 4) /= size(rho, 3)) then
      write (msg, '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a,i0,a)') 'rho(', nx, ', ', ny, ', z_count) and u(3, ', nx, ', ', ny, &
           ', z_count) expected; got rho(', size(rho, 1), ', ', size(rho, 2), ', ', size(rho, 3), ')'
      call size_error('fegpu_lattice_fields: ' // trim(msg), stat, errmsg)
      return
    end if
    call check(c_lattice_fields(lat%handle, z0, size(rho, 3, kind=c_int64_t), rho, u), 'fegpu_lattice_fields', stat, errmsg)
  end subroutine

  !> The lattice's size (a split lattice's whole size), as integers of any kind.
  subroutine fegpu_lattice_shape(lat, nx, ny, nz, stat, errmsg)
    type(fegpu_lattice), intent(in) :: lat
    class(*), intent(out) :: nx, ny, nz
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: d(3)
    d = 0
    call check(c_lattice_shape(lat%handle, d(1), d(2), d(3)), 'fegpu_lattice_shape', stat, errmsg)
    call put(nx, d(1))
    call put(ny, d(2))
    call put(nz, d(3))
  end subroutine

  subroutine fegpu_lattice_destroy(lat, stat, errmsg)
    type(fegpu_lattice), intent(inout) :: lat
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_lattice_destroy(lat%handle)
    if (st == FEGPU_OK) lat%handle = 0
    call check(st, 'fegpu_lattice_destroy', stat, errmsg)
  end subroutine

end module fegpu_lbm
