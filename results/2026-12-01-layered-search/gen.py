# Candidate generators for the "layered porous flow" row. Array layout k[l,j,i] (z,y,x), x fastest (matches gallery.rs idx).
import sys, json, time
import numpy as np, scipy.sparse as sp
from scipy.ndimage import uniform_filter1d
from bc import uniform_gen, lognormal
from fp import fingerprint
ALL={(a,s) for a in range(3) for s in range(2)}
BCS={"all":ALL,"x2":{(0,0),(0,1)},"x0":{(0,0)},"z2":{(2,0),(2,1)},"z0":{(2,0)},"z1":{(2,1)},"x0x1z0":{(0,0),(0,1),(2,0)}}
def uni(seed,m):
    g=uniform_gen(seed); return np.array([next(g) for _ in range(m)])
def layer_ids(n,thick,seed):
    if thick=="rand":   # thicknesses uniform in 1..8 from xorshift stream (seed+1000)
        u=uni(seed+1000,n); th=[];s=0;q=0
        while s<n: t=1+int(8*u[q]); q+=1; th.append(t); s+=t
        return np.repeat(np.arange(len(th)),th)[:n]
    return np.arange(n)//int(thick)
def field(n,cfg):
    kind=cfg.get("kind","lay"); C=cfg.get("contrast",1e6); seed=cfg.get("seed",11)
    if kind=="ln": return lognormal(n,C,cfg.get("seed",7))
    lid=layer_ids(n,cfg.get("thick",2),seed); L=lid.max()+1
    vals=cfg.get("vals","logu01")
    if vals=="logu01": v=np.exp(np.log(C)*uni(seed,L)); v[0]=1.0; v[1]=C
    elif vals=="logu": v=np.exp(np.log(C)*uni(seed,L))
    elif vals=="alt": v=np.where(np.arange(L)%2==0,1.0,C)
    elif vals=="alt1": v=np.where(np.arange(L)%2==0,C,1.0)
    k=np.broadcast_to(v[lid][:,None,None],(n,n,n)).copy()
    sig=cfg.get("lat",0.0)   # lateral log-normal variation inside layers, sig = decades (std of log10 k)
    if sig>0:
        g=uni(cfg.get("lseed",7),n**3).reshape(n,n,n)-0.5
        for _ in range(cfg.get("passes",3)):
            for ax in cfg.get("faxes",(1,2)): g=uniform_filter1d(g,3,axis=ax,mode='nearest')
        g=(g-g.mean())/g.std()
        k=k*10**(sig*g)
        if cfg.get("clip",True):
            lo,hi=np.log10(k.min()),np.log10(k.max()); k=10**((np.log10(k)-lo)/(hi-lo)*np.log10(C))
    return k
def porous(k,dirichlet,avg="harm",aniso=(1,1,1),bfac=2.0):
    n=k.shape[0]; N=n**3; idx=np.arange(N).reshape(n,n,n)
    rows=[];cols=[];vals=[]; diag=np.zeros((n,n,n))
    for ax in range(3):
        npax=2-ax; s0=[slice(None)]*3; s1=[slice(None)]*3; s0[npax]=slice(0,n-1); s1[npax]=slice(1,n)
        k0=k[tuple(s0)]; k1=k[tuple(s1)]
        if avg=="harm": t=2*k0*k1/(k0+k1)
        elif avg=="arith": t=0.5*(k0+k1)
        elif avg=="geom": t=np.sqrt(k0*k1)
        t=aniso[ax]*t
        i0=idx[tuple(s0)].ravel(); i1=idx[tuple(s1)].ravel()
        rows+=[i0,i1]; cols+=[i1,i0]; vals+=[-t.ravel(),-t.ravel()]
        diag[tuple(s0)]+=t; diag[tuple(s1)]+=t
        for side in (0,1):
            if (ax,side) in dirichlet:
                s=[slice(None)]*3; s[npax]=0 if side==0 else n-1
                diag[tuple(s)]+=bfac*aniso[ax]*k[tuple(s)]
    rows.append(idx.ravel()); cols.append(idx.ravel()); vals.append(diag.ravel())
    return sp.csr_matrix((np.concatenate(vals),(np.concatenate(rows),np.concatenate(cols))),shape=(N,N))
def build(n,cfg):
    k=field(n,cfg); kz=cfg.get("kz",1.0)
    return porous(k,BCS[cfg.get("bc","all")],cfg.get("avg","harm"),(1.0,1.0,kz))
if __name__=="__main__":
    n=int(sys.argv[1]); which=tuple(sys.argv[2].split(","))
    lines=sys.argv[3:] if sys.argv[3:]!=["-"] else [l for l in sys.stdin if l.strip() and not l.startswith("#")]
    for line in lines:
        cfg=json.loads(line); t=time.time(); A=build(n,cfg); b=A@np.ones(A.shape[0])
        print(n,json.dumps(cfg),fingerprint(A,b,which),f"{time.time()-t:.0f}s",flush=True)
