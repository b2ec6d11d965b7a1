// Generates synthetic, schema-valid corpora of any size for scale benchmarks and tests.
#pragma once

#include <cstddef>
#include <string>

namespace kwiki::bench {

/// Writes `count` records (about 1 in 50 a hw-1.0 spec sheet, the rest clean-1.3 technique
/// cards with varied vocabulary) under `root`/{hardware_wiki,kernel_wiki}/records. Deterministic
/// for a given count and seed. Returns the bytes written.
std::size_t generate_corpus(const std::string& root, std::size_t count, unsigned seed = 1);

}  // namespace kwiki::bench
