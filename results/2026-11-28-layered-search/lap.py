from fp import *
for n in (32,64):
    A=pyamg.gallery.poisson((n,n,n),format='csr')
    N=A.shape[0]
    for bn,b in [("ones",np.ones(N)),("Ax",rhs(A)),("rand",np.random.default_rng(0).random(N))]:
        print(n,bn,fingerprint(A,b,("J","SA","SAJ","SAJ43","RS")),flush=True)
