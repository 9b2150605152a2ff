// grid.cuh: the grid-stride loop of the kernels (any grid size gives the full result).
//
//   for (long long e = hpcgnn_thread(); e < total; e += hpcgnn_threads()) ...
// visits every e in [0, total) exactly once over all the threads of the grid, whatever the
// number of blocks the launcher chose (it caps the grid: MAX_BLOCKS in
// hpcgnn/kernels/cuda_modules.py). 64-bit throughout: totals past 2^31 are fine.
// Header only, no system includes, no other header (see hash.cuh).
#pragma once

// This thread's index in the grid (x only).
__device__ __forceinline__ long long hpcgnn_thread() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

// The number of threads of the grid (x only): the stride of a grid-stride loop.
__device__ __forceinline__ long long hpcgnn_threads() {
    return (long long)gridDim.x * blockDim.x;
}
