!> Bad input from Fortran: every call returns its status in `stat` and a
!> message naming the problem in `errmsg`, and leaves the data unchanged.
program bad_input
  use, intrinsic :: iso_fortran_env, only: real32, real64, int8, int64
  use, intrinsic :: iso_c_binding, only: c_double_complex
  use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_positive_inf
  use fegpu
  use checks, only: check => expect, finish
  implicit none
  type(fegpu_context) :: ctx
  type(fegpu_array) :: a, b, stale
  type(fegpu_radfields) :: acc
  complex(c_double_complex) :: cur(3, 2, 4, 2), fields(3, 2, 4, 2)
  real(real64) :: x(3, 4), y(4, 3), z(0)
  character(len=512) :: msg
  integer :: st
  integer(int64) :: st8, rows8, cols8
  type(fegpu_csr) :: csr, kmat
  type(fegpu_solver) :: solver
  type(fegpu_array) :: rhs, sol
  type(fegpu_lattice) :: lat
  real(real64) :: rho(4, 3, 2), u(3, 4, 3, 2), rho_t(3, 4, 2), u_t(3, 3, 4, 2)
  integer :: nx, ny, nz
  real(real64) :: pop(0:18, 4, 3, 2)
  type(fegpu_fem) :: set
  real(real64) :: square3(3, 4), square(2, 4), props(2, 1), props1(1, 1)
  integer :: conn(4, 1), conn3(3, 1), material(1), edge(2, 1), edge3(3, 1), element, nodes, elements, materials
  real(real64) :: traction(2, 1), pressure(1, 1), laws(8, 1), cast(2), temps(4), load(8)
  type(fegpu_array) :: f
  type(fegpu_stress) :: stress
  type(fegpu_heat) :: heat

  call fegpu_context_create(ctx)
  x = 1; y = 7
  call fegpu_array_create(ctx, x, a)
  call fegpu_array_create(ctx, x, b)      ! 3 x 4: wrong shape for a transpose of a

  call fegpu_transpose(a, b, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'dst must be 4 x 3') > 0, 'mismatched shapes')
  call fegpu_array_download(b, x, stat=st)
  call expect(st == FEGPU_OK .and. all(x == 1), 'dst unchanged after a failed transpose')

  call fegpu_array_create_empty(ctx, real64, 0, 3, stale, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'rows = 0') > 0, 'zero size')
  call fegpu_array_create_empty(ctx, real64, 3, -2, stale, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'cols = -2') > 0, 'negative size')
  call fegpu_array_create_empty(ctx, 3, 3, 3, stale, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'kind = 3: expected real32') > 0, 'unknown kind')
  call fegpu_array_create(ctx, z, stale, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'rows = 0') > 0, 'empty host array')
  call fegpu_array_upload(a, y(1:2, 1), stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'count = 2') > 0, 'upload of the wrong size')
  ! count= beyond an array of known size: refused before C reads or writes past its end
  y = 7
  call fegpu_array_download(a, y(:, 1), count=12, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'count = 12 but a has 4 elements') > 0, &
       'download count beyond the array')
  call expect(all(y == 7), 'nothing written past a refused count')
  call fegpu_array_upload(a, y(:, 1), count=12, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'fegpu_array_upload: count = 12') > 0, &
       'upload count beyond the array')
  call fegpu_array_create(ctx, y(:, 1), stale, count=5, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'fegpu_array_create: count = 5') > 0, &
       'create count beyond the array')
  call fegpu_array_upload(a, y(:, 1), count=-1, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'fegpu_array_upload: count = -1: must be at least 1') > 0, &
       'a negative count named as given')
  ! a strided section would reach C as a temporary copy, pinned and then freed
  call fegpu_host_register(ctx, y(1, :), stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'not contiguous') > 0, 'registering a strided section')
  call fegpu_host_register(ctx, y(:, 2), stat=st, errmsg=msg)
  call expect(st == FEGPU_OK, 'registering a contiguous column')
  call fegpu_host_unregister(ctx, y(:, 2), stat=st, errmsg=msg)
  call expect(st == FEGPU_OK, 'unregistering it')
  call fegpu_array_download(a, y(:, 1), first=11, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'arr(11:14) lies outside the array') > 0, &
       'slice past the end, counted from 1')
  call fegpu_array_download(a, y(:, 1), first=0, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'index_base') > 0, '1-based slice starting at 0')
  call fegpu_transpose_host(ctx, x, x, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'at is 3 x 4') > 0, 'host transpose shape')
  call fegpu_transpose_in_place(a, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'square') > 0, 'in place on a non-square array')
  call fegpu_transpose(a, b, variant=42, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'variant = 42') > 0, 'unknown variant')
  call fegpu_host_unregister(ctx, y, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'not registered') > 0, 'unregister unknown memory')

  ! rad_fields: S points x(3, 4), 2 right-hand sides.
  call fegpu_radfields_create(ctx, x, 2, (0.0_real64, 0.0_real64), (1.0_real64, 0.0_real64), acc, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'k = 0') > 0, 'rad_fields with k = 0')
  call fegpu_radfields_create([ctx, ctx], x, 2, (6.0_real64, 0.0_real64), (6.0_real64, 0.0_real64), acc, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'ctxs(') > 0, 'rad_fields split across one device twice')
  call fegpu_radfields_create(ctx, x, 2, (6.0_real64, 0.0_real64), (6.0_real64, 0.0_real64), acc)
  cur = (1.0_real64, 0.0_real64)
  call fegpu_radfields_accumulate(acc, y, [1.0_real64, 1.0_real64], cur, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'points must be (3, n_p)') > 0, 'rad_fields batch shapes')
  y(2, 1) = ieee_value(1.0_real64, ieee_positive_inf)
  call fegpu_radfields_accumulate(acc, y(1:3, :), [1.0_real64, 1.0_real64, 1.0_real64], cur(:, :, 1:3, :), stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'points(2, 1)') > 0, 'rad_fields non-finite point')
  call fegpu_radfields_download(acc, fields, stat=st)
  call expect(st == FEGPU_OK .and. all(fields == (0.0_real64, 0.0_real64)), 'rad_fields unchanged after refused batches')
  call fegpu_radfields_download(acc, fields(:, :, 1:3, :), stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'fields must be (3, 2, n_s, n_rhs)') > 0, &
       'rad_fields download size')
  ! currents for one right-hand side where the accumulator has two: C would read past them
  call fegpu_radfields_accumulate(acc, y(1:3, 1:2), [1.0_real64, 1.0_real64], cur(:, :, 1:2, 1:1), stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'accumulator''s n_rhs') > 0, 'rad_fields currents of one rhs')
  ! a current that is not finite, named by its place in the caller's cur(3, 2, n_p, n_rhs)
  cur(2, 1, 3, 2) = cmplx(0.0_real64, ieee_value(1.0_real64, ieee_positive_inf), real64)
  call fegpu_radfields_accumulate(acc, x, [1.0_real64, 1.0_real64, 1.0_real64, 1.0_real64], cur, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'currents(2, 1, 3, 2)') > 0, 'rad_fields non-finite current')
  call fegpu_radfields_destroy(acc)
  y = 7

  stale = a
  call fegpu_array_destroy(a)
  call fegpu_copy(stale, b, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_HANDLE .and. index(msg, 'destroyed') > 0, 'destroyed handle')
  call fegpu_array_destroy(stale, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_HANDLE, 'double destroy')
  call fegpu_copy(fegpu_array(0_int64), b, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_HANDLE .and. index(msg, 'null handle') > 0, 'never-created handle')

  ! Integer arguments of any kind; a non-integer is refused by name.
  call fegpu_array_create_empty(ctx, real64, 2_int64, 3_int8, stale, stat=st8, errmsg=msg)
  call expect(st8 == FEGPU_OK, 'sizes given as int64 and int8, stat as int64')
  call fegpu_array_shape(stale, rows8, cols8, stat=st)
  call expect(st == FEGPU_OK .and. rows8 == 2 .and. cols8 == 3, 'shape returned into int64 results')
  call fegpu_array_create_empty(ctx, real64, 2.5_real64, 3, stale, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'rows') > 0 .and. index(msg, 'not an integer') > 0, &
       'a real where an integer belongs')
  ! A size the machine cannot hold is a status, not an abort; the same
  ! array where one is written is refused.
  call fegpu_array_create_empty(ctx, real64, 1000000, 1000000, stale, stat=st, errmsg=msg)
  call expect((st == FEGPU_ERR_OUT_OF_MEMORY .or. st == FEGPU_ERR_OUT_OF_DEVICE_MEMORY) .and. index(msg, 'array') > 0, &
       'a 10^6 x 10^6 array')
  call fegpu_axpby(1.0_real64, b, 2.0_real64, b, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'same array') > 0, 'axpby with x = y')
  ! Positions counted from 1, as Fortran does.
  call fegpu_csr_create(ctx, 2, 2, [1, 2, 3], [1, 2], [1.0_real64, 1.0_real64], csr)
  call fegpu_csr_update_values(csr, [1.0_real64, ieee_value(1.0_real64, ieee_positive_inf)], stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'values(2) = inf') > 0, '1-based position in a message')
  ! the solve's right-hand side is checked finite and named the same way
  call fegpu_solver_create(csr, FEGPU_METHOD_CG, FEGPU_PRECOND_JACOBI, solver)
  call fegpu_array_create(ctx, [1.0_real64, ieee_value(1.0_real64, ieee_positive_inf)], rhs)
  call fegpu_array_create(ctx, [0.0_real64, 0.0_real64], sol)
  call fegpu_solve(solver, rhs, sol, 1.0e-10_real64, 10, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'b(2) = inf') > 0, 'the solve names b(2)')
  call fegpu_solver_destroy(solver)
  call fegpu_array_destroy(rhs)
  call fegpu_array_destroy(sol)

  ! element sets: coords(dim, :), conn(nodes per element, :), props(2, :), material(elements) checked before C reads them
  square = reshape([0d0, 0d0, 1d0, 0d0, 1d0, 1d0, 0d0, 1d0], [2, 4]); square3 = 0; square3(1:2, :) = square
  conn(:, 1) = [1, 2, 3, 4]; conn3(:, 1) = [1, 2, 3]; material = 1; props(:, 1) = [1d0, 0.3d0]; props1 = 1
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_PLANE_STRAIN, square3, conn, props, material, set, &
       stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'coords(2, nodes)') > 0 .and. index(msg, 'got coords(3') > 0, &
       '3-D coordinates for a quad4 set')
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_PLANE_STRAIN, square, conn3, props, material, set, &
       stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'conn(3, 1)') > 0, 'three nodes for a quad4')
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_PLANE_STRAIN, square, conn, props1, material, set, &
       stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'props(1, :)') > 0, 'one value a material')
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_PLANE_STRAIN, square, conn, props, material, set, &
       stat=st, errmsg=msg)
  call expect(st == FEGPU_OK, 'the right shapes')
  call fegpu_fem_set_materials(set, props1, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'props(2, n_materials)') > 0, 'new materials of one value')
  call fegpu_fem_shape(set, element, nodes, elements, materials)
  call expect(element == FEGPU_ELEMENT_QUAD4 .and. nodes == 4 .and. elements == 1 .and. materials == 1, 'set shape')
  ! face loads: faces(nodes per face, :) and values(dim or 1, :); stress: cast(elements), temperature(nodes)
  load = 0
  call fegpu_array_create(ctx, load, f)
  edge(:, 1) = [2, 3]; edge3(:, 1) = [2, 3, 4]; traction = 1; pressure = 1
  call fegpu_fem_face_load(set, FEGPU_FACE_TRACTION, edge3, traction, f, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'faces(2, n_faces)') > 0, 'three nodes an edge')
  call fegpu_fem_face_load(set, FEGPU_FACE_TRACTION, edge, pressure, f, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'values(2, n_faces)') > 0, 'one traction value')
  call fegpu_fem_face_load(set, FEGPU_FACE_PRESSURE, edge, traction, f, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'values(1, n_faces)') > 0, 'two pressure values')
  call fegpu_array_download(f, load)
  call expect(all(load == 0), 'refused face loads add nothing')
  call fegpu_fem_face_load(set, FEGPU_FACE_TRACTION, edge, traction, f, stat=st, errmsg=msg)
  call expect(st == FEGPU_OK, 'a traction of the right shape')
  laws = 0; cast = 0; temps = 20
  call fegpu_fem_stress_create(set, laws, cast, 20d0, temps, [1, 2], stress, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'cast(n_elements)') > 0, 'a cast time for two elements')
  call fegpu_array_destroy(f)
  call fegpu_fem_destroy(set)
  ! convection faces of a heat stepper: faces(nodes per face, :) checked against the stepper's element
  call fegpu_fem_create(ctx, FEGPU_ELEMENT_QUAD4, FEGPU_PROBLEM_HEAT, square, conn, props, material, set)
  call fegpu_fem_integrate(set)
  call fegpu_fem_assemble(set, kmat)
  call fegpu_fem_heat_create(set, 0.1d0, 1d0, [1], [0d0], heat)
  call fegpu_fem_heat_set_convection_faces(heat, edge3, [1d0], [20d0], stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'faces(2, n_faces)') > 0 .and. index(msg, 'got faces(3') > 0, &
       'three nodes a convection edge')
  call fegpu_fem_heat_set_convection_faces(heat, edge, [1d0], [20d0], stat=st, errmsg=msg)
  call expect(st == FEGPU_OK, 'a convection edge of two nodes')
  call fegpu_fem_heat_destroy(heat)
  call fegpu_csr_destroy(kmat)
  call fegpu_fem_destroy(set)

  ! lattice fields: the wrapper checks rho(nx, ny, :) and u(3, nx, ny, :) before C writes nx ny z_count values
  call fegpu_lattice_create(ctx, 4, 3, 2, 0.8d0, lat)
  call fegpu_lattice_shape(lat, nx, ny, nz)
  call expect(nx == 4 .and. ny == 3 .and. nz == 2, 'lattice shape')
  rho_t = -1; u_t = -1
  call fegpu_lattice_fields(lat, rho_t, u_t, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'rho(4, 3, z_count)') > 0, 'fields of the wrong shape')
  call expect(all(rho_t == -1) .and. all(u_t == -1), 'nothing written for a refused shape')
  call fegpu_lattice_fields(lat, rho, u, stat=st, errmsg=msg)
  call expect(st == FEGPU_OK, 'fields of the right shape')
  call expect(all(abs(rho - 1) < 1d-12) .and. all(abs(u) < 1d-12), 'fields at rest')
  ! a population that is not finite, named as the caller's f(0:18, nx, ny, nz) counts
  pop = 0.05
  pop(4, 2, 3, 1) = ieee_value(1.0_real64, ieee_positive_inf)
  call fegpu_lattice_set_populations(lat, pop, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'f(4, 2, 3, 1)') > 0, 'a population that is not finite')
  call fegpu_lattice_destroy(lat)

  call fegpu_context_destroy(ctx)
  call fegpu_array_destroy(b, stat=st, errmsg=msg)
  call expect(st == FEGPU_ERR_INVALID_HANDLE, 'array of a destroyed context')
  call finish()

contains

  !> A check whose failure also shows the last message.
  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    call check(ok, what // ': ' // trim(msg))
  end subroutine

end program bad_input
