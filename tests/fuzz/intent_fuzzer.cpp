// libFuzzer target: request extraction, upstream-intent parsing, JSON helpers, brief lines and
// byte budgets must never crash, hang or break their contracts on any input bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "budget.hpp"
#include "json_text.hpp"
#include "kwiki/answer.hpp"
#include "kwiki/error.hpp"
#include "kwiki/intent.hpp"
#include "tokenize.hpp"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);

  // Prose requests: any bytes are a request.
  const kwiki::Intent intent = kwiki::extract_intent(input);
  check(intent.also_arches.empty() || !intent.arch.empty());  // a second architecture only beside a first
  const std::string intent_json = kwiki::json_text(intent.to_json());
  check(nlohmann::json::accept(intent_json));
  kwiki::detail::tokenize(input);

  // Replayed intents and records: JSON in, clear errors out.
  const auto doc = nlohmann::ordered_json::parse(input, nullptr, false);
  if (!doc.is_discarded()) {
    try {
      kwiki::intent_from_upstream(nlohmann::json::parse(input));
    } catch (const kwiki::Error& e) {
      check(e.code() == kwiki::ErrorCode::kBadInput);
    }
    if (doc.is_object() && !kwiki::detail::find_invalid_utf8(input)) {
      kwiki::detail::find_member_value(input, "payload");
      // Byte budgets are hard limits whatever the payload looks like.
      kwiki::Answer answer;
      answer.query_id = "q-0000000000000000";
      kwiki::AnswerRecord record;
      record.record.key = record.record.id = "fuzz.record";
      record.record.store = "gpu_wiki";
      record.record.source = "kernel_wiki";
      // Every brief row reads the fuzzed payload: documents, cards, sheets and ceilings.
      constexpr const char* kTypes[] = {"doc", "technique-card", "symptom-card", "spec-sheet", "measured-ceiling", "instruction"};
      record.record.type = kTypes[size % 6];
      record.record.applies_to_json = R"({"vendor":"generic","arch":"generic"})";
      record.record.payload = kwiki::json_text(doc);
      answer.records.push_back(record);
      answer.records.push_back(record);
      answer.records.back().record.key = "fuzz.second";
      answer.notes.push_back(intent_json.substr(0, 300));
      kwiki::FactAnswer fact;
      fact.product = "fuzz";
      fact.record = "fuzz.sheet";
      fact.field = "memory.bandwidth_tb_s";
      fact.value = 1.5;
      fact.derivation = input.substr(0, 2000);  // a long reason is cut to the brief fact's size
      answer.facts.push_back(fact);
      const std::size_t budget = kwiki::detail::kMinAnswerBytes + size % 4000;
      const std::string json = kwiki::detail::fill_budget(answer, budget, (size & 1) != 0);
      check(json.size() <= budget);
      check(nlohmann::json::accept(json));
      check(!kwiki::render_answer_json(answer).empty());
    }
  }
  return 0;
}
