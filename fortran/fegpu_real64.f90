!> The real64 procedures behind the dense module's generic names: the C
!> functions of that kind, and the bodies of dense_kind.inc with wp = real64.
module fegpu_real64
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_int64_t, c_ptr, c_null_ptr, c_loc
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use fegpu_types
  use fegpu_support
  implicit none
  private
  integer, parameter :: wp = real64
  public :: array_create, array_upload, array_download, host_register, host_unregister, transpose_host, &
       transpose_host_in_place

  interface
    integer(c_int32_t) function c_array_create(ctx, rows, cols, host, arr) bind(C, name='fegpu_array_create_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, rows, cols
      type(c_ptr), value :: host
      integer(c_int64_t), intent(out) :: arr
    end function
    integer(c_int32_t) function c_upload_slice(arr, first, count, host, base) bind(C, name='fegpu_array_upload_slice_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, first, count
      type(c_ptr), value :: host
      integer(c_int32_t), value :: base
    end function
    integer(c_int32_t) function c_upload(arr, host, count) bind(C, name='fegpu_array_upload_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, count
      type(c_ptr), value :: host
    end function
    integer(c_int32_t) function c_download_slice(arr, first, count, host, base) &
         bind(C, name='fegpu_array_download_slice_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, first, count
      type(c_ptr), value :: host
      integer(c_int32_t), value :: base
    end function
    integer(c_int32_t) function c_download(arr, host, count) bind(C, name='fegpu_array_download_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: arr, count
      type(c_ptr), value :: host
    end function
    integer(c_int32_t) function c_transpose_host(ctx, m, n, a, at, variant) bind(C, name='fegpu_dense_transpose_host_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, m, n
      type(c_ptr), value :: a, at
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_transpose_host_in_place(ctx, n, a, variant) &
         bind(C, name='fegpu_dense_transpose_host_in_place_f64')
      import :: c_int32_t, c_int64_t, c_ptr
      integer(c_int64_t), value :: ctx, n
      type(c_ptr), value :: a
      integer(c_int32_t), value :: variant
    end function
  end interface

contains

  include 'dense_kind.inc'

end module fegpu_real64
