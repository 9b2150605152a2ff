// hash.cuh: the counter-based hashes of hpcgnn/rng.py, on the device.
//
// Contract (bit-identical to hpcgnn/rng.py):
//   hpcgnn_mix(x)        == rng.mix(x)        SplitMix64 finaliser, wrapping uint64 maths
//   hpcgnn_chain(k, w)   == rng.chain(k, w)   mix(k ^ (uint64)(int64)w)
//   hpcgnn_uniform(b)    == rng.to_uniform(b) top 53 bits times 2^-53, a double in [0, 1)
//   hpcgnn_sfc64_next(s) == numpy's SFC64 next_uint64 on the state s = {a, b, c, counter}
//     (the four words of np.random.SFC64(seed).state["state"]["state"], seeding and its
//     12 warm-up draws already done on the host).
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

__device__ __forceinline__ unsigned long long hpcgnn_sfc64_next(unsigned long long s[4]) {
    const unsigned long long tmp = s[0] + s[1] + s[3]++;
    s[0] = s[1] ^ (s[1] >> 11);
    s[1] = s[2] + (s[2] << 3);
    s[2] = ((s[2] << 24) | (s[2] >> 40)) + tmp;
    return tmp;
}
