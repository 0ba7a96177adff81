from var import *
def layered_xs(n, contrast, seed, thick):
    g=uniform_gen(seed)
    L=np.array([np.exp(np.log(contrast)*next(g)) for _ in range(-(-n//thick))]); L[0]=1.0
    if len(L)>1: L[1]=contrast
    kz=L[np.arange(n)//thick]
    return np.broadcast_to(kz[:,None,None],(n,n,n)).copy()
if __name__=="__main__":
    which=tuple(sys.argv[1].split(","))
    for spec in sys.argv[2:]:
        n,seed,thick,bc=spec.split(":"); n=int(n); seed=int(seed); thick=int(thick)
        k=layered_xs(n,1e6,seed,thick); A=porous2(k,BCS[bc]); b=A@np.ones(A.shape[0])
        t=time.time(); print("CAND",spec,fingerprint(A,b,which),f"{time.time()-t:.0f}s",flush=True)
