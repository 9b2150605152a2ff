// grid.cuh: the grid-stride loop of the kernels (any grid size gives the full result), and
// the IEEE add that keeps float32 subnormals.
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

// a + b rounded to nearest, subnormals kept: what the CPU twins compute. CuPy's RawModule
// always appends -ftz=true to NVRTC's options (after ours, and the last one wins), so a
// plain float32 `a + b` compiles to add.ftz.f32 and flushes subnormal inputs and results
// to zero; inline PTX add.rn.f32 is not affected. float64 never flushes. The host build
// (cuda/host/shim.h) compiles the plain add.
__device__ __forceinline__ float hpcgnn_add(float a, float b) {
#ifdef __CUDA_ARCH__
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#else
    return a + b;
#endif
}

__device__ __forceinline__ double hpcgnn_add(double a, double b) { return a + b; }
