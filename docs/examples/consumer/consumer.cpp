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
    kwiki::HardwareOptions field;
    field.field = "memory.bandwidth_tb_s";
    const kwiki::HardwareAnswer hw = engine.hardware("MI300X", field);
    const auto& facts = hw.answer.facts;
    std::printf("mi300x bandwidth=%s (%s)\n", facts.empty() ? "-" : facts.front().value.dump().c_str(),
                facts.empty() ? "-" : (facts.front().record + ":" + facts.front().field).c_str());
    return r.answer.records.empty() || facts.empty() ? 1 : 0;
  } catch (const kwiki::Error& e) {
    std::fprintf(stderr, "%s\n", e.one_line().c_str());
    return 4;
  }
}
