!> What the topic modules share and the caller does not see: the integer
!> argument helpers (class(*) in, int32/int64 out), the stat/errmsg
!> convention, and the C calls more than one topic makes. Only
!> fegpu_last_error is re-exported by the umbrella module.
module fegpu_support
  use, intrinsic :: iso_c_binding, only: c_double, c_int32_t, c_int64_t, c_ptr, c_char, c_null_char
  use, intrinsic :: iso_fortran_env, only: int8, int16, int32, int64, real32, real64, error_unit
  use fegpu_types
  implicit none
  private
  public :: fegpu_last_error, i64, i32, put, check, refuse, elements, beyond, assumed_size_error, matrix_shape, shape_error, &
       size_error, variant_code, base_of, opt32, opt64, c_host_register, c_host_unregister, c_messages_set_index_base, &
       text_from_c
  public :: NOT_AN_INTEGER, NOT_AN_INT32, solve_info, solve_result

  !> What a non-integer (or, for a C int, an out-of-range) actual argument
  !> reads as: a value every fegpu call refuses by the argument's name.
  integer(c_int64_t), parameter :: NOT_AN_INTEGER = -huge(1_c_int64_t)
  integer(c_int32_t), parameter :: NOT_AN_INT32 = -huge(1_c_int32_t)

  !> fegpu_solve_info of fegpu.h.
  type, bind(C) :: solve_info
    integer(c_int64_t) :: iterations = 0
    real(c_double) :: relative_residual = 0, true_relative_residual = 0, setup_seconds = 0, solve_seconds = 0
  end type solve_info

  interface
    integer(c_int32_t) function c_last_error_message(buf, len) bind(C, name='fegpu_last_error_message')
      import :: c_int32_t, c_int64_t, c_char
      character(kind=c_char), intent(out) :: buf(*)
      integer(c_int64_t), value :: len
    end function
    integer(c_int32_t) function c_messages_set_index_base(index_base) bind(C, name='fegpu_messages_set_index_base')
      import :: c_int32_t
      integer(c_int32_t), value :: index_base
    end function
    integer(c_int32_t) function c_host_register(ctx, ptr, bytes) bind(C, name='fegpu_host_register')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, bytes
      type(c_ptr), value :: ptr
    end function
    integer(c_int32_t) function c_host_unregister(ctx, ptr) bind(C, name='fegpu_host_unregister')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx
      type(c_ptr), value :: ptr
    end function
  end interface

contains

  !> The calling thread's last error message.
  function fegpu_last_error() result(msg)
    character(len=:), allocatable :: msg
    character(kind=c_char) :: buf(1024)
    integer :: i, st
    st = c_last_error_message(buf, int(size(buf), c_int64_t))
    msg = ''
    do i = 1, size(buf)
      if (buf(i) == c_null_char) exit
      msg = msg // buf(i)
    end do
  end function fegpu_last_error

  !> The NUL-terminated C string in buf as text (blank-padded, cut at len(text)).
  subroutine text_from_c(buf, text)
    character(kind=c_char), intent(in) :: buf(:)
    character(*), intent(out) :: text
    integer :: i
    text = ''
    do i = 1, min(len(text), size(buf))
      if (buf(i) == c_null_char) exit
      text(i:i) = buf(i)
    end do
  end subroutine text_from_c

  !> An integer argument of any kind as int64 (elemental: arrays too): the
  !> procedures take their integer arguments as class(*), so one module serves code built with
  !> default 4-byte integers and with -fdefault-integer-8 (or integer*8
  !> declarations). A non-integer reads as NOT_AN_INTEGER, which fegpu
  !> refuses naming the argument.
  elemental function i64(x) result(v)
    class(*), intent(in) :: x
    integer(c_int64_t) :: v
    select type (x)
    type is (integer(int8))
      v = x
    type is (integer(int16))
      v = x
    type is (integer(int32))
      v = x
    type is (integer(int64))
      v = x
    class default
      v = NOT_AN_INTEGER
    end select
  end function

  !> An integer argument of any kind as a C int (out-of-range values and
  !> non-integers become NOT_AN_INT32, which fegpu refuses by name).
  elemental function i32(x) result(v)
    class(*), intent(in) :: x
    integer(c_int32_t) :: v
    integer(c_int64_t) :: w
    w = i64(x)
    v = NOT_AN_INT32
    if (abs(w) <= huge(v)) v = int(w, c_int32_t)
  end function

  !> Stores v into an integer result argument of whatever kind the caller
  !> declared, or a real one (legacy implicit typing makes STAT a REAL).
  subroutine put(x, v)
    class(*), intent(out) :: x
    integer(c_int64_t), intent(in) :: v
    select type (x)
    type is (real(real32))
      x = real(v, real32)
    type is (real(real64))
      x = real(v, real64)
    type is (integer(int8))
      x = int(v, int8)
    type is (integer(int16))
      x = int(v, int16)
    type is (integer(int32))
      x = int(v, int32)
    type is (integer(int64))
      x = v
    end select
  end subroutine

  !> Reports a status the Fortran way: into stat/errmsg when present,
  !> otherwise print the message and stop.
  subroutine check(status, where, stat, errmsg)
    integer(c_int32_t), intent(in) :: status
    character(*), intent(in) :: where
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(len=:), allocatable :: msg
    if (present(stat)) call put(stat, int(status, c_int64_t))
    if (status == FEGPU_OK) return
    msg = where // ': ' // fegpu_last_error()
    call refuse(status, msg, stat, errmsg)
  end subroutine check

  !> A solve's outcome the Fortran way: iterations and residuals into the
  !> optional arguments present (in every case, converged or not), then the status as check does.
  subroutine solve_result(status, info, where, iterations, residual, true_residual, stat, errmsg)
    integer(c_int32_t), intent(in) :: status
    type(solve_info), intent(in) :: info
    character(*), intent(in) :: where
    class(*), intent(out), optional :: iterations
    real(c_double), intent(out), optional :: residual, true_residual
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (present(iterations)) call put(iterations, info%iterations)
    if (present(residual)) residual = info%relative_residual
    if (present(true_residual)) true_residual = info%true_relative_residual
    call check(status, where, stat, errmsg)
  end subroutine solve_result

  !> A failed call the Fortran way: `status` into stat and `msg` into errmsg
  !> when present, otherwise the message on error_unit and a stop.
  subroutine refuse(status, msg, stat, errmsg)
    integer(c_int32_t), intent(in) :: status
    character(*), intent(in) :: msg
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (present(stat)) call put(stat, int(status, c_int64_t))
    if (present(errmsg)) errmsg = msg
    if (.not. present(stat)) call fail(msg)
  end subroutine refuse

  !> Without stat=: the message goes to standard error, flushed, before the
  !> program stops, so a batch log shows it ahead of any backtrace.
  subroutine fail(msg)
    character(*), intent(in) :: msg
    write (error_unit, '(a)') 'fegpu: ' // msg
    flush (error_unit)
    error stop 1
  end subroutine

  !> The element count of an array argument: count= when given (the only way
  !> to pass a legacy assumed-size A(*) array whole), else its size, which is
  !> negative for an assumed-size actual argument.
  integer(c_int64_t) function elements(size_a, count)
    integer(c_int64_t), intent(in) :: size_a
    class(*), intent(in), optional :: count
    elements = size_a
    if (present(count)) elements = i64(count)
  end function

  !> Refuses a negative count= (named as given), or one beyond an array whose
  !> size is known (the C side would read or write past its end); .true.
  !> when it refused.
  logical function beyond(where, size_a, n, count, stat, errmsg)
    character(*), intent(in) :: where
    integer(c_int64_t), intent(in) :: size_a, n
    class(*), intent(in), optional :: count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(len=200) :: msg
    if (present(count) .and. n < 0) then
      write (msg, '(a,i0,a)') ': count = ', n, ': must be at least 1'
      call refuse(int(FEGPU_ERR_INVALID_ARGUMENT, c_int32_t), where // trim(msg), stat, errmsg)
      beyond = .true.
      return
    end if
    beyond = size_a >= 0 .and. n > size_a
    if (beyond) then
      write (msg, '(a,i0,a,i0,a)') ': count = ', n, ' but a has ', size_a, ' elements'
      call size_error(where // trim(msg), stat, errmsg)
    end if
  end function

  subroutine assumed_size_error(where, stat, errmsg)
    character(*), intent(in) :: where
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(len=:), allocatable :: msg
    msg = where // ': a is an assumed-size array (its size is unknown here): pass count= (the number of elements)' // &
         ' or a section such as a(1:n)'
    call refuse(int(FEGPU_ERR_INVALID_ARGUMENT, c_int32_t), msg, stat, errmsg)
  end subroutine

  !> rows x cols of an array of any rank: rank 1 is n x 1, higher ranks fold
  !> their trailing dimensions into the columns.
  subroutine matrix_shape(rnk, n, n1, rows, cols)
    integer, intent(in) :: rnk
    integer(c_int64_t), intent(in) :: n, n1
    integer(c_int64_t), intent(out) :: rows, cols
    rows = n; cols = 1
    if (rnk >= 1 .and. n1 > 0) then
      rows = n1; cols = n / n1
    end if
  end subroutine

  subroutine shape_error(sa, sat, stat, errmsg)
    integer, intent(in) :: sa(2), sat(2)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    character(len=200) :: msg
    write (msg, '(a,i0,a,i0,a,i0,a,i0)') 'a is ', sa(1), ' x ', sa(2), ' so at must be its transpose, but at is ', &
         sat(1), ' x ', sat(2)
    call size_error('fegpu_transpose_host: ' // trim(msg), stat, errmsg)
  end subroutine

  !> A size mismatch found on the Fortran side (before any C call), reported as check does.
  subroutine size_error(msg, stat, errmsg)
    character(*), intent(in) :: msg
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call refuse(int(FEGPU_ERR_SIZE_MISMATCH, c_int32_t), msg, stat, errmsg)
  end subroutine

  integer(c_int32_t) function variant_code(variant)
    class(*), intent(in), optional :: variant
    variant_code = FEGPU_VARIANT_AUTO
    if (present(variant)) variant_code = i32(variant)
  end function

  integer(c_int32_t) function base_of(index_base)
    class(*), intent(in), optional :: index_base
    base_of = 1
    if (present(index_base)) base_of = i32(index_base)
  end function

  integer(c_int32_t) function opt32(v)
    class(*), intent(in), optional :: v
    opt32 = 0
    if (present(v)) opt32 = i32(v)
  end function

  integer(c_int64_t) function opt64(v)
    class(*), intent(in), optional :: v
    opt64 = 0
    if (present(v)) opt64 = i64(v)
  end function
end module fegpu_support
