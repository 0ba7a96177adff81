import sys, re, statistics as st
rx = re.compile(r"TRACE up=(\d) launch=(\d+) ticket=(\d+) w=(-?\d+) runs=(\d+) top=(\d+) own0=(\d+) entry=(\d+) gate=(\d+) mid=(\d+) end=(\d+)")
rows = [list(map(int, m.groups())) for m in map(rx.search, open(sys.argv[1])) if m]
for up in (0, 1):
    rs = sorted([r for r in rows if r[0] == up], key=lambda r: r[7])
    groups, cur = [], []
    for r in rs:
        if cur and r[7] - cur[-1][7] > 100_000:
            groups.append(cur); cur = []
        cur.append(r)
    if cur: groups.append(cur)
    for g in groups:
        g.sort(key=lambda r: r[2])
        t0 = min(r[7] for r in g); runs = g[0][4]; w = g[0][3]
        by = {r[2]: r for r in g}
        walk = [(r[10]-r[8])/1e3 for r in g]
        lags = [(r[8]-by[r[2]-runs][8])/1e3 for r in g if r[2]-runs in by]
        span = (max(r[10] for r in g)-t0)/1e3
        print(f"up={up} w={w} runs={runs} blocks={len(g)} span={span:.1f}us walk(gate->end) med={st.median(walk):.1f} min={min(walk):.1f} max={max(walk):.1f}; "
              f"start lag behind predecessor med={st.median(lags) if lags else 0:.2f} min={min(lags) if lags else 0:.2f} max={max(lags) if lags else 0:.2f} us")
        if len(sys.argv) > 2:
            for r in g[:50]:
                print(f"   t{r[2]:3d} top={r[5]:3d} entry={(r[7]-t0)/1e3:7.1f} gate={(r[8]-t0)/1e3:7.1f} mid={(r[9]-t0)/1e3:7.1f} end={(r[10]-t0)/1e3:7.1f}")
