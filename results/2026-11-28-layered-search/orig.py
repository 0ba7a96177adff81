from fp import *
n=int(sys.argv[1])
allf={(a,s) for a in range(3) for s in range(2)}
for kind in sys.argv[2].split(","):
    k = layered(n,1e6,11) if kind=="layered" else lognormal(n,1e6,7)
    A=porous(k,allf)
    for bn,b in [("A1",A@np.ones(A.shape[0])),("ones",np.ones(A.shape[0]))]:
        t=time.time(); print(kind,n,"all faces",bn,fingerprint(A,b,tuple(sys.argv[3].split(","))),f"{time.time()-t:.0f}s",flush=True)
