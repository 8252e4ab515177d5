// Generated programs of N nodes that the load benchmarks (bench/load_bench.cc) time and the load
// tests (tests/e2e/untrusted_program_test.cc) hold the load's memory estimate to.
//
//   std::vector<uint8_t> bytes = ferry::example::AddChainProgram(100000);
#ifndef FERRY_BENCH_EXAMPLE_LOAD_PROGRAMS_H_
#define FERRY_BENCH_EXAMPLE_LOAD_PROGRAMS_H_

#include <cstdint>
#include <vector>

namespace ferry::example {

// `n` host adds of a [16] constant to a [16] input, one after the other: the graph the peers
// harness loads (bench/peers/). With `in_place`, in-place adds (add_) to the input: every result
// is a view of it, so its alias group grows by one buffer per node.
std::vector<uint8_t> AddChainProgram(int n, bool in_place = false);

// `n` host nodes alternating relu and neg over a [16] input, every 10th node a graph delegate on
// cuda:0 that multiplies by a constant (each delegate's payload is a sub-program of its own).
std::vector<uint8_t> DelegateChainProgram(int n);

// `n` nodes of `args` copies of one [1] input each: host cats (with the dim first), or graph
// delegates on cuda:0 whose sub-programs take all `args` inputs and return relu of the first.
std::vector<uint8_t> LongArgumentListsProgram(int n, int args, bool delegates);

}  // namespace ferry::example

#endif  // FERRY_BENCH_EXAMPLE_LOAD_PROGRAMS_H_
