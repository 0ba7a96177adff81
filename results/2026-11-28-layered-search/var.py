from fp import *
import itertools, json
def porous2(k, dirichlet, bfac=2.0, aniso=(1,1,1)):
    # k: [l,j,i] (z,y,x); aniso multiplies transmissibility along axis (x,y,z)
    n = k.shape[0]; N=n**3
    idx = np.arange(N).reshape(n,n,n)
    rows=[];cols=[];vals=[]; diag=np.zeros((n,n,n))
    for ax in range(3):
        npax=2-ax
        sl0=[slice(None)]*3; sl1=[slice(None)]*3
        sl0[npax]=slice(0,n-1); sl1[npax]=slice(1,n)
        k0=k[tuple(sl0)]; k1=k[tuple(sl1)]
        t=aniso[ax]*2*k0*k1/(k0+k1)
        i0=idx[tuple(sl0)].ravel(); i1=idx[tuple(sl1)].ravel()
        rows+=[i0,i1]; cols+=[i1,i0]; vals+=[-t.ravel(),-t.ravel()]
        diag[tuple(sl0)]+=t; diag[tuple(sl1)]+=t
        for side in (0,1):
            if (ax,side) in dirichlet:
                s=[slice(None)]*3; s[npax]=0 if side==0 else n-1
                diag[tuple(s)]+=bfac*aniso[ax]*k[tuple(s)]
    rows.append(idx.ravel()); cols.append(idx.ravel()); vals.append(diag.ravel())
    return sp.csr_matrix((np.concatenate(vals),(np.concatenate(rows),np.concatenate(cols))),shape=(N,N))
def layers_field(n, thick, vals, axis='z', contrast=1e6, seed=1):
    rng=np.random.default_rng(seed)
    if thick=='rand':
        th=[];s=0
        while s<n: t=int(rng.integers(1,9)); th.append(t); s+=t
        lid=np.repeat(np.arange(len(th)),th)[:n]
    else: lid=np.arange(n)//thick
    L=lid.max()+1
    if vals=='alt': v=np.where(np.arange(L)%2==0,1.0,1.0/contrast)
    elif vals=='logu': v=contrast**rng.random(L)
    elif vals=='logu01': v=contrast**rng.random(L); v[0]=1; v[1]=contrast   # like bc.py
    elif vals.startswith('types'):
        m=int(vals[5:]); lv=np.logspace(0,np.log10(contrast),m); v=lv[rng.integers(0,m,L)]
    kk=v[lid]
    if axis=='z': return np.broadcast_to(kk[:,None,None],(n,n,n)).copy()
    if axis=='x': return np.broadcast_to(kk[None,None,:],(n,n,n)).copy()
    if axis=='y': return np.broadcast_to(kk[None,:,None],(n,n,n)).copy()
BCS={"all":{(a,s) for a in range(3) for s in range(2)},"x2":{(0,0),(0,1)},"x0":{(0,0)},"z2":{(2,0),(2,1)},"z0":{(2,0)},"y2":{(1,0),(1,1)},"x0z0":{(0,0),(2,0)},"x2z2":{(0,0),(0,1),(2,0),(2,1)},"x0x1z0":{(0,0),(0,1),(2,0)},"z0z1y":{(2,0),(2,1),(1,0),(1,1)},"allbutz1":{(0,0),(0,1),(1,0),(1,1),(2,0)}}
if __name__=="__main__":
    n=int(sys.argv[1]); which=tuple(sys.argv[2].split(","))
    for line in sys.argv[3:]:
        cfg=json.loads(line)
        k=layers_field(n,(lambda t: t if t=="rand" else int(t))(cfg.get("thick",2)),cfg.get("vals","logu01"),cfg.get("axis","z"),seed=cfg.get("seed",1)) if cfg.get("kind","lay")=="lay" else None
        if k is None:
            k=lognormal(n,1e6,7)
        A=porous2(k,BCS[cfg.get("bc","all")],cfg.get("bfac",2.0),tuple(cfg.get("aniso",(1,1,1))))
        b=A@np.ones(A.shape[0]); t=time.time()
        print(n,json.dumps(cfg),fingerprint(A,b,which),f"{time.time()-t:.0f}s",flush=True)
