from var import *
from lnvar import ln_field
def add_well(A,n,k,where,fac=2.0):
    d=np.zeros((n,n,n))
    h=n//2
    if where=="colc": d[:,h,h]=fac*k[:,h,h]
    elif where=="col0": d[:,0,0]=fac*k[:,0,0]
    elif where=="cell0": d[0,0,0]=fac*k[0,0,0]
    elif where=="cellc": d[h,h,h]=fac*k[h,h,h]
    elif where=="none": pass
    return (A+sp.diags(d.ravel())).tocsr()
n=int(sys.argv[1]); which=tuple(sys.argv[2].split(","))
for line in sys.argv[3:]:
    cfg=json.loads(line); kind=cfg["kind"]
    if kind=="layorig": k=layered(n,1e6,11)
    elif kind=="lnorig": k=lognormal(n,1e6,7)
    elif kind=="lay": k=layers_field(n,cfg.get("thick",2),cfg.get("vals","logu"),cfg.get("axis","z"),seed=cfg.get("seed",1))
    elif kind=="ln": k=ln_field(n,cfg.get("filt","box3x3"),cfg.get("scale","minmax"),cfg.get("seed",7))
    A=porous2(k,BCS[cfg.get("bc","none")] if cfg.get("bc","none")!="none" else set(),cfg.get("bfac",2.0),tuple(cfg.get("aniso",(1,1,1))))
    A=add_well(A,n,k,cfg.get("well","none"))
    b=A@np.ones(A.shape[0]); t=time.time()
    print("W",n,json.dumps(cfg),fingerprint(A,b,which),f"{time.time()-t:.0f}s",flush=True)
