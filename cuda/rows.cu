// rows.cu: gather-pack and scatter-add-unpack of rows of dense row-major matrices.
//
// Used by the neighbour exchanges (hpcgnn/exchange/): pack the rows a peer needs into a
// contiguous send buffer, and add received gradient rows into the owned rows.
// CPU twins: hpcgnn/kernels/rows.py (gather_rows, scatter_add_rows).
//
// Contract, for T in {float, double} and index type I in {int, long long}; x, out and
// rows are C-contiguous with f columns, idx holds n row ids (every one in range: the
// caller guarantees it, the kernels do not check):
//   gather_rows<T, I>(x, idx, out, n, f)           out[i, :]  = x[idx[i], :]
//   scatter_add_unique<T, I>(rows, idx, out, n, f) out[idx[i], :] += rows[i, :]
//       idx must hold distinct ids (the exchange plan guarantees it: a staged sub-stage,
//       a transition flush); then one plain add per element, no atomics, deterministic.
//   scatter_add_atomic<T, I>(rows, idx, out, n, f) out[idx[i], :] += rows[i, :]
//       any idx, duplicates accumulate (atomicAdd; the order of the adds of a duplicated
//       target is unspecified, so sums of duplicates may differ in the last bits between
//       runs; the CPU twin adds in i order).
// Geometry: one thread per element of the n x f block, grid-stride (any grid size works;
// the dispatch launches ceil(n f / 256) blocks of 256, capped). n f == 0 launches nothing.

// op(e, k) for every element e of the n x f block, k its element in the indexed row
// idx[e / f] of the other side (grid-stride).
template <typename I, typename Op>
__device__ __forceinline__ void for_each_indexed(const I* __restrict__ idx, long long n,
                                                 long long f, Op op) {
    const long long total = n * f;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
        const long long i = e / f;
        op(e, (long long)idx[i] * f + (e - i * f));
    }
}

template <typename T, typename I>
__global__ void gather_rows(const T* __restrict__ x, const I* __restrict__ idx,
                            T* __restrict__ out, long long n, long long f) {
    for_each_indexed(idx, n, f, [&](long long e, long long k) { out[e] = x[k]; });
}

template <typename T, typename I>
__global__ void scatter_add_unique(const T* __restrict__ rows, const I* __restrict__ idx,
                                   T* __restrict__ out, long long n, long long f) {
    for_each_indexed(idx, n, f, [&](long long e, long long k) { out[k] += rows[e]; });
}

template <typename T, typename I>
__global__ void scatter_add_atomic(const T* __restrict__ rows, const I* __restrict__ idx,
                                   T* __restrict__ out, long long n, long long f) {
    for_each_indexed(idx, n, f, [&](long long e, long long k) { atomicAdd(out + k, rows[e]); });
}

#ifdef HPCGNN_INSTANTIATE  // make ptx: emit every instantiation CuPy asks for by name
#define HPCGNN_ROWS(T, I)                                                                   \
    template __global__ void gather_rows<T, I>(const T*, const I*, T*, long long, long long); \
    template __global__ void scatter_add_unique<T, I>(const T*, const I*, T*, long long,     \
                                                      long long);                           \
    template __global__ void scatter_add_atomic<T, I>(const T*, const I*, T*, long long,     \
                                                      long long);
HPCGNN_ROWS(float, int)
HPCGNN_ROWS(float, long long)
HPCGNN_ROWS(double, int)
HPCGNN_ROWS(double, long long)
#endif
