# ILU(0) (= D-ILU on the 7-point graph) in several colourings, BiCGSTAB to 1e-8 with scipy; args: n peclet.
# Run on this CPU, stop 69: n=64 c=0: red-black 58, 8 colours by the parities of x, y, z 53, 4 colours (x+2y+3z) mod 4 59 (the x%4,y%2 line is not a colouring: ignore).
import numpy as np, scipy.sparse as sp, scipy.sparse.linalg as spl, sys
n=int(sys.argv[1]); c=float(sys.argv[2])
def op(n,c):
    I=sp.identity(n,format='csr')
    T=sp.diags([np.full(n-1,-1.0-c)],[-1])+sp.diags([np.full(n-1,-1.0)],[1])
    return (sp.kron(sp.kron(I,I),T)+sp.kron(sp.kron(I,T),I)+sp.kron(sp.kron(T,I),I)+(6+3*c)*sp.identity(n**3)).tocsr()
A=op(n,c); N=A.shape[0]; b=A@np.ones(N)
ii=np.arange(N); x=ii%n; y=(ii//n)%n; z=ii//(n*n)
def run(colour,label):
    C=colour.max()+1
    perm=np.argsort(colour,kind='stable'); starts=np.searchsorted(colour[perm],np.arange(C+1))
    P=A[perm][:,perm].tocsr()
    L=sp.tril(P,-1).tocsr(); U=sp.triu(P,1).tocsr(); d=P.diagonal().copy()
    # D-ILU (triangle-free graph): d_i = a_ii - sum_{k<i} l_ik u_ki / d_k, colour by colour
    LU_T=L.multiply(U.T).tocsr()  # entries a_ik a_ki for k<i
    for cc in range(C):
        s,e=starts[cc],starts[cc+1]
        blk=LU_T[s:e]
        d[s:e]=d[s:e]-blk@(1/d)
    def apply(r):
        rp=r[perm]; w=np.zeros(N)
        for cc in range(C):
            s,e=starts[cc],starts[cc+1]; w[s:e]=(rp[s:e]-L[s:e]@w)/d[s:e]
        v=d*w; zz=np.zeros(N)
        for cc in reversed(range(C)):
            s,e=starts[cc],starts[cc+1]; zz[s:e]=(v[s:e]-U[s:e]@zz)/d[s:e]
        out=np.empty(N); out[perm]=zz; return out
    it=[0]
    xx,info=spl.bicgstab(A,b,rtol=1e-8,atol=0,M=spl.LinearOperator((N,N),apply),maxiter=5000,callback=lambda v: it.__setitem__(0,it[0]+1))
    print(label,C,it[0],info,flush=True)
run((x+y+z)%2,"red-black")
run((x%2)+2*(y%2)+4*(z%2),"8-colour parity")
run((x%4)+4*(y%2) ,"x%4,y%2")
run((x+2*y+3*z)%4,"4-colour diag")
run(z*0+((x+y+z)%2)+2*((z//1)%2),"rb x z-parity")
run(z,"planes (natural in-plane? no: z levels)") if False else None
