// csr.cu: extraction of CSR rows by position (the rows of S_U of a sampling hop).
//
// CPU twin: hpcgnn/kernels/csr.py (gather_ranges), used by hpcgnn/sampling/rows.py
// (RowStore.take / merge: building S_U, serving fetched rows of S).
//
// gather_ranges<I>(indptr, indices, pos, out_ptr, rows, out), I in {int, long long}:
// out row k is row pos[k] of (indptr, indices):
//   out[out_ptr[k] .. out_ptr[k + 1]) = indices[indptr[pos[k]] .. indptr[pos[k] + 1])
// out_ptr is the exclusive prefix sum of the selected row lengths (rows + 1 entries,
// computed by the caller); pos may repeat and be in any order; empty rows copy nothing.
// Geometry: grid-stride over output rows by block, the threads of a block stride over
// the row's entries (coalesced reads and writes); the dispatch launches min(rows, 65535)
// blocks of 128.

template <typename I>
__global__ void gather_ranges(const long long* __restrict__ indptr,
                              const I* __restrict__ indices, const long long* __restrict__ pos,
                              const long long* __restrict__ out_ptr, long long rows,
                              I* __restrict__ out) {
    for (long long k = blockIdx.x; k < rows; k += gridDim.x) {
        const long long src = indptr[pos[k]];
        const long long dst = out_ptr[k];
        const long long len = out_ptr[k + 1] - dst;
        for (long long e = threadIdx.x; e < len; e += blockDim.x) out[dst + e] = indices[src + e];
    }
}

#ifdef HPCGNN_INSTANTIATE  // make ptx: emit every instantiation CuPy asks for by name
template __global__ void gather_ranges<int>(const long long*, const int*, const long long*,
                                            const long long*, long long, int*);
template __global__ void gather_ranges<long long>(const long long*, const long long*,
                                                  const long long*, const long long*,
                                                  long long, long long*);
#endif
