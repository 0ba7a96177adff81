import numpy as np, scipy.sparse as sp, scipy.sparse.linalg as sla, sys, time
def uniform_gen(seed):
    s = (seed | 1) & (2**64-1)
    M = 2**64-1
    while True:
        s ^= s >> 12; s ^= (s << 25) & M; s ^= s >> 27
        yield (((s * 0x2545f4914f6cdd1d) & M) >> 11) / float(1 << 53)
def layered(n, contrast, seed):
    g = uniform_gen(seed)
    layers = np.array([np.exp(np.log(contrast)*next(g)) for _ in range((n+1)//2)])
    layers[0]=1.0
    if len(layers)>1: layers[1]=contrast
    kz = layers[np.arange(n)//2]
    return np.broadcast_to(kz[:,None,None], (n,n,n)).copy()  # [l,j,i]
def lognormal(n, contrast, seed):
    g = uniform_gen(seed)
    a = np.array([next(g)-0.5 for _ in range(n**3)]).reshape(n,n,n)
    for _ in range(3):
        for ax in range(3):
            # axis order: index i is x fastest -> array [l,j,i]; axis 0 in rust = i = numpy axis 2
            npax = 2-ax
            p = np.pad(a, [(1,1) if d==npax else (0,0) for d in range(3)])
            s = np.take(p, range(0,n), axis=npax)+np.take(p, range(1,n+1),axis=npax)+np.take(p, range(2,n+2),axis=npax)
            m = np.full(n,3.0); m[0]=2; m[-1]=2
            sh=[1,1,1]; sh[npax]=n
            a = s/m.reshape(sh)
    lo,hi=a.min(),a.max()
    return np.exp(np.log(contrast)*(a-lo)/(hi-lo))
def porous(k, dirichlet):  # dirichlet: set of (axis, side) faces held at fixed pressure; axis 0=x
    n = k.shape[0]
    N = n**3
    idx = np.arange(N).reshape(n,n,n)
    rows=[];cols=[];vals=[]
    diag = np.zeros((n,n,n))
    for ax in range(3):
        npax = 2-ax
        sl0 = [slice(None)]*3; sl1=[slice(None)]*3
        sl0[npax]=slice(0,n-1); sl1[npax]=slice(1,n)
        k0=k[tuple(sl0)]; k1=k[tuple(sl1)]
        t = 2*k0*k1/(k0+k1)
        i0=idx[tuple(sl0)].ravel(); i1=idx[tuple(sl1)].ravel()
        rows += [i0,i1]; cols += [i1,i0]; vals += [-t.ravel(), -t.ravel()]
        d0 = np.zeros_like(diag); d0[tuple(sl0)] += t; d0[tuple(sl1)] += t
        diag += d0
        for side in (0,1):
            if (ax,side) in dirichlet:
                s=[slice(None)]*3; s[npax]= 0 if side==0 else n-1
                diag[tuple(s)] += 2*k[tuple(s)]
    rows.append(idx.ravel()); cols.append(idx.ravel()); vals.append(diag.ravel())
    return sp.csr_matrix((np.concatenate(vals),(np.concatenate(rows),np.concatenate(cols))),shape=(N,N))
def rhs(A):
    n=A.shape[0]; i=np.arange(n)
    x = 1.0 + ((i*7919)%1000)/1000.0
    return A@x
def jcg(A,b,tol=1e-8,maxit=20000):
    d=1/A.diagonal(); it=[0]
    M=sla.LinearOperator(A.shape, matvec=lambda v: d*v)
    x,info=sla.cg(A,b,rtol=tol,maxiter=maxit,M=M,callback=lambda xk: it.__setitem__(0,it[0]+1))
    return it[0], np.linalg.norm(b-A@x)/np.linalg.norm(b)
if __name__=="__main__":
    n=int(sys.argv[1]); kind=sys.argv[2]
    k = layered(n,1e6,11) if kind=="layered" else lognormal(n,1e6,7)
    allf={(a,s) for a in range(3) for s in range(2)}
    for name,bc in [("all",allf),("x faces",{(0,0),(0,1)}),("z faces",{(2,0),(2,1)}),("x0 only",{(0,0)}),("z0 only",{(2,0)})]:
        A=porous(k,bc); b=rhs(A); t=time.time()
        print(kind,n,name,jcg(A,b),f"{time.time()-t:.1f}s",flush=True)
