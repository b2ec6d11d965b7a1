// Uses libkwiki's C++ API: open an index, answer a request, look up a fact.
#include <cstdio>

#include "kwiki/error.hpp"
#include "kwiki/query.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer_cpp INDEX_DIR\n");
    return 2;
  }
  try {
    kwiki::QueryEngine engine = kwiki::QueryEngine::open(argv[1]);
    kwiki::QueryOptions options;
    options.max_records = 3;
    const kwiki::QueryResult r = engine.query("softmax on MI300X", options);
    std::printf("records=%zu first=%s\n", r.answer.records.size(), r.answer.records.empty() ? "-" : r.answer.records.front().record.key.c_str());
    const kwiki::HardwareAnswer hw = engine.hardware("MI300X", "memory.bandwidth_tb_s");
    std::printf("mi300x bandwidth=%s\n", hw.facts.empty() ? "-" : hw.facts.front().value.dump().c_str());
    return r.answer.records.empty() || hw.facts.empty() ? 1 : 0;
  } catch (const kwiki::Error& e) {
    std::fprintf(stderr, "%s\n", e.one_line().c_str());
    return 4;
  }
}
