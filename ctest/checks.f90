!> What the CTest drivers share: counting checks and failures, and the
!> closing line CTest's log and CI read ("N passed, M failed").
module checks
  implicit none
  private
  public :: expect, finish
  integer :: passed = 0, failed = 0

contains

  !> Records one check; a failed one prints what it was.
  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(*), intent(in) :: what
    if (ok) then
      passed = passed + 1
    else
      failed = failed + 1
      print '(a,a)', 'FAIL: ', what
    end if
  end subroutine

  !> Prints the tally and stops with a failure status if any check failed.
  subroutine finish()
    print '(i0,a,i0,a)', passed, ' passed, ', failed, ' failed'
    if (failed > 0) error stop 1
  end subroutine

end module checks
