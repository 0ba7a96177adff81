!> The Fortran bindings of the smaller calls, each against what it must
!> return: a CSR matrix with unsorted rows and a duplicate comes back sorted
!> and summed (fegpu_csr_download), survives a Matrix Market round trip
!> (fegpu_csr_write_mm, fegpu_csr_read_mm), ||x|| of vectors whose squares
!> underflow or overflow (fegpu_nrm2), a solve's residual history
!> (fegpu_solver_history), the library version (fegpu_version), and the
!> lattice's population storage chosen with storage= (the round trip of
!> populations exact in f64, within f32's and f16's rounding otherwise, and
!> kind=real64 meaning f64 whatever the compiler's kind numbers), the
!> bindings added with the topic modules (fegpu_lattice_directions,
!> fegpu_fem_packed_size against nd*(nd+1)/2, fegpu_profile_op counting the
!> calls and bytes of two pipelined axpby calls) and the C-named forms
!> (fegpu_vector_dot, fegpu_dense_transpose) against the older names.
program fortran_api
  use, intrinsic :: iso_fortran_env, only: real64, int64
  use fegpu
  use checks, only: expect, finish
  implicit none
  type(fegpu_context) :: ctx
  type(fegpu_csr) :: a, b
  type(fegpu_solver) :: s
  type(fegpu_array) :: v, rhs, x
  ! [[4 -1 0], [-1 4 -1], [0 -1 4]] given row by row, rows 1 and 2 unsorted,
  ! and row 3's diagonal split into 3 + 1
  integer :: rp(4) = [1, 3, 6, 9], ci(8) = [2, 1, 3, 2, 1, 2, 3, 3]
  real(real64) :: vals(8) = [-1, 4, -1, 4, -1, -1, 3, 1]
  integer(int64) :: rp8(4), ci8(7), rp9(4), ci9(7), count
  real(real64) :: v8(7), v9(7), hist(100), res
  integer :: its, major, minor, patch, nrows, ncols, nnz, k, st
  type(fegpu_lattice) :: lat
  real(real64) :: f(19, 4, 4, 4), g(19, 4, 4, 4), w(19), err(3)
  integer, parameter :: storages(3) = [FEGPU_DTYPE_F64, FEGPU_DTYPE_F32, FEGPU_DTYPE_F16]
  character(len=300) :: msg
  type(fegpu_fem) :: tet
  type(fegpu_op_profile) :: prof
  type(fegpu_array) :: m23, m32
  real(real64) :: coords(3, 4) = reshape([0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1], [3, 4]), props(2, 1) = 0.25_real64
  real(real64) :: xs(1000), ys(1000)
  real(real64) :: m(2, 3) = reshape([1, 2, 3, 4, 5, 6], [2, 3]), mt(3, 2)
  integer :: conn(4, 1) = reshape([1, 2, 3, 4], [4, 1]), material(1) = 1, backend
  integer(int64) :: packed
  integer :: mm_unit

  call fegpu_context_create(ctx)
  call fegpu_csr_create(ctx, 3, 3, rp, ci, vals, a)
  call fegpu_csr_download(a, rp8, ci8, v8)
  call expect(all(rp8 == [1, 3, 6, 8]) .and. all(ci8 == [1, 2, 1, 2, 3, 2, 3]), 'download: rows sorted, duplicate merged')
  call expect(all(v8 == [4, -1, -1, 4, -1, -1, 4]), 'download: the duplicate summed')
  call fegpu_csr_write_mm(a, 'fortran_api.mtx')
  call fegpu_csr_read_mm(ctx, 'fortran_api.mtx', b)
  call fegpu_csr_info(b, nrows, ncols, nnz)
  call fegpu_csr_download(b, rp9, ci9, v9)
  call expect(nrows == 3 .and. ncols == 3 .and. nnz == 7, 'Matrix Market round trip: sizes')
  call expect(all(rp9 == rp8) .and. all(ci9 == ci8) .and. all(v9 == v8), 'Matrix Market round trip: entries')
  ! the file is the driver's own: removed, so a run from the source tree leaves nothing there
  open(newunit=mm_unit, file='fortran_api.mtx', status='old', iostat=st)
  call expect(st == 0, 'the Matrix Market file is there to remove')
  if (st == 0) close(mm_unit, status='delete')

  call fegpu_array_create(ctx, [3.0e-200_real64, 4.0e-200_real64], v)
  call expect(abs(fegpu_nrm2(v) - 5.0e-200_real64) <= 1.0e-215_real64, 'nrm2 of values whose squares underflow')
  call fegpu_array_upload(v, [3.0e200_real64, -4.0e200_real64])
  call expect(abs(fegpu_nrm2(v) - 5.0e200_real64) <= 1.0e185_real64, 'nrm2 of values whose squares overflow')

  call fegpu_solver_create(a, FEGPU_METHOD_CG, FEGPU_PRECOND_NONE, s)
  call fegpu_array_create(ctx, [3.0_real64, 2.0_real64, 3.0_real64], rhs)   ! A * (1, 1, 1)
  call fegpu_array_create(ctx, [0.0_real64, 0.0_real64, 0.0_real64], x)
  call fegpu_solve(s, rhs, x, 1.0e-12_real64, 50, iterations=its, residual=res)
  call fegpu_solver_history(s, hist, count)
  call expect(count == its + 1, 'history: one residual per iteration and the start')
  call expect(hist(1) == 1.0_real64 .and. abs(hist(count) - res) <= 1.0e-15_real64, 'history: starts at 1, ends at the residual')

  ! D3Q19 rest weights, and populations a few percent off them
  w = [1.0_real64 / 3, (1.0_real64 / 18, k = 1, 6), (1.0_real64 / 36, k = 1, 12)]
  do k = 1, 19
    f(k, :, :, :) = w(k) * (1 + 0.01_real64 * sin(k + reshape([(real(its + k * 7 + nnz, real64), nnz = 1, 64)], [4, 4, 4])))
  end do
  do k = 1, 3
    call fegpu_lattice_create(ctx, 4, 4, 4, 0.8_real64, lat, storage=storages(k))
    call fegpu_lattice_set_populations(lat, f)
    g = -1
    call fegpu_lattice_get_populations(lat, g)
    err(k) = maxval(abs(g - f))
    call fegpu_lattice_destroy(lat)
  end do
  print '(a,3es10.2)', 'population round trip, f64 / f32 / f16 storage: ', err
  call expect(err(1) == 0, 'storage=FEGPU_DTYPE_F64: exact')
  call expect(err(2) > 0 .and. err(2) <= 1.0e-7_real64, 'storage=FEGPU_DTYPE_F32: f32 rounding')
  call expect(err(3) > 1.0e-7_real64 .and. err(3) < 1.0e-4_real64, 'storage=FEGPU_DTYPE_F16: f16 rounding of f - w')
  call fegpu_lattice_create(ctx, 4, 4, 4, 0.8_real64, lat, storage=7, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'dtype') > 0, 'storage=7 refused: ' // trim(msg))
  call fegpu_lattice_create(ctx, 4, 4, 4, 0.8_real64, lat, kind=1000, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'kind = 1000') > 0, 'kind=1000 refused by name: ' // trim(msg))

  call expect(fegpu_lattice_directions() == size(w), 'fegpu_lattice_directions: D3Q19')
  call fegpu_lattice_create(ctx, 4, 4, 4, 0.8_real64, lat, kind=real64)
  call fegpu_lattice_set_populations(lat, f)
  g = -1
  call fegpu_lattice_get_populations(lat, g)
  call expect(all(g == f), 'kind=real64: f64 storage (exact round trip)')
  call fegpu_lattice_destroy(lat)

  props(1, 1) = 1
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_TET4, FEGPU_PROBLEM_ELASTIC_3D, coords, conn, props, material, tet)
  call fegpu_fem_packed_size(tet, packed)
  call expect(packed == 12 * 13 / 2, 'fegpu_fem_packed_size: tet4 elasticity, 12 dofs')
  call fegpu_fem_destroy(tet)
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_TET4, FEGPU_PROBLEM_HEAT, coords, conn, props, material, tet)
  call fegpu_fem_packed_size(tet, packed)
  call expect(packed == 4 * 5 / 2, 'fegpu_fem_packed_size: tet4 heat, 4 dofs')
  call fegpu_fem_destroy(tet)

  call fegpu_profile_enable(ctx, .true.)
  xs = 1; ys = 2
  call fegpu_pipeline_axpby(ctx, 2.0_real64, xs, 1.0_real64, ys)
  call fegpu_pipeline_axpby(ctx, 2.0_real64, xs, 1.0_real64, ys)
  call expect(all(ys == 6), 'pipeline axpby twice')
  call fegpu_profile_op(ctx, 'axpby', prof)
  call fegpu_context_backend(ctx, backend)
  call expect(prof%calls == 2, 'fegpu_profile_op: two axpby calls')
  if (backend == FEGPU_BACKEND_CUDA) then
    call expect(prof%h2d_bytes == 2 * 2 * 8 * size(xs) .and. prof%d2h_bytes == 2 * 8 * size(xs), &
         'fegpu_profile_op: x and y up, y down, per call')
  else
    call expect(prof%h2d_bytes == 0 .and. prof%d2h_bytes == 0, 'fegpu_profile_op: no transfers on the CPU backend')
  end if
  call fegpu_profile_op(ctx, 'gemm', prof)
  call expect(prof%calls == 0 .and. prof%wall_seconds == 0, 'fegpu_profile_op: an operation not run is zeros')
  call fegpu_profile_op(ctx, 'axbpy', prof, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'axbpy') > 0, 'a misspelt operation refused: ' // trim(msg))
  call fegpu_profile_enable(ctx, .false.)  ! no table and JSON file at destroy

  call fegpu_array_create(ctx, m, m23)
  call fegpu_array_create_empty(ctx, real64, 3, 2, m32)
  call fegpu_dense_transpose(m23, m32)
  call fegpu_array_download(m32, mt)
  call expect(all(mt == transpose(m)), 'fegpu_dense_transpose (the C name of fegpu_transpose)')
  call expect(fegpu_vector_dot(m23, m23) == sum(m * m) .and. fegpu_dot(m32, m32) == sum(m * m), &
       'fegpu_vector_dot and fegpu_dot agree with sum(m*m)')

  call fegpu_version(major, minor, patch)
  call expect(major >= 0 .and. minor >= 0 .and. patch >= 0 .and. major + minor + patch > 0, 'version')
  print '(a,i0,a,i0,a,i0)', 'fegpu ', major, '.', minor, '.', patch
  call fegpu_context_destroy(ctx)
  call finish()
end program fortran_api
