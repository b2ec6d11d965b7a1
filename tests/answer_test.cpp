// The answer's pieces in-process: brief lines, byte budgets over many sizes, typing distance and
// the spelling rules, coverage verdicts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "answer_render.hpp"
#include "brief.hpp"
#include "budget.hpp"
#include "coverage.hpp"
#include "lexicon.hpp"
#include "text_util.hpp"

namespace kwiki::detail {
namespace {

using nlohmann::json;

Record technique_card(const std::string& id, std::size_t filler) {
  Record r;
  r.key = r.id = id;
  r.store = "gpu_wiki";
  r.source = "kernel_wiki";
  r.type = "technique-card";
  r.vendor = "nvidia";
  r.arch = "hopper";
  r.applies_to_json = R"({"vendor":"nvidia","arch":"hopper"})";
  nlohmann::ordered_json payload = {{"goal", "Reach DRAM bandwidth in RMSNorm on Hopper by giving each row to one thread block and loading it once."},
                  {"problem", {{"statement", std::string(filler, 'p')}}},
                  {"technique", "one row per block, 16-byte vector loads, row kept in registers"},
                  {"what", std::string(filler, 'w')},
                  {"caveats", {std::string(filler / 2, 'c')}},
                  {"sources", {{{"title", "CUDA C++ Best Practices Guide"}, {"url", "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/"}}}}};
  r.payload = payload.dump();
  return r;
}

Answer sample_answer(std::size_t records, std::size_t facts) {
  Answer a;
  a.query_id = "q-0123456789abcdef";
  for (std::size_t i = 0; i < records; ++i) {
    AnswerRecord ar;
    ar.record = technique_card("nvidia.hopper.cuda.sample.record-" + std::to_string(i), 200 + 37 * i);
    ar.why = {"architecture hopper", "operator rmsnorm", "symptom memory-bound", "see also of nvidia.hopper.cuda.sample.record-0"};
    a.records.push_back(std::move(ar));
  }
  for (std::size_t i = 0; i < facts; ++i) {
    FactAnswer f;
    f.product = "h200-sxm";
    f.record = "nvidia.hopper.spec-sheet.h200-sxm";
    f.field = "memory.bandwidth_tb_s." + std::to_string(i);
    f.value = 4.8;
    f.unit = "TB/s";
    f.evidence = "vendor-published";
    f.sources = json::array({{{"title", std::string(300, 's')}, {"ref", "https://example.com"}}});
    if (i == 0) {
      f.value = nullptr;  // not recorded, with a long reason: cut to fit
      f.derivation = std::string(900, 'd');
    }
    a.facts.push_back(std::move(f));
  }
  a.notes = {"not covered: nothing here is about \"something\"; nearest, sharing words only: a, b, c", "spelling: read \"rmsnrom\" as \"rmsnorm\""};
  a.search_notes = {"scope: vendor nvidia, architecture hopper (exact, then architecture-neutral)", "widened: operator filter relaxed to scope"};
  return a;
}

TEST(Budget, FitsEverySizeFactsFirstEnvelopeWithinATenth) {
  for (std::size_t max = kMinAnswerBytes; max <= 20000; max += 97) {
    Answer a = sample_answer(20, 3);
    a.fact_sources = false;  // the brief form's facts: no sources unless asked
    const std::string out = fill_budget(a, max, true);
    ASSERT_LE(out.size(), max) << max;
    const json j = json::parse(out);
    EXPECT_EQ(j["form"], "brief");
    // Facts come first: a record is served only when every fact was.
    if (!j["records"].empty()) {
      EXPECT_EQ(j["hardware"].size(), 3u) << max;
    }
    for (const auto& f : j.value("hardware", json::array())) EXPECT_LE(f.dump().size(), kMaxBriefFactBytes) << max;
    // With content dropped, the envelope keeps to a tenth (or to its essentials below ~1.5 KB);
    // the not-covered verdict is part of the answer, not of its envelope.
    json envelope = j;
    envelope.erase("hardware");
    envelope["records"] = json::object();
    json kept = json::array();
    for (const auto& n : envelope["notes"])
      if (!n.get<std::string>().starts_with("not covered")) kept.push_back(n);
    envelope["notes"] = kept;
    if (max >= 2000 && j["records"].size() < 20) {
      EXPECT_LE(envelope.dump().size(), max / 10) << max << " " << envelope.dump();
    }
    // The verdict note survives every budget that serves a record.
    if (!j["records"].empty()) {
      EXPECT_NE(j["notes"].dump().find("not covered"), std::string::npos) << max;
    }
  }
}

TEST(Budget, RecordsInRankOrderThenDetailFieldsOfTheTopOnes) {
  Answer a = sample_answer(3, 0);
  const std::string out = fill_budget(a, 20000, true);
  const json j = json::parse(out);
  ASSERT_EQ(j["records"].size(), 3u);
  EXPECT_LT(out.find("record-0"), out.find("record-1"));
  EXPECT_LT(out.find("record-1"), out.find("record-2"));
  // The room left went to the top records' other fields, whole.
  EXPECT_EQ(j["records"]["nvidia.hopper.cuda.sample.record-0"]["fields"]["what"].get<std::string>().size(), 200u);
  Answer brief_only = sample_answer(3, 0);
  EXPECT_FALSE(json::parse(fill_budget(brief_only, 20000, false))["records"]["nvidia.hopper.cuda.sample.record-0"].contains("fields"));
}

TEST(Brief, LinesComeFromTheTypesRowAndAreCut) {
  const BriefLines lines = brief_lines(technique_card("x", 10));
  EXPECT_EQ(lines.action, "one row per block, 16-byte vector loads, row kept in registers");
  EXPECT_LE(lines.title.size(), kBriefTitleBytes);
  EXPECT_EQ(lines.cite, "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/");
  // What the lines did not show is what a budget may add.
  EXPECT_EQ(lines.detail_fields, (std::vector<std::string>{"problem", "what", "caveats"}));
  EXPECT_EQ(cut_text("First sentence here. Second one is longer than the limit allows.", 30), "First sentence here.");
  EXPECT_EQ(cut_text("one two three four five six seven", 20), "one two three...");
  EXPECT_EQ(cut_text("short", 20), "short");
  const std::string utf8 = "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9";  // no spaces, two-byte letters
  const std::string cut = cut_text(utf8, 9);
  EXPECT_LE(cut.size(), 9u);
  EXPECT_TRUE(json::accept(json(cut).dump())) << "never inside a UTF-8 sequence";
}

TEST(Spelling, TypingDistanceCountsASwapOnce) {
  EXPECT_EQ(edit_distance("rmsnrom", "rmsnorm"), 1u);
  EXPECT_EQ(edit_distance("layuot", "layout"), 1u);
  EXPECT_EQ(edit_distance("delta", "data"), 2u);
  EXPECT_EQ(edit_distance("mamba", "mfma"), 2u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(Spelling, ReadsTyposOfLexiconWordsOnly) {
  const Lexicon& lex = Lexicon::embedded();
  EXPECT_EQ(lex.nearest_word("rmsnrom"), "rmsnorm");
  EXPECT_EQ(lex.nearest_word("softmx"), "softmax");
  EXPECT_EQ(lex.nearest_word("layernrom"), "layernorm");
  EXPECT_EQ(lex.nearest_word("delta"), "");     // two edits from "data" in five letters
  EXPECT_EQ(lex.nearest_word("mamba"), "");     // not "mfma"
  EXPECT_EQ(lex.nearest_word("radix"), "");     // nothing near
  EXPECT_EQ(lex.nearest_word("bilinear"), "");  // "linear" plus letters in front is another word
  EXPECT_EQ(lex.nearest_word("smith"), "");     // not "switch"
}

TEST(Coverage, WeakEvidenceOnlyIsNotCovered) {
  Intent intent;
  intent.free_terms = {"stencil", "heat"};
  std::vector<Candidate> ranked(5);
  for (std::size_t i = 0; i < ranked.size(); ++i) ranked[i].key = "near-" + std::to_string(i);
  const Coverage none = assess_coverage(intent, ranked, false);
  EXPECT_FALSE(none.covered);
  EXPECT_NE(none.note.find("\"stencil heat\""), std::string::npos) << none.note;
  EXPECT_NE(none.note.find("near-0, near-1, near-2"), std::string::npos) << none.note;
  EXPECT_EQ(none.note.find("near-3"), std::string::npos) << "only the leading records are named";
  // Evidence on a leading record covers it; on a later one it does not.
  ranked[2].evidence.topic = true;
  EXPECT_TRUE(assess_coverage(intent, ranked, false).covered);
  ranked[2].evidence.topic = false;
  ranked[3].evidence.operator_match = true;
  EXPECT_FALSE(assess_coverage(intent, ranked, false).covered);
  // Exact facts answer the request; a request of scope words alone asks nothing beyond it.
  EXPECT_TRUE(assess_coverage(intent, ranked, true).covered);
  Intent scope_only;
  scope_only.products = {"h200-sxm"};
  EXPECT_TRUE(assess_coverage(scope_only, ranked, false).covered);
}

}  // namespace
}  // namespace kwiki::detail
