!> A porous-flow code's pressure loop with AMG: the legacy program assembles
!> a 3-D two-point-flux finite-volume system (harmonic-mean
!> transmissibilities, fixed pressure on every boundary face) for a layered
!> permeability of contrast 1e6, in 1-based CSR, and solves it with its own
!> serial Jacobi-preconditioned CG. fegpu's AMG-CG solves the same system;
!> then the permeability changes (a Newton or time step) and fegpu refreshes
!> the values (the hierarchy kept) and solves again. Required each time:
!> the two solutions agree, AMG takes a fraction of the serial code's
!> iterations, and the hierarchy has several levels. Also: the rigid-body
!> modes of a few nodes against their formulas, the V-cycle over f32 values,
!> the W-cycle and the hybrid cycle, and bad input refused.
program amg_porous
  use, intrinsic :: iso_fortran_env, only: real64
  use fegpu
  use checks, only: expect, finish
  use serial_krylov, only: serial_cg
  implicit none
  integer, parameter :: dp = real64, m = 20, n = m * m * m
  real(dp), parameter :: tol = 1.0e-10_dp
  type(fegpu_context) :: ctx
  type(fegpu_csr) :: a
  type(fegpu_solver) :: s, s2
  type(fegpu_array) :: db, dx
  type(fegpu_amg_options) :: opts
  integer, allocatable :: rp(:), ci(:)
  real(dp), allocatable :: v(:), k(:), b(:), x(:), xs(:)
  integer :: step, its, its_serial, st
  character(len=4000) :: text
  character(len=256) :: msg

  call fegpu_context_create(ctx)
  allocate (k(n), b(n), x(n), xs(n))
  b = 1
  call fegpu_array_create(ctx, b, db)
  do step = 1, 2
    call permeability(step, k)
    call assemble(k, rp, ci, v)
    call serial_cg(rp, ci, v, b, xs, tol, its_serial)
    if (step == 1) then
      call fegpu_csr_create(ctx, n, n, rp, ci, v, a)
      opts%strength = 0
      call fegpu_solver_create_amg(a, FEGPU_METHOD_CG, s, opts)
      call fegpu_solver_describe(s, text)
      print '(a)', trim(text)
      call expect(index(text, 'level 2') > 0, 'the hierarchy has at least three levels')
    else
      call fegpu_csr_update_values(a, v) ! the next solve redoes only the hierarchy's values
    end if
    x = 0
    call fegpu_array_create(ctx, x, dx)
    call fegpu_solve(s, db, dx, tol, 500, iterations=its)
    call fegpu_array_download(dx, x)
    call fegpu_array_destroy(dx)
    print '(a,i0,a,i0,a,i0,a,es10.3)', 'step ', step, ': AMG-CG ', its, ' iterations, serial Jacobi-CG ', its_serial, &
         ', max |x - x_serial| / max |x| = ', maxval(abs(x - xs)) / maxval(abs(xs))
    call expect(maxval(abs(x - xs)) <= 1.0e-6_dp * maxval(abs(xs)), 'AMG-CG and the serial CG agree')
    call expect(3 * its < its_serial, 'AMG-CG needs a third of the serial iterations or fewer')
  end do
  call rigid_body_modes_check()
  ! symmetric Gauss-Seidel smoothing (sweeps = 0: one sweep), on the last step's values
  opts%smoother = FEGPU_SMOOTHER_GAUSS_SEIDEL
  call variant('Gauss-Seidel x1', 'Gauss-Seidel smoothing', 2)
  opts%sweeps = 9
  call refused('1 to 8 sweeps')
  opts%sweeps = 0
  ! the V-cycle over f32 copies of the matrices
  opts%smoother = FEGPU_SMOOTHER_AUTO
  opts%f32_cycle = 1
  call variant('f32 values', 'f32 cycle', 3)
  opts%f32_cycle = 2
  call refused('f32_cycle = 2')
  opts%f32_cycle = 0
  ! the W-cycle: each coarse level but the dense coarsest visited twice
  opts%cycle = FEGPU_CYCLE_W
  call variant('W-cycle', 'W-cycle', 3)
  ! the hybrid cycle: second visits only on levels with a quarter of the level above's nonzeros
  opts%cycle = FEGPU_CYCLE_HYBRID
  call variant('hybrid V/W-cycle', 'hybrid cycle', 3)
  opts%cycle = 3
  call refused('cycle = 3')
  opts%cycle = FEGPU_CYCLE_V
  ! the parallel aggregation (on the GPU the whole setup runs there)
  opts%aggregation = FEGPU_AGGREGATION_PARALLEL
  call variant('parallel aggregation', 'parallel aggregation', 3)
  opts%aggregation = 2
  call refused('aggregation = 2')
  opts%aggregation = FEGPU_AGGREGATION_GREEDY
  ! bad input: near-null space of the wrong length, a smoother that does not exist
  block
    type(fegpu_solver) :: bad
    real(dp) :: wrong(n - 1, 1)
    wrong = 1
    call fegpu_solver_create_amg(a, FEGPU_METHOD_CG, bad, near_null_space=wrong, stat=st, errmsg=msg)
    call expect(st == FEGPU_ERR_SIZE_MISMATCH .and. index(msg, 'near-null space') > 0, 'a short near-null space is refused')
    opts%smoother = 7
    call fegpu_solver_create_amg(a, FEGPU_METHOD_CG, bad, opts, stat=st, errmsg=msg)
    call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, 'smoother = 7') > 0, 'an unknown smoother is refused')
  end block
  call fegpu_solver_destroy(s)
  call fegpu_csr_destroy(a)
  call fegpu_array_destroy(db)
  call fegpu_context_destroy(ctx)
  call finish()

contains

  !> AMG-CG with `opts` on the last step's values: its summary names
  !> `feature`, it gives the serial solution to 1e-6 in under 1/`fraction`
  !> of the serial iterations.
  subroutine variant(feature, label, fraction)
    character(*), intent(in) :: feature, label
    integer, intent(in) :: fraction
    call fegpu_solver_create_amg(a, FEGPU_METHOD_CG, s2, opts)
    call fegpu_solver_describe(s2, text)
    call expect(index(text, feature) > 0, label // ': the summary says ' // feature)
    x = 0
    call fegpu_array_create(ctx, x, dx)
    call fegpu_solve(s2, db, dx, tol, 500, iterations=its)
    call fegpu_array_download(dx, x)
    call fegpu_array_destroy(dx)
    call fegpu_solver_destroy(s2)
    print '(a,a,i0,a,es10.3)', label, ': AMG-CG ', its, ' iterations, max |x - x_serial| / max |x| = ', &
         maxval(abs(x - xs)) / maxval(abs(xs))
    call expect(maxval(abs(x - xs)) <= 1.0e-6_dp * maxval(abs(xs)), label // ': AMG-CG and the serial CG agree')
    call expect(fraction * its < its_serial, label // ': AMG-CG needs a fraction of the serial iterations')
  end subroutine

  !> The options as they stand are refused, the message naming `what`.
  subroutine refused(what)
    character(*), intent(in) :: what
    call fegpu_solver_create_amg(a, FEGPU_METHOD_CG, s2, opts, stat=st, errmsg=msg)
    call expect(st == FEGPU_ERR_INVALID_ARGUMENT .and. index(msg, what) > 0, 'refused by name: ' // what)
  end subroutine

  integer function cell(i, j, l)
    integer, intent(in) :: i, j, l
    cell = i + m * (j - 1 + m * (l - 1))
  end function

  !> Layers two cells thick alternating over six decades; step 2 swaps them.
  subroutine permeability(step, k)
    integer, intent(in) :: step
    real(dp), intent(out) :: k(:)
    integer :: c, layer
    do c = 1, n
      layer = (c - 1) / (m * m) / 2
      k(c) = 10.0_dp ** (6 * modulo(layer + step, 2)) * (1 + 0.1_dp * modulo(layer, 3))
    end do
  end subroutine

  !> Two-point flux finite volumes on unit cells, 1-based CSR, columns ascending.
  subroutine assemble(k, rp, ci, v)
    real(dp), intent(in) :: k(:)
    integer, allocatable, intent(out) :: rp(:), ci(:)
    real(dp), allocatable, intent(out) :: v(:)
    integer :: i, j, l, c, o, d, nz, e, ord(7), cols(7), t
    integer :: p(3), di(6, 3)
    real(dp) :: diag, vals(7)
    di = reshape([0, 0, -1, 1, 0, 0, 0, -1, 0, 0, 1, 0, -1, 0, 0, 0, 0, 1], [6, 3])
    allocate (rp(n + 1), ci(7 * n), v(7 * n))
    nz = 0
    rp(1) = 1
    do l = 1, m
      do j = 1, m
        do i = 1, m
          c = cell(i, j, l)
          diag = 0
          e = 0
          do d = 1, 6
            p = [i, j, l] + di(d, :)
            if (all(p >= 1) .and. all(p <= m)) then
              o = cell(p(1), p(2), p(3))
              e = e + 1
              cols(e) = o
              vals(e) = -2 * k(c) * k(o) / (k(c) + k(o))
              diag = diag - vals(e)
            else
              diag = diag + 2 * k(c)
            end if
          end do
          e = e + 1
          cols(e) = c
          vals(e) = diag
          ord(1:e) = [(t, t = 1, e)]
          call sort_by(cols(1:e), ord(1:e))
          do t = 1, e
            nz = nz + 1
            ci(nz) = cols(ord(t))
            v(nz) = vals(ord(t))
          end do
          rp(c + 1) = nz + 1
        end do
      end do
    end do
    ci = ci(1:nz)
    v = v(1:nz)
  end subroutine

  subroutine sort_by(key, ord)
    integer, intent(in) :: key(:)
    integer, intent(inout) :: ord(:)
    integer :: a, b, t
    do a = 2, size(ord)
      t = ord(a)
      b = a - 1
      do while (b >= 1)
        if (key(ord(b)) <= key(t)) exit
        ord(b + 1) = ord(b)
        b = b - 1
      end do
      ord(b + 1) = t
    end do
  end subroutine

  !> Two nodes of a 3-D mesh: the modes are the translations, then the
  !> rotations about the centroid (z, x, y axes), node by node.
  subroutine rigid_body_modes_check()
    real(dp) :: coords(3, 2), modes(6, 6), r(3)
    coords = reshape([1.0_dp, 2.0_dp, 3.0_dp, 3.0_dp, 2.0_dp, 5.0_dp], [3, 2])
    call fegpu_rigid_body_modes(coords, modes)
    r = coords(:, 1) - [2.0_dp, 2.0_dp, 4.0_dp]
    call expect(all(modes(1:3, 1:3) == reshape([1, 0, 0, 0, 1, 0, 0, 0, 1], [3, 3])), 'translations at node 1')
    call expect(all(abs(modes(1:3, 4) - [-r(2), r(1), 0.0_dp]) < 1e-14_dp), 'rotation about z at node 1')
    call expect(all(abs(modes(1:3, 5) - [0.0_dp, -r(3), r(2)]) < 1e-14_dp), 'rotation about x at node 1')
    call expect(all(abs(modes(1:3, 6) - [r(3), 0.0_dp, -r(1)]) < 1e-14_dp), 'rotation about y at node 1')
  end subroutine

end program amg_porous
