from bc import *
import pyamg
def amg_its(ml,b):
    res=[]; ml.solve(b,tol=1e-8,accel='cg',residuals=res,maxiter=1000); return len(res)-1
def fingerprint(A,b,which=("J","SA","SAJ","RS")):
    out={}
    if "J" in which: out["J"]=jcg(A,b)[0]
    if "SA" in which: out["SA"]=amg_its(pyamg.smoothed_aggregation_solver(A),b)
    if "SAJ" in which: out["SAJ"]=amg_its(pyamg.smoothed_aggregation_solver(A,presmoother='jacobi',postsmoother='jacobi'),b)
    if "SAJ43" in which: out["SAJ43"]=amg_its(pyamg.smoothed_aggregation_solver(A,presmoother=('jacobi',{'omega':4/3}),postsmoother=('jacobi',{'omega':4/3})),b)
    if "RS" in which: out["RS"]=amg_its(pyamg.ruge_stuben_solver(A),b)
    return out
