// D3Q19 lattice Boltzmann: fused collide-and-stream steps (BGK or TRT, Guo
// forcing; one pass over memory) in three schemes: in place (one buffer,
// the AA pattern; the default), push (collide, then write to the
// neighbours; two buffers) and pull (gather from the neighbours, then
// collide; two buffers), uniform equilibrium initialisation and the
// macroscopic fields. Populations are stored direction-major (SoA):
// f[i*n + site], site = x + nx*(y + ny*z), so each direction's accesses are
// coalesced. Arithmetic is in R (float for f16 and f32 storage, double for
// f64). src/lbm/cpu.rs is the same algorithm on the host.
//
// Velocities in the Palabos order: direction i+9 is opposite i (i = 1..9).
// Flags: 0 fluid, 1 resting wall, 2 moving wall, 3 velocity boundary, 4
// pressure boundary; sites beyond a non-periodic face are resting walls.
// Walls use halfway bounce-back (Ladd's correction for moving walls); a
// velocity boundary is a wall moving with its own prescribed velocity, a
// pressure boundary anti-bounces-back towards the equilibrium of its own
// prescribed density (Krüger et al., The Lattice Boltzmann Method, 2017,
// sections 5.3.3 and 5.3.4). Their prescribed (rho, ux, uy, uz) sit in a
// table, 4 doubles a boundary site, the sites listed in increasing order.
// Non-fluid sites keep their populations unchanged.

typedef long long i64;
typedef unsigned short half_bits;

// Site flags as the caller sets them, and BULK, which the device adds
// (lbm_mark_bulk) to fluid sites whose neighbours are all fluid: those
// stream without looking at their neighbours' flags.
#define FLUID 0
#define WALL 1
#define MOVING_WALL 2
#define VELOCITY_BC 3
#define PRESSURE_BC 4
#define BULK 0x80
#define KIND(code) ((code) & 0x7f)

// Storage <-> arithmetic. f16 storage (half_bits) keeps f_i - w_i in IEEE
// half precision, rounded to nearest even; f32 and f64 store f_i as is.
__device__ __forceinline__ float load_pop(float v, float) { return v; }
__device__ __forceinline__ double load_pop(double v, double) { return v; }
__device__ __forceinline__ float load_pop(half_bits h, float w) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f + w;
}
__device__ __forceinline__ void store_pop(float* p, float v, float) { *p = v; }
__device__ __forceinline__ void store_pop(double* p, double v, double) { *p = v; }
__device__ __forceinline__ void store_pop(half_bits* p, float v, float w) {
    half_bits h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v - w));
    *p = h;
}

#define D3Q19_TABLES(R)                                                                                 \
    const int cx[19] = {0, -1, 0, 0, -1, -1, -1, -1, 0, 0, 1, 0, 0, 1, 1, 1, 1, 0, 0};               \
    const int cy[19] = {0, 0, -1, 0, -1, 1, 0, 0, -1, -1, 0, 1, 0, 1, -1, 0, 0, 1, 1};               \
    const int cz[19] = {0, 0, 0, -1, 0, 0, -1, 1, -1, 1, 0, 0, 1, 0, 0, 1, -1, 1, -1};               \
    const R w0 = R(1) / R(3), w1 = R(1) / R(18), w2 = R(1) / R(36);                                     \
    const R w[19] = {w0, w1, w1, w1, w2, w2, w2, w2, w2, w2, w1, w1, w1, w2, w2, w2, w2, w2, w2};

// Neighbour coordinate along one axis: wrapped where periodic, -1 beyond a wall face.
__device__ __forceinline__ int neighbour(int c, int d, int n, bool periodic) {
    int v = c + d;
    if (v < 0) v = periodic ? v + n : -1;
    else if (v >= n) v = periodic ? v - n : -1;
    return v;
}

// sum + c v and c . v for lattice velocity components c in {-1, 0, 1}, known
// at compile time once the direction loops unroll: only the nonzero terms,
// since 0 * v does not fold away in IEEE arithmetic (an FFMA each). The same
// roundings as the full products: +-1 * v is exact and adding +-0 changes
// no finite sum.
template <typename R>
__device__ __forceinline__ R c_add(R sum, int c, R v) {
    return c > 0 ? sum + v : c < 0 ? sum - v : sum;
}
template <typename R>
__device__ __forceinline__ R c_dot(int cx, int cy, int cz, R vx, R vy, R vz) {
    R sum = cx > 0 ? vx : cx < 0 ? -vx : R(0);
    sum = cx ? c_add(sum, cy, vy) : cy > 0 ? vy : cy < 0 ? -vy : sum;
    return cx || cy ? c_add(sum, cz, vz) : cz > 0 ? vz : cz < 0 ? -vz : sum;
}

// Post-collision populations of one site from its populations f; returns
// the density. BGK relaxes with omega; TRT relaxes the even part of f - feq
// with omega and the odd part with omega_minus (the Guo source term split the
// same way). Written over the nine pairs (i, opp(i)): c_opp(i) = -c_i, so a
// pair shares its equilibrium's even part and negates its odd part, and the
// force's terms exist only where FORCE (x * 0 does not fold away in IEEE
// arithmetic). Fewer instructions than direction by direction: the f16
// in-place step, bound by them, ran 16% faster on the H100 (BENCHMARKS.md).
template <bool TRT, typename R, bool FORCE = true>
__device__ __forceinline__ R collide(const R* f, R* post, R omega, R omega_minus, R fx, R fy, R fz, R* u = nullptr) {
    D3Q19_TABLES(R)
    R rho = 0, jx = 0, jy = 0, jz = 0;
#pragma unroll
    for (int i = 0; i < 19; ++i) {
        rho += f[i];
        jx = c_add(jx, cx[i], f[i]);
        jy = c_add(jy, cy[i], f[i]);
        jz = c_add(jz, cz[i], f[i]);
    }
    // Guo forcing: the velocity carries half the force; the source term the rest.
    if (FORCE) {
        jx += fx / 2;
        jy += fy / 2;
        jz += fz / 2;
    }
    const R inverse = R(1) / rho;
    const R ux = jx * inverse, uy = jy * inverse, uz = jz * inverse;
    if (u) {
        u[0] = ux;
        u[1] = uy;
        u[2] = uz;
    }
    const R usq = ux * ux + uy * uy + uz * uz;
    const R rest = rho * (1 - R(1.5) * usq);  // feq_i / w_i without its c_i.u terms
    // source_i = w_i (3 c_i.F - 3 u.F + 9 (c_i.u)(c_i.F)): even part w_i (9 cu cf - 3 uf), odd part 3 w_i cf,
    // scaled by 1 - omega/2 (BGK both; TRT: 1 - omega_minus/2 for the odd part)
    const R uf = FORCE ? ux * fx + uy * fy + uz * fz : R(0);
    const R even_scale = 1 - omega / 2, odd_scale = TRT ? 1 - omega_minus / 2 : even_scale;
    post[0] = f[0] - omega * (f[0] - w[0] * rest);
    if (FORCE) post[0] -= even_scale * w[0] * 3 * uf;
#pragma unroll
    for (int i = 1; i <= 9; ++i) {
        const int o = i + 9;
        const R cu = c_dot(cx[i], cy[i], cz[i], ux, uy, uz);
        const R even_eq = w[i] * (rest + R(4.5) * rho * cu * cu), odd_eq = 3 * w[i] * rho * cu;
        R even_source = 0, odd_source = 0;
        if (FORCE) {
            const R cf = c_dot(cx[i], cy[i], cz[i], fx, fy, fz);
            even_source = even_scale * w[i] * (9 * cu * cf - 3 * uf);
            odd_source = odd_scale * 3 * w[i] * cf;
        }
        if (TRT) {
            const R even = -omega * ((f[i] + f[o]) / 2 - even_eq) + even_source;
            const R odd = -omega_minus * ((f[i] - f[o]) / 2 - odd_eq) + odd_source;
            post[i] = f[i] + even + odd;
            post[o] = f[o] + even - odd;
        } else {
            post[i] = f[i] - omega * (f[i] - (even_eq + odd_eq)) + (even_source + odd_source);
            post[o] = f[o] - omega * (f[o] - (even_eq - odd_eq)) + (even_source - odd_source);
        }
    }
    return rho;
}

// Site coordinates. Sites fit in 32 bits (Lattice::new refuses 2^31 or
// more), so they come from 32-bit divisions, several times cheaper than 64-bit.
__device__ __forceinline__ void coordinates(unsigned s, int nx, int ny, int& x, int& y, int& z) {
    const unsigned xy = s / (unsigned)nx;
    x = (int)(s - xy * (unsigned)nx);
    y = (int)(xy % (unsigned)ny);
    z = (int)(xy / (unsigned)ny);
}

// The offsets of site (x, y, z)'s neighbours along each axis, wrapped on
// every axis: xs = {x+1, x, x-1}, ys and zs the same times nx and nx*ny, so
// the site s - c_i is xs[c_x + 1] + ys[c_y + 1] + zs[c_z + 1]: three selects
// per axis, then two additions per direction. Where a face is not periodic
// the wrapped site is only a valid address: the sites next to it are not
// BULK, and their callers fix up what it gave.
__device__ __forceinline__ void wrapped_offsets(int x, int y, int z, int nx, int ny, int nz, unsigned* xs, unsigned* ys,
                                                unsigned* zs) {
    const unsigned plane = (unsigned)nx * (unsigned)ny;
    xs[0] = x == nx - 1 ? 0 : x + 1, xs[1] = x, xs[2] = x == 0 ? nx - 1 : x - 1;
    ys[0] = (y == ny - 1 ? 0 : y + 1) * (unsigned)nx, ys[1] = y * (unsigned)nx, ys[2] = (y == 0 ? ny - 1 : y - 1) * (unsigned)nx;
    zs[0] = (z == nz - 1 ? 0 : z + 1) * plane, zs[1] = z * plane, zs[2] = (z == 0 ? nz - 1 : z - 1) * plane;
}

// The site (x, y, z) + sign * c_i, or -1 beyond a non-periodic face.
template <typename R>
__device__ __forceinline__ i64 site_towards(int i, int sign, int x, int y, int z, int nx, int ny, int nz, int periodic) {
    D3Q19_TABLES(R)
    const int xd = neighbour(x, sign * cx[i], nx, periodic & 1), yd = neighbour(y, sign * cy[i], ny, periodic & 2),
              zd = neighbour(z, sign * cz[i], nz, periodic & 4);
    if (xd < 0 || yd < 0 || zd < 0) return -1;
    return (i64)((unsigned)xd + (unsigned)nx * ((unsigned)yd + (unsigned)ny * (unsigned)zd));
}

// The boundary table's row of site s (a velocity or pressure site): a binary
// search of the sorted site list (only sites next to an open boundary look).
__device__ __forceinline__ const double* open_values(const unsigned* __restrict__ sites, const double* __restrict__ values,
                                                    int count, unsigned s) {
    int lo = 0, hi = count - 1;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (sites[mid] < s) lo = mid + 1;
        else hi = mid;
    }
    return values + 4 * lo;
}

// What direction i brings into a fluid site from the open boundary site b
// behind it, given the site's own post-collision population `back` sent
// towards b (direction opposite i), its density rho and velocity u:
// velocity boundary, back + 6 w_i rho c_i.u_b; pressure boundary,
// -back + 2 w_i rho_b (1 + 4.5 (c_i.u)^2 - 1.5 u.u).
template <typename R>
__device__ __forceinline__ R open_link(unsigned char kind, const double* b, R back, R w, int cx, int cy, int cz, R rho,
                                       const R* u) {
    if (kind == VELOCITY_BC) return back + 6 * w * rho * (cx * R(b[1]) + cy * R(b[2]) + cz * R(b[3]));
    const R cu = cx * u[0] + cy * u[1] + cz * u[2];
    return -back + 2 * w * R(b[0]) * (1 + R(4.5) * cu * cu - R(1.5) * (u[0] * u[0] + u[1] * u[1] + u[2] * u[2]));
}

// v, hidden from the compiler until `after` is known, so that addresses
// computed from it are computed afresh (see collide_site).
__device__ __forceinline__ unsigned opaque(unsigned v, float after) {
    asm volatile("" : "+r"(v) : "f"(after));
    return v;
}
__device__ __forceinline__ unsigned opaque(unsigned v, double after) {
    asm volatile("" : "+r"(v) : "d"(after));
    return v;
}

// Collides site s (populations f) and sends each post-collision population
// along its link: to slot i of the neighbour d = s + c_i where d is fluid
// (push), or, LOCAL, to slot opp(i) of s itself (the in-place scheme's even
// step, whose next step gathers it from there). A link to a non-fluid site
// bounces back at once, with the collision's density and velocity, into
// slot opp(i) of s, where the next step reads it in every scheme.
template <bool TRT, typename T, typename R, bool LOCAL = false, bool FORCE = true, typename Index = i64>
__device__ __forceinline__ void collide_site(const R* f, unsigned s, bool bulk, T* __restrict__ fout, const unsigned char* __restrict__ flags,
                                             Index n, int nx, int ny, int nz, int periodic, R omega, R omega_minus, R fx, R fy,
                                             R fz, R uwx, R uwy, R uwz, const unsigned* __restrict__ open_sites,
                                             const double* __restrict__ open_table, int open_count) {
    D3Q19_TABLES(R)
    R post[19], u[3];
    const R rho = collide<TRT, R, FORCE>(f, post, omega, omega_minus, fx, fy, fz, u);
    if (LOCAL && bulk) {
        // f16 stores to addresses computed afresh: ptxas would otherwise keep
        // the loads' 19 64-bit addresses through the collision; at 64
        // registers instead of 80 the f16 even step ran 4% faster on the H100
        // (f32 0.5% slower; BENCHMARKS.md)
        const unsigned at = sizeof(T) == 2 ? opaque(s, rho) : s;
#pragma unroll
        for (int i = 0; i < 19; ++i) store_pop(&fout[(i == 0 ? 0 : (i <= 9 ? i + 9 : i - 9)) * n + at], post[i], w[i]);
        return;
    }
    int x, y, z;
    coordinates(s, nx, ny, x, y, z);
#pragma unroll
    for (int i = 0; i < 19; ++i) {
        const int o = i == 0 ? 0 : (i <= 9 ? i + 9 : i - 9);
        const i64 d = site_towards<R>(i, 1, x, y, z, nx, ny, nz, periodic);
        const unsigned char dflag = bulk ? FLUID : d >= 0 ? KIND(flags[d]) : WALL;
        if (dflag == FLUID) {
            store_pop(LOCAL ? &fout[o * n + s] : &fout[i * n + (Index)d], post[i], w[i]);
        } else if (dflag >= VELOCITY_BC) {
            const double* b = open_values(open_sites, open_table, open_count, (unsigned)d);
            store_pop(&fout[o * n + s], open_link<R>(dflag, b, post[i], w[o], cx[o], cy[o], cz[o], rho, u), w[o]);
        } else {
            const R wall = dflag == MOVING_WALL ? 6 * w[i] * rho * (cx[i] * uwx + cy[i] * uwy + cz[i] * uwz) : R(0);
            store_pop(&fout[o * n + s], post[i] - wall, w[o]);
        }
    }
}

// One site per thread. (Measured on the H100, BENCHMARKS.md: two sites per
// thread, with all loads first or as adjacent pairs in vector loads, and
// evict-first loads/stores, were slower.)
template <bool TRT, typename T, typename R>
__device__ void collide_push(const T* __restrict__ fin, T* __restrict__ fout, const unsigned char* __restrict__ flags,
                             int nx, int ny, int nz, int periodic, R omega, R omega_minus, R fx, R fy, R fz, R uwx, R uwy,
                             R uwz, i64 first, i64 count, const unsigned* __restrict__ open_sites,
                             const double* __restrict__ open_table, int open_count) {
    D3Q19_TABLES(R)
    const i64 n = (i64)nx * ny * nz;
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const unsigned s = (unsigned)(first + t);
    T stored[19];
#pragma unroll
    for (int i = 0; i < 19; ++i) stored[i] = fin[i * n + s];
    const unsigned char code = flags[s];
    if (KIND(code) == FLUID) {
        R f[19];
#pragma unroll
        for (int i = 0; i < 19; ++i) f[i] = load_pop(stored[i], w[i]);
        collide_site<TRT, T, R>(f, s, code & BULK, fout, flags, n, nx, ny, nz, periodic, omega, omega_minus, fx, fy, fz, uwx, uwy, uwz,
                                open_sites, open_table, open_count);
    } else {  // walls keep their populations, bit for bit
#pragma unroll
        for (int i = 0; i < 19; ++i) fout[i * n + s] = stored[i];
    }
}

// The pull scheme keeps post-collision populations g between steps: site s
// gathers f_i = g_i(s - c_i) from its neighbours (misaligned loads, which
// the caches absorb) and writes its own post-collision populations in place
// (aligned stores). Where s - c_i is a wall, f_i is s's own g_o bounced back,
// with Ladd's term at moving walls from the density of s's last collision,
// the sum of its g (collisions conserve mass).
enum PullMode { PULL_COLLIDE = 0, PULL_ONLY = 1, COLLIDE_ONLY = 2 };

// Every load is issued before the first is used: the site's flag and,
// speculatively, the populations a site whose sources are all fluid gathers
// (its own for COLLIDE_ONLY); nothing waits on a flag before its populations
// are on the way. Sites next to walls then fix up the directions whose source
// is not fluid, and wall sites copy their own populations.
template <int MODE, bool TRT, typename T, typename R, bool FORCE = true>
__device__ void stream_pull(const T* __restrict__ fin, T* __restrict__ fout, const unsigned char* __restrict__ flags,
                            int nx, int ny, int nz, int periodic, R omega, R omega_minus, R fx, R fy, R fz, R uwx, R uwy,
                            R uwz, i64 first, i64 count, const unsigned* __restrict__ open_sites,
                            const double* __restrict__ open_table, int open_count) {
    D3Q19_TABLES(R)
    const i64 n = (i64)nx * ny * nz;
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const unsigned s = (unsigned)(first + t);
    const unsigned char code = flags[s];
    int x, y, z;
    coordinates(s, nx, ny, x, y, z);
    // the sources' offsets (the fix-up below replaces what non-BULK sites gathered)
    unsigned xs[3], ys[3], zs[3];
    wrapped_offsets(x, y, z, nx, ny, nz, xs, ys, zs);
    T raw[19];
#pragma unroll
    for (int i = 0; i < 19; ++i) {
        // source = site - c_i: index 0 where c = -1, 1 where 0, 2 where +1
        const unsigned from = MODE == COLLIDE_ONLY ? s : xs[cx[i] + 1] + ys[cy[i] + 1] + zs[cz[i] + 1];
        raw[i] = fin[i * n + from];
    }
    if (KIND(code) != FLUID) {  // walls keep their populations, bit for bit
#pragma unroll
        for (int i = 0; i < 19; ++i) fout[i * n + s] = fin[i * n + s];
        return;
    }
    unsigned moving = 0, open = 0;
    if (MODE != COLLIDE_ONLY && !(code & BULK)) {
#pragma unroll
        for (int i = 0; i < 19; ++i) {
            const int o = i == 0 ? 0 : (i <= 9 ? i + 9 : i - 9);
            const i64 from = site_towards<R>(i, -1, x, y, z, nx, ny, nz, periodic);
            const unsigned char source = from >= 0 ? KIND(flags[from]) : WALL;
            if (source != FLUID) raw[i] = fin[o * n + s];
            if (source == MOVING_WALL) moving |= 1u << i;
            if (source >= VELOCITY_BC) open |= 1u << i;
        }
    }
    R f[19];  // (a bounced-back g_o was stored with w_o, which is w_i)
#pragma unroll
    for (int i = 0; i < 19; ++i) f[i] = load_pop(raw[i], w[i]);
    if (moving | open) {  // rare: sites next to a moving wall or an open boundary
        // the density and velocity of this site's last collision, from its
        // post-collision populations (collisions keep rho and add F to j)
        R rho = 0, u[3] = {0, 0, 0};
#pragma unroll
        for (int j = 0; j < 19; ++j) {
            const R g = load_pop(fin[j * n + s], w[j]);
            rho += g;
            u[0] += cx[j] * g;
            u[1] += cy[j] * g;
            u[2] += cz[j] * g;
        }
        u[0] = (u[0] - fx / 2) / rho;
        u[1] = (u[1] - fy / 2) / rho;
        u[2] = (u[2] - fz / 2) / rho;
#pragma unroll
        for (int i = 0; i < 19; ++i) {
            if (moving & (1u << i)) f[i] += 6 * w[i] * rho * (cx[i] * uwx + cy[i] * uwy + cz[i] * uwz);
            if (open & (1u << i)) {
                const unsigned from = (unsigned)site_towards<R>(i, -1, x, y, z, nx, ny, nz, periodic);
                const double* b = open_values(open_sites, open_table, open_count, from);
                f[i] = open_link<R>(KIND(flags[from]), b, f[i], w[i], cx[i], cy[i], cz[i], rho, u);
            }
        }
    }
    if (MODE == PULL_ONLY) {
#pragma unroll
        for (int i = 0; i < 19; ++i) store_pop(&fout[i * n + s], f[i], w[i]);
        return;
    }
    R post[19];
    collide<TRT, R, FORCE>(f, post, omega, omega_minus, fx, fy, fz);
#pragma unroll
    for (int i = 0; i < 19; ++i) store_pop(&fout[i * n + s], post[i], w[i]);
}

// In-place streaming, one buffer (the AA pattern: Bailey et al., ICPP 2009).
// Two steps alternate. The even step collides each fluid site from its own
// slots and stores post_i in its own slot opp(i). The odd step gathers f_i
// from slot opp(i) of site - c_i, collides, and stores post_i in slot i of
// site + c_i. Each step reads and writes the same set of locations, each
// read and written by one thread, so sites need no ordering. Links to a
// non-fluid site bounce back at collision time (collide_site), into slot
// opp(i) of the site itself, which both steps read for f_opp(i) there; a
// boundary site's own slots are never touched. After an even step the
// buffer holds post-collision populations whose streaming is pending; after
// an odd step, the populations after streaming, as the caller's layout.
enum InPlacePass { IN_PLACE_EVEN = 0, IN_PLACE_ODD = 1 };

// One site s (flag code) of a step. Index: i64, or unsigned where 19 n fits it.
template <int PASS, bool TRT, typename T, typename R, bool FORCE = true, typename Index = i64>
__device__ __forceinline__ void in_place_site(T* __restrict__ f, unsigned s, unsigned char code,
                                              const unsigned char* __restrict__ flags, int nx, int ny, int nz,
                                              int periodic, R omega, R omega_minus, R fx, R fy, R fz, R uwx, R uwy,
                                              R uwz, const unsigned* __restrict__ open_sites,
                                              const double* __restrict__ open_table, int open_count) {
    D3Q19_TABLES(R)
    const Index n = (Index)nx * ny * nz;
    T raw[19];
    unsigned xs[3], ys[3], zs[3];  // (odd step) wrapped_offsets
    if (PASS == IN_PLACE_EVEN) {
#pragma unroll
        for (int i = 0; i < 19; ++i) raw[i] = f[i * n + s];
    } else {
        // As the pull step: every load issued before the flag is used, the
        // fix-up below for sites whose sources are not all fluid. The odd
        // step reads f_opp(i) where it writes post_i: slot i of s + c_i.
        int x, y, z;
        coordinates(s, nx, ny, x, y, z);
        wrapped_offsets(x, y, z, nx, ny, nz, xs, ys, zs);
#pragma unroll
        for (int i = 0; i < 19; ++i) {
            const int o = i == 0 ? 0 : (i <= 9 ? i + 9 : i - 9);
            raw[o] = f[i * n + xs[1 - cx[i]] + ys[1 - cy[i]] + zs[1 - cz[i]]];
        }
        if (KIND(code) == FLUID && !(code & BULK)) {
#pragma unroll
            for (int i = 0; i < 19; ++i) {
                const i64 from = site_towards<R>(i, -1, x, y, z, nx, ny, nz, periodic);
                if (from < 0 || KIND(flags[from]) != FLUID) raw[i] = f[i * n + s];  // bounced back there
            }
        }
    }
    if (KIND(code) != FLUID) return;
    R g[19];  // (slot opp(i) was stored with w_opp(i), which is w_i)
#pragma unroll
    for (int i = 0; i < 19; ++i) g[i] = load_pop(raw[i], w[i]);
    // f16 (bound by instructions) stores a bulk site's populations from the
    // addresses at hand; f32 and f64 (bound by registers) recompute them
    // after the collision, in collide_site: each measured faster so on the
    // H100 (BENCHMARKS.md).
    if (PASS == IN_PLACE_ODD && sizeof(T) == 2 && (code & BULK)) {
        R post[19];
        collide<TRT, R, FORCE>(g, post, omega, omega_minus, fx, fy, fz);
#pragma unroll
        for (int i = 0; i < 19; ++i) store_pop(&f[i * n + xs[1 - cx[i]] + ys[1 - cy[i]] + zs[1 - cz[i]]], post[i], w[i]);
        return;
    }
    collide_site<TRT, T, R, PASS == IN_PLACE_EVEN, FORCE, Index>(g, s, code & BULK, f, flags, n, nx, ny, nz, periodic, omega,
                                                           omega_minus, fx, fy, fz, uwx, uwy, uwz, open_sites, open_table,
                                                           open_count);
}

// One site a thread.
template <int PASS, bool TRT, typename T, typename R, bool FORCE = true, typename Index = i64>
__device__ void stream_in_place(T* __restrict__ f, const unsigned char* __restrict__ flags, int nx, int ny, int nz,
                                int periodic, R omega, R omega_minus, R fx, R fy, R fz, R uwx, R uwy, R uwz, i64 first,
                                i64 count, const unsigned* __restrict__ open_sites, const double* __restrict__ open_table,
                                int open_count) {
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const unsigned s = (unsigned)(first + t);
    in_place_site<PASS, TRT, T, R, FORCE, Index>(f, s, flags[s], flags, nx, ny, nz, periodic, omega, omega_minus, fx, fy,
                                                 fz, uwx, uwy, uwz, open_sites, open_table, open_count);
}

// f32 -> f16 storage bits (f - w), as store_pop.
__device__ __forceinline__ unsigned half_of(float v, float w) {
    half_bits h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v - w));
    return h;
}

// Collides a pair of sites from words (each direction's f16 populations,
// the first site's in the lower half) and leaves in each word the pair's
// post-collision populations; returns the second site's density.
template <bool TRT, bool FORCE>
__device__ __forceinline__ float collide_pair(unsigned* words, float omega, float omega_minus, float fx, float fy,
                                              float fz) {
    D3Q19_TABLES(float)
    float g[19], post[19];
#pragma unroll
    for (int i = 0; i < 19; ++i) g[i] = load_pop((half_bits)(words[i] & 0xffff), w[i]);
    collide<TRT, float, FORCE>(g, post, omega, omega_minus, fx, fy, fz);
#pragma unroll
    for (int i = 0; i < 19; ++i) words[i] = (words[i] & 0xffff0000u) | half_of(post[i], w[i]);
#pragma unroll
    for (int i = 0; i < 19; ++i) g[i] = load_pop((half_bits)(words[i] >> 16), w[i]);
    const float rho = collide<TRT, float, FORCE>(g, post, omega, omega_minus, fx, fy, fz);
#pragma unroll
    for (int i = 0; i < 19; ++i) words[i] = (words[i] & 0xffffu) | half_of(post[i], w[i]) << 16;
    return rho;
}

// A pair's sites (or the range's last site alone) through the one-site
// step: pairs that are not both bulk.
template <int PASS, bool TRT, bool FORCE>
__device__ __forceinline__ void sites_one_by_one(half_bits* __restrict__ f, unsigned s, int sites,
                                                 const unsigned char* __restrict__ flags, int nx, int ny, int nz,
                                                 int periodic, float omega, float omega_minus, float fx, float fy,
                                                 float fz, float uwx, float uwy, float uwz,
                                                 const unsigned* __restrict__ open_sites,
                                                 const double* __restrict__ open_table, int open_count) {
    for (int j = 0; j < sites; ++j)
        in_place_site<PASS, TRT, half_bits, float, FORCE>(f, s + j, flags[s + j], flags, nx, ny, nz, periodic, omega,
                                                          omega_minus, fx, fy, fz, uwx, uwy, uwz, open_sites,
                                                          open_table, open_count);
}

// The f16 in-place steps, two adjacent sites a thread (f16 is bound by
// instructions, and a pair's populations of one direction are one 32-bit
// word: 24% fewer instructions in the even step). A pair of bulk sites at an
// even site index, nx even, takes the word path; other pairs take the
// one-site path for each site (the caller launches these kernels where nx
// is even). On the H100 at 256^3 they ran the even step 7% and the odd step
// 14% faster than one site a thread (BENCHMARKS.md).
template <bool TRT, bool FORCE = true, typename Index = i64>
__device__ void even_in_place_pairs(half_bits* __restrict__ f, const unsigned char* __restrict__ flags, int nx, int ny,
                                    int nz, int periodic, float omega, float omega_minus, float fx, float fy, float fz,
                                    float uwx, float uwy, float uwz, i64 first, i64 count,
                                    const unsigned* __restrict__ open_sites, const double* __restrict__ open_table,
                                    int open_count) {
    const Index n = (Index)nx * ny * nz;  // Index: 19 n must fit it
    const i64 k = 2 * ((i64)blockIdx.x * blockDim.x + threadIdx.x);
    if (k >= count) return;
    const unsigned s = (unsigned)(first + k);
    // a word: s and every direction's start n even
    const unsigned codes = k + 1 < count && !(s & 1) && !(n & 1) ? *reinterpret_cast<const unsigned short*>(flags + s) : 0;
    if ((codes & (BULK | BULK << 8)) != (BULK | BULK << 8)) {
        sites_one_by_one<IN_PLACE_EVEN, TRT, FORCE>(f, s, k + 1 < count ? 2 : 1, flags, nx, ny, nz, periodic, omega,
                                                    omega_minus, fx, fy, fz, uwx, uwy, uwz, open_sites, open_table,
                                                    open_count);
        return;
    }
    unsigned words[19];
#pragma unroll
    for (int i = 0; i < 19; ++i) words[i] = *reinterpret_cast<const unsigned*>(f + i * n + s);
    const float rho = collide_pair<TRT, FORCE>(words, omega, omega_minus, fx, fy, fz);
    const unsigned at = opaque(s, rho);  // addresses afresh, as the one-site even step
#pragma unroll
    for (int i = 0; i < 19; ++i) {
        const int o = i == 0 ? 0 : (i <= 9 ? i + 9 : i - 9);
        *reinterpret_cast<unsigned*>(f + o * n + at) = words[i];
    }
}

// The odd step stores post_i of the pair (s, s + 1) in slot i of
// (s, s + 1) + c_i. Along y and z that is one word. Along x it straddles two
// words; stored as such (partial sectors) it kept the one-site f16 odd step
// at 93-96% of the L2's throughput. So each pair hands its x-shifted pairs
// through shared memory to its neighbour lanes, and each lane stores the
// aligned word at its own x. Where the neighbour x lies outside the block,
// in the next row or in a pair that is not bulk, the half goes directly.
// Every location is still read and written by the thread of its site.
template <bool TRT, bool FORCE = true, typename Index = i64>
__device__ void odd_in_place_pairs(half_bits* __restrict__ f, const unsigned char* __restrict__ flags, int nx, int ny,
                                   int nz, int periodic, float omega, float omega_minus, float fx, float fy, float fz,
                                   float uwx, float uwy, float uwz, i64 first, i64 count,
                                   const unsigned* __restrict__ open_sites, const double* __restrict__ open_table,
                                   int open_count) {
    D3Q19_TABLES(float)
    __shared__ unsigned sent[10][128];  // the 10 directions with c_x != 0, a word a lane (<= 128 lanes)
    __shared__ bool paired[128];
    const Index n = (Index)nx * ny * nz;  // Index: 19 n must fit it
    const int lane = threadIdx.x, width = blockDim.x;
    const i64 k = 2 * ((i64)blockIdx.x * width + lane);
    const unsigned s = (unsigned)(first + (k < count ? k : 0));
    // a word, and the pair on one row: s and nx even
    const unsigned codes = k + 1 < count && !(s & 1) && !(nx & 1) ? *reinterpret_cast<const unsigned short*>(flags + s) : 0;
    const bool fast = (codes & (BULK | BULK << 8)) == (BULK | BULK << 8);
    paired[lane] = fast;
    int x, y, z;
    unsigned xs[3], ys[3], zs[3];
    if (!fast) {
        if (k < count)
            sites_one_by_one<IN_PLACE_ODD, TRT, FORCE>(f, s, k + 1 < count ? 2 : 1, flags, nx, ny, nz, periodic, omega,
                                                      omega_minus, fx, fy, fz, uwx, uwy, uwz, open_sites, open_table,
                                                      open_count);
    } else {
        coordinates(s, nx, ny, x, y, z);
        wrapped_offsets(x, y, z, nx, ny, nz, xs, ys, zs);
        const unsigned beyond = x + 2 == nx ? 0 : x + 2;  // the site after the pair's second, wrapped
        unsigned words[19];  // words[opp(i)]: slot i of (s, s + 1) + c_i
#pragma unroll
        for (int i = 0; i < 19; ++i) {
            const int o = i == 0 ? 0 : (i <= 9 ? i + 9 : i - 9);
            const unsigned row = ys[1 - cy[i]] + zs[1 - cz[i]];
            if (cx[i] == 0) words[o] = *reinterpret_cast<const unsigned*>(f + i * n + xs[1] + row);
            else words[o] = f[i * n + (cx[i] > 0 ? xs[0] : xs[2]) + row] | (unsigned)f[i * n + (cx[i] > 0 ? beyond : xs[1]) + row] << 16;
        }
        const float rho = collide_pair<TRT, FORCE>(words, omega, omega_minus, fx, fy, fz);
        const unsigned at_x = opaque(xs[1], rho);  // addresses afresh (registers)
        int m = 0;
#pragma unroll
        for (int i = 0; i < 19; ++i) {
            if (cx[i] == 0) *reinterpret_cast<unsigned*>(f + i * n + at_x + ys[1 - cy[i]] + zs[1 - cz[i]]) = words[i];
            else sent[m++][lane] = words[i];
        }
    }
    __syncthreads();
    if (!fast) return;
    // the pair's neighbours along x whose words are in `sent`
    const bool before = lane > 0 && x > 0 && paired[lane - 1], after = lane + 1 < width && x + 2 < nx && paired[lane + 1];
    const unsigned beyond = x + 2 == nx ? 0 : x + 2;  // (again: cheaper than a register held across the barrier)
    int m = 0;
#pragma unroll
    for (int i = 0; i < 19; ++i) {
        if (cx[i] == 0) continue;
        const unsigned row = ys[1 - cy[i]] + zs[1 - cz[i]];
        half_bits* at = f + i * n + xs[1] + row;
        const unsigned mine = sent[m][lane];
        if (cx[i] > 0) {  // (the previous pair's second, my first); my second goes beyond
            if (before) *reinterpret_cast<unsigned*>(at) = __byte_perm(sent[m][lane - 1], mine, 0x5432);
            else at[1] = (half_bits)mine;
            if (!after) f[i * n + beyond + row] = (half_bits)(mine >> 16);
        } else {  // (my second, the next pair's first); my first goes before
            if (after) *reinterpret_cast<unsigned*>(at) = __byte_perm(mine, sent[m][lane + 1], 0x5432);
            else at[0] = (half_bits)(mine >> 16);
            if (!before) f[i * n + xs[2] + row] = (half_bits)mine;
        }
        ++m;
    }
}

// Carries out the streaming an even in-place step left pending, in place:
// along each link between two fluid sites s and d = s + c_i, slot opp(i) of s
// (post_i(s)) and slot i of d (post_opp(i)(d)) trade places; links to
// non-fluid sites were bounced back already. Each location belongs to one
// link, and each link to one thread (its site s, i = 1..9).
template <typename T>
__device__ void settle_in_place(T* __restrict__ f, const unsigned char* __restrict__ flags, int nx, int ny, int nz,
                                int periodic, i64 first, i64 count) {
    const i64 n = (i64)nx * ny * nz;
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const unsigned s = (unsigned)(first + t);
    const unsigned char code = flags[s];
    if (KIND(code) != FLUID) return;
    int x, y, z;
    coordinates(s, nx, ny, x, y, z);
#pragma unroll
    for (int i = 1; i <= 9; ++i) {
        const i64 d = site_towards<float>(i, 1, x, y, z, nx, ny, nz, periodic);
        if (d < 0 || (!(code & BULK) && KIND(flags[d]) != FLUID)) continue;
        const T mine = f[(i + 9) * n + s];
        f[(i + 9) * n + s] = f[i * n + d];
        f[i * n + d] = mine;
    }
}

// Sets BULK on fluid sites whose 18 neighbours are fluid (across periodic
// faces too), clears it elsewhere. Neighbours are read through KIND, so
// concurrent updates of their BULK bits do not matter.
extern "C" __global__ void lbm_mark_bulk(unsigned char* flags, int nx, int ny, int nz, int periodic) {
    if constexpr (WANTED(lbm_mark_bulk)) {
        const i64 n = (i64)nx * ny * nz;
        const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
        if (t >= n) return;
        const unsigned s = (unsigned)t;
        int x, y, z;
        coordinates(s, nx, ny, x, y, z);
        bool bulk = KIND(flags[s]) == FLUID;
        for (int i = 1; i < 19 && bulk; ++i) {
            const i64 d = site_towards<float>(i, 1, x, y, z, nx, ny, nz, periodic);
            bulk = d >= 0 && KIND(flags[d]) == FLUID;
        }
        flags[s] = KIND(flags[s]) | (bulk ? BULK : 0);
    }
}

template <typename T, typename R>
__device__ void equilibrium(T* __restrict__ f, i64 n, R rho, R ux, R uy, R uz) {
    D3Q19_TABLES(R)
    const i64 s = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n) return;
    const R usq = ux * ux + uy * uy + uz * uz;
#pragma unroll
    for (int i = 0; i < 19; ++i) {
        const R cu = cx[i] * ux + cy[i] * uy + cz[i] * uz;
        store_pop(&f[i * n + s], w[i] * rho * (1 + 3 * cu + R(4.5) * cu * cu - R(1.5) * usq), w[i]);
    }
}

// Density and (force-corrected) velocity of sites first..first+count-1;
// u is (3, count). Wall sites report 0.
template <typename T, typename R>
__device__ void fields(const T* __restrict__ f, const unsigned char* __restrict__ flags, i64 n, i64 first, i64 count,
                       R fx, R fy, R fz, double* __restrict__ rho_out, double* __restrict__ u_out) {
    D3Q19_TABLES(R)
    const i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const i64 s = first + t;
    R rho = 0, jx = 0, jy = 0, jz = 0;
    if (KIND(flags[s]) == FLUID) {
#pragma unroll
        for (int i = 0; i < 19; ++i) {
            const R v = load_pop(f[i * n + s], w[i]);
            rho += v;
            jx += cx[i] * v;
            jy += cy[i] * v;
            jz += cz[i] * v;
        }
    }
    const bool fluid = rho != 0;
    rho_out[t] = rho;
    u_out[3 * t] = fluid ? (jx + fx / 2) / rho : 0;
    u_out[3 * t + 1] = fluid ? (jy + fy / 2) / rho : 0;
    u_out[3 * t + 2] = fluid ? (jz + fz / 2) / rho : 0;
}

// The force the fluid exerts on the body sites (sorted site list), by
// momentum exchange on populations after streaming; src/lbm/cpu.rs
// body_force is the same sum. One body site per thread (256 a block); each
// block's sum goes to partial[3 * block + axis], summed by the host in order.
template <typename T, typename R>
__device__ void body_force(const T* __restrict__ f, const unsigned char* __restrict__ flags, int nx, int ny, int nz,
                           int periodic, double uwx, double uwy, double uwz, const unsigned* __restrict__ body, int count,
                           i64 own_first, i64 own_end, double* __restrict__ partial) {
    D3Q19_TABLES(R)
    __shared__ double sum[3][256];
    const i64 n = (i64)nx * ny * nz;
    const int t = threadIdx.x, k = blockIdx.x * blockDim.x + t;
    double force[3] = {0, 0, 0};
    const unsigned char kind = k < count ? KIND(flags[body[k]]) : FLUID;
    if (kind == WALL || kind == MOVING_WALL) {
        int x, y, z;
        coordinates(body[k], nx, ny, x, y, z);
        for (int i = 1; i < 19; ++i) {
            const int o = i <= 9 ? i + 9 : i - 9;
            const i64 from = site_towards<R>(i, -1, x, y, z, nx, ny, nz, periodic);  // the fluid site linked by c_i
            // links from fluid sites outside own_first..own_end-1 are counted by the rank that owns them
            if (from < own_first || from >= own_end || KIND(flags[from]) != FLUID) continue;
            const double back = load_pop(f[o * n + from], w[o]);
            double ladd = 0;
            if (kind == MOVING_WALL) {
                double rho = 0;
                for (int j = 0; j < 19; ++j) rho += load_pop(f[j * n + from], w[j]);
                ladd = 6 * (double)w[i] * rho * (cx[i] * uwx + cy[i] * uwy + cz[i] * uwz);
            }
            force[0] += cx[i] * (2 * back + ladd);
            force[1] += cy[i] * (2 * back + ladd);
            force[2] += cz[i] * (2 * back + ladd);
        }
    }
    for (int a = 0; a < 3; ++a) sum[a][t] = force[a];
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half)
            for (int a = 0; a < 3; ++a) sum[a][t] += sum[a][t + half];
        __syncthreads();
    }
    if (t == 0)
        for (int a = 0; a < 3; ++a) partial[3 * blockIdx.x + a] = sum[a][0];
}

// Sites first..first+count-1 of the directions in the bit mask `dirs` to
// or from `packed` (one run of count a direction, in increasing order):
// the planes a lattice split over ranks sends to its neighbours and
// receives from them, in storage form.
template <typename T>
__device__ void planes(T* __restrict__ f, T* __restrict__ packed, i64 n, i64 first, i64 count, unsigned dirs,
                       int unpack) {
    const i64 k = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= __popc(dirs) * count) return;
    unsigned rest = dirs;
    for (i64 run = k / count; run > 0; --run) rest &= rest - 1;  // drop the runs before this one
    const i64 at = (i64)(__ffs(rest) - 1) * n + first + k % count;
    if (unpack)
        f[at] = packed[k];
    else
        packed[k] = f[at];
}

// Every step kernel starts here: fegpu launches the steps overlapped with
// the kernel before them on the stream (programmatic dependent launch,
// sm_90 on; src/gpu/launch.rs), so a step's blocks may be resident before
// that kernel ends. They wait for it, and its memory, here; then let the
// next step launch, so its blocks take the SMs this grid's tail leaves
// idle (H100: 2% at 128^3, 0.2% at 256^3; BENCHMARKS.md). Launched plainly,
// both are no-ops.
__device__ __forceinline__ void follow_previous_kernel() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#define LBM_STEP(T, R, NAME, COLLISION, TRT)                                                                     \
    extern "C" __global__ void __launch_bounds__(256) lbm_push_##COLLISION##NAME(const T* fin, T* fout,           \
        const unsigned char* flags, int nx, int ny, int nz, int periodic, R omega, R omega_minus, R fx, R fy,      \
        R fz, R uwx, R uwy, R uwz, i64 first, i64 count, const unsigned* open_sites, const double* open_table,     \
        int open_count) {                                                                                         \
        if constexpr (WANTED(lbm_push_##COLLISION##NAME)) {                                                       \
            follow_previous_kernel();                                                                             \
            collide_push<TRT, T, R>(fin, fout, flags, nx, ny, nz, periodic, omega, omega_minus, fx, fy, fz, uwx,  \
                                    uwy, uwz, first, count, open_sites, open_table, open_count);                  \
        }                                                                                                         \
    }
// MIN_BLOCKS: resident blocks of 256 the register budget must allow. The
// pull kernels need about 100 registers unbounded (2 blocks per SM); capped
// at 80 (3 blocks) f32 and f16 ran 7% and 16% faster on the H100 without
// spilling, f64 spilled and ran 2% slower (BENCHMARKS.md), so f64 keeps 2.
#define LBM_PULL(T, R, NAME, MIN_BLOCKS, MODE, MODENAME, COLLISION, TRT, FORCE)                                  \
    extern "C" __global__ void __launch_bounds__(256, MIN_BLOCKS) lbm_##MODENAME##_##COLLISION##NAME(            \
        const T* fin, T* fout, const unsigned char* flags, int nx, int ny, int nz, int periodic, R omega,         \
        R omega_minus, R fx, R fy, R fz, R uwx, R uwy, R uwz, i64 first, i64 count, const unsigned* open_sites,    \
        const double* open_table, int open_count) {                                                               \
        if constexpr (WANTED(lbm_##MODENAME##_##COLLISION##NAME)) {                                               \
            follow_previous_kernel();                                                                             \
            stream_pull<MODE, TRT, T, R, FORCE>(fin, fout, flags, nx, ny, nz, periodic, omega, omega_minus, fx,   \
                                                fy, fz, uwx, uwy, uwz, first, count, open_sites, open_table,      \
                                                open_count);                                                      \
        }                                                                                                         \
    }
// The in-place steps: one buffer, otherwise the pull steps' arguments.
#define LBM_IN_PLACE_INDEX(T, R, NAME, MIN_BLOCKS, PASS, PASSNAME, COLLISION, TRT, FORCE, INDEX)                \
    extern "C" __global__ void __launch_bounds__(256, MIN_BLOCKS) lbm_##PASSNAME##_##COLLISION##NAME(            \
        T* f, const unsigned char* flags, int nx, int ny, int nz, int periodic, R omega, R omega_minus, R fx,     \
        R fy, R fz, R uwx, R uwy, R uwz, i64 first, i64 count, const unsigned* open_sites,                        \
        const double* open_table, int open_count) {                                                               \
        if constexpr (WANTED(lbm_##PASSNAME##_##COLLISION##NAME)) {                                               \
            follow_previous_kernel();                                                                             \
            stream_in_place<PASS, TRT, T, R, FORCE, INDEX>(f, flags, nx, ny, nz, periodic, omega, omega_minus, fx, \
                                                           fy, fz, uwx, uwy, uwz, first, count, open_sites,      \
                                                           open_table, open_count);                              \
        }                                                                                                         \
    }
#define LBM_IN_PLACE(T, R, NAME, MIN_BLOCKS, PASS, PASSNAME, COLLISION, TRT, FORCE)                              \
    LBM_IN_PLACE_INDEX(T, R, NAME, MIN_BLOCKS, PASS, PASSNAME, COLLISION, TRT, FORCE, i64)
#define LBM_KERNELS(T, R, NAME, MIN_BLOCKS)                                                                      \
    LBM_STEP(T, R, NAME, , false)                                                                                 \
    LBM_STEP(T, R, NAME, trt_, true)                                                                              \
    LBM_PULL(T, R, NAME, MIN_BLOCKS, PULL_COLLIDE, pull, , false, true)                                           \
    LBM_PULL(T, R, NAME, MIN_BLOCKS, PULL_COLLIDE, pull, trt_, true, true)                                        \
    LBM_PULL(T, R, NAME, MIN_BLOCKS, PULL_COLLIDE, pull_unforced, , false, false)                                 \
    LBM_PULL(T, R, NAME, MIN_BLOCKS, PULL_COLLIDE, pull_unforced, trt_, true, false)                              \
    LBM_PULL(T, R, NAME, MIN_BLOCKS, COLLIDE_ONLY, collide, , false, true)                                        \
    LBM_PULL(T, R, NAME, MIN_BLOCKS, COLLIDE_ONLY, collide, trt_, true, true)                                     \
    LBM_PULL(T, R, NAME, MIN_BLOCKS, PULL_ONLY, stream, , false, true)                                            \
    LBM_IN_PLACE(T, R, NAME, MIN_BLOCKS, IN_PLACE_EVEN, even, , false, true)                                     \
    LBM_IN_PLACE(T, R, NAME, MIN_BLOCKS, IN_PLACE_EVEN, even, trt_, true, true)                                   \
    LBM_IN_PLACE(T, R, NAME, MIN_BLOCKS, IN_PLACE_EVEN, even_unforced, , false, false)                            \
    LBM_IN_PLACE(T, R, NAME, MIN_BLOCKS, IN_PLACE_EVEN, even_unforced, trt_, true, false)                         \
    LBM_IN_PLACE(T, R, NAME, MIN_BLOCKS, IN_PLACE_ODD, odd, , false, true)                                        \
    LBM_IN_PLACE(T, R, NAME, MIN_BLOCKS, IN_PLACE_ODD, odd, trt_, true, true)                                     \
    LBM_IN_PLACE(T, R, NAME, MIN_BLOCKS, IN_PLACE_ODD, odd_unforced, , false, false)                              \
    LBM_IN_PLACE(T, R, NAME, MIN_BLOCKS, IN_PLACE_ODD, odd_unforced, trt_, true, false)                           \
    extern "C" __global__ void lbm_settle_##NAME(T* f, const unsigned char* flags, int nx, int ny, int nz,        \
        int periodic, i64 first, i64 count) {                                                                     \
        if constexpr (WANTED(lbm_settle_##NAME)) {                                                                \
            follow_previous_kernel();                                                                             \
            settle_in_place<T>(f, flags, nx, ny, nz, periodic, first, count);                                    \
        }                                                                                                         \
    }                                                                                                             \
    extern "C" __global__ void lbm_equilibrium_##NAME(T* f, i64 n, R rho, R ux, R uy, R uz) {                    \
        if constexpr (WANTED(lbm_equilibrium_##NAME)) equilibrium<T, R>(f, n, rho, ux, uy, uz);                   \
    }                                                                                                             \
    extern "C" __global__ void lbm_fields_##NAME(const T* f, const unsigned char* flags, i64 n, i64 first,       \
        i64 count, R fx, R fy, R fz, double* rho, double* u) {                                                    \
        if constexpr (WANTED(lbm_fields_##NAME)) fields<T, R>(f, flags, n, first, count, fx, fy, fz, rho, u);    \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(256) lbm_body_force_##NAME(const T* f, const unsigned char* flags, \
        int nx, int ny, int nz, int periodic, double uwx, double uwy, double uwz, const unsigned* body, int count,  \
        i64 own_first, i64 own_end, double* partial) {                                                            \
        if constexpr (WANTED(lbm_body_force_##NAME))                                                              \
            body_force<T, R>(f, flags, nx, ny, nz, periodic, uwx, uwy, uwz, body, count, own_first, own_end,      \
                             partial);                                                                            \
    }                                                                                                             \
    extern "C" __global__ void lbm_planes_##NAME(T* f, T* packed, i64 n, i64 first, i64 count, unsigned dirs,     \
        int unpack) {                                                                                             \
        if constexpr (WANTED(lbm_planes_##NAME)) planes<T>(f, packed, n, first, count, dirs, unpack);             \
    }
LBM_KERNELS(half_bits, float, f16, 3)
// f16's in-place steps two sites a thread, for lattices whose nx is even,
// at most 128 threads a block. Resident blocks an SM (the register budget),
// each measured fastest on the H100 (BENCHMARKS.md): 5 for the even steps
// and the forced odd steps (about 96 registers), 6 for the unforced odd
// steps (80 registers: some spilled, yet 4% faster than 5 blocks). The odd
// steps come twice: with 64-bit indices and, for lattices where 19 n < 2^32,
// 32-bit ones (pairs32_*: fewer instructions, 1% faster).
#define LBM_PAIRS(PASS, PASSNAME, COLLISION, TRT, FORCE, MIN_BLOCKS, INDEX, PREFIX)                              \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) lbm_##PREFIX##_##PASSNAME##_##COLLISION##f16(    \
        half_bits* f, const unsigned char* flags, int nx, int ny, int nz, int periodic, float omega,              \
        float omega_minus, float fx, float fy, float fz, float uwx, float uwy, float uwz, i64 first, i64 count,   \
        const unsigned* open_sites, const double* open_table, int open_count) {                                   \
        if constexpr (WANTED(lbm_##PREFIX##_##PASSNAME##_##COLLISION##f16)) {                                     \
            follow_previous_kernel();                                                                             \
            if constexpr (PASS == IN_PLACE_EVEN)                                                                  \
                even_in_place_pairs<TRT, FORCE, INDEX>(f, flags, nx, ny, nz, periodic, omega, omega_minus, fx,    \
                                                       fy, fz, uwx, uwy, uwz, first, count, open_sites,          \
                                                       open_table, open_count);                                  \
            else                                                                                                  \
                odd_in_place_pairs<TRT, FORCE, INDEX>(f, flags, nx, ny, nz, periodic, omega, omega_minus, fx, fy, \
                                                      fz, uwx, uwy, uwz, first, count, open_sites, open_table,   \
                                                      open_count);                                               \
        }                                                                                                         \
    }
#define LBM_PAIRS_ODD(INDEX, PREFIX)                                                                              \
    LBM_PAIRS(IN_PLACE_ODD, odd, , false, true, 5, INDEX, PREFIX)                                                 \
    LBM_PAIRS(IN_PLACE_ODD, odd, trt_, true, true, 5, INDEX, PREFIX)                                              \
    LBM_PAIRS(IN_PLACE_ODD, odd_unforced, , false, false, 6, INDEX, PREFIX)                                       \
    LBM_PAIRS(IN_PLACE_ODD, odd_unforced, trt_, true, false, 6, INDEX, PREFIX)
LBM_PAIRS(IN_PLACE_EVEN, even, , false, true, 5, i64, pairs)
LBM_PAIRS(IN_PLACE_EVEN, even, trt_, true, true, 5, i64, pairs)
LBM_PAIRS(IN_PLACE_EVEN, even_unforced, , false, false, 5, i64, pairs)
LBM_PAIRS(IN_PLACE_EVEN, even_unforced, trt_, true, false, 5, i64, pairs)
LBM_PAIRS_ODD(i64, pairs)
LBM_PAIRS_ODD(unsigned, pairs32)
LBM_KERNELS(float, float, f32, 3)
// f32's in-place steps with 32-bit indices, for lattices where 19 n < 2^32
// (even32_*, odd32_*: fewer instructions).
#define LBM_IN_PLACE_32(PASS, PASSNAME, FORCE)                                                                    \
    LBM_IN_PLACE_INDEX(float, float, f32, 3, PASS, PASSNAME, , false, FORCE, unsigned)                            \
    LBM_IN_PLACE_INDEX(float, float, f32, 3, PASS, PASSNAME, trt_, true, FORCE, unsigned)
LBM_IN_PLACE_32(IN_PLACE_EVEN, even32, true)
LBM_IN_PLACE_32(IN_PLACE_ODD, odd32, true)
LBM_IN_PLACE_32(IN_PLACE_EVEN, even32_unforced, false)
LBM_IN_PLACE_32(IN_PLACE_ODD, odd32_unforced, false)
LBM_KERNELS(double, double, f64, 2)
