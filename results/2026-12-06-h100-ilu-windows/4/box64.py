# Writes .gpu/box64.mtx: a 7-point operator on 24 x 20 x 64 (x fastest), -1.2 / -0.8 along x, 6.5 on the diagonal
nx, ny, nz = 24, 20, 64
idx = lambda i, j, k: i + nx * (j + ny * k) + 1
ents = []
for k in range(nz):
    for j in range(ny):
        for i in range(nx):
            for di, dj, dk, w in [(0, 0, -1, -1), (0, -1, 0, -1), (-1, 0, 0, -1.2), (0, 0, 0, 6.5), (1, 0, 0, -0.8), (0, 1, 0, -1), (0, 0, 1, -1)]:
                a, b, c = i + di, j + dj, k + dk
                if 0 <= a < nx and 0 <= b < ny and 0 <= c < nz:
                    ents.append((idx(i, j, k), idx(a, b, c), w))
n = nx * ny * nz
with open('.gpu/box64.mtx', 'w') as f:
    f.write("%%MatrixMarket matrix coordinate real general\n")
    f.write("%d %d %d\n" % (n, n, len(ents)))
    for r, c, w in ents:
        f.write("%d %d %g\n" % (r, c, w))
