!> FE-IIEE rad_fields: the S-point field accumulators on one or several devices.
module fegpu_radfields_m
  use, intrinsic :: iso_c_binding, only: c_int32_t, c_int64_t, c_double, c_double_complex
  use, intrinsic :: iso_fortran_env, only: real32, real64
  use fegpu_types
  use fegpu_support
  implicit none
  private
  public :: fegpu_radfields_create, fegpu_radfields_accumulate, fegpu_radfields_download, fegpu_radfields_reset
  public :: fegpu_radfields_excluded, fegpu_radfields_set_variant, fegpu_radfields_destroy, fegpu_radfields_compute

  !> fegpu_radfields_create(ctx, points, n_rhs, k, omega_mu, acc): ctx one
  !> context, or an array of CUDA contexts (one per device) to split S across GPUs.
  interface fegpu_radfields_create
    module procedure radfields_create_one, radfields_create_many
  end interface

  interface
    integer(c_int32_t) function c_radfields_create(ctx, n_s, points, n_rhs, k, omega_mu, acc) &
         bind(C, name='fegpu_radfields_create')
      import :: c_int32_t, c_int64_t, c_double, c_double_complex
      integer(c_int64_t), value :: ctx, n_s, n_rhs
      real(c_double), intent(in) :: points(*)
      complex(c_double_complex), intent(in) :: k, omega_mu
      integer(c_int64_t), intent(out) :: acc
    end function
    integer(c_int32_t) function c_radfields_create_multi(n_ctx, ctxs, n_s, points, n_rhs, k, omega_mu, acc) &
         bind(C, name='fegpu_radfields_create_multi')
      import :: c_int32_t, c_int64_t, c_double, c_double_complex
      integer(c_int64_t), value :: n_ctx, n_s, n_rhs
      integer(c_int64_t), intent(in) :: ctxs(*)
      real(c_double), intent(in) :: points(*)
      complex(c_double_complex), intent(in) :: k, omega_mu
      integer(c_int64_t), intent(out) :: acc
    end function
    integer(c_int32_t) function c_radfields_accumulate(acc, n_p, points, weights, currents) &
         bind(C, name='fegpu_radfields_accumulate')
      import :: c_int32_t, c_int64_t, c_double, c_double_complex
      integer(c_int64_t), value :: acc, n_p
      real(c_double), intent(in) :: points(*), weights(*)
      complex(c_double_complex), intent(in) :: currents(*)
    end function
    integer(c_int32_t) function c_radfields_download(acc, fields, n) bind(C, name='fegpu_radfields_download')
      import :: c_int32_t, c_int64_t, c_double_complex
      integer(c_int64_t), value :: acc, n
      complex(c_double_complex), intent(out) :: fields(*)
    end function
    integer(c_int32_t) function c_radfields_reset(acc) bind(C, name='fegpu_radfields_reset')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: acc
    end function
    integer(c_int32_t) function c_radfields_shape(acc, n_s, n_rhs) bind(C, name='fegpu_radfields_shape')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: acc
      integer(c_int64_t), intent(out) :: n_s, n_rhs
    end function
    integer(c_int32_t) function c_radfields_excluded(acc, count) bind(C, name='fegpu_radfields_excluded')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: acc
      integer(c_int64_t), intent(out) :: count
    end function
    integer(c_int32_t) function c_radfields_set_variant(acc, variant) bind(C, name='fegpu_radfields_set_variant')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: acc
      integer(c_int32_t), value :: variant
    end function
    integer(c_int32_t) function c_radfields_destroy(acc) bind(C, name='fegpu_radfields_destroy')
      import :: c_int32_t, c_int64_t
      integer(c_int64_t), value :: acc
    end function
    integer(c_int32_t) function c_radfields_compute(ctx, n_s, s_points, n_p, p_points, weights, currents, n_rhs, k, &
         omega_mu, fields) bind(C, name='fegpu_radfields_compute')
      import :: c_int32_t, c_int64_t, c_double, c_double_complex
      integer(c_int64_t), value :: ctx, n_s, n_p, n_rhs
      real(c_double), intent(in) :: s_points(*), p_points(*), weights(*)
      complex(c_double_complex), intent(in) :: currents(*), k, omega_mu
      complex(c_double_complex), intent(out) :: fields(*)
    end function
  end interface

contains

  !> An accumulator on ctx for the S points points(3, n_s), n_rhs right-hand
  !> sides, wavenumber k and omega*mu (complex for lossy media). With ctx an
  !> array of CUDA contexts on distinct devices, the S points are split across them.
  subroutine radfields_create_one(ctx, points, n_rhs, k, omega_mu, acc, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: points(:, :)
    class(*), intent(in) :: n_rhs
    complex(c_double_complex), intent(in) :: k, omega_mu
    type(fegpu_radfields), intent(out) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(points, 1) /= 3) then
      call size_error('fegpu_radfields_create: points must be (3, n_s)', stat, errmsg)
      return
    end if
    call check(c_radfields_create(ctx%handle, size(points, 2, kind=c_int64_t), points, i64(n_rhs), k, omega_mu, acc%handle), &
         'fegpu_radfields_create', stat, errmsg)
  end subroutine

  subroutine radfields_create_many(ctx, points, n_rhs, k, omega_mu, acc, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx(:)
    real(real64), intent(in) :: points(:, :)
    class(*), intent(in) :: n_rhs
    complex(c_double_complex), intent(in) :: k, omega_mu
    type(fegpu_radfields), intent(out) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: handles(size(ctx))
    if (size(points, 1) /= 3) then
      call size_error('fegpu_radfields_create: points must be (3, n_s)', stat, errmsg)
      return
    end if
    handles = ctx%handle
    call check(c_radfields_create_multi(size(handles, kind=c_int64_t), handles, size(points, 2, kind=c_int64_t), points, &
         i64(n_rhs), k, omega_mu, acc%handle), 'fegpu_radfields_create', stat, errmsg)
  end subroutine

  !> Adds one S' element (or a batch): points(3, n_p), weights(n_p),
  !> currents(3, 2, n_p, n_rhs) (J then M). Returns without waiting for the
  !> device; the arrays may be overwritten at once.
  subroutine fegpu_radfields_accumulate(acc, points, weights, currents, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    real(real64), intent(in) :: points(:, :), weights(:)
    complex(c_double_complex), intent(in) :: currents(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n_s, n_rhs
    n_s = 0; n_rhs = 0
    call check(c_radfields_shape(acc%handle, n_s, n_rhs), 'fegpu_radfields_accumulate', stat, errmsg)
    if (n_rhs == 0) return
    ! C reads 3 x 2 x n_p x n_rhs currents (n_rhs the accumulator's): checked here
    if (size(points, 1) /= 3 .or. size(points, 2) /= size(weights) .or. size(currents, 1) /= 3 .or. &
         size(currents, 2) /= 2 .or. size(currents, 3) /= size(weights) .or. size(currents, 4) /= n_rhs) then
      call size_error('fegpu_radfields_accumulate: points must be (3, n_p), weights (n_p), currents (3, 2, n_p, n_rhs) ' // &
           'with the accumulator''s n_rhs', stat, errmsg)
      return
    end if
    call check(c_radfields_accumulate(acc%handle, size(weights, kind=c_int64_t), points, weights, currents), &
         'fegpu_radfields_accumulate', stat, errmsg)
  end subroutine

  !> fields(3, 2, n_s, n_rhs): E then curl E, after every queued accumulation.
  subroutine fegpu_radfields_download(acc, fields, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    complex(c_double_complex), intent(out) :: fields(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int64_t) :: n_s, n_rhs
    n_s = 0; n_rhs = 0
    call check(c_radfields_shape(acc%handle, n_s, n_rhs), 'fegpu_radfields_download', stat, errmsg)
    if (n_s == 0) return
    if (size(fields, 1) /= 3 .or. size(fields, 2) /= 2 .or. size(fields, 3) /= n_s .or. size(fields, 4) /= n_rhs) then
      call size_error('fegpu_radfields_download: fields must be (3, 2, n_s, n_rhs) with the accumulator''s n_s and n_rhs', &
           stat, errmsg)
      return
    end if
    call check(c_radfields_download(acc%handle, fields, size(fields, kind=c_int64_t)), 'fegpu_radfields_download', stat, errmsg)
  end subroutine

  !> Zeroes the fields for the next FE-IIEE iteration.
  subroutine fegpu_radfields_reset(acc, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_radfields_reset(acc%handle), 'fegpu_radfields_reset', stat, errmsg)
  end subroutine

  !> Pairs of coincident S and S' points skipped since creation or the last reset.
  subroutine fegpu_radfields_excluded(acc, count, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    integer(c_int64_t), intent(out) :: count
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_radfields_excluded(acc%handle, count), 'fegpu_radfields_excluded', stat, errmsg)
  end subroutine

  !> FEGPU_RADFIELDS_AUTO (default), _DIRECT or _TILED.
  subroutine fegpu_radfields_set_variant(acc, variant, stat, errmsg)
    type(fegpu_radfields), intent(in) :: acc
    class(*), intent(in) :: variant
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    call check(c_radfields_set_variant(acc%handle, i32(variant)), 'fegpu_radfields_set_variant', stat, errmsg)
  end subroutine

  subroutine fegpu_radfields_destroy(acc, stat, errmsg)
    type(fegpu_radfields), intent(inout) :: acc
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    integer(c_int32_t) :: st
    st = c_radfields_destroy(acc%handle)
    if (st == FEGPU_OK) acc%handle = 0
    call check(st, 'fegpu_radfields_destroy', stat, errmsg)
  end subroutine

  !> The one-call form: fields(3, 2, n_s, n_rhs) radiated by all of S' at once.
  subroutine fegpu_radfields_compute(ctx, s_points, p_points, weights, currents, k, omega_mu, fields, stat, errmsg)
    type(fegpu_context), intent(in) :: ctx
    real(real64), intent(in) :: s_points(:, :), p_points(:, :), weights(:)
    complex(c_double_complex), intent(in) :: currents(:, :, :, :), k, omega_mu
    complex(c_double_complex), intent(out) :: fields(:, :, :, :)
    class(*), intent(out), optional :: stat
    character(*), intent(inout), optional :: errmsg
    if (size(s_points, 1) /= 3 .or. size(p_points, 1) /= 3 .or. size(p_points, 2) /= size(weights) .or. &
         any(shape(currents) /= [3, 2, size(weights), size(currents, 4)]) .or. &
         any(shape(fields) /= [3, 2, size(s_points, 2), size(currents, 4)])) then
      call size_error('fegpu_radfields_compute: s_points must be (3, n_s), p_points (3, n_p), weights (n_p), '// &
           'currents (3, 2, n_p, n_rhs), fields (3, 2, n_s, n_rhs)', stat, errmsg)
      return
    end if
    call check(c_radfields_compute(ctx%handle, size(s_points, 2, kind=c_int64_t), s_points, size(weights, kind=c_int64_t), &
         p_points, weights, currents, size(currents, 4, kind=c_int64_t), k, omega_mu, fields), 'fegpu_radfields_compute', &
         stat, errmsg)
  end subroutine

end module fegpu_radfields_m
