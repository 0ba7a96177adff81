from var import *
from scipy.ndimage import uniform_filter1d, gaussian_filter
def ln_field(n, filt="box3x3", scale="minmax", seed=7, contrast=1e6):
    rng=np.random.default_rng(seed); g=rng.random((n,n,n))-0.5
    if filt.startswith("box"):
        w,p=map(int,filt[3:].split("x"))
        for _ in range(p):
            for ax in range(3): g=uniform_filter1d(g,w,axis=ax,mode='nearest')
    elif filt.startswith("gauss"):
        g=gaussian_filter(g,float(filt[5:]),mode='nearest')
    elif filt=="none": pass
    if scale=="minmax":
        g=(g-g.min())/(g.max()-g.min()); return contrast**g
    else:  # sigma: log10 k ~ N(0,s) with s = log10(contrast)/float(scale)  (e.g. 6 -> +-3 sigma spans range)
        g=(g-g.mean())/g.std(); return 10**(g*np.log10(contrast)/float(scale))
if __name__=="__main__":
    n=int(sys.argv[1]); which=tuple(sys.argv[2].split(","))
    for line in sys.argv[3:]:
        cfg=json.loads(line)
        k=ln_field(n,cfg.get("filt","box3x3"),cfg.get("scale","minmax"),cfg.get("seed",7))
        A=porous2(k,BCS[cfg.get("bc","all")],cfg.get("bfac",2.0),tuple(cfg.get("aniso",(1,1,1))))
        b=A@np.ones(A.shape[0]); t=time.time()
        print("LN",n,json.dumps(cfg),f"log10k range {np.log10(k.max()/k.min()):.1f}",fingerprint(A,b,which),f"{time.time()-t:.0f}s",flush=True)
