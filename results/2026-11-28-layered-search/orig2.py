from var import *
n=int(sys.argv[1]); which=tuple(sys.argv[2].split(","))
for spec in sys.argv[3:]:
    kind,bc=spec.split(":")
    k = layered(n,1e6,11) if kind=="layered" else lognormal(n,1e6,7)
    A=porous2(k,BCS[bc]); b=A@np.ones(A.shape[0])
    t=time.time(); print("ORIG",kind,n,bc,fingerprint(A,b,which),f"{time.time()-t:.0f}s",flush=True)
