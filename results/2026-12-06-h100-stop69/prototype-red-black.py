# Red-black ILU(0) (= D-ILU: the 7-point graph has no triangles) against none and Jacobi, BiCGSTAB to 1e-8 with scipy; args: n peclet.
# Run on this CPU, stop 69: n=128 c=0: none 217, red-black 111; c=1: none 407, red-black 193.
import numpy as np, scipy.sparse as sp, scipy.sparse.linalg as spl, sys, time
n=int(sys.argv[1]); c=float(sys.argv[2])
def op(n,c):
    I=sp.identity(n,format='csr')
    # 1-D pieces: lower neighbour coefficient -1-c, upper -1
    Lo=sp.diags([np.full(n-1,-1.0-c)],[-1]); Up=sp.diags([np.full(n-1,-1.0)],[1])
    T=Lo+Up
    A=sp.kron(sp.kron(I,I),T)+sp.kron(sp.kron(I,T),I)+sp.kron(sp.kron(T,I),I)+(6+3*c)*sp.identity(n**3)
    return A.tocsr()
A=op(n,c); N=A.shape[0]
b=A@np.ones(N)
def count(M):
    it=[0]
    def cb(x): it[0]+=1
    t=time.time()
    x,info=spl.bicgstab(A,b,rtol=1e-8,atol=0,M=M,maxiter=5000,callback=cb)
    return it[0], info, np.linalg.norm(b-A@x)/np.linalg.norm(b)
print("none",count(None))
# red-black D-ILU == ILU(0) (bipartite graph: no fill in pattern)
ii=np.arange(N); x=ii%n; y=(ii//n)%n; z=ii//(n*n)
red=((x+y+z)%2==0); blk=~red
perm=np.concatenate([ii[red],ii[blk]]); nr=red.sum()
P=A[perm][:,perm].tocsr()
d=P.diagonal().copy()
Lb=sp.tril(P,-1).tocsr(); Ub=sp.triu(P,1).tocsr()
# black: d_b = a_bb - sum_r a_br a_rb / a_rr
B=P[nr:, :nr]; C=P[:nr, nr:]
d[nr:] = d[nr:] - (B.multiply(C.T)).sum(axis=1).A1 / 1.0 if False else d[nr:] - np.asarray((B @ sp.diags(1/d[:nr]) ).multiply(C.T).sum(axis=1)).ravel()
def apply_rb(r):
    rp=r[perm]
    # forward (D+L) D^-1 ... M=(D+L)D^-1(D+U): solve (D+L) w = r ; then (D+U) z = D w
    w=np.empty(N); w[:nr]=rp[:nr]/d[:nr]; w[nr:]=(rp[nr:]-B@w[:nr])/d[nr:]
    v=d*w
    zz=np.empty(N); zz[nr:]=v[nr:]/d[nr:]; zz[:nr]=(v[:nr]-C@zz[nr:])/d[:nr]
    out=np.empty(N); out[perm]=zz; return out
print("rb-ilu0",count(spl.LinearOperator((N,N),apply_rb)))
dd=A.diagonal(); Lfull=sp.tril(A,-1).tocsr()
print("jacobi",count(spl.LinearOperator((N,N),lambda r:r/dd)))
