// launch.h: the grid loop and the kernel table of a host build of a cuda/*.cu source.
//
// Included after shim.h and the source by the translation unit that
// hpcgnn/kernels/host_build.py generates, which then defines the table
//   extern const hpcgnn_host::Entry hpcgnn_host_table[] = {
//       HPCGNN_HOST_KERNEL("gather_rows<float, int>", &gather_rows<float, int>), ...,
//       {nullptr, nullptr, nullptr}};
// (one entry per kernel the Python loader launches, by the name it launches it with).
//
// Exported (extern "C", the only symbols the library exports), for ctypes:
//   int hpcgnn_host_count()                 number of kernels in the table
//   const char* hpcgnn_host_name(k)         kernel k's name
//   const char* hpcgnn_host_signature(k)    its parameters, space-separated: "i8" / "u4"
//       (signed / unsigned integer of N bytes), "f4" / "f8" (floating point), "b1" (bool),
//       "*" + the pointee's kind for a pointer ("*f4"; "*" alone for void*; a pointer to a
//       pack of values, a class with a value_type, has its value_type's: "*f4")
//   void hpcgnn_host_launch(k, grid[3], block[3], args, order, seed)
//       runs kernel k once for every (block, thread) pair of the grid, sequentially, in
//       the order 0 natural (block-major, x fastest), 1 reversed, 2 shuffled (a bijection
//       of the pairs drawn from seed, O(1) memory); args as for cudaLaunchKernel: args[i]
//       points at the value of parameter i (copied once, before the first thread runs).
#pragma once

#include <cstddef>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

namespace hpcgnn_host {

using u64 = unsigned long long;

enum Order : int { kNatural = 0, kReversed = 1, kShuffled = 2 };

// SplitMix64's finaliser: the round keys of a Permutation.
inline u64 splitmix(u64 x) {
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

// A bijection of [0, n) drawn from a seed: keyed rounds of (odd multiply + add, xor-shift)
// on the smallest power of two >= n (each round a bijection of it), cycle-walked back
// into [0, n) (fewer than two rounds of walking on average, no table).
class Permutation {
  public:
    Permutation(u64 n, u64 seed) : n_(n) {
        while (bits_ < 64 && (1ULL << bits_) < n) ++bits_;
        mask_ = bits_ == 64 ? ~0ULL : (1ULL << bits_) - 1;
        shift_ = bits_ / 2 + 1;
        for (int r = 0; r < kRounds; ++r) {
            mul_[r] = splitmix(seed + 2 * r) | 1;
            add_[r] = splitmix(seed + 2 * r + 1);
        }
    }

    u64 operator()(u64 x) const {
        do {
            for (int r = 0; r < kRounds; ++r) {
                x = (x * mul_[r] + add_[r]) & mask_;
                x ^= x >> shift_;
            }
        } while (x >= n_);
        return x;
    }

  private:
    static constexpr int kRounds = 4;
    u64 n_;
    int bits_ = 0;
    int shift_ = 1;
    u64 mask_ = 0;
    u64 mul_[kRounds] = {};
    u64 add_[kRounds] = {};
};

// The (x, y, z) of linear index i in a box of dims (x fastest); no division in 1-D.
inline uint3 split(u64 i, const unsigned* dims) {
    if (dims[1] == 1 && dims[2] == 1) return {static_cast<unsigned>(i), 0, 0};
    return {static_cast<unsigned>(i % dims[0]), static_cast<unsigned>(i / dims[0] % dims[1]),
            static_cast<unsigned>(i / dims[0] / dims[1])};
}

// body() once per (block, thread) pair of the grid, blockIdx / threadIdx set, in order.
template <typename Body>
void for_each_thread(const unsigned* grid, const unsigned* block, int order, u64 seed,
                     Body&& body) {
    gridDim = {grid[0], grid[1], grid[2]};
    blockDim = {block[0], block[1], block[2]};
    const u64 blocks = static_cast<u64>(grid[0]) * grid[1] * grid[2];
    const u64 threads = static_cast<u64>(block[0]) * block[1] * block[2];
    if (order == kShuffled) {
        const Permutation pick(blocks * threads, seed);
        for (u64 i = 0; i < blocks * threads; ++i) {
            const u64 p = pick(i);
            blockIdx = split(p / threads, grid);
            threadIdx = split(p % threads, block);
            body();
        }
        return;
    }
    for (u64 i = 0; i < blocks; ++i) {
        blockIdx = split(order == kReversed ? blocks - 1 - i : i, grid);
        for (u64 j = 0; j < threads; ++j) {
            threadIdx = split(order == kReversed ? threads - 1 - j : j, block);
            body();
        }
    }
}

template <typename T>
inline constexpr bool kUnsupported = false;

// The kind of a parameter type, as hpcgnn_host_signature reports it.
template <typename T>
std::string kind() {
    if constexpr (std::is_pointer_v<T>) {
        using P = std::remove_cv_t<std::remove_pointer_t<T>>;
        if constexpr (std::is_void_v<P>) {
            return "*";
        } else if constexpr (std::is_class_v<P>) {  // a pack of values (rows.cu's hpcgnn_vec16)
            return "*" + kind<typename P::value_type>();
        } else {
            return "*" + kind<P>();
        }
    } else if constexpr (std::is_same_v<T, bool>) {
        return "b1";
    } else if constexpr (std::is_floating_point_v<T>) {
        return "f" + std::to_string(sizeof(T));
    } else if constexpr (std::is_integral_v<T>) {
        return (std::is_signed_v<T> ? "i" : "u") + std::to_string(sizeof(T));
    } else {
        static_assert(kUnsupported<T>, "host build: unsupported kernel parameter type");
        return "";
    }
}

template <typename F>
struct Kernel;

template <typename... A>
struct Kernel<void (*)(A...)> {
    static const char* signature() {
        static const std::string text = [] {
            std::string s;
            ((s += (s.empty() ? "" : " ") + kind<A>()), ...);
            return s;
        }();
        return text.c_str();
    }

    template <void (*F)(A...)>
    static void run(void** args, const unsigned* grid, const unsigned* block, int order,
                    u64 seed) {
        run_with<F>(args, grid, block, order, seed, std::index_sequence_for<A...>{});
    }

  private:
    template <void (*F)(A...), std::size_t... I>
    static void run_with(void** args, const unsigned* grid, const unsigned* block, int order,
                         u64 seed, std::index_sequence<I...>) {
        std::tuple<A...> values;
        (std::memcpy(&std::get<I>(values), args[I], sizeof(A)), ...);
        static_cast<void>(args);
        for_each_thread(grid, block, order, seed, [&] { F(std::get<I>(values)...); });
    }
};

struct Entry {
    const char* name;
    const char* (*signature)();
    void (*run)(void**, const unsigned*, const unsigned*, int, u64);
};

}  // namespace hpcgnn_host

// One table entry: the name the loader launches and the kernel's address expression.
#define HPCGNN_HOST_KERNEL(NAME, ...)                                                       \
    hpcgnn_host::Entry {                                                                    \
        NAME, &hpcgnn_host::Kernel<decltype(__VA_ARGS__)>::signature,                       \
            &hpcgnn_host::Kernel<decltype(__VA_ARGS__)>::template run<__VA_ARGS__>          \
    }

extern const hpcgnn_host::Entry hpcgnn_host_table[];  // null-terminated, defined after this

// The only symbols the library exports (it is built with -fvisibility=hidden, so the
// kernels and the loop are not interposable and inline into each other).
#define HPCGNN_HOST_EXPORT extern "C" __attribute__((visibility("default")))

HPCGNN_HOST_EXPORT int hpcgnn_host_count() {
    int n = 0;
    while (hpcgnn_host_table[n].name != nullptr) ++n;
    return n;
}

HPCGNN_HOST_EXPORT const char* hpcgnn_host_name(int k) { return hpcgnn_host_table[k].name; }

HPCGNN_HOST_EXPORT const char* hpcgnn_host_signature(int k) {
    return hpcgnn_host_table[k].signature();
}

HPCGNN_HOST_EXPORT void hpcgnn_host_launch(int k, const unsigned* grid, const unsigned* block,
                                           void** args, int order, unsigned long long seed) {
    hpcgnn_host_table[k].run(args, grid, block, order, seed);
}
