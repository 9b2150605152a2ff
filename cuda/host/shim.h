// shim.h: the CUDA names our kernels use, for a host (C++17) build of cuda/*.cu.
//
// hpcgnn/kernels/host_build.py compiles each cuda/*.cu unchanged with the system C++
// compiler: a generated translation unit includes this header, the .cu source, then
// launch.h (the grid loop and the kernel table). A "thread" is one sequential call of the
// kernel function with blockIdx / threadIdx set; the launch loop visits every (block,
// thread) pair of the grid once, in a chosen order.
//
// Provided: __global__, __device__, __host__, __forceinline__ (__restrict__ is a GCC and
// Clang keyword), blockIdx / threadIdx (uint3), blockDim / gridDim (dim3), atomicAdd (a
// plain add: threads never run concurrently), __longlong_as_double and
// __double_as_longlong, and the math functions of <math.h> (nextafter, fmin, ... with
// their float overloads).
//
// Refused at compile time, because a sequential loop cannot run them faithfully: block
// synchronisation (__syncthreads and friends), shared and constant memory (__shared__,
// __constant__), warp intrinsics (__shfl*_sync, __ballot_sync, __activemask, warpSize),
// and any other CUDA name not defined here (undeclared). A kernel that needs them needs
// another emulation, not this one.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))

// Shared and constant memory: the macro leaves an undeclared name where a type must be.
#define __shared__ hpcgnn_host_shared_memory_is_not_supported
#define __constant__ hpcgnn_host_constant_memory_is_not_supported

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
};

// Set by the launch loop before every call of a kernel function (thread_local: two host
// threads may launch at once, as ctypes releases the GIL).
static thread_local uint3 blockIdx, threadIdx;
static thread_local dim3 blockDim, gridDim;

// Synchronisation and warp-level operations: deleted, so a use names them in the error.
void __syncthreads() = delete;
int __syncthreads_count(int) = delete;
int __syncthreads_and(int) = delete;
int __syncthreads_or(int) = delete;
void __syncwarp(...) = delete;
void __threadfence() = delete;
void __threadfence_block() = delete;
unsigned __activemask() = delete;
unsigned __ballot_sync(...) = delete;
int __all_sync(...) = delete;
int __any_sync(...) = delete;
int __shfl_sync(...) = delete;
int __shfl_up_sync(...) = delete;
int __shfl_down_sync(...) = delete;
int __shfl_xor_sync(...) = delete;
struct hpcgnn_host_no_warp_size;
extern hpcgnn_host_no_warp_size warpSize;  // incomplete type: any use fails to compile

template <typename T>
__device__ __forceinline__ T atomicAdd(T* address, T value) {
    const T old = *address;
    *address = old + value;
    return old;
}

__device__ __forceinline__ double __longlong_as_double(long long bits) {
    double d;
    std::memcpy(&d, &bits, sizeof d);
    return d;
}

__device__ __forceinline__ long long __double_as_longlong(double d) {
    long long bits;
    std::memcpy(&bits, &d, sizeof bits);
    return bits;
}
