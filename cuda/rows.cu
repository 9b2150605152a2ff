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
//   copy_rows<T, I>(x, src, dst, out, n, f)       out[dst[i], :] = x[src[i], :]
//       gather and scatter in one pass, no packed rows in between: HongTu's in-place
//       buffers (rows written at their precomputed write positions). dst must hold
//       distinct ids. x may be page-locked host memory (zero-copy: under unified
//       addressing its host pointer is the device's; each row is read over the bus,
//       consecutive threads reading consecutive columns of one row), out is device memory.
//   scatter_add_unique<T, I>(rows, idx, out, n, f) out[idx[i], :] += rows[i, :]
//       idx must hold distinct ids (the exchange plan guarantees it: a staged sub-stage,
//       a transition flush); then one plain add per element, no atomics, deterministic.
//   scatter_add_segments<T>(rows, order, targets, seg, out, m, f)
//       out[idx[i], :] += rows[i, :] for any idx, duplicates included, through the inverse
//       map of idx (hpcgnn/kernels/rows.py: scatter_map; all int64): order = the stable
//       argsort of idx, targets = its m distinct ids (ascending), seg = the m + 1 segment
//       offsets (rows order[seg[j] .. seg[j + 1]) go to targets[j]). One thread per
//       (target, column) adds its rows in i order into a register, then stores once:
//         acc = out[targets[j], c]; acc += rows[order[k], c] for k = seg[j] ..; store
//       No atomics, a fixed order: bit-identical to the CPU twin's index_add_ (which adds
//       in i order) on every run and every GPU.
// 16-byte packing: every kernel also runs on T = hpcgnn_vec16<float> (4 floats) and
// hpcgnn_vec16<double> (2 doubles), a 16-byte aligned pack that a GPU loads and stores with
// one vector instruction (ld.global.nc.v4.f32 / st.global.v4.f32, .v2.f64), f counted in
// packs. The dispatch (hpcgnn/kernels/rows.py: row_kernel) takes it when a row is a whole
// number of packs and every value array starts on a 16-byte boundary, so every row does;
// otherwise the scalar kernel runs. Same element order and adds, so the packed kernels'
// bytes equal the scalar ones' and the CPU twins'. scatter_add_segments and
// scatter_add_unique need no atomics, so a pack is added element by element in registers.
// Floating point: IEEE adds rounded to nearest with subnormals kept (hpcgnn_add of grid.cuh:
// CuPy compiles with -ftz=true, which a plain float32 add would obey), no multiply, so the
// sums equal the CPU twins' bit for bit, subnormal ones included.
// Geometry: one thread per element of the n x f block (m x f for the segments),
// grid-stride (any grid size works; the dispatch launches ceil(n f / 256) blocks of 256,
// capped at MAX_BLOCKS). n f == 0 launches nothing.
#include "grid.cuh"

// 16 bytes of T (float: 4, double: 2), aligned to 16: moved by one vector load or store.
// value_type names the element for the host build's parameter check (cuda/host/launch.h).
template <typename T>
struct alignas(16) hpcgnn_vec16 {
    using value_type = T;
    static constexpr int size = 16 / sizeof(T);
    T v[size];
};

// Element-wise hpcgnn_add of two packs (the same adds as the scalar kernels'). Both by
// value: each pack is read whole, one vector load (a reference lets the compiler read b's
// elements one by one).
template <typename T>
__device__ __forceinline__ hpcgnn_vec16<T> hpcgnn_add(hpcgnn_vec16<T> a, hpcgnn_vec16<T> b) {
    for (int j = 0; j < hpcgnn_vec16<T>::size; ++j) a.v[j] = hpcgnn_add(a.v[j], b.v[j]);
    return a;
}

// op(e, k) for every element e of the n x f block, k its element in the indexed row
// idx[e / f] of the other side (grid-stride).
template <typename I, typename Op>
__device__ __forceinline__ void for_each_indexed(const I* __restrict__ idx, long long n,
                                                 long long f, Op op) {
    const long long total = n * f;
    for (long long e = hpcgnn_thread(); e < total; e += hpcgnn_threads()) {
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
__global__ void copy_rows(const T* __restrict__ x, const I* __restrict__ src,
                          const I* __restrict__ dst, T* __restrict__ out, long long n,
                          long long f) {
    for_each_indexed(src, n, f, [&](long long e, long long k) {
        const long long i = e / f;
        out[(long long)dst[i] * f + (e - i * f)] = x[k];
    });
}

template <typename T, typename I>
__global__ void scatter_add_unique(const T* __restrict__ rows, const I* __restrict__ idx,
                                   T* __restrict__ out, long long n, long long f) {
    for_each_indexed(idx, n, f,
                     [&](long long e, long long k) { out[k] = hpcgnn_add(out[k], rows[e]); });
}

template <typename T>
__global__ void scatter_add_segments(const T* __restrict__ rows,
                                     const long long* __restrict__ order,
                                     const long long* __restrict__ targets,
                                     const long long* __restrict__ seg, T* __restrict__ out,
                                     long long m, long long f) {
    const long long total = m * f;
    for (long long e = hpcgnn_thread(); e < total; e += hpcgnn_threads()) {
        const long long j = e / f;
        const long long c = e - j * f;
        T* target = out + targets[j] * f + c;
        T acc = *target;
        for (long long k = seg[j]; k < seg[j + 1]; ++k) {
            acc = hpcgnn_add(acc, rows[order[k] * f + c]);
        }
        *target = acc;
    }
}

#ifdef HPCGNN_INSTANTIATE  // make ptx: emit every instantiation CuPy asks for by name
#define HPCGNN_ROWS(T, I)                                                                   \
    template __global__ void gather_rows<T, I>(const T*, const I*, T*, long long, long long); \
    template __global__ void copy_rows<T, I>(const T*, const I*, const I*, T*, long long,     \
                                             long long);                                      \
    template __global__ void scatter_add_unique<T, I>(const T*, const I*, T*, long long,     \
                                                      long long);
HPCGNN_ROWS(float, int)
HPCGNN_ROWS(float, long long)
HPCGNN_ROWS(double, int)
HPCGNN_ROWS(double, long long)
HPCGNN_ROWS(hpcgnn_vec16<float>, int)
HPCGNN_ROWS(hpcgnn_vec16<float>, long long)
HPCGNN_ROWS(hpcgnn_vec16<double>, int)
HPCGNN_ROWS(hpcgnn_vec16<double>, long long)
#define HPCGNN_SEGMENTS(T)                                                                  \
    template __global__ void scatter_add_segments<T>(const T*, const long long*,             \
                                                     const long long*, const long long*, T*, \
                                                     long long, long long);
HPCGNN_SEGMENTS(float)
HPCGNN_SEGMENTS(double)
HPCGNN_SEGMENTS(hpcgnn_vec16<float>)
HPCGNN_SEGMENTS(hpcgnn_vec16<double>)
#endif
