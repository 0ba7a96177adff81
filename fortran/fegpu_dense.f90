!> Device arrays, their transposes and copies, the vector algebra on them,
!> and the pipelines that stream host arrays through the device.
module fegpu_dense
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_int64_t, c_double
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use fegpu_types
  use fegpu_support
  use fegpu_real32, only: array_create_r32 => array_create, array_upload_r32 => array_upload, &
       array_download_r32 => array_download, host_register_r32 => host_register, host_unregister_r32 => host_unregister, &
       transpose_host_r32 => transpose_host, transpose_host_in_place_r32 => transpose_host_in_place
  use fegpu_real64, only: array_create_r64 => array_create, array_upload_r64 => array_upload, &
       array_download_r64 => array_download, host_register_r64 => host_register, host_unregister_r64 => host_unregister, &
       transpose_host_r64 => transpose_host, transpose_host_in_place_r64 => transpose_host_in_place
  implicit none
  private
  public :: fegpu_array_create, fegpu_array_create_empty, fegpu_array_destroy, fegpu_array_shape
  public :: fegpu_array_upload, fegpu_array_download, fegpu_host_register, fegpu_host_unregister
  public :: fegpu_transpose, fegpu_transpose_in_place, fegpu_copy, fegpu_transpose_host, fegpu_transpose_host_in_place
  public :: fegpu_dense_transpose, fegpu_dense_transpose_in_place, fegpu_dense_copy
  public :: fegpu_dense_transpose_host, fegpu_dense_transpose_host_in_place
  public :: fegpu_dot, fegpu_axpby, fegpu_nrm2, fegpu_vector_dot, fegpu_vector_axpby, fegpu_vector_nrm2
  public :: fegpu_pipeline_axpby, fegpu_pipeline_column_dots, fegpu_pipeline_gemm, fegpu_pipeline_gemv, fegpu_pipeline_transpose

  !> Creates an array holding a copy of a real32/real64 array of any rank
  !> (rank 1 becomes n x 1; rank 2 keeps its shape).
  interface fegpu_array_create
    module procedure array_create_r32, array_create_r64
  end interface
  !> Overwrites the array (or, with `first`, the elements first..first+size(a)-1, 1-based).
  interface fegpu_array_upload
    module procedure array_upload_r32, array_upload_r64
  end interface
  !> Copies the array (or, with `first`, elements first..first+size(a)-1, 1-based) into `a`.
  interface fegpu_array_download
    module procedure array_download_r32, array_download_r64
  end interface
  !> Page-locks a host array so transfers from and to it run at pinned speed.
  interface fegpu_host_register
    module procedure host_register_r32, host_register_r64
  end interface
  interface fegpu_host_unregister
    module procedure host_unregister_r32, host_unregister_r64
  end interface
  !> at = transpose(a) for host arrays through the context's backend
  !> (fegpu_dense_transpose_host is the C name; fegpu_transpose_host the older one).
  interface fegpu_dense_transpose_host
    module procedure transpose_host_r32, transpose_host_r64
  end interface
  interface fegpu_transpose_host
    module procedure transpose_host_r32, transpose_host_r64
  end interface
  interface fegpu_dense_transpose_host_in_place
    module procedure transpose_host_in_place_r32, transpose_host_in_place_r64
  end interface
  interface fegpu_transpose_host_in_place
    module procedure transpose_host_in_place_r32, transpose_host_in_place_r64
  end interface

  ! The C names (fegpu.h) of the device operations; the shorter names are the older ones.
  interface fegpu_dense_transpose
    module procedure fegpu_transpose
  end interface
  interface fegpu_dense_transpose_in_place
    module procedure fegpu_transpose_in_place
  end interface
  interface fegpu_dense_copy
    module procedure fegpu_copy
  end interface
  interface fegpu_vector_dot
    module procedure fegpu_dot
  end interface
  interface fegpu_vector_axpby
    module procedure fegpu_axpby
  end interface
  interface fegpu_vector_nrm2
    module procedure fegpu_nrm2
  end interface

  interface
    integer(c_int32_t) function c_array_create_empty(ctx, dtype, rows, cols, arr) bind(C, name='fegpu_array_create_empty')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: ctx, rows, cols
      integer(c_int32_t), value :: dtype
      integer(c_int64_t), intent(out) :: arr
    end function
    integer(c_int32_t) function c_array_destroy(arr) bind(C, name='fegpu_array_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: arr
    end function
    integer(c_int32_t) function c_array_shape(arr, rows, cols, dtype) bind(C, name='fegpu_array_shape')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: arr
      integer(c_int64_t), intent(out) :: rows, cols
      integer(c_int32_t), intent(out) :: dtype
    end function
    integer(c_int32_t) function c_transpose(src, dst, variant) bind(C, name='fegpu_dense_transpose')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: src, dst
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_transpose_in_place(a, variant) bind(C, name='fegpu_dense_transpose_in_place')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: a
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_copy(src, dst, variant) bind(C, name='fegpu_dense_copy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: src, dst
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_vector_nrm2(x, r) bind(C, name='fegpu_vector_nrm2')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: x
      real(c_double), intent(out) :: r
    end function
    integer(c_int32_t) function c_vector_dot(x, y, r) bind(C, name='fegpu_vector_dot')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: x, y
      real(c_double), intent(out) :: r
    end function
    integer(c_int32_t) function c_vector_axpby(alpha, x, beta, y) bind(C, name='fegpu_vector_axpby')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: x, y
      real(c_double), value :: alpha, beta
    end function
    integer(c_int32_t) function c_pipeline_axpby(ctx, n, a, x, b, y, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_axpby')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, n, n_streams, n_chunks
      real(c_double), value :: a, b
      real(c_double), intent(in) :: x(*)
      real(c_double), intent(inout) :: y(*)
      integer(c_int32_t), value :: strategy
    end function
    integer(c_int32_t) function c_pipeline_column_dots(ctx, m, ncols, a, b, out, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_column_dots')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, m, ncols, n_streams, n_chunks
      real(c_double), intent(in) :: a(*), b(*)
      real(c_double), intent(out) :: out(*)
      integer(c_int32_t), value :: strategy
    end function
    integer(c_int32_t) function c_pipeline_gemm(ctx, m, n, k, alpha, a, b, beta, c, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_gemm')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, m, n, k, n_streams, n_chunks
      real(c_double), value :: alpha, beta
      real(c_double), intent(in) :: a(*), b(*)
      real(c_double), intent(inout) :: c(*)
      integer(c_int32_t), value :: strategy
    end function
    integer(c_int32_t) function c_pipeline_gemv(ctx, m, n, alpha, a, x, beta, y, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_gemv')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, m, n, n_streams, n_chunks
      real(c_double), value :: alpha, beta
      real(c_double), intent(in) :: a(*), x(*)
      real(c_double), intent(inout) :: y(*)
      integer(c_int32_t), value :: strategy
    end function
    integer(c_int32_t) function c_pipeline_transpose(ctx, m, n, a, at, strategy, n_streams, n_chunks) &
         bind(C, name='fegpu_pipeline_transpose')
      import :: c_int32_t, c_int64_t, c_double
      integer(c_int64_t), value :: ctx, m, n, n_streams, n_chunks
      real(c_double), intent(in) :: a(*)
      real(c_double), intent(out) :: at(*)
      integer(c_int32_t), value :: strategy
    end function
  end interface

contains

  !> An uninitialised rows x cols array; `kind` is real32 or real64.
  subroutine fegpu_array_create_empty(ctx, kind, rows, cols, arr, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    class(*), intent(in) :: kind, rows, cols
    type(fegpu_array), intent(inout) :: arr
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: dtype
    character(len=120) :: msg
    dtype = 0
    if (i64(kind) == real32) dtype = FEGPU_DTYPE_F32
    if (i64(kind) == real64) dtype = FEGPU_DTYPE_F64
    if (dtype == 0) then  ! named as the Fortran caller gave it, a kind, not C's dtype
      write (msg, '(a,i0,a,i0,a,i0,a)') 'fegpu_array_create_empty: kind = ', i64(kind), ': expected real32 (', real32, &
           ') or real64 (', real64, ') from iso_fortran_env'
      call refuse(int(FEGPU_ERR_INVALID_ARGUMENT, c_int32_t), trim(msg), stat, errmsg)
      return
    end if
    call check(c_array_create_empty(ctx%handle, dtype, i64(rows), i64(cols), arr%handle), &
         'fegpu_array_create_empty', stat, errmsg)
  end subroutine

  subroutine fegpu_array_destroy(arr, stat, errmsg)
    type(fegpu_array), intent(inout) :: arr
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_array_destroy(arr%handle)
    if (st == FEGPU_OK) arr%handle = 0
    call check(st, 'fegpu_array_destroy', stat, errmsg)
  end subroutine

  !> rows, cols and kind (real32 or real64) of an array.
  subroutine fegpu_array_shape(arr, rows, cols, kind, stat, errmsg)
    type(fegpu_array), intent(in) :: arr
    class(*), intent(out) :: rows, cols
    class(*), intent(out), optional :: kind
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: r, c
    integer(c_int32_t) :: d
    r = 0; c = 0; d = 0
    call check(c_array_shape(arr%handle, r, c, d), 'fegpu_array_shape', stat, errmsg)
    call put(rows, r)
    call put(cols, c)
    if (present(kind)) call put(kind, int(merge(real64, real32, d == FEGPU_DTYPE_F64), c_int64_t))
  end subroutine

  !> dst = transpose(src) on the device (src m x n, dst n x m).
  subroutine fegpu_transpose(src, dst, variant, stat, errmsg)
    type(fegpu_array), intent(in) :: src, dst
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_transpose(src%handle, dst%handle, variant_code(variant)), 'fegpu_transpose', stat, errmsg)
  end subroutine

  !> a = transpose(a) on the device for a square array.
  subroutine fegpu_transpose_in_place(a, variant, stat, errmsg)
    type(fegpu_array), intent(in) :: a
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_transpose_in_place(a%handle, variant_code(variant)), 'fegpu_transpose_in_place', stat, errmsg)
  end subroutine

  !> dst = src on the device (same shape and kind).
  subroutine fegpu_copy(src, dst, variant, stat, errmsg)
    type(fegpu_array), intent(in) :: src, dst
    class(*), intent(in), optional :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_copy(src%handle, dst%handle, variant_code(variant)), 'fegpu_copy', stat, errmsg)
  end subroutine

  !> x . y of two device arrays (only the scalar comes back).
  real(real64) function fegpu_dot(x, y, stat, errmsg)
    type(fegpu_array), intent(in) :: x, y
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    real(c_double) :: r
    r = 0
    call check(c_vector_dot(x%handle, y%handle, r), 'fegpu_dot', stat, errmsg)
    fegpu_dot = r
  end function

  !> y = alpha*x + beta*y on device arrays.
  subroutine fegpu_axpby(alpha, x, beta, y, stat, errmsg)
    real(real64), intent(in) :: alpha, beta
    type(fegpu_array), intent(in) :: x, y
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_vector_axpby(alpha, x%handle, beta, y%handle), 'fegpu_axpby', stat, errmsg)
  end subroutine

  !> ||x||_2 of a device array, without underflow or overflow.
  real(real64) function fegpu_nrm2(x, stat, errmsg)
    type(fegpu_array), intent(in) :: x
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    real(c_double) :: r
    r = 0
    call check(c_vector_nrm2(x%handle, r), 'fegpu_nrm2', stat, errmsg)
    fegpu_nrm2 = r
  end function

  !> y = a x + b y on host arrays, pipelined through the device in chunks.
  !> strategy: FEGPU_PIPELINE_AUTO (default), _SERIAL, _PER_CHUNK or _STAGED;
  !> n_streams 1..16 (default: the overlap model's choice); n_chunks (default
  !> one per stream). Register x and y with fegpu_host_register for full speed.
  subroutine fegpu_pipeline_axpby(ctx, a, x, b, y, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: a, b, x(:)
    real(real64), intent(inout) :: y(:)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(x) /= size(y)) then
      call size_error('fegpu_pipeline_axpby: x and y must have the same size', stat, errmsg)
      return
    end if
    call check(c_pipeline_axpby(ctx%handle, size(y, kind=c_int64_t), a, x, b, y, opt32(strategy), opt64(n_streams), &
         opt64(n_chunks)), 'fegpu_pipeline_axpby', stat, errmsg)
  end subroutine

  !> out(j) = dot_product(a(:, j), b(:, j)) for every column, pipelined by columns.
  subroutine fegpu_pipeline_column_dots(ctx, a, b, out, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: a(:, :), b(:, :)
    real(real64), intent(out) :: out(:)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (any(shape(a) /= shape(b)) .or. size(out) /= size(a, 2)) then
      call size_error('fegpu_pipeline_column_dots: a and b must have the same shape and out one element per column', &
           stat, errmsg)
      return
    end if
    call check(c_pipeline_column_dots(ctx%handle, size(a, 1, kind=c_int64_t), size(a, 2, kind=c_int64_t), a, b, out, &
         opt32(strategy), opt64(n_streams), opt64(n_chunks)), 'fegpu_pipeline_column_dots', stat, errmsg)
  end subroutine

  !> c = alpha a b + beta c (cuBLAS); a goes to the device once, b and c in column panels.
  subroutine fegpu_pipeline_gemm(ctx, alpha, a, b, beta, c, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: alpha, beta, a(:, :), b(:, :)
    real(real64), intent(inout) :: c(:, :)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(a, 2) /= size(b, 1) .or. size(c, 1) /= size(a, 1) .or. size(c, 2) /= size(b, 2)) then
      call size_error('fegpu_pipeline_gemm: a (m x k), b (k x n), c (m x n) do not agree', stat, errmsg)
      return
    end if
    call check(c_pipeline_gemm(ctx%handle, size(a, 1, kind=c_int64_t), size(b, 2, kind=c_int64_t), size(a, 2, kind=c_int64_t), &
         alpha, a, b, beta, c, opt32(strategy), opt64(n_streams), opt64(n_chunks)), 'fegpu_pipeline_gemm', stat, errmsg)
  end subroutine

  !> y = alpha a x + beta y (cuBLAS); a moves in row panels, x once.
  subroutine fegpu_pipeline_gemv(ctx, alpha, a, x, beta, y, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: alpha, beta, a(:, :), x(:)
    real(real64), intent(inout) :: y(:)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(a, 2) /= size(x) .or. size(a, 1) /= size(y)) then
      call size_error('fegpu_pipeline_gemv: a (m x n), x (n), y (m) do not agree', stat, errmsg)
      return
    end if
    call check(c_pipeline_gemv(ctx%handle, size(a, 1, kind=c_int64_t), size(a, 2, kind=c_int64_t), alpha, a, x, beta, y, &
         opt32(strategy), opt64(n_streams), opt64(n_chunks)), 'fegpu_pipeline_gemv', stat, errmsg)
  end subroutine

  !> at = transpose(a), in column panels of a.
  subroutine fegpu_pipeline_transpose(ctx, a, at, strategy, n_streams, n_chunks, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: a(:, :)
    real(real64), intent(out) :: at(:, :)
    class(*), intent(in), optional :: strategy, n_streams, n_chunks
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(at, 1) /= size(a, 2) .or. size(at, 2) /= size(a, 1)) then
      call size_error('fegpu_pipeline_transpose: at must be the transpose shape of a', stat, errmsg)
      return
    end if
    call check(c_pipeline_transpose(ctx%handle, size(a, 1, kind=c_int64_t), size(a, 2, kind=c_int64_t), a, at, &
         opt32(strategy), opt64(n_streams), opt64(n_chunks)), 'fegpu_pipeline_transpose', stat, errmsg)
  end subroutine

end module fegpu_dense
