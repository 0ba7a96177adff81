# Split (Eisenstat) red-black ILU(0)-BiCGSTAB against the right-preconditioned form, split and true residuals; args: n peclet. Run on this CPU, stop 70: n=128 c=0: split 111 (split 7.9e-9, true 1.09e-8), right 112; c=1: split 193 (split 9.2e-9, true 6.9e-8), right 193.
import numpy as np, scipy.sparse as sp, sys
n=int(sys.argv[1]); c=float(sys.argv[2]); tol=1e-8
I=sp.identity(n,format='csr')
T=sp.diags([np.full(n-1,-1.0-c)],[-1])+sp.diags([np.full(n-1,-1.0)],[1])
A=(sp.kron(sp.kron(I,I),T)+sp.kron(sp.kron(I,T),I)+sp.kron(sp.kron(T,I),I)+(6+3*c)*sp.identity(n**3)).tocsr()
N=A.shape[0]; b=A@np.ones(N)
ii=np.arange(N); x=ii%n; y=(ii//n)%n; z=ii//(n*n)
colour=(x+y+z)%2; perm=np.argsort(colour,kind='stable'); nr=(colour==0).sum()
P=A[perm][:,perm].tocsr(); D=P.diagonal().copy(); d=D.copy()
B=P[nr:,:nr]; C=P[:nr,nr:]
d[nr:]-=np.asarray((B@sp.diags(1/d[:nr])).multiply(C.T).sum(axis=1)).ravel()
e=D-2*d
def Uinv(v):
    t=np.empty(N); t[nr:]=v[nr:]/d[nr:]; t[:nr]=(v[:nr]-C@t[nr:])/d[:nr]; return t
def Linv(w):  # unit lower, L_br = a_br/d_r
    s=np.empty(N); s[:nr]=w[:nr]; s[nr:]=w[nr:]-B@(s[:nr]/d[:nr]); return s
def Umul(x):
    return d*x+sp.triu(P,1)@x
def Lmul(s):
    return s+sp.tril(P,-1)@(s/d)
def Ahat(v):
    t=Uinv(v); return d*t+Linv(v+e*t)
# check Ahat == L^-1 A U^-1
v=np.random.rand(N); print("identity err",np.linalg.norm(Ahat(v)-Linv(P@Uinv(v)))/np.linalg.norm(v))
bp=b[perm]; bh=Linv(bp)
def bicgstab(Aop,b,x0,tol,maxit,check):
    x=x0.copy(); r=b-Aop(x); r0=r.copy(); bn=np.linalg.norm(b); rho=r0@r; p=r.copy(); v=np.zeros_like(r)
    al=om=rp=1.0
    for it in range(1,maxit+1):
        if it>1:
            beta=(rho/rp)*(al/om); p=r+beta*(p-om*v)
        v=Aop(p); al=rho/(r0@v); s=r-al*v
        t=Aop(s); om=(t@s)/(t@t); x=x+al*p+om*s; r=s-om*t
        rel=np.linalg.norm(r)/bn
        if rel<=tol: return x,it,rel
        rp=rho; rho=r0@r
    return x,maxit,rel
yv,it,rel=bicgstab(Ahat,bh,np.zeros(N),tol,5000,None)
xs=Uinv(yv); xt=np.empty(N); xt[perm]=xs
true=np.linalg.norm(b-A@xt)/np.linalg.norm(b)
print("split its",it,"split rel",rel,"true rel",true)
# right-preconditioned for comparison
def Minv(r): return Uinv(d*Linv(r)/d) if False else Uinv(Linv(r))
xr,itr,relr=bicgstab(lambda q:P@Minv(q),bp,np.zeros(N),tol,5000,None)
print("right its",itr,relr)
