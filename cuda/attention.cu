// attention.cu: GAT's edge kernels on a CSR pattern: scores and row softmax, its backward,
// and the SDDMM of the coefficients' gradient.
//
// Used by the GAT layer (hpcgnn/nn/gat.py). CPU twins: hpcgnn/kernels/attention.py
// (edge_softmax, edge_softmax_backward, edge_dot).
//
// Contract, for T in {float, double}; the pattern is rows x cols with E edges, CSR row
// pointers crow (rows + 1), the column col[e] and the row row[e] of every edge (int64, in
// range: the caller guarantees it); K heads; every per-edge array is E x K and every
// per-vertex array n x K (C-contiguous):
//   edge_softmax<T>(crow, col, s_dst, s_src, rows, K, slope, alpha, t)
//       t[e, k] = s_dst[i, k] + s_src[col[e], k] for the edges e of row i,
//       alpha[e, k] = softmax over the row's edges of LeakyReLU(t) (slope below 0): the
//       row maximum subtracted, exp, the row sum in edge order, then one division each.
//   edge_softmax_backward<T>(row, alpha, t, d_alpha, delta, E, K, slope, dt)
//       dt[e, k] = alpha (d_alpha - delta[row[e], k]), times slope where t <= 0; delta
//       (rows x K) is each row's sum of alpha d_alpha, which the caller has.
//   edge_dot<T>(row, col, a, b, E, K, f, out)
//       out[e, k] = sum_c a[row[e], k, c] b[col[e], k, c] (a, b: n x K x f), c in order.
// Floating point: IEEE adds that keep subnormals (hpcgnn_add of grid.cuh), no FMA
// (--fmad=false); exp is the device's (expf / exp), within an ulp or two of the CPU's, so
// the GPU results equal the CPU twins' to rounding, not bit for bit.
// Geometry: one thread per (row, head) for edge_softmax, per (edge, head) for the others,
// grid-stride (any grid size works). No synchronisation, no atomics.
#include "grid.cuh"

__device__ __forceinline__ float hpcgnn_exp(float x) { return expf(x); }
__device__ __forceinline__ double hpcgnn_exp(double x) { return exp(x); }

template <typename T>
__device__ __forceinline__ T hpcgnn_leaky(T t, T slope) {
    return t > T(0) ? t : t * slope;
}

template <typename T>
__global__ void edge_softmax(const long long* __restrict__ crow,
                             const long long* __restrict__ col, const T* __restrict__ s_dst,
                             const T* __restrict__ s_src, long long rows, long long heads,
                             T slope, T* __restrict__ alpha, T* __restrict__ t) {
    const long long total = rows * heads;
    for (long long w = hpcgnn_thread(); w < total; w += hpcgnn_threads()) {
        const long long i = w / heads;
        const long long k = w - i * heads;
        const long long lo = crow[i], hi = crow[i + 1];
        if (lo == hi) continue;
        const T dst = s_dst[w];
        T top = T(0);
        for (long long e = lo; e < hi; ++e) {
            const T te = hpcgnn_add(dst, s_src[col[e] * heads + k]);
            t[e * heads + k] = te;
            const T v = hpcgnn_leaky(te, slope);
            top = (e == lo || v > top) ? v : top;
        }
        T sum = T(0);
        for (long long e = lo; e < hi; ++e) {
            const T p = hpcgnn_exp(hpcgnn_add(hpcgnn_leaky(t[e * heads + k], slope), -top));
            alpha[e * heads + k] = p;
            sum = hpcgnn_add(sum, p);
        }
        for (long long e = lo; e < hi; ++e) alpha[e * heads + k] = alpha[e * heads + k] / sum;
    }
}

template <typename T>
__global__ void edge_softmax_backward(const long long* __restrict__ row,
                                      const T* __restrict__ alpha, const T* __restrict__ t,
                                      const T* __restrict__ d_alpha,
                                      const T* __restrict__ delta, long long edges,
                                      long long heads, T slope, T* __restrict__ dt) {
    const long long total = edges * heads;
    for (long long q = hpcgnn_thread(); q < total; q += hpcgnn_threads()) {
        const long long e = q / heads;
        const long long k = q - e * heads;
        const T de = alpha[q] * hpcgnn_add(d_alpha[q], -delta[row[e] * heads + k]);
        dt[q] = t[q] > T(0) ? de : de * slope;
    }
}

template <typename T>
__global__ void edge_dot(const long long* __restrict__ row, const long long* __restrict__ col,
                         const T* __restrict__ a, const T* __restrict__ b, long long edges,
                         long long heads, long long f, T* __restrict__ out) {
    const long long total = edges * heads;
    for (long long w = hpcgnn_thread(); w < total; w += hpcgnn_threads()) {
        const long long e = w / heads;
        const long long k = w - e * heads;
        const T* x = a + (row[e] * heads + k) * f;
        const T* y = b + (col[e] * heads + k) * f;
        T acc = T(0);
        for (long long c = 0; c < f; ++c) acc = hpcgnn_add(acc, x[c] * y[c]);
        out[w] = acc;
    }
}

#ifdef HPCGNN_INSTANTIATE  // make ptx: emit every instantiation CuPy asks for by name
#define HPCGNN_ATTENTION(T)                                                                  \
    template __global__ void edge_softmax<T>(const long long*, const long long*, const T*,  \
                                             const T*, long long, long long, T, T*, T*);    \
    template __global__ void edge_softmax_backward<T>(const long long*, const T*, const T*, \
                                                      const T*, const T*, long long,        \
                                                      long long, T, T*);                    \
    template __global__ void edge_dot<T>(const long long*, const long long*, const T*,      \
                                         const T*, long long, long long, long long, T*);
HPCGNN_ATTENTION(float)
HPCGNN_ATTENTION(double)
#endif
