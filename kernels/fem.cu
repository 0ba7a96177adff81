// Element stiffness matrices by Gauss quadrature, one thread per element
// (FEStudio's level I). src/fem/cpu.rs is the same integration on the host,
// point for point. Output: the upper triangle of each K^e packed row by row,
// stored entry-major, ke[k * ne + e] (np = nd (nd + 1) / 2 entries k, nd =
// nodes x dofs per node, dofs node-major: node a, component c at a * dpn + c),
// so a warp's threads, consecutive elements, write and read consecutive words.
//
// Element types: tri3 and tet4 (constant gradients: one point at the centroid
// integrates K^e exactly, whatever the order), quad4 and hex8 (order^dim
// tensor Gauss-Legendre points). Problems: heat conduction (dpn 1, D = k I)
// and linear elasticity (dpn = dim; plane stress or plane strain in 2-D;
// Voigt order xx yy [zz] xy [yz zx] with engineering shears).
// Material m: props[2m] = k (heat) or E, props[2m + 1] = rho c (heat: the
// volumetric heat capacity) or nu (elasticity); the mass kernels take their
// coefficient per material separately (rho c, or the density rho).

// Compiled twice (src/fem/cuda.rs): as it is, and with FEM_QUADRATIC defined
// for the quadratic elements' kernels alone (tri6, quad8, tet10, hex20), which
// take NVRTC longer than all the rest, so a program of linear elements never
// waits for them.

typedef long long i64;

// Gauss-Legendre points and weights on [-1, 1], orders 1..4, by order.
__constant__ double GL_X[4][4] = {{0.0, 0, 0, 0},
                                  {-0.57735026918962576451, 0.57735026918962576451, 0, 0},
                                  {-0.77459666924148337704, 0.0, 0.77459666924148337704, 0},
                                  {-0.86113631159405257522, -0.33998104358485626480, 0.33998104358485626480,
                                   0.86113631159405257522}};
__constant__ double GL_W[4][4] = {{2.0, 0, 0, 0},
                                  {1.0, 1.0, 0, 0},
                                  {0.55555555555555555556, 0.88888888888888888889, 0.55555555555555555556, 0},
                                  {0.34785484513745385737, 0.65214515486254614263, 0.65214515486254614263,
                                   0.34785484513745385737}};

// Natural coordinate c of corner a of quad4 and hex8: counter-clockwise from
// (-1, -1[, -1]), then (hex8) the top face the same way.
__device__ __forceinline__ double corner(int a, int c) {
    const int k = a & 3;
    const bool plus = c == 0 ? (k == 1 || k == 2) : c == 1 ? k >= 2 : a >= 4;
    return plus ? 1.0 : -1.0;
}

// Quadratic elements: tri6 and tet10 (corners, then the edges' midpoints:
// tri6 0-1 1-2 2-0; tet10 0-1 1-2 2-0 0-3 1-3 2-3) from the barycentric
// L_0 = 1 - sum xi, L_i = xi_(i-1): N = L_a (2 L_a - 1) at a corner, 4 L_i L_j
// on edge (i, j); quad8 and hex20 serendipity (corners as quad4 and hex8,
// then the edges' midpoints: quad8 0-1 1-2 2-3 3-0; hex20 the bottom's four,
// the top's four, then the verticals 0-4 1-5 2-6 3-7), from each node's
// natural coordinates s (one of them 0 at a midpoint).
template <int NN, int DIM>
__device__ __forceinline__ constexpr bool quadratic_simplex() {
    return (DIM == 2 && NN == 6) || (DIM == 3 && NN == 10);
}
template <int NN, int DIM>
__device__ __forceinline__ constexpr bool serendipity() {
    return (DIM == 2 && NN == 8) || (DIM == 3 && NN == 20);
}
__constant__ signed char SERENDIPITY_2[8][2] = {{-1, -1}, {1, -1}, {1, 1}, {-1, 1}, {0, -1}, {1, 0}, {0, 1}, {-1, 0}};
__constant__ signed char SERENDIPITY_3[20][3] = {
    {-1, -1, -1}, {1, -1, -1}, {1, 1, -1}, {-1, 1, -1}, {-1, -1, 1}, {1, -1, 1}, {1, 1, 1}, {-1, 1, 1},
    {0, -1, -1},  {1, 0, -1},  {0, 1, -1}, {-1, 0, -1}, {0, -1, 1},  {1, 0, 1},  {0, 1, 1}, {-1, 0, 1},
    {-1, -1, 0},  {1, -1, 0},  {1, 1, 0},  {-1, 1, 0}};
__constant__ unsigned char SIMPLEX_EDGES[6][2] = {{0, 1}, {1, 2}, {2, 0}, {0, 3}, {1, 3}, {2, 3}};

// N_a (and with dn its gradients) of the quadratic elements at xi.
template <int NN, int DIM>
__device__ void quadratic_shapes(const double* xi, double* n, double (*dn)[3]) {
    if (quadratic_simplex<NN, DIM>()) {
        double l[DIM + 1], dl[DIM + 1][3];
        l[0] = 1.0;
        for (int c = 0; c < DIM; ++c) {
            l[0] -= xi[c];
            l[c + 1] = xi[c];
            dl[0][c] = -1.0;
            for (int i = 1; i <= DIM; ++i) dl[i][c] = (i - 1 == c) ? 1.0 : 0.0;
        }
        for (int a = 0; a < NN; ++a) {
            const int i = a <= DIM ? a : SIMPLEX_EDGES[a - DIM - 1][0], j = a <= DIM ? a : SIMPLEX_EDGES[a - DIM - 1][1];
            if (n) n[a] = a <= DIM ? l[a] * (2 * l[a] - 1) : 4 * l[i] * l[j];
            if (dn)
                for (int c = 0; c < DIM; ++c)
                    dn[a][c] = a <= DIM ? (4 * l[a] - 1) * dl[a][c] : 4 * (dl[i][c] * l[j] + l[i] * dl[j][c]);
        }
        return;
    }
    for (int a = 0; a < NN; ++a) {
        double sa[3];
        int zero = -1;
        for (int c = 0; c < DIM; ++c) {
            sa[c] = DIM == 2 ? SERENDIPITY_2[a][c] : SERENDIPITY_3[a][c];
            if (sa[c] == 0.0) zero = c;
        }
        if (zero < 0) {  // corner: prod (1 + s xi) (sum s xi - (DIM - 1)) / 2^DIM
            double prod = 1.0, sum = -(DIM - 1);
            for (int c = 0; c < DIM; ++c) {
                prod *= 1 + sa[c] * xi[c];
                sum += sa[c] * xi[c];
            }
            if (n) n[a] = prod * sum / (1 << DIM);
            if (dn)
                for (int k = 0; k < DIM; ++k) {
                    double others = 1.0;
                    for (int c = 0; c < DIM; ++c)
                        if (c != k) others *= 1 + sa[c] * xi[c];
                    dn[a][k] = (sa[k] * others * sum + prod * sa[k]) / (1 << DIM);
                }
        } else {  // midpoint: (1 - xi_z^2) prod_(c != z) (1 + s xi) / 2^(DIM - 1)
            double prod = 1.0;
            for (int c = 0; c < DIM; ++c)
                if (c != zero) prod *= 1 + sa[c] * xi[c];
            const double bubble = 1 - xi[zero] * xi[zero];
            if (n) n[a] = bubble * prod / (1 << (DIM - 1));
            if (dn)
                for (int k = 0; k < DIM; ++k) {
                    if (k == zero) {
                        dn[a][k] = -2 * xi[zero] * prod / (1 << (DIM - 1));
                        continue;
                    }
                    double others = 1.0;
                    for (int c = 0; c < DIM; ++c)
                        if (c != k && c != zero) others *= 1 + sa[c] * xi[c];
                    dn[a][k] = bubble * sa[k] * others / (1 << (DIM - 1));
                }
        }
    }
}

// dN_a/dxi_c at natural point xi, for NN nodes in DIM dimensions.
template <int NN, int DIM>
__device__ void shape_gradients(const double* xi, double (*dn)[3]) {
    if (quadratic_simplex<NN, DIM>() || serendipity<NN, DIM>()) {
        quadratic_shapes<NN, DIM>(xi, nullptr, dn);
        return;
    }
    if (NN == DIM + 1) {  // linear simplex: N_0 = 1 - sum xi, N_a = xi_(a-1)
        for (int c = 0; c < DIM; ++c) {
            dn[0][c] = -1.0;
            for (int a = 1; a < NN; ++a) dn[a][c] = (a - 1 == c) ? 1.0 : 0.0;
        }
        return;
    }
    // bilinear / trilinear: N_a = prod_c (1 + s_ac xi_c) / 2^DIM
#pragma unroll
    for (int a = 0; a < NN; ++a)
#pragma unroll
        for (int c = 0; c < DIM; ++c) {
            double v = corner(a, c) / (1 << DIM);
#pragma unroll
            for (int o = 0; o < DIM; ++o)
                if (o != c) v *= 1 + corner(a, o) * xi[o];
            dn[a][c] = v;
        }
}

// N_a at natural point xi.
template <int NN, int DIM>
__device__ void shape_values(const double* xi, double* n) {
    if (quadratic_simplex<NN, DIM>() || serendipity<NN, DIM>()) {
        quadratic_shapes<NN, DIM>(xi, n, nullptr);
        return;
    }
    if (NN == DIM + 1) {
        n[0] = 1.0;
        for (int c = 0; c < DIM; ++c) {
            n[c + 1] = xi[c];
            n[0] -= xi[c];
        }
        return;
    }
#pragma unroll
    for (int a = 0; a < NN; ++a) {
        double v = 1.0 / (1 << DIM);
#pragma unroll
        for (int c = 0; c < DIM; ++c) v *= 1 + corner(a, c) * xi[c];
        n[a] = v;
    }
}

// The stress-strain (or conductivity) matrix, NS x NS.
template <int DIM, int DPN>
__device__ void material_matrix(double p0, double p1, int plane_strain, double (*d)[6]) {
    constexpr int NS = DPN == 1 ? DIM : (DIM == 2 ? 3 : 6);
    for (int i = 0; i < NS; ++i)
        for (int j = 0; j < NS; ++j) d[i][j] = 0.0;
    if (DPN == 1) {
        for (int i = 0; i < DIM; ++i) d[i][i] = p0;
    } else if (DIM == 2) {
        const double e = p0, nu = p1;
        const double f = plane_strain ? e / ((1 + nu) * (1 - 2 * nu)) : e / (1 - nu * nu);
        const double a = plane_strain ? 1 - nu : 1.0;
        d[0][0] = d[1][1] = f * a;
        d[0][1] = d[1][0] = f * nu;
        d[2][2] = plane_strain ? f * (1 - 2 * nu) / 2 : f * (1 - nu) / 2;
    } else {
        const double e = p0, nu = p1;
        const double lambda = e * nu / ((1 + nu) * (1 - 2 * nu)), mu = e / (2 * (1 + nu));
        for (int i = 0; i < 3; ++i) {
            for (int j = 0; j < 3; ++j) d[i][j] = lambda;
            d[i][i] = lambda + 2 * mu;
            d[i + 3][i + 3] = mu;
        }
    }
}

// Row s of B for dof (a, c), given the physical gradients g[a][0..DIM).
template <int DIM, int DPN>
__device__ double b_entry(int s, int c, const double* g) {
    if (DPN == 1) return g[s];
    if (DIM == 2) {
        if (s < 2) return s == c ? g[c] : 0.0;
        return g[1 - c];  // xy: dN/dy for u, dN/dx for v
    }
    if (s < 3) return s == c ? g[c] : 0.0;
    // shears xy, yz, zx: pairs (0,1), (1,2), (2,0)
    const int p = s - 3, i = p, j = (p + 1) % 3;
    return c == i ? g[j] : (c == j ? g[i] : 0.0);
}

// The element's nodes xe[a][0..DIM) from the global coordinates.
template <int NN, int DIM>
__device__ __forceinline__ void element_nodes(const double* __restrict__ x, const int* __restrict__ conn, i64 e,
                                              double (*xe)[3]) {
#pragma unroll
    for (int a = 0; a < NN; ++a)
#pragma unroll
        for (int c = 0; c < DIM; ++c) xe[a][c] = x[(i64)DIM * conn[e * NN + a] + c];
}

// Gauss points of an element: q^DIM for quad4/hex8 and the quadratic
// elements (q = the order; quadratic simplices by the collapsed (Duffy)
// square or cube), the centroid alone for linear simplices (constant
// gradients: exact for K^e).
template <int NN, int DIM>
__device__ __forceinline__ int gauss_points(int order) {
    if (NN == DIM + 1) return 1;
    return DIM == 2 ? order * order : order * order * order;
}

// At Gauss point gp: the physical gradients g[a][c] = dN_a/dx_c (J^-1 maps
// natural to physical), w det J, and with `n` the shape values. False when
// det J is not positive and finite (an inverted or degenerate element, NaN
// nodes, or coordinates so large that det J overflows).
template <int NN, int DIM>
__device__ __forceinline__ bool gauss_point(const double (*xe)[3], int order, int gp, double (*g)[3], double& wdet,
                                            double* n) {
    double xi[3], w;
    if (NN == DIM + 1) {
#pragma unroll
        for (int c = 0; c < DIM; ++c) xi[c] = 1.0 / (DIM + 1);
        w = DIM == 2 ? 0.5 : 1.0 / 6.0;
    } else {
        const int q = order, i0 = gp % q, i1 = (gp / q) % q, i2 = gp / (q * q);
        xi[0] = GL_X[q - 1][i0];
        xi[1] = GL_X[q - 1][i1];
        xi[2] = DIM == 3 ? GL_X[q - 1][i2] : 0.0;
        w = GL_W[q - 1][i0] * GL_W[q - 1][i1] * (DIM == 3 ? GL_W[q - 1][i2] : 1.0);
        if (quadratic_simplex<NN, DIM>()) {  // the unit square or cube collapsed onto the simplex
            const double u = 0.5 * (1 + xi[0]), v = 0.5 * (1 + xi[1]), t = 0.5 * (1 + xi[2]);
            xi[0] = u;
            xi[1] = v * (1 - u);
            xi[2] = DIM == 3 ? t * (1 - u) * (1 - v) : 0.0;
            w *= DIM == 2 ? 0.25 * (1 - u) : 0.125 * (1 - u) * (1 - u) * (1 - v);
        }
    }
    double dn[NN][3];
    shape_gradients<NN, DIM>(xi, dn);
    if (n) shape_values<NN, DIM>(xi, n);
    double j[3][3];  // j[r][c] = dx_c / dxi_r
#pragma unroll
    for (int r = 0; r < DIM; ++r)
#pragma unroll
        for (int c = 0; c < DIM; ++c) {
            j[r][c] = 0.0;
#pragma unroll
            for (int a = 0; a < NN; ++a) j[r][c] += dn[a][r] * xe[a][c];
        }
    double det, inv[3][3];
    if (DIM == 2) {
        det = j[0][0] * j[1][1] - j[0][1] * j[1][0];
        inv[0][0] = j[1][1] / det;
        inv[0][1] = -j[0][1] / det;
        inv[1][0] = -j[1][0] / det;
        inv[1][1] = j[0][0] / det;
    } else {
        det = j[0][0] * (j[1][1] * j[2][2] - j[1][2] * j[2][1]) - j[0][1] * (j[1][0] * j[2][2] - j[1][2] * j[2][0]) +
              j[0][2] * (j[1][0] * j[2][1] - j[1][1] * j[2][0]);
#pragma unroll
        for (int r = 0; r < 3; ++r)
#pragma unroll
            for (int c = 0; c < 3; ++c) {
                const int r1 = (r + 1) % 3, r2 = (r + 2) % 3, c1 = (c + 1) % 3, c2 = (c + 2) % 3;
                inv[c][r] = (j[r1][c1] * j[r2][c2] - j[r1][c2] * j[r2][c1]) / det;  // cofactor transpose
            }
    }
#pragma unroll
    for (int a = 0; a < NN; ++a)
#pragma unroll
        for (int c = 0; c < DIM; ++c) {
            g[a][c] = 0.0;
#pragma unroll
            for (int r = 0; r < DIM; ++r) g[a][c] += inv[c][r] * dn[a][r];
        }
    wdet = w * det;
    return det > 0.0 && isfinite(det);  // an overflowed det J would make K^e 0 * inf
}

template <int NN, int DIM, int DPN>
__device__ void stiffness(i64 ne, const double* __restrict__ x, const int* __restrict__ conn,
                          const int* __restrict__ material, const double* __restrict__ props, int plane_strain,
                          int order, double* __restrict__ ke, int* bad) {
    constexpr int ND = NN * DPN, NP = ND * (ND + 1) / 2;
    constexpr int NS = DPN == 1 ? DIM : (DIM == 2 ? 3 : 6);
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    double xe[NN][3];
    element_nodes<NN, DIM>(x, conn, e, xe);
    const int m = material[e];
    double d[6][6];
    material_matrix<DIM, DPN>(props[2 * m], props[2 * m + 1], plane_strain, d);
    double k[NP];
#pragma unroll
    for (int i = 0; i < NP; ++i) k[i] = 0.0;
    const int points = gauss_points<NN, DIM>(order);
    for (int gp = 0; gp < points; ++gp) {
        double g[NN][3], f;
        if (!gauss_point<NN, DIM>(xe, order, gp, g, f, nullptr)) {
            atomicMin(bad, (int)e);
            return;
        }
        // unrolled so that k, db and g are indexed by constants (registers
        // where they fit; hex8 elasticity's 300 entries still spill)
#pragma unroll
        for (int p = 0; p < ND; ++p) {
            const int a = p / DPN, c = p % DPN;
            const int row = p * ND - p * (p - 1) / 2;  // packed row p starts here
            double db[NS];  // row p of B^T D
#pragma unroll
            for (int t = 0; t < NS; ++t) {
                db[t] = 0.0;
#pragma unroll
                for (int s = 0; s < NS; ++s) db[t] += b_entry<DIM, DPN>(s, c, g[a]) * d[s][t];
            }
#pragma unroll
            for (int r = p; r < ND; ++r) {
                const int b = r / DPN, cb = r % DPN;
                double v = 0.0;
#pragma unroll
                for (int t = 0; t < NS; ++t) v += db[t] * b_entry<DIM, DPN>(t, cb, g[b]);
                k[row + r - p] += f * v;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < NP; ++i) ke[(i64)i * ne + e] = k[i];
}

// Levels II and IIa (FEStudio): `epb` elements per block (1: level II).
// First the block's threads compute every (element, Gauss point) pair's
// physical gradients and w det J into shared memory; then thread (j, i)
// forms entries k = i, i + rows, ... of element j's K^e, summing over the
// Gauss points from shared memory. Consecutive threads take consecutive
// elements for one entry, so the entry-major stores are coalesced, and no
// thread holds a whole K^e. Dynamic shared memory: epb x points x (NN DIM + 1) doubles.
template <int NN, int DIM, int DPN>
__device__ void stiffness_blocked(i64 ne, const double* __restrict__ x, const int* __restrict__ conn,
                                  const int* __restrict__ material, const double* __restrict__ props, int plane_strain,
                                  int order, double* __restrict__ ke, int* bad, int epb) {
    constexpr int ND = NN * DPN, NP = ND * (ND + 1) / 2;
    constexpr int NS = DPN == 1 ? DIM : (DIM == 2 ? 3 : 6);
    constexpr int PER_POINT = NN * DIM + 1;  // the gradients, then w det J
    extern __shared__ double shared[];
    const int points = gauss_points<NN, DIM>(order);
    const i64 first = (i64)blockIdx.x * epb;
    const int threads = blockDim.x;
    for (int pair = threadIdx.x; pair < epb * points; pair += threads) {
        const int j = pair / points, gp = pair % points;
        const i64 e = first + j;
        double* out = shared + (i64)pair * PER_POINT;
        if (e >= ne) {
            out[NN * DIM] = 0.0;
            continue;
        }
        double xe[NN][3], g[NN][3], f;
        element_nodes<NN, DIM>(x, conn, e, xe);
        if (!gauss_point<NN, DIM>(xe, order, gp, g, f, nullptr)) atomicMin(bad, (int)e);
        for (int a = 0; a < NN; ++a)
            for (int c = 0; c < DIM; ++c) out[a * DIM + c] = g[a][c];
        out[NN * DIM] = f;
    }
    __syncthreads();
    const int j = threadIdx.x % epb, rows = threads / epb;
    const i64 e = first + j;
    if (e >= ne || threadIdx.x >= rows * epb) return;
    const int m = material[e];
    double d[6][6];
    material_matrix<DIM, DPN>(props[2 * m], props[2 * m + 1], plane_strain, d);
    for (int k = threadIdx.x / epb; k < NP; k += rows) {
        int p = 0, row = 0;  // the packed entry k is (p, r), row p starting at `row`
        while (row + (ND - p) <= k) {
            row += ND - p;
            ++p;
        }
        const int r = p + (k - row);
        double v = 0.0;
        for (int gp = 0; gp < points; ++gp) {
            const double* at = shared + (i64)(j * points + gp) * PER_POINT;
            double gp_[DIM], gr_[DIM];
            for (int c = 0; c < DIM; ++c) {
                gp_[c] = at[(p / DPN) * DIM + c];
                gr_[c] = at[(r / DPN) * DIM + c];
            }
            double sum = 0.0;
            for (int s2 = 0; s2 < NS; ++s2) {
                const double bs = b_entry<DIM, DPN>(s2, p % DPN, gp_);
                if (bs == 0.0) continue;
                for (int t = 0; t < NS; ++t) sum += bs * d[s2][t] * b_entry<DIM, DPN>(t, r % DPN, gr_);
            }
            v += at[NN * DIM] * sum;
        }
        ke[(i64)k * ne + e] = v;
    }
}

#define STIFFNESS(NAME, NN, DIM, DPN)                                                                            \
    extern "C" __global__ void __launch_bounds__(128) stiffness_##NAME(i64 ne, const double* x, const int* conn,             \
        const int* material, const double* props, int plane_strain, int order, double* ke, int* bad) {          \
        if constexpr (WANTED(stiffness_##NAME)) {                                                                             \
            stiffness<NN, DIM, DPN>(ne, x, conn, material, props, plane_strain, order, ke, bad);                              \
        }                                                                                                                     \
    }

#define STIFFNESS_BLOCKED(NAME, NN, DIM, DPN)                                                                    \
    extern "C" __global__ void __launch_bounds__(256) stiffness_##NAME##_blocked(i64 ne, const double* x, const int* conn,   \
        const int* material, const double* props, int plane_strain, int order, double* ke, int* bad, int epb) {  \
        if constexpr (WANTED(stiffness_##NAME##_blocked)) {                                                                   \
            stiffness_blocked<NN, DIM, DPN>(ne, x, conn, material, props, plane_strain, order, ke, bad, epb);                 \
        }                                                                                                                     \
    }

// Assembly as a gather: global entry i = the sum of the packed element entries
// ke[from[ptr[i] .. ptr[i + 1])], in element order (src/fem/mod.rs builds the
// map once), so the result is the same every time and needs no atomics.
extern "C" __global__ void __launch_bounds__(256) assemble(i64 nnz, const int* __restrict__ ptr,
    const int* __restrict__ from, const double* __restrict__ ke, double* __restrict__ values) {
    if constexpr (WANTED(assemble)) {
        const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= nnz) return;
        double s = 0.0;
        for (int k = ptr[i]; k < ptr[i + 1]; ++k) s += ke[from[k]];
        values[i] = s;
    }
}

// ---- Element-by-element products (EBE CG) ----

// The device-driven solvers' status word (kernels/sparse.cu `Scalar`: STATUS
// at 3, RUNNING = 0): these kernels run inside a CG iteration and do nothing
// once it has stopped. sc may be null (a plain product).
__device__ __forceinline__ bool ebe_stopped(const double* sc) { return sc && sc[3] != 0.0; }

// y = diag .* x on constrained dofs, 0 elsewhere (before the element products
// add in); without `fixed`, y = 0.
extern "C" __global__ void __launch_bounds__(256) ebe_init(i64 n, const double* __restrict__ x, double* __restrict__ y,
    const unsigned char* __restrict__ fixed, const double* __restrict__ diag, const double* sc) {
    if constexpr (WANTED(ebe_init)) {
        if (ebe_stopped(sc)) return;
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
            y[i] = (fixed && fixed[i]) ? diag[i] * x[i] : 0.0;
    }
}

// y += sum_e K^e x_e, one thread per element, from the packed K^e; with
// `fixed`, constrained dofs are zero in x_e and receive nothing (their rows
// and columns are those of the assembled matrix after Dirichlet conditions).
// Race-free by atomics: elements sharing a node add into it concurrently.
template <int NN, int DPN>
__device__ void ebe_apply(i64 ne, const int* __restrict__ conn, const double* __restrict__ ke,
                          const double* __restrict__ x, double* y, const unsigned char* __restrict__ fixed,
                          const double* sc) {
    constexpr int ND = NN * DPN;
    constexpr int UNROLL = ND <= 24 ? ND : 1;  // tet10 and hex20 elasticity: loops (unrolled, they take NVRTC long)
    if (ebe_stopped(sc)) return;
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    // Every loop is unrolled so xe, ye and dof live in registers (a runtime
    // index would put them in local memory).
    int dof[ND];
    double xe[ND], ye[ND];
#pragma unroll UNROLL
    for (int p = 0; p < ND; ++p) {
        dof[p] = conn[e * NN + p / DPN] * DPN + p % DPN;
        xe[p] = (fixed && fixed[dof[p]]) ? 0.0 : x[dof[p]];
        ye[p] = 0.0;
    }
    const double* k = ke + e;  // entry idx at k[idx * ne]
#pragma unroll UNROLL
    for (int i = 0; i < ND; ++i) {
        const int row = i * ND - i * (i - 1) / 2;  // packed row i starts here
        ye[i] += k[(i64)row * ne] * xe[i];
#pragma unroll UNROLL
        for (int j = i + 1; j < ND; ++j) {
            const double kij = k[(i64)(row + j - i) * ne];
            ye[i] += kij * xe[j];
            ye[j] += kij * xe[i];
        }
    }
#pragma unroll UNROLL
    for (int p = 0; p < ND; ++p)
        if (!(fixed && fixed[dof[p]])) atomicAdd(&y[dof[p]], ye[p]);
}

// diag += the diagonals of the element matrices (the assembled diagonal).
template <int NN, int DPN>
__device__ void ebe_diagonal(i64 ne, const int* __restrict__ conn, const double* __restrict__ ke, double* diag) {
    constexpr int ND = NN * DPN;
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    int idx = 0;
    for (int p = 0; p < ND; ++p) {
        atomicAdd(&diag[conn[e * NN + p / DPN] * DPN + p % DPN], ke[(i64)idx * ne + e]);
        idx += ND - p;
    }
}

#define EBE(NAME, NN, DIM, DPN)                                                                                     \
    extern "C" __global__ void __launch_bounds__(128) ebe_apply_##NAME(i64 ne, const int* conn, const double* ke, \
        const double* x, double* y, const unsigned char* fixed, const double* sc) {                              \
        if constexpr (WANTED(ebe_apply_##NAME)) {                                                                  \
            ebe_apply<NN, DPN>(ne, conn, ke, x, y, fixed, sc);                                                     \
        }                                                                                                          \
    }                                                                                                           \
    extern "C" __global__ void __launch_bounds__(128) ebe_diagonal_##NAME(i64 ne, const int* conn,              \
        const double* ke, double* diag) {                                                                       \
        if constexpr (WANTED(ebe_diagonal_##NAME)) {                                                             \
            ebe_diagonal<NN, DPN>(ne, conn, ke, diag);                                                           \
        }                                                                                                        \
    }

// Dirichlet right-hand side (EBE solves and heat steps): with t = K g (g the
// prescribed values, 0 on free dofs), free rows b -= t and constrained rows
// b = diag g, as the assembled matrix's conditions give.
extern "C" __global__ void __launch_bounds__(256) dirichlet_rhs(i64 n, const unsigned char* __restrict__ fixed,
    const double* __restrict__ g, const double* __restrict__ diag, const double* __restrict__ t, double* __restrict__ b) {
    if constexpr (WANTED(dirichlet_rhs)) {
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
            b[i] = fixed[i] ? diag[i] * g[i] : b[i] - t[i];
    }
}

// Mass matrices: the heat capacity C^e_ab = integral of rho c N_a N_b (DPN
// 1), or the consistent mass M^e = integral of rho N_a N_b, once per
// displacement component (DPN = dim), packed and stored as the stiffness.
// coef[m] is material m's rho c or rho. Linear simplices in closed form
// (coef V (1 + delta_ab) / ((d + 1)(d + 2)), exact); quad4 and hex8 by
// order^dim Gauss points.
template <int NN, int DIM, int DPN>
__device__ void mass(i64 ne, const double* __restrict__ x, const int* __restrict__ conn,
                     const int* __restrict__ material, const double* __restrict__ coef, int order,
                     double* __restrict__ ce, int* bad) {
    constexpr int ND = NN * DPN, NP = ND * (ND + 1) / 2;
    constexpr bool SIMPLEX = NN == DIM + 1;
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    double xe[NN][3];
    element_nodes<NN, DIM>(x, conn, e, xe);
    const double rc = coef[material[e]];
    double m[NP];
    for (int i = 0; i < NP; ++i) m[i] = 0.0;
    const int points = gauss_points<NN, DIM>(order);
    for (int gp = 0; gp < points; ++gp) {
        double g[NN][3], n[NN], wdet;
        if (!gauss_point<NN, DIM>(xe, order, gp, g, wdet, n)) {
            atomicMin(bad, (int)e);
            return;
        }
        int idx = 0;
        for (int p = 0; p < ND; ++p)
            for (int r = p; r < ND; ++r, ++idx) {
                const int a = p / DPN, b = r / DPN;
                if (p % DPN != r % DPN) continue;  // components do not couple
                m[idx] += SIMPLEX ? rc * wdet * (a == b ? 2.0 : 1.0) / ((DIM + 1) * (DIM + 2)) : rc * wdet * n[a] * n[b];
            }
    }
    for (int i = 0; i < NP; ++i) ce[(i64)i * ne + e] = m[i];
}

#define MASS(NAME, NN, DIM, DPN)                                                                                 \
    extern "C" __global__ void __launch_bounds__(128) mass_##NAME(i64 ne, const double* x, const int* conn,      \
        const int* material, const double* coef, int order, double* ce, int* bad) {                             \
        if constexpr (WANTED(mass_##NAME)) {                                                                      \
            mass<NN, DIM, DPN>(ne, x, conn, material, coef, order, ce, bad);                                      \
        }                                                                                                         \
    }

// ---- Element-by-element products with K^e recomputed (on the fly) ----

// y += sum_e K^e x_e without stored matrices: at each Gauss point the
// gradient (strain) B x_e, the flux (stress) D B x_e, and B^T of it back to
// the element's dofs; masking, atomics and y's initialisation (ebe_init) as
// ebe_apply. Memory: the geometry only. With `diag_out`, instead of the
// product, the element diagonals are added into diag_out (for Jacobi).
template <int NN, int DIM, int DPN>
__device__ void ebe_otf(i64 ne, const double* __restrict__ x_nodes, const int* __restrict__ conn,
                        const int* __restrict__ material, const double* __restrict__ props, int plane_strain,
                        int order, const double* __restrict__ u, double* y, const unsigned char* __restrict__ fixed,
                        double* diag_out, const double* sc) {
    constexpr int ND = NN * DPN;
    constexpr int NS = DPN == 1 ? DIM : (DIM == 2 ? 3 : 6);
    if (ebe_stopped(sc)) return;
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    double xe[NN][3], ue[ND], ye[ND];
    int dof[ND];
    element_nodes<NN, DIM>(x_nodes, conn, e, xe);
#pragma unroll
    for (int p = 0; p < ND; ++p) {
        dof[p] = conn[e * NN + p / DPN] * DPN + p % DPN;
        ue[p] = (diag_out || (fixed && fixed[dof[p]])) ? 0.0 : u[dof[p]];
        ye[p] = 0.0;
    }
    const int m = material[e];
    double d[6][6];
    material_matrix<DIM, DPN>(props[2 * m], props[2 * m + 1], plane_strain, d);
    const int points = gauss_points<NN, DIM>(order);
    for (int gp = 0; gp < points; ++gp) {
        double g[NN][3], f;
        gauss_point<NN, DIM>(xe, order, gp, g, f, nullptr);  // integration checked the elements
        if (diag_out) {  // the diagonal: B_p^T D B_p for each dof p
#pragma unroll
            for (int p = 0; p < ND; ++p) {
                double v = 0.0;
#pragma unroll
                for (int s = 0; s < NS; ++s)
#pragma unroll
                    for (int t = 0; t < NS; ++t)
                        v += b_entry<DIM, DPN>(s, p % DPN, g[p / DPN]) * d[s][t] * b_entry<DIM, DPN>(t, p % DPN, g[p / DPN]);
                ye[p] += f * v;
            }
            continue;
        }
        double strain[NS], stress[NS];
#pragma unroll
        for (int s = 0; s < NS; ++s) {
            strain[s] = 0.0;
#pragma unroll
            for (int p = 0; p < ND; ++p) strain[s] += b_entry<DIM, DPN>(s, p % DPN, g[p / DPN]) * ue[p];
        }
#pragma unroll
        for (int t = 0; t < NS; ++t) {
            stress[t] = 0.0;
#pragma unroll
            for (int s = 0; s < NS; ++s) stress[t] += d[t][s] * strain[s];
        }
#pragma unroll
        for (int p = 0; p < ND; ++p) {
            double v = 0.0;
#pragma unroll
            for (int t = 0; t < NS; ++t) v += b_entry<DIM, DPN>(t, p % DPN, g[p / DPN]) * stress[t];
            ye[p] += f * v;
        }
    }
#pragma unroll
    for (int p = 0; p < ND; ++p) {
        if (diag_out) {
            atomicAdd(&diag_out[dof[p]], ye[p]);
        } else if (!(fixed && fixed[dof[p]])) {
            atomicAdd(&y[dof[p]], ye[p]);
        }
    }
}

#define EBE_OTF(NAME, NN, DIM, DPN)                                                                               \
    extern "C" __global__ void __launch_bounds__(128) ebe_otf_##NAME(i64 ne, const double* x, const int* conn,     \
        const int* material, const double* props, int plane_strain, int order, const double* u, double* y,        \
        const unsigned char* fixed, double* diag_out, const double* sc) {                                         \
        if constexpr (WANTED(ebe_otf_##NAME)) {                                                                     \
            ebe_otf<NN, DIM, DPN>(ne, x, conn, material, props, plane_strain, order, u, y, fixed, diag_out, sc);    \
        }                                                                                                           \
    }

// ---- The assembly pattern and map, built on the device ----
// The same CSR pattern and gather map as src/fem/mod.rs `build_assembly` (the
// host reference), entry for entry, so the assembled values are the same
// bits. Nodes first: each node's elements (counted, filled, sorted), its
// neighbours (the nodes it shares an element with, sorted), and per pair
// (node v, its neighbour at position `pos`) the count of element
// contributions; the src/array/cuda.rs scans turn counts into offsets. Then
// one thread per node writes its dpn rows: row pointers, columns, the
// diagonal's position, and for every (row, column) entry its contributions
// in element order, as the host's loop over elements visits them.

// count[v] = the elements of node v (one per occurrence in conn).
extern "C" __global__ void __launch_bounds__(256) map_count(i64 total, const int* __restrict__ conn, int* count) {
    if constexpr (WANTED(map_count)) {
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x)
            atomicAdd(&count[conn[i]], 1);
    }
}

// elems[elem_ptr[v] ..] = the elements of v, in arrival order (map_neighbours sorts them).
extern "C" __global__ void __launch_bounds__(256) map_fill(i64 total, int nn, const int* __restrict__ conn,
    const int* __restrict__ elem_ptr, int* cursor, int* __restrict__ elems) {
    if constexpr (WANTED(map_fill)) {
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x) {
            const int v = conn[i];
            elems[elem_ptr[v] + atomicAdd(&cursor[v], 1)] = (int)(i / nn);
        }
    }
}

__device__ __forceinline__ void insertion_sort(int* a, int n) {
    for (int i = 1; i < n; ++i) {
        const int t = a[i];
        int j = i - 1;
        for (; j >= 0 && a[j] > t; --j) a[j + 1] = a[j];
        a[j + 1] = t;
    }
}

// One thread per node: sorts its elements, writes every node of them into
// its stretch of `scratch` (nn entries an element), sorts that and counts
// the distinct ones: degree[v], the node's neighbours (itself included).
extern "C" __global__ void __launch_bounds__(128) map_neighbours(i64 nodes, int nn, const int* __restrict__ conn,
    const int* __restrict__ elem_ptr, int* __restrict__ elems, int* __restrict__ scratch, int* __restrict__ degree) {
    if constexpr (WANTED(map_neighbours)) {
        const i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        if (v >= nodes) return;
        const int first = elem_ptr[v], count = elem_ptr[v + 1] - first;
        insertion_sort(elems + first, count);
        int* s = scratch + (i64)nn * first;
        for (int i = 0; i < count; ++i)
            for (int b = 0; b < nn; ++b) s[i * nn + b] = conn[(i64)elems[first + i] * nn + b];
        insertion_sort(s, count * nn);
        int distinct = 0;
        for (int i = 0; i < count * nn; ++i) distinct += i == 0 || s[i] != s[i - 1];
        degree[v] = distinct;
    }
}

// One thread per node: its sorted neighbours from scratch into nbr[nbr_ptr[v] ..].
extern "C" __global__ void __launch_bounds__(128) map_neighbour_list(i64 nodes, int nn, const int* __restrict__ elem_ptr,
    const int* __restrict__ scratch, const int* __restrict__ nbr_ptr, int* __restrict__ nbr) {
    if constexpr (WANTED(map_neighbour_list)) {
        const i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        if (v >= nodes) return;
        const int first = elem_ptr[v], len = (elem_ptr[v + 1] - first) * nn;
        const int* s = scratch + (i64)nn * first;
        int at = nbr_ptr[v];
        for (int i = 0; i < len; ++i)
            if (i == 0 || s[i] != s[i - 1]) nbr[at++] = s[i];
    }
}

// Position of w among the sorted neighbours nbr[lo, hi) (it is there).
__device__ __forceinline__ int neighbour_position(const int* nbr, int lo, int hi, int w) {
    int a = lo, b = hi;
    while (b - a > 1) {
        const int m = (a + b) >> 1;
        if (nbr[m] <= w) a = m; else b = m;
    }
    return a - lo;
}

// Visits node v's contributions in the host's order: elements ascending (a
// repeated element once), then v's local nodes a, then the element's nodes b.
template <typename F>
__device__ __forceinline__ void each_contribution(int v, int nn, const int* conn, const int* elem_ptr, const int* elems,
                                                  F visit) {
    for (int i = elem_ptr[v]; i < elem_ptr[v + 1]; ++i) {
        const int e = elems[i];
        if (i > elem_ptr[v] && e == elems[i - 1]) continue;
        for (int a = 0; a < nn; ++a) {
            if (conn[(i64)e * nn + a] != v) continue;
            for (int b = 0; b < nn; ++b) visit(e, a, b, conn[(i64)e * nn + b]);
        }
    }
}

// One thread per node: pairs[p] = the contributions (e, a, b) of pair p.
extern "C" __global__ void __launch_bounds__(128) map_pair_count(i64 nodes, int nn, const int* __restrict__ conn,
    const int* __restrict__ elem_ptr, const int* __restrict__ elems, const int* __restrict__ nbr_ptr,
    const int* __restrict__ nbr, int* __restrict__ pairs) {
    if constexpr (WANTED(map_pair_count)) {
        const i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        if (v >= nodes) return;
        const int lo = nbr_ptr[v], hi = nbr_ptr[v + 1];
        for (int p = lo; p < hi; ++p) pairs[p] = 0;
        each_contribution((int)v, nn, conn, elem_ptr, elems,
                          [&](int, int, int, int w) { ++pairs[lo + neighbour_position(nbr, lo, hi, w)]; });
    }
}

// One thread per node v, with P the scanned pair counts (P[p] contributions
// before pair p): the rows (v, c) and their entries (v, c; w, d). Row (v, c)
// starts at dpn (dpn nbr_ptr[v] + c deg); entry (pos, d) of it has column w dpn
// + d and its contributions start at dpn^2 S + c dpn T + dpn (P[p] - S) + d
// cnt (S, T: node v's first and total pair contributions, cnt = P[p+1] -
// P[p]). Its j-th contribution (e, a, b) is packed entry (a dpn + c, b dpn
// + d) of element e: from = packed * ne + e. `cursor` (zeroed) counts each
// pair's contributions written so far.
extern "C" __global__ void __launch_bounds__(128) map_rows(i64 nodes, int nn, int dpn, i64 ne,
    const int* __restrict__ conn, const int* __restrict__ elem_ptr, const int* __restrict__ elems,
    const int* __restrict__ nbr_ptr, const int* __restrict__ nbr, const int* __restrict__ P, int* __restrict__ cursor,
    int* __restrict__ row_ptr, int* __restrict__ col, int* __restrict__ diag, int* __restrict__ ptr,
    int* __restrict__ from) {
    if constexpr (WANTED(map_rows)) {
        const i64 v = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        if (v >= nodes) return;
        const int lo = nbr_ptr[v], hi = nbr_ptr[v + 1], deg = hi - lo;
        const int S = P[lo], T = P[hi] - S, nd = nn * dpn;
        const i64 entries = (i64)dpn * dpn * lo;  // node v's first entry
        for (int c = 0; c < dpn; ++c) {
            const i64 row = v * dpn + c, start = entries + (i64)c * dpn * deg;
            row_ptr[row] = (int)start;
            for (int pos = 0; pos < deg; ++pos) {
                const int p = lo + pos, w = nbr[p], cnt = P[p + 1] - P[p];
                for (int d = 0; d < dpn; ++d) {
                    const i64 k = start + pos * dpn + d;
                    col[k] = w * dpn + d;
                    ptr[k] = dpn * dpn * S + c * dpn * T + dpn * (P[p] - S) + d * cnt;
                    if (w == v && d == c) diag[row] = (int)k;
                }
            }
        }
        if (v == nodes - 1) {
            row_ptr[nodes * dpn] = dpn * dpn * hi;
            ptr[(i64)dpn * dpn * hi] = dpn * dpn * P[hi];
        }
        each_contribution((int)v, nn, conn, elem_ptr, elems, [&](int e, int a, int b, int w) {
            const int pos = neighbour_position(nbr, lo, hi, w), p = lo + pos, j = cursor[p]++;
            for (int c = 0; c < dpn; ++c) {
                const i64 start = entries + (i64)c * dpn * deg;
                for (int d = 0; d < dpn; ++d) {
                    const int i = min(a * dpn + c, b * dpn + d), jj = max(a * dpn + c, b * dpn + d);
                    const i64 packed = (i64)i * nd - (i64)i * (i - 1) / 2 + (jj - i);
                    // ptr[k] + j, with ptr[k] as written above (this thread wrote it)
                    from[ptr[start + pos * dpn + d] + j] = (int)(packed * ne + e);
                }
            }
        });
    }
}

// values[at[i]] += s h[i]: the heat stepper's convection h A on the diagonal
// (each dof's own diagonal entry, so no two threads meet).
extern "C" __global__ void __launch_bounds__(256) diagonal_add(i64 n, const int* __restrict__ at, double s,
    const double* __restrict__ h, double* __restrict__ values) {
    if constexpr (WANTED(diagonal_add)) {
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (i64)gridDim.x * blockDim.x)
            values[at[i]] += s * h[i];
    }
}

// ---- Load vectors ----

// f += the integral of N_a b over each element, b constant on it (DPN values
// per element: a body force, a heat source, or the density, whose integral
// against N_a is the row sum of the consistent mass, sum_b N_b being 1: the
// lumped mass), at the stiffness's Gauss points (the centroid of a linear
// simplex, exact for N_a). One thread per element; elements sharing a node
// add into it by atomics.
template <int NN, int DIM, int DPN>
__device__ void body_load(i64 ne, const double* __restrict__ x, const int* __restrict__ conn,
                          const double* __restrict__ b, int order, double* f, int* bad) {
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    double xe[NN][3], fe[NN];
    element_nodes<NN, DIM>(x, conn, e, xe);
#pragma unroll
    for (int a = 0; a < NN; ++a) fe[a] = 0.0;
    const int points = gauss_points<NN, DIM>(order);
    for (int gp = 0; gp < points; ++gp) {
        double g[NN][3], n[NN], wdet;
        if (!gauss_point<NN, DIM>(xe, order, gp, g, wdet, n)) {
            atomicMin(bad, (int)e);
            return;
        }
#pragma unroll
        for (int a = 0; a < NN; ++a) fe[a] += wdet * n[a];
    }
#pragma unroll
    for (int a = 0; a < NN; ++a)
#pragma unroll
        for (int c = 0; c < DPN; ++c) atomicAdd(&f[(i64)conn[e * NN + a] * DPN + c], fe[a] * b[e * DPN + c]);
}

#define BODY_LOAD(NAME, NN, DIM, DPN)                                                                            \
    extern "C" __global__ void __launch_bounds__(128) body_load_##NAME(i64 ne, const double* x, const int* conn, \
        const double* b, int order, double* f, int* bad) {                                                       \
        if constexpr (WANTED(body_load_##NAME)) {                                                                 \
            body_load<NN, DIM, DPN>(ne, x, conn, b, order, f, bad);                                               \
        }                                                                                                         \
    }

// Face integrals, one thread per face of FN nodes in DIM dimensions: an edge
// in 2-D (FN 2, or 3 for quadratic elements: the ends, then the midpoint;
// per unit thickness), a triangle (3, or 6: corners, then the midpoints of
// 0-1 1-2 2-0) or a quadrilateral (4, or 8 likewise) in 3-D, its nodes
// ordered so that the outward normal is on the right of an edge (the
// element counter-clockwise) and counter-clockwise seen from outside a
// face. Rules exact for N_a N_b on flat faces: 2 Gauss points per direction
// (linear), 3 (quadratic; on triangles the collapsed 3 x 3), the 3-point
// edge-midpoint rule on linear triangles (points (1/6, 1/6), (2/3, 1/6),
// (1/6, 2/3), weight 1/6 each). With values v of face i (NV each):
//   TRACTION (NV = DIM):    f_(a,c) += v_c * integral N_a dA
//   PRESSURE (NV = 1):      f_(a,c) -= v * integral N_a n_c dA
//   FLUX (NV = 1, heat):    f_a += v * integral N_a dA (heat flowing in)
//   CONVECTION (NV = 2: h, T_env): f_a += h T_env integral N_a dA, and the
//     face matrix h integral N_a N_b dA, packed upper triangle, into
//     hf[k * nf + i] (entry-major).
enum FaceKind { TRACTION = 1, PRESSURE = 2, FLUX = 3, CONVECTION = 4 };

template <int FN, int DIM>
__device__ __forceinline__ int face_points() {
    return FN == 2 ? 2 : FN == 3 ? 3 : FN == 4 ? 4 : 9;
}

// At face point q: the shape values and the area vector n dA / (dxi deta)
// (2-D: the edge's right-hand normal times its length element), weight included.
template <int FN, int DIM>
__device__ __forceinline__ void face_point(const double (*xf)[3], int q, double* n, double* area) {
    const double gx = GL_X[1][1];  // the 2-point rule's abscissa
    double dn[FN][3], w;
    if (DIM == 2 && FN == 3) {  // edge3: the ends, then the midpoint
        const double s = GL_X[2][q];
        n[0] = 0.5 * s * (s - 1);
        n[1] = 0.5 * s * (s + 1);
        n[2] = 1 - s * s;
        dn[0][0] = s - 0.5;
        dn[1][0] = s + 0.5;
        dn[2][0] = -2 * s;
        w = GL_W[2][q];
    } else if (FN == 6 || FN == 8) {  // tri6 and quad8 faces: the 2-D quadratic shapes
        double xi[3] = {GL_X[2][q % 3], GL_X[2][q / 3], 0.0};
        w = GL_W[2][q % 3] * GL_W[2][q / 3];
        if (FN == 6) {  // the square collapsed onto the triangle
            const double u = 0.5 * (1 + xi[0]), v = 0.5 * (1 + xi[1]);
            xi[0] = u;
            xi[1] = v * (1 - u);
            w *= 0.25 * (1 - u);
        }
        quadratic_shapes<FN, 2>(xi, n, dn);
    } else if (FN == 2) {
        const double s = q == 0 ? -gx : gx;
        n[0] = 0.5 * (1 - s);
        n[1] = 0.5 * (1 + s);
        dn[0][0] = -0.5;
        dn[1][0] = 0.5;
        w = 1.0;
    } else if (FN == 3) {
        const double s = q == 1 ? 2.0 / 3.0 : 1.0 / 6.0, t = q == 2 ? 2.0 / 3.0 : 1.0 / 6.0;
        n[0] = 1 - s - t;
        n[1] = s;
        n[2] = t;
        dn[0][0] = dn[0][1] = -1.0;
        dn[1][0] = dn[2][1] = 1.0;
        dn[1][1] = dn[2][0] = 0.0;
        w = 1.0 / 6.0;
    } else {
        const double s = (q & 1) ? gx : -gx, t = (q & 2) ? gx : -gx;
        const double cs[4] = {-1, 1, 1, -1}, ct[4] = {-1, -1, 1, 1};
#pragma unroll
        for (int a = 0; a < FN; ++a) {
            n[a] = 0.25 * (1 + cs[a] * s) * (1 + ct[a] * t);
            dn[a][0] = 0.25 * cs[a] * (1 + ct[a] * t);
            dn[a][1] = 0.25 * ct[a] * (1 + cs[a] * s);
        }
        w = 1.0;
    }
    double t1[3] = {0, 0, 0}, t2[3] = {0, 0, 0};
#pragma unroll
    for (int a = 0; a < FN; ++a)
#pragma unroll
        for (int c = 0; c < DIM; ++c) {
            t1[c] += dn[a][0] * xf[a][c];
            if (DIM == 3) t2[c] += dn[a][1] * xf[a][c];
        }
    if (DIM == 2) {
        area[0] = w * t1[1];
        area[1] = -w * t1[0];
        area[2] = 0.0;
    } else {
        area[0] = w * (t1[1] * t2[2] - t1[2] * t2[1]);
        area[1] = w * (t1[2] * t2[0] - t1[0] * t2[2]);
        area[2] = w * (t1[0] * t2[1] - t1[1] * t2[0]);
    }
}

template <int FN, int DIM>
__device__ void face_load(i64 nf, const double* __restrict__ x, const int* __restrict__ faces, int kind,
                          const double* __restrict__ values, double* f, double* __restrict__ hf) {
    constexpr int NP = FN * (FN + 1) / 2;
    const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= nf) return;
    double xf[FN][3];
    element_nodes<FN, DIM>(x, faces, i, xf);
    const int dpn = (kind == TRACTION || kind == PRESSURE) ? DIM : 1;
    double fe[FN][DIM], h[NP];
#pragma unroll
    for (int a = 0; a < FN; ++a)
#pragma unroll
        for (int c = 0; c < DIM; ++c) fe[a][c] = 0.0;
#pragma unroll
    for (int k = 0; k < NP; ++k) h[k] = 0.0;
    for (int q = 0; q < face_points<FN, DIM>(); ++q) {
        double n[FN], area[3];
        face_point<FN, DIM>(xf, q, n, area);
        double da = 0.0;
#pragma unroll
        for (int c = 0; c < DIM; ++c) da += area[c] * area[c];
        da = sqrt(da);
#pragma unroll
        for (int a = 0; a < FN; ++a) {
            if (kind == TRACTION) {
#pragma unroll
                for (int c = 0; c < DIM; ++c) fe[a][c] += values[i * DIM + c] * n[a] * da;
            } else if (kind == PRESSURE) {
#pragma unroll
                for (int c = 0; c < DIM; ++c) fe[a][c] -= values[i] * n[a] * area[c];
            } else if (kind == FLUX) {
                fe[a][0] += values[i] * n[a] * da;
            } else {
                fe[a][0] += values[2 * i] * values[2 * i + 1] * n[a] * da;
            }
        }
        if (kind == CONVECTION) {
            int k = 0;
#pragma unroll
            for (int a = 0; a < FN; ++a)
#pragma unroll
                for (int b = a; b < FN; ++b, ++k) h[k] += values[2 * i] * n[a] * n[b] * da;
        }
    }
#pragma unroll
    for (int a = 0; a < FN; ++a)
        for (int c = 0; c < dpn; ++c) atomicAdd(&f[(i64)faces[i * FN + a] * dpn + c], fe[a][c]);
    if (kind == CONVECTION)
#pragma unroll
        for (int k = 0; k < NP; ++k) hf[(i64)k * nf + i] = h[k];
}

#define FACE_LOAD(NAME, FN, DIM)                                                                                   \
    extern "C" __global__ void __launch_bounds__(128) face_load_##NAME(i64 nf, const double* x, const int* faces, \
        int kind, const double* values, double* f, double* hf) {                                                   \
        if constexpr (WANTED(face_load_##NAME)) {                                                                   \
            face_load<FN, DIM>(nf, x, faces, kind, values, f, hf);                                                  \
        }                                                                                                           \
    }

// values[at[k * nf + i]] += s hf[k * nf + i]: face matrices into the global
// matrix's values (positions found on the host; -1: none, the lower twin of
// a diagonal entry). Faces sharing nodes meet in an entry: atomics.
extern "C" __global__ void __launch_bounds__(256) face_matrix_add(i64 total, const int* __restrict__ at, double s,
    const double* __restrict__ hf, double* values) {
    if constexpr (WANTED(face_matrix_add)) {
        for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (i64)gridDim.x * blockDim.x)
            if (at[i] >= 0) atomicAdd(&values[at[i]], s * hf[i]);
    }
}

// ---- Nonlinear explicit dynamics (FEStudio's Algorithm 1) ----

// f += s f_int(u), the total Lagrangian internal forces, one thread per
// element and no global matrix: at each Gauss point of the reference
// configuration, the deformation gradient F = I + du/dX, the Green-Lagrange
// strain E = (F^T F - I) / 2, St Venant-Kirchhoff's second Piola-Kirchhoff
// stress S = lambda tr(E) I + 2 mu E (props: E, nu; in 2-D plane strain),
// and f_(a,i) += (F S)_iJ dN_a/dX_J w det J0. A rigid rotation gives E = 0
// and no force, however large.
template <int NN, int DIM>
__device__ void tl_force(i64 ne, const double* __restrict__ x, const int* __restrict__ conn,
                         const int* __restrict__ material, const double* __restrict__ props, int order,
                         const double* __restrict__ u, double s, double* f) {
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    double xe[NN][3], ue[NN][DIM], fe[NN][DIM];
    element_nodes<NN, DIM>(x, conn, e, xe);
#pragma unroll
    for (int a = 0; a < NN; ++a)
#pragma unroll
        for (int c = 0; c < DIM; ++c) {
            ue[a][c] = u[(i64)conn[e * NN + a] * DIM + c];
            fe[a][c] = 0.0;
        }
    const int m = material[e];
    const double young = props[2 * m], nu = props[2 * m + 1];
    const double lambda = young * nu / ((1 + nu) * (1 - 2 * nu)), mu = young / (2 * (1 + nu));
    const int points = gauss_points<NN, DIM>(order);
    for (int gp = 0; gp < points; ++gp) {
        double g[NN][3], wdet;
        gauss_point<NN, DIM>(xe, order, gp, g, wdet, nullptr);  // the stepper checked the elements
        double F[DIM][DIM], S[DIM][DIM];
#pragma unroll
        for (int i = 0; i < DIM; ++i)
#pragma unroll
            for (int j = 0; j < DIM; ++j) {
                F[i][j] = i == j ? 1.0 : 0.0;
#pragma unroll
                for (int a = 0; a < NN; ++a) F[i][j] += ue[a][i] * g[a][j];
            }
        double trace = 0.0;
#pragma unroll
        for (int i = 0; i < DIM; ++i)
#pragma unroll
            for (int j = 0; j < DIM; ++j) {
                double c = 0.0;
#pragma unroll
                for (int k = 0; k < DIM; ++k) c += F[k][i] * F[k][j];
                S[i][j] = 0.5 * (c - (i == j ? 1.0 : 0.0));  // E for now
                if (i == j) trace += S[i][j];
            }
#pragma unroll
        for (int i = 0; i < DIM; ++i)
#pragma unroll
            for (int j = 0; j < DIM; ++j) S[i][j] = 2 * mu * S[i][j] + (i == j ? lambda * trace : 0.0);
#pragma unroll
        for (int i = 0; i < DIM; ++i)
#pragma unroll
            for (int j = 0; j < DIM; ++j) {
                double p = 0.0;  // P_ij = (F S)_ij
#pragma unroll
                for (int k = 0; k < DIM; ++k) p += F[i][k] * S[k][j];
                p *= wdet;
#pragma unroll
                for (int a = 0; a < NN; ++a) fe[a][i] += p * g[a][j];
            }
    }
#pragma unroll
    for (int a = 0; a < NN; ++a)
#pragma unroll
        for (int c = 0; c < DIM; ++c) atomicAdd(&f[(i64)conn[e * NN + a] * DIM + c], s * fe[a][c]);
}

#define TL_FORCE(NAME, NN, DIM)                                                                                  \
    extern "C" __global__ void __launch_bounds__(128) tl_force_##NAME(i64 ne, const double* x, const int* conn,  \
        const int* material, const double* props, int order, const double* u, double s, double* f) {            \
        if constexpr (WANTED(tl_force_##NAME)) {                                                                  \
            tl_force<NN, DIM>(ne, x, conn, material, props, order, u, s, f);                                      \
        }                                                                                                         \
    }

// Global entry i = sum over its contributions of scale[e] ke[from[k]], e the
// contribution's element (from = packed entry * ne + e): the matrix of
// per-element moduli from unit-modulus element matrices (thermal stress).
extern "C" __global__ void __launch_bounds__(256) assemble_scaled(i64 nnz, i64 ne, const int* __restrict__ ptr,
    const int* __restrict__ from, const double* __restrict__ ke, const double* __restrict__ scale,
    double* __restrict__ values) {
    if constexpr (WANTED(assemble_scaled)) {
        const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        if (i >= nnz) return;
        double s = 0.0;
        for (int k = ptr[i]; k < ptr[i + 1]; ++k) s += scale[from[k] % ne] * ke[from[k]];
        values[i] = s;
    }
}

// ---- Thermal stress with age and creep (the concrete-dam codes) ----
// Material law row p (src/fem/stress.rs `Law`): p[0] the modulus law (0:
// E0 (1 - exp(-a tau^b)), 1: E0 tau / (a + tau), 2: E0), p[1..4) E0, a, b,
// p[4] alpha, p[5..8) the autogenous volume strain G(tau) = g_inf (1 -
// exp(-c tau^d)), then per creep term j p[8 + 4j ..] = f, g, q, r of the
// Dirichlet series C(t, tau) = sum_j (f + g tau^-q) (1 - exp(-r (t - tau))).
// Over a step (t, t + dt), tau_m the age at its middle: the stress
// increment acts at tau_m, so with D1 the unit-modulus D,
//   eta  = sum_j (1 - e^(-r dt)) w_j            (the creep the past stresses add)
//   Ebar = E(tau_m) / (1 + E(tau_m) sum_j psi_j(tau_m) (1 - e^(-r dt / 2)))
//   e0   = alpha dT + dG on the normal strains  (dT at the Gauss point from N)
//   ds   = Ebar D1 (B du - eta - e0),  w_j <- e^(-r dt) w_j + psi_j e^(-r dt / 2) D1^-1 ds
// and the step's load is the integral of B^T Ebar D1 (eta + e0). State per
// Gauss point, entry-major (k * ne + e): the stress (6), w_j (6 per term).
__device__ double law_modulus(const double* p, double tau) {
    const int kind = (int)p[0];
    if (kind == 0) return p[1] * (1.0 - exp(-p[2] * pow(tau, p[3])));
    if (kind == 1) return p[1] * tau / (p[2] + tau);
    return p[1];
}

__device__ double law_autogenous(const double* p, double tau) {
    return tau > 0.0 ? p[5] * (1.0 - exp(-p[6] * pow(tau, p[7]))) : 0.0;
}

template <int NN>
__device__ void thermal_stress(i64 ne, const double* __restrict__ x, const int* __restrict__ conn,
                               const int* __restrict__ material, const double* __restrict__ laws, int stride,
                               int terms, const double* __restrict__ nu_of, const double* __restrict__ cast, double t,
                               double dt, int order, const double* __restrict__ t_new, const double* __restrict__ t_old,
                               double* __restrict__ stress, double* __restrict__ w, double* __restrict__ ebar_out,
                               double* f, const double* __restrict__ du) {
    constexpr int DIM = 3, NS = 6;
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    const int m = material[e];
    const double* p = laws + (i64)m * stride;
    const double tau = t + 0.5 * dt - cast[e];
    const double em = law_modulus(p, tau);
    double q = 0.0;
    for (int j = 0; j < terms; ++j) {
        const double* c = p + 8 + 4 * j;
        q += (c[0] + c[1] * pow(tau, -c[2])) * (1.0 - exp(-c[3] * 0.5 * dt));
    }
    const double ebar = em / (1.0 + em * q);
    if (!du) ebar_out[e] = ebar;
    const double dg = law_autogenous(p, t + dt - cast[e]) - law_autogenous(p, t - cast[e]);
    double d[6][6];
    material_matrix<DIM, DIM>(1.0, nu_of[m], 0, d);
    double xe[NN][3], dte[NN], fe[NN][3], ue[NN][3];
    element_nodes<NN, DIM>(x, conn, e, xe);
#pragma unroll
    for (int a = 0; a < NN; ++a) {
        const i64 v = conn[e * NN + a];
        dte[a] = t_new[v] - t_old[v];
#pragma unroll
        for (int c = 0; c < 3; ++c) {
            fe[a][c] = 0.0;
            ue[a][c] = du ? du[3 * v + c] : 0.0;
        }
    }
    const int points = gauss_points<NN, DIM>(order);
    for (int gp = 0; gp < points; ++gp) {
        double g[NN][3], n[NN], wdet;
        gauss_point<NN, DIM>(xe, order, gp, g, wdet, n);  // the set's integration checked the elements
        double dtemp = 0.0;
#pragma unroll
        for (int a = 0; a < NN; ++a) dtemp += n[a] * dte[a];
        double v[NS];  // eta + e0, then (with du) B du - eta - e0
#pragma unroll
        for (int s = 0; s < NS; ++s) {
            double eta = 0.0;
            for (int j = 0; j < terms; ++j)
                eta += (1.0 - exp(-p[8 + 4 * j + 3] * dt)) * w[((i64)(j * points + gp) * NS + s) * ne + e];
            v[s] = eta + (s < 3 ? p[4] * dtemp + dg : 0.0);
        }
        if (du) {
#pragma unroll
            for (int s = 0; s < NS; ++s) {
                double strain = 0.0;
#pragma unroll
                for (int a = 0; a < NN; ++a)
#pragma unroll
                    for (int c = 0; c < 3; ++c) strain += b_entry<DIM, DIM>(s, c, g[a]) * ue[a][c];
                v[s] = strain - v[s];
            }
        }
        double sv[NS];  // Ebar D1 v
#pragma unroll
        for (int s = 0; s < NS; ++s) {
            sv[s] = 0.0;
#pragma unroll
            for (int r = 0; r < NS; ++r) sv[s] += ebar * d[s][r] * v[r];
        }
        if (!du) {
#pragma unroll
            for (int a = 0; a < NN; ++a)
#pragma unroll
                for (int c = 0; c < 3; ++c) {
                    double b = 0.0;
#pragma unroll
                    for (int s = 0; s < NS; ++s) b += b_entry<DIM, DIM>(s, c, g[a]) * sv[s];
                    fe[a][c] += wdet * b;
                }
            continue;
        }
#pragma unroll
        for (int s = 0; s < NS; ++s) {
            stress[((i64)gp * NS + s) * ne + e] += sv[s];
            for (int j = 0; j < terms; ++j) {
                const double* c = p + 8 + 4 * j;
                double& wj = w[((i64)(j * points + gp) * NS + s) * ne + e];
                wj = exp(-c[3] * dt) * wj + (c[0] + c[1] * pow(tau, -c[2])) * exp(-c[3] * 0.5 * dt) * ebar * v[s];
            }
        }
    }
    if (!du)
#pragma unroll
        for (int a = 0; a < NN; ++a)
#pragma unroll
            for (int c = 0; c < 3; ++c) atomicAdd(&f[(i64)conn[e * NN + a] * 3 + c], fe[a][c]);
}

#define THERMAL_STRESS(NAME, NN)                                                                                   \
    extern "C" __global__ void __launch_bounds__(128) thermal_stress_##NAME(i64 ne, const double* x,               \
        const int* conn, const int* material, const double* laws, int stride, int terms, const double* nu,        \
        const double* cast, double t, double dt, int order, const double* t_new, const double* t_old,             \
        double* stress, double* w, double* ebar, double* f, const double* du) {                                   \
        if constexpr (WANTED(thermal_stress_##NAME)) {                                                              \
            thermal_stress<NN>(ne, x, conn, material, laws, stride, terms, nu, cast, t, dt, order, t_new, t_old,    \
                               stress, w, ebar, f, du);                                                             \
        }                                                                                                           \
    }

// sums[6 v + s] += the element mean of stress s, count[v] += 1, for each
// node v of each element: the nodal averages once divided.
extern "C" __global__ void __launch_bounds__(128) stress_to_nodes(i64 ne, int nn, int points,
    const int* __restrict__ conn, const double* __restrict__ stress, double* sums, double* count) {
    if constexpr (WANTED(stress_to_nodes)) {
        const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        if (e >= ne) return;
        double mean[6];
        for (int s = 0; s < 6; ++s) {
            mean[s] = 0.0;
            for (int gp = 0; gp < points; ++gp) mean[s] += stress[((i64)gp * 6 + s) * ne + e];
            mean[s] /= points;
        }
        for (int a = 0; a < nn; ++a) {
            const i64 v = conn[e * nn + a];
            for (int s = 0; s < 6; ++s) atomicAdd(&sums[6 * v + s], mean[s]);
            atomicAdd(&count[v], 1.0);
        }
    }
}

// The lumped mass of quadratic elements by HRZ (Hinton, Rock, Zienkiewicz):
// their row sums are not all positive (serendipity and quadratic-simplex
// corners take negative ones), so each element's diagonal M_aa, scaled so
// that it sums to the element's mass, is added at its dofs: out[dof] +=
// M_aa sum_ab M_ab / sum_a M_aa (one component's block; the others equal).
template <int NN, int DIM, int DPN>
__device__ void hrz_lump(i64 ne, const int* __restrict__ conn, const double* __restrict__ ce, double* out) {
    constexpr int ND = NN * DPN;
    const i64 e = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= ne) return;
    double total = 0.0, diag = 0.0;
    int k = 0;
    for (int p = 0; p < ND; ++p)
        for (int r = p; r < ND; ++r, ++k) {
            if (p % DPN != 0 || r % DPN != 0) continue;
            const double m = ce[(i64)k * ne + e];
            total += p == r ? m : 2 * m;
            if (p == r) diag += m;
        }
    k = 0;
    for (int p = 0; p < ND; ++p) {
        atomicAdd(&out[(i64)conn[e * NN + p / DPN] * DPN + p % DPN], ce[(i64)k * ne + e] * total / diag);
        k += ND - p;
    }
}

#define HRZ_LUMP(NAME, NN, DIM, DPN)                                                                             \
    extern "C" __global__ void __launch_bounds__(128) hrz_lump_##NAME(i64 ne, const int* conn, const double* ce, \
        double* out) {                                                                                           \
        if constexpr (WANTED(hrz_lump_##NAME)) {                                                                  \
            hrz_lump<NN, DIM, DPN>(ne, conn, ce, out);                                                            \
        }                                                                                                         \
    }

// ---- The kernels of each element type ----
// X(element, NN, DIM) for each type; every kind of kernel is made for heat
// (one dof per node) and elasticity (DIM). Without FEM_QUADRATIC the linear
// types with everything written for them; with it the quadratic types (a
// thread per element integrates only the small ones: tet10 and hex20
// elasticity, 465 and 1,830 packed entries, by the blocked kernels alone).
#define LINEAR_ELEMENTS(X) X(tri3, 3, 2) X(quad4, 4, 2) X(tet4, 4, 3) X(hex8, 8, 3)
#define BOTH_PHYSICS(KIND, E, NN, DIM) KIND(E##_heat, NN, DIM, 1) KIND(E##_elastic, NN, DIM, DIM)
#define EVERY_ELEMENT_KIND(E, NN, DIM)                                                                          \
    BOTH_PHYSICS(STIFFNESS_BLOCKED, E, NN, DIM)                                                                 \
    BOTH_PHYSICS(EBE, E, NN, DIM) BOTH_PHYSICS(MASS, E, NN, DIM) BOTH_PHYSICS(BODY_LOAD, E, NN, DIM)
#ifndef FEM_QUADRATIC
#define LINEAR_KINDS(E, NN, DIM)                                                                                \
    EVERY_ELEMENT_KIND(E, NN, DIM) BOTH_PHYSICS(STIFFNESS, E, NN, DIM) BOTH_PHYSICS(EBE_OTF, E, NN, DIM)        \
    TL_FORCE(E##_elastic, NN, DIM)
LINEAR_ELEMENTS(LINEAR_KINDS)
THERMAL_STRESS(tet4, 4)
THERMAL_STRESS(hex8, 8)
FACE_LOAD(edge, 2, 2)
FACE_LOAD(tri, 3, 3)
FACE_LOAD(quad, 4, 3)
#else
FACE_LOAD(edge3, 3, 2)
FACE_LOAD(tri6, 6, 3)
FACE_LOAD(quad8, 8, 3)
#define QUADRATIC_ELEMENTS(X) X(tri6, 6, 2) X(quad8, 8, 2) X(tet10, 10, 3) X(hex20, 20, 3)
QUADRATIC_ELEMENTS(EVERY_ELEMENT_KIND)
#define HRZ_ELASTIC(E, NN, DIM) HRZ_LUMP(E##_elastic, NN, DIM, DIM)
QUADRATIC_ELEMENTS(HRZ_ELASTIC)
STIFFNESS(tri6_heat, 6, 2, 1)
STIFFNESS(quad8_heat, 8, 2, 1)
STIFFNESS(tet10_heat, 10, 3, 1)
STIFFNESS(hex20_heat, 20, 3, 1)
STIFFNESS(tri6_elastic, 6, 2, 2)
STIFFNESS(quad8_elastic, 8, 2, 2)
#endif
