// sampling.cu: one round of inverse transform sampling (ITS) for the bulk samplers.
//
// CPU twins: hpcgnn/kernels/sampling.py (its_round, uniform_round), called by
// hpcgnn/sampling/its.py once per round; the host keeps the rounds, the acceptance of
// distinct hits and the bookkeeping.
//
// Common to both kernels: `rows` active rows; active row a draws need[a] numbers, draw t
// of round rnd using u = uniform(chain(chain(keys[a], rnd), t)) (rng.chain(key, rnd, t)),
// and writes its result to out[draw_off[a] + t], draw_off = exclusive prefix sum of need
// (the draws of the rows concatenated in row order).
//
// its_round: weighted rows. cum holds each active row's inclusive prefix sums in
// cum[sub_ptr[a] .. sub_ptr[a + 1]), total[a] the row's sum. The draw is
// x = min(u * total[a], nextafter(total[a], -inf)) and the result is the first position
// i in [sub_ptr[a], sub_ptr[a + 1]) with cum[i] > x (binary search; sub_ptr[a + 1] if
// none, which cannot happen for a row with a positive total).
//
// uniform_round: rows of equal weights (GraphSAGE). remaining[a] >= 1 entries are left;
// the result is the rank min(floor(u * remaining[a]), remaining[a] - 1) of the entry
// drawn among them (the closed form of the search).
//
// Geometry: one thread per active row (need[a] is at most the fanout), grid-stride: the
// dispatch launches ceil(rows / 256) blocks of 256, capped at MAX_BLOCKS, and the threads
// loop over the rows past the grid, so any grid gives every row's draws.
#include "grid.cuh"
#include "hash.cuh"

extern "C" __global__ void its_round(
    const unsigned long long* __restrict__ keys, const long long* __restrict__ need,
    const long long* __restrict__ draw_off, long long rows, long long rnd,
    const double* __restrict__ cum, const long long* __restrict__ sub_ptr,
    const double* __restrict__ total, long long* __restrict__ out) {
    for (long long a = hpcgnn_thread(); a < rows; a += hpcgnn_threads()) {
        const unsigned long long key = hpcgnn_chain(keys[a], rnd);
        const double tot = total[a];
        const double top = nextafter(tot, __longlong_as_double(0xFFF0000000000000LL));
        for (long long t = 0; t < need[a]; ++t) {
            const double x = fmin(hpcgnn_uniform(hpcgnn_chain(key, t)) * tot, top);
            long long lo = sub_ptr[a], hi = sub_ptr[a + 1];
            while (lo < hi) {
                const long long mid = (lo + hi) >> 1;
                if (cum[mid] <= x) lo = mid + 1; else hi = mid;
            }
            out[draw_off[a] + t] = lo;
        }
    }
}

extern "C" __global__ void uniform_round(
    const unsigned long long* __restrict__ keys, const long long* __restrict__ need,
    const long long* __restrict__ draw_off, long long rows, long long rnd,
    const long long* __restrict__ remaining, long long* __restrict__ out) {
    for (long long a = hpcgnn_thread(); a < rows; a += hpcgnn_threads()) {
        const unsigned long long key = hpcgnn_chain(keys[a], rnd);
        const long long m = remaining[a];
        for (long long t = 0; t < need[a]; ++t) {
            const long long r = (long long)(hpcgnn_uniform(hpcgnn_chain(key, t)) * (double)m);
            out[draw_off[a] + t] = r < m - 1 ? r : m - 1;
        }
    }
}
