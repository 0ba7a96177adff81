from fp import *
for n in (32,64):
    A=pyamg.gallery.poisson((n,n,n),format='csr')
    N=A.shape[0]; rng=np.random.default_rng(42)
    g=np.indices((n,n,n)).reshape(3,-1)/(n+1.0)
    for bn,b in [("A@rand",A@np.random.default_rng(0).random(N)),("randn",np.random.default_rng(0).standard_normal(N)),
                 ("A@ones",A@np.ones(N)),("sinx",A@np.prod(np.sin(np.pi*(g+1/(n+1))),axis=0)),("pyamg rand",np.random.rand(N))]:
        print(n,bn,fingerprint(A,b,("J","SA","RS")),flush=True)
