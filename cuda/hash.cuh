// hash.cuh: the counter-based hashes of hpcgnn/rng.py, on the device.
//
// Contract (bit-identical to hpcgnn/rng.py):
//   hpcgnn_mix(x)        == rng.mix(x)        SplitMix64 finaliser, wrapping uint64 maths
//   hpcgnn_chain(k, w)   == rng.chain(k, w)   mix(k ^ (uint64)(int64)w)
//   hpcgnn_uniform(b)    == rng.to_uniform(b) top 53 bits times 2^-53, a double in [0, 1)
//   hpcgnn_lowbias32(x)  == rng.lowbias32(x)   Wellons' 32-bit hash, wrapping uint32 maths
//   hpcgnn_entry_keep(row, col, row_key, col_key, threshold)
//                        == rng.keep_of(rng.entry_bits(...)): the entry stream's keep test
//     bits = lowbias32(lo32(mix(row_key ^ row)) ^ lo32(mix(col_key ^ col))), keep =
//     bits >= threshold (threshold = rng.keep_threshold(p) = ceil(p 2^32) <= 2^32, so a
//     64-bit comparison: 2^32 keeps nothing); col_key = rng.column_key(row_key).
// Header only, no system includes and no other local header: the same text compiles under
// NVRTC (CuPy RawModule; hpcgnn/kernels/cuda_modules.py inlines it into the source), nvcc
// ("make ptx", -Icuda) and the system C++ compiler (the host build of
// hpcgnn/kernels/host_build.py, with cuda/host/shim.h).
#pragma once

__device__ __forceinline__ unsigned long long hpcgnn_mix(unsigned long long x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

__device__ __forceinline__ unsigned long long hpcgnn_chain(unsigned long long key, long long w) {
    return hpcgnn_mix(key ^ (unsigned long long)w);
}

__device__ __forceinline__ double hpcgnn_uniform(unsigned long long bits) {
    return (double)(bits >> 11) * (1.0 / 9007199254740992.0);
}

__device__ __forceinline__ unsigned int hpcgnn_lowbias32(unsigned int x) {
    x ^= x >> 16;
    x *= 0x7FEB352DU;
    x ^= x >> 15;
    x *= 0x846CA68BU;
    return x ^ (x >> 16);
}

__device__ __forceinline__ bool hpcgnn_entry_keep(
    long long row, long long col, unsigned long long row_key, unsigned long long col_key,
    unsigned long long threshold) {
    const unsigned int r = (unsigned int)hpcgnn_mix(row_key ^ (unsigned long long)row);
    const unsigned int c = (unsigned int)hpcgnn_mix(col_key ^ (unsigned long long)col);
    return (unsigned long long)hpcgnn_lowbias32(r ^ c) >= threshold;
}
