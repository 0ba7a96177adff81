C     A fixed-form legacy program as the README's "From fixed-form
C     Fortran 77" section writes it: implicit typing, the fegpu handles in
C     a COMMON block shared by subroutines, assumed-size A(*) dummies, and
C     no kind parameters. It runs a Newton-like loop of sparse solves on a
C     1-D Poisson system whose values change every step, checked against
C     its own serial tridiagonal (Thomas) solve, then a transpose loop
C     checked against the serial do-loops. Built three ways by the package
C     test: -std=legacy; with -fdefault-real-8 -fdefault-double-8; and
C     with -fdefault-integer-8 as well.
      PROGRAM LEGACY
      USE FEGPU
      IMPLICIT DOUBLE PRECISION (A-H,O-Z)
      PARAMETER (N = 40, NNZ = 3*N-2)
      DIMENSION IA(N+1), JA(NNZ), VA(NNZ), B(N), X(N), XS(N)
      INCLUDE 'gpucom.inc'
      NFAIL = 0
      CALL GPUINI(N, IA, JA, VA)
      DO 30 NEWTON = 1, 5
C        new values for the same pattern, a new right-hand side
         S = 1.0D0 + 0.25D0*NEWTON
         CALL ASSEMB(N, S, IA, JA, VA, B)
         CALL GPUSLV(N, VA, B, X, ITS, ISTAT)
         CALL THOMAS(N, S, B, XS)
         ERR = 0.0D0
         DO 20 I = 1, N
            ERR = MAX(ERR, ABS(X(I) - XS(I)))
   20    CONTINUE
         WRITE (*, '(A,I2,A,I4,A,1PE9.2)') ' NEWTON', NEWTON,
     &      ': ITERATIONS', ITS, ', MAX ERROR', ERR
         IF (ISTAT .NE. FEGPU_OK .OR. ERR .GT. 1.0D-8) NFAIL = NFAIL+1
   30 CONTINUE
      CALL BADVAL(N, VA, NFAIL)
      CALL TRLOOP(NFAIL)
      CALL FEGPU_CONTEXT_DESTROY(ICTX)
      IF (NFAIL .NE. 0) THEN
         WRITE (*, '(A,I3,A)') ' LEGACY:', NFAIL, ' CHECKS FAILED'
         STOP 1
      END IF
      WRITE (*, '(A)') ' LEGACY: ALL CHECKS PASSED'
      END

C     The context, the matrix (1-based CSR, as the code stores it), the
C     solver and the two device vectors, kept in COMMON /GPU/.
      SUBROUTINE GPUINI(N, IA, JA, VA)
      USE FEGPU
      IMPLICIT DOUBLE PRECISION (A-H,O-Z)
      DIMENSION IA(*), JA(*), VA(*)
      INCLUDE 'gpucom.inc'
      DIMENSION DUMMY(1)
      CALL ASSEMB(N, 1.0D0, IA, JA, VA, DUMMY)
      NZ = IA(N+1) - 1
      CALL FEGPU_CONTEXT_CREATE(ICTX)
C     assumed-shape arguments take sections of the A(*) arrays
      CALL FEGPU_CSR_CREATE(ICTX, N, N, IA(1:N+1), JA(1:NZ), VA(1:NZ),
     &   IMAT)
      CALL FEGPU_SOLVER_CREATE(IMAT, FEGPU_METHOD_BICGSTAB,
     &   FEGPU_PRECOND_ILU0, ISOL)
      CALL FEGPU_ARRAY_CREATE_EMPTY(ICTX, KIND(VA), N, 1, IRHS)
      CALL FEGPU_ARRAY_CREATE_EMPTY(ICTX, KIND(VA), N, 1, IDX)
      END

C     One solve: new values and b up, x back. B and X are assumed-size, so
C     the element count goes with them (COUNT=).
      SUBROUTINE GPUSLV(N, VA, B, X, ITS, ISTAT)
      USE FEGPU
      IMPLICIT DOUBLE PRECISION (A-H,O-Z)
      DIMENSION VA(*), B(*), X(*)
      INCLUDE 'gpucom.inc'
      CHARACTER*200 MSG
      NZ = 3*N - 2
      CALL FEGPU_CSR_UPDATE_VALUES(IMAT, VA(1:NZ))
      CALL FEGPU_ARRAY_UPLOAD(IRHS, B, COUNT=N)
      DO 10 I = 1, N
         X(I) = 0.0D0
   10 CONTINUE
      CALL FEGPU_ARRAY_UPLOAD(IDX, X, COUNT=N)
      CALL FEGPU_SOLVE(ISOL, IRHS, IDX, 1.0D-12, 500, ITERATIONS=ITS,
     &   STAT=ISTAT, ERRMSG=MSG)
      IF (ISTAT .NE. FEGPU_OK) WRITE (*, '(A)') TRIM(MSG)
      CALL FEGPU_ARRAY_DOWNLOAD(IDX, X, COUNT=N)
      END

C     A = S * tridiag(-1, 2, -1) in 1-based CSR; B = A * (1, 2, ..., N).
      SUBROUTINE ASSEMB(N, S, IA, JA, VA, B)
      IMPLICIT DOUBLE PRECISION (A-H,O-Z)
      DIMENSION IA(*), JA(*), VA(*), B(*)
      K = 1
      DO 10 I = 1, N
         IA(I) = K
         IF (I .GT. 1) THEN
            JA(K) = I - 1
            VA(K) = -S
            K = K + 1
         END IF
         JA(K) = I
         VA(K) = 2.0D0*S
         K = K + 1
         IF (I .LT. N) THEN
            JA(K) = I + 1
            VA(K) = -S
            K = K + 1
         END IF
   10 CONTINUE
      IA(N+1) = K
      IF (S .EQ. 1.0D0) RETURN
      DO 20 I = 1, N
         B(I) = 2.0D0*S*I
         IF (I .GT. 1) B(I) = B(I) - S*(I-1)
         IF (I .LT. N) B(I) = B(I) - S*(I+1)
   20 CONTINUE
      END

C     The serial reference: the Thomas algorithm on S * tridiag(-1, 2, -1).
      SUBROUTINE THOMAS(N, S, B, X)
      IMPLICIT DOUBLE PRECISION (A-H,O-Z)
      DIMENSION B(*), X(*), C(1000), D(1000)
      C(1) = -S/(2.0D0*S)
      D(1) = B(1)/(2.0D0*S)
      DO 10 I = 2, N
         W = 2.0D0*S + S*C(I-1)
         C(I) = -S/W
         D(I) = (B(I) + S*D(I-1))/W
   10 CONTINUE
      X(N) = D(N)
      DO 20 I = N-1, 1, -1
         X(I) = D(I) - C(I)*X(I+1)
   20 CONTINUE
      END

C     Bad values are refused with STAT and a message that counts from 1,
C     as this code does; the matrix keeps its values.
      SUBROUTINE BADVAL(N, VA, NFAIL)
      USE FEGPU
      IMPLICIT DOUBLE PRECISION (A-H,O-Z)
      DIMENSION VA(*)
      INCLUDE 'gpucom.inc'
      CHARACTER*200 MSG
      NZ = 3*N - 2
      SAVED = VA(2)
      VA(2) = 0.0D0
      VA(2) = VA(2)/VA(2)
      CALL FEGPU_CSR_UPDATE_VALUES(IMAT, VA(1:NZ), STAT=ISTAT,
     &   ERRMSG=MSG)
      WRITE (*, '(A,A)') ' NAN VALUE: ', TRIM(MSG)
      IF (ISTAT .NE. FEGPU_ERR_INVALID_ARGUMENT) NFAIL = NFAIL + 1
      IF (INDEX(MSG, 'values(2)') .EQ. 0) NFAIL = NFAIL + 1
      VA(2) = SAVED
C     STAT here is implicitly DOUBLE PRECISION: it receives the code too.
      STAT = -1.0D0
      CALL FEGPU_ARRAY_UPLOAD(IRHS, VA, STAT=STAT, ERRMSG=MSG)
      WRITE (*, '(A,A)') ' NO COUNT: ', TRIM(MSG)
      IF (INDEX(MSG, 'count=') .EQ. 0) NFAIL = NFAIL + 1
      IF (STAT .NE. FEGPU_ERR_INVALID_ARGUMENT) NFAIL = NFAIL + 1
      END

C     The concrete program's transpose loop, on the device and serially.
      SUBROUTINE TRLOOP(NFAIL)
      USE FEGPU
      IMPLICIT DOUBLE PRECISION (A-H,O-Z)
      PARAMETER (M = 7, K = 5)
      DIMENSION AM(M,K), AT(K,M), ATS(K,M)
      INCLUDE 'gpucom.inc'
      TYPE(FEGPU_ARRAY) IDA, IDT
      DO 10 J = 1, K
         DO 10 I = 1, M
            AM(I,J) = I + 100*J
   10 CONTINUE
      CALL FEGPU_ARRAY_CREATE(ICTX, AM, IDA)
      CALL FEGPU_ARRAY_CREATE_EMPTY(ICTX, KIND(AM), K, M, IDT)
      DO 30 ISTEP = 1, 3
         DO 20 J = 1, K
            DO 20 I = 1, M
               AM(I,J) = AM(I,J) + 1.0D0
               ATS(J,I) = AM(I,J)
   20    CONTINUE
         CALL FEGPU_ARRAY_UPLOAD(IDA, AM)
         CALL FEGPU_TRANSPOSE(IDA, IDT)
   30 CONTINUE
      CALL FEGPU_ARRAY_DOWNLOAD(IDT, AT)
      DO 40 J = 1, M
         DO 40 I = 1, K
            IF (AT(I,J) .NE. ATS(I,J)) NFAIL = NFAIL + 1
   40 CONTINUE
      WRITE (*, '(A)') ' TRANSPOSE LOOP DONE'
      END
