!> Contexts, the library version and the pipelines' profile.
module fegpu_context_m
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_int64_t, c_ptr, c_null_ptr, c_loc, c_char, c_null_char
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use fegpu_types
  use fegpu_support
  implicit none
  private
  public :: fegpu_context_create, fegpu_context_destroy, fegpu_context_backend, fegpu_context_synchronize
  public :: fegpu_version, fegpu_profile_enable, fegpu_profile_report, fegpu_profile_op

  interface
    integer(c_int32_t) function c_profile_op(ctx, op, out) bind(C, name='fegpu_profile_op')
      import :: c_int32_t, c_int64_t, c_char, fegpu_op_profile
      integer(c_int64_t), value :: ctx
      character(kind=c_char), intent(in) :: op(*)
      type(fegpu_op_profile), intent(out) :: out
    end function
  end interface

  interface
    integer(c_int32_t) function c_context_create(backend, device, ctx) bind(C, name='fegpu_context_create')
      import :: c_int32_t, c_int64_t
      integer(c_int32_t), value :: backend
      integer(c_int64_t), value :: device
      integer(c_int64_t), intent(out) :: ctx
    end function
    integer(c_int32_t) function c_context_destroy(ctx) bind(C, name='fegpu_context_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx
    end function
    integer(c_int32_t) function c_context_backend(ctx, backend) bind(C, name='fegpu_context_backend')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx
      integer(c_int32_t), intent(out) :: backend
    end function
    integer(c_int32_t) function c_context_synchronize(ctx) bind(C, name='fegpu_context_synchronize')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx
    end function
    integer(c_int32_t) function c_version(major, minor, patch) bind(C, name='fegpu_version')
      import :: c_int32_t
      integer(c_int32_t), intent(out) :: major, minor, patch
    end function
    integer(c_int32_t) function c_profile_enable(ctx, on) bind(C, name='fegpu_profile_enable')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx
      integer(c_int32_t), value :: on
    end function
    integer(c_int32_t) function c_profile_report(ctx, path) bind(C, name='fegpu_profile_report')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx
      type(c_ptr), value :: path
    end function
  end interface

contains

  subroutine fegpu_context_create(ctx, backend, device, stat, errmsg)
    type(fegpu_context), intent(out) :: ctx
    class(*), intent(in), optional :: backend, device
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: b, st
    integer(c_int64_t) :: d
    b = FEGPU_BACKEND_AUTO; d = 0
    if (present(backend)) b = i32(backend)
    if (present(device)) d = i64(device)
    ! messages name positions as Fortran counts them: values(1), not values[0]
    st = c_messages_set_index_base(1_c_int32_t)
    if (st == FEGPU_OK) st = c_context_create(b, d, ctx%handle)
    call check(st, 'fegpu_context_create', stat, errmsg)
  end subroutine

  subroutine fegpu_context_destroy(ctx, stat, errmsg)
    type(fegpu_context), intent(inout) :: ctx
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_context_destroy(ctx%handle)
    if (st == FEGPU_OK) ctx%handle = 0
    call check(st, 'fegpu_context_destroy', stat, errmsg)
  end subroutine

  !> The backend the context runs on (FEGPU_BACKEND_CPU or FEGPU_BACKEND_CUDA).
  subroutine fegpu_context_backend(ctx, backend, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(out) :: backend
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: b
    b = -1
    call check(c_context_backend(ctx%handle, b), 'fegpu_context_backend', stat, errmsg)
    call put(backend, int(b, c_int64_t))
  end subroutine

  subroutine fegpu_context_synchronize(ctx, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_context_synchronize(ctx%handle), 'fegpu_context_synchronize', stat, errmsg)
  end subroutine

  !> The library's version (major.minor.patch).
  subroutine fegpu_version(major, minor, patch, stat, errmsg)
    class(*), intent(out) :: major, minor, patch
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: v(3)
    v = 0
    call check(c_version(v(1), v(2), v(3)), 'fegpu_version', stat, errmsg)
    call put(major, int(v(1), c_int64_t))
    call put(minor, int(v(2), c_int64_t))
    call put(patch, int(v(3), c_int64_t))
  end subroutine

  !> Records where the context's time goes (as FEGPU_PROFILE=1 does).
  subroutine fegpu_profile_enable(ctx, on, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    logical, intent(in) :: on
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: flag
    flag = 0
    if (on) flag = 1
    call check(c_profile_enable(ctx%handle, flag), 'fegpu_profile_enable', stat, errmsg)
  end subroutine

  !> Prints the profile table; with json_path, also writes it as JSON.
  subroutine fegpu_profile_report(ctx, json_path, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    character(*), intent(in), optional :: json_path
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(kind=c_char, len=:), allocatable, target :: path
    if (present(json_path)) then
      path = trim(json_path) // c_null_char
      call check(c_profile_report(ctx%handle, c_loc(path)), 'fegpu_profile_report', stat, errmsg)
    else
      call check(c_profile_report(ctx%handle, c_null_ptr), 'fegpu_profile_report', stat, errmsg)
    end if
  end subroutine

  !> The profile of one pipelined operation ("axpby", "column_dots", "gemm",
  !> "gemv" or "transpose"): calls, bytes and seconds; zeros if it has not run.
  subroutine fegpu_profile_op(ctx, op, profile, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    character(*), intent(in) :: op
    type(fegpu_op_profile), intent(out) :: profile
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_profile_op(ctx%handle, trim(op) // c_null_char, profile), 'fegpu_profile_op', stat, errmsg)
  end subroutine

end module fegpu_context_m
