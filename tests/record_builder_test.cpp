// Tests of record validation and extraction: refusals with file and pointer, warnings, facts.
#include "record_builder.hpp"

#include "json_text.hpp"
#include "store_writer.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "kwiki/error.hpp"
#include "test_support.hpp"

namespace kwiki::detail {
namespace {

using nlohmann::ordered_json;

const SchemaValidator& validator() {
  static const SchemaValidator v;
  return v;
}

std::string fixture(const std::string& rel) { return test::read_text(test::mini_wiki() + "/" + rel); }

const char* kCard = "kernel_wiki/records/technique-card/nvidia/hopper/cuda/nvidia.hopper.cuda.rmsnorm.fixture-vector-loads.json";
const char* kSheet = "hardware_wiki/records/spec-sheet/nvidia/hopper/fixture-gpu.json";

RecordLocation kernel_at(const std::string& rel) { return {"mem/" + rel, rel, "mem", "kernel_wiki", false}; }
RecordLocation hardware_at(const std::string& rel) { return {"mem/" + rel, rel, "mem", "hardware_wiki", false}; }

// Builds and expects a refusal; returns it.
Error refusal(const std::string& text, const RecordLocation& where) {
  std::vector<Diagnostic> warnings;
  try {
    build_record(validator(), text, where, warnings);
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a refusal";
  return Error(ErrorCode::kInternal, "none");
}

TEST(RecordBuilder, KernelRecordPayloadIsTheFileBytes) {
  const std::string text = fixture(kCard);
  std::vector<Diagnostic> warnings;
  const BuiltRecord b = build_record(validator(), text, kernel_at(kCard), warnings);
  EXPECT_EQ(b.record.id, "nvidia.hopper.cuda.rmsnorm.fixture-vector-loads");
  EXPECT_EQ(b.record.key, b.record.id);
  EXPECT_EQ(b.record.store, "gpu_wiki");
  EXPECT_EQ(b.record.vendor, "nvidia");
  EXPECT_EQ(b.record.operator_family, "rmsnorm");
  EXPECT_NE(text.find(b.record.payload), std::string::npos);
  EXPECT_EQ(b.record.payload.front(), '{');
  EXPECT_EQ(ordered_json::parse(b.record.payload), ordered_json::parse(text)["payload"]);
  EXPECT_TRUE(warnings.empty());
}

TEST(RecordBuilder, InternalRecordsAreNamespaced) {
  std::vector<Diagnostic> warnings;
  RecordLocation where = kernel_at(kCard);
  where.internal = true;
  const BuiltRecord b = build_record(validator(), fixture(kCard), where, warnings);
  EXPECT_EQ(b.record.key, "internal_gpu_wiki::nvidia.hopper.cuda.rmsnorm.fixture-vector-loads");
  EXPECT_EQ(b.record.store, "internal_gpu_wiki");
}

TEST(RecordBuilder, LinksAreKeptForTheRanker) {
  ordered_json doc = ordered_json::parse(fixture(kCard));
  doc["retrieval"]["links"] = {{"see_also", {"generic.generic.any.reduction.two-level-warp-then-block"}},
                               {"cited_records", {"nvidia.hopper.spec-sheet.h100-sxm", "generic.generic.any.reduction.two-level-warp-then-block"}}};
  std::vector<Diagnostic> warnings;
  const BuiltRecord b = build_record(validator(), doc.dump(1), kernel_at(kCard), warnings);
  EXPECT_EQ(b.record.links, (std::vector<std::string>{"generic.generic.any.reduction.two-level-warp-then-block", "nvidia.hopper.spec-sheet.h100-sxm"}));
  const std::string data = encode_search_data(b.record);
  EXPECT_TRUE(data.ends_with("\tgeneric.generic.any.reduction.two-level-warp-then-block,nvidia.hopper.spec-sheet.h100-sxm")) << data;
}

TEST(RecordBuilder, SpecSheetFactsAreFlattened) {
  std::vector<Diagnostic> warnings;
  const BuiltRecord b = build_record(validator(), fixture(kSheet), hardware_at(kSheet), warnings);
  std::map<std::string, HardwareFact> by_path;
  for (const auto& f : b.facts) by_path[f.path] = f;
  ASSERT_TRUE(by_path.count("peak_compute.bf16.dense"));
  EXPECT_DOUBLE_EQ(by_path["peak_compute.bf16.dense"].number, 500);
  EXPECT_EQ(by_path["peak_compute.bf16.dense"].unit, "TFLOPS");
  EXPECT_DOUBLE_EQ(by_path["peak_compute.bf16.tensor-core.sparse_2to4"].number, 1000);
  EXPECT_DOUBLE_EQ(by_path["memory.bandwidth_tb_s"].number, 2.5);
  EXPECT_EQ(by_path["memory.bandwidth_tb_s"].unit, "TB/s");
  EXPECT_EQ(by_path["compute_units.sm_count"].value_json, "100");
  EXPECT_EQ(b.record.payload, std::string(trim_json_space(fixture(kSheet))));
  EXPECT_TRUE(warnings.empty());
}

TEST(RecordBuilder, EmptyFileIsRefused) {
  const Error e = refusal("  \n", kernel_at("x.json"));
  EXPECT_EQ(e.code(), ErrorCode::kEmptyFile);
  EXPECT_EQ(e.file(), "mem/x.json");
}

TEST(RecordBuilder, NonUtf8IsRefusedWithItsPosition) {
  std::string text = fixture(kCard);
  text.insert(text.find("Fixture card"), "\xC3\x28");
  const Error e = refusal(text, kernel_at(kCard));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidUtf8);
  EXPECT_NE(std::string(e.what()).find("line "), std::string::npos);
}

TEST(RecordBuilder, MalformedJsonIsRefused) {
  std::string text = fixture(kCard);
  text.replace(text.find("\"level\""), 7, "level");
  const Error e = refusal(text, kernel_at(kCard));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidJson);
  EXPECT_NE(std::string(e.what()).find("malformed"), std::string::npos);
}

TEST(RecordBuilder, TruncatedJsonIsRefused) {
  const std::string text = fixture(kCard).substr(0, 300);
  const Error e = refusal(text, kernel_at(kCard));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidJson);
  EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos);
}

TEST(RecordBuilder, NulByteIsRefusedEvenWhenTheJsonBeforeItIsComplete) {
  const std::string text = fixture(kCard) + std::string(1, '\0') + "trailing junk";
  const Error e = refusal(text, kernel_at(kCard));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidJson);
  EXPECT_NE(std::string(e.what()).find("NUL byte"), std::string::npos);
}

TEST(RecordBuilder, NumberPastTheDoubleRangeIsMalformedJson) {
  std::string text = fixture(kCard);
  text.replace(text.find("\"level\""), 7, "\"x_overflow\": 1e400, \"level\"");
  const Error e = refusal(text, kernel_at(kCard));
  EXPECT_EQ(e.code(), ErrorCode::kInvalidJson);
  EXPECT_NE(std::string(e.what()).find("1e400"), std::string::npos);
  EXPECT_EQ(e.file(), "mem/" + std::string(kCard));
}

TEST(RecordBuilder, UnknownEnumValueNamesItsPointer) {
  auto doc = ordered_json::parse(fixture(kCard));
  doc["retrieval"]["scope"]["vendor"] = "intel";
  const Error e = refusal(doc.dump(1), kernel_at(kCard));
  EXPECT_EQ(e.code(), ErrorCode::kSchemaViolation);
  EXPECT_EQ(e.pointer(), "/retrieval/scope/vendor");
}

TEST(RecordBuilder, MissingRequiredFieldIsASchemaViolation) {
  auto doc = ordered_json::parse(fixture(kCard));
  doc["payload"].erase("when");
  const Error e = refusal(doc.dump(1), kernel_at(kCard));
  EXPECT_EQ(e.code(), ErrorCode::kSchemaViolation);
  EXPECT_EQ(e.pointer().rfind("/payload", 0), 0u) << e.pointer();
}

TEST(RecordBuilder, WrongTypeIsASchemaViolation) {
  auto doc = ordered_json::parse(fixture(kSheet));
  doc["facts"]["memory"]["capacity_gb"] = "eighty";
  const Error e = refusal(doc.dump(1), hardware_at(kSheet));
  EXPECT_EQ(e.code(), ErrorCode::kSchemaViolation);
  EXPECT_EQ(e.pointer(), "/facts/memory/capacity_gb");
}

TEST(RecordBuilder, DerivedFromIsAProductSlug) {
  auto doc = ordered_json::parse(fixture(kSheet));
  doc["identity"]["derived_from"] = "fixture-base";
  std::vector<Diagnostic> warnings;
  EXPECT_NO_THROW(build_record(validator(), doc.dump(1), hardware_at(kSheet), warnings));
  doc["identity"]["derived_from"] = "Fixture Base";
  const Error e = refusal(doc.dump(1), hardware_at(kSheet));
  EXPECT_EQ(e.code(), ErrorCode::kSchemaViolation);
  EXPECT_EQ(e.pointer(), "/identity/derived_from");
}

// Every derived_from in the bundled wiki names a recorded spec sheet of the same vendor.
TEST(RecordBuilder, BundledDerivedFromNamesARecordedSheet) {
  const std::string root = test::bundled_wiki() + "/hardware_wiki/records/spec-sheet";
  std::map<std::string, std::string> vendor_of;  // product -> vendor
  std::vector<std::pair<std::string, ordered_json>> sheets;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path().extension() != ".json") continue;
    auto doc = ordered_json::parse(test::read_text(e.path().string()));
    vendor_of[doc["identity"]["product"]] = doc["identity"]["vendor"];
    sheets.emplace_back(e.path().string(), std::move(doc));
  }
  int derived = 0;
  for (const auto& [path, doc] : sheets) {
    const auto& base = doc["identity"].value("derived_from", ordered_json());
    if (base.is_null()) continue;
    ++derived;
    ASSERT_TRUE(vendor_of.count(base)) << path << " derives from unrecorded " << base;
    EXPECT_EQ(vendor_of[base], doc["identity"]["vendor"]) << path;
    EXPECT_NE(base, doc["identity"]["product"]) << path;
  }
  EXPECT_GT(derived, 0);
}

TEST(RecordBuilder, UnknownSchemaIsRefused) {
  auto doc = ordered_json::parse(fixture(kCard));
  doc["schema"] = "clean-9.9";
  const Error e = refusal(doc.dump(1), kernel_at(kCard));
  EXPECT_EQ(e.code(), ErrorCode::kUnknownSchema);
  EXPECT_EQ(e.pointer(), "/schema");
}

TEST(RecordBuilder, RecordUnderTheWrongStoreFolderIsRefused) {
  const Error e = refusal(fixture(kCard), hardware_at(kCard));
  EXPECT_EQ(e.code(), ErrorCode::kSchemaViolation);
}

TEST(RecordBuilder, NonObjectIsRefused) {
  const Error e = refusal("[1, 2, 3]", kernel_at("x.json"));
  EXPECT_EQ(e.code(), ErrorCode::kSchemaViolation);
  EXPECT_EQ(e.pointer(), "/");
}

TEST(RecordBuilderWarnings, WhenRepeatingWhatIsReported) {
  auto doc = ordered_json::parse(fixture(kCard));
  doc["payload"]["when"] = doc["payload"]["what"];
  std::vector<Diagnostic> warnings;
  build_record(validator(), doc.dump(1), kernel_at(kCard), warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].pointer, "/payload/when");
}

TEST(RecordBuilderWarnings, SparseNotTwiceDenseIsReported) {
  auto doc = ordered_json::parse(fixture(kSheet));
  doc["facts"]["peak_compute"][0]["sparse_2to4"] = 900;
  std::vector<Diagnostic> warnings;
  build_record(validator(), doc.dump(1), hardware_at(kSheet), warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].pointer, "/facts/peak_compute/0");
}

TEST(RecordBuilderWarnings, DuplicateDtypeRowIsReportedAndFirstWins) {
  auto doc = ordered_json::parse(fixture(kSheet));
  auto row = doc["facts"]["peak_compute"][0];
  row["dense"] = 1;
  row["sparse_2to4"] = 2;
  doc["facts"]["peak_compute"].push_back(row);
  std::vector<Diagnostic> warnings;
  const BuiltRecord b = build_record(validator(), doc.dump(1), hardware_at(kSheet), warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].message.find("duplicate"), std::string::npos);
  for (const auto& f : b.facts)
    if (f.path == "peak_compute.bf16.dense") {
      EXPECT_DOUBLE_EQ(f.number, 500);
    }
}

TEST(RecordBuilderWarnings, MissingBandwidthIsReported) {
  auto doc = ordered_json::parse(fixture(kSheet));
  doc["facts"]["memory"].erase("bandwidth_tb_s");
  std::vector<Diagnostic> warnings;
  build_record(validator(), doc.dump(1), hardware_at(kSheet), warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].pointer, "/facts/memory/bandwidth_tb_s");
}

TEST(RecordBuilderWarnings, ImplausibleRidgePointIsReported) {
  auto doc = ordered_json::parse(fixture(kSheet));
  doc["facts"]["memory"]["bandwidth_tb_s"] = 2500;  // GB/s written into a TB/s field
  std::vector<Diagnostic> warnings;
  build_record(validator(), doc.dump(1), hardware_at(kSheet), warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].message.find("ridge"), std::string::npos);
}

TEST(RecordBuilderWarnings, FileNameNotMatchingIdIsReported) {
  std::vector<Diagnostic> warnings;
  build_record(validator(), fixture(kCard), kernel_at("kernel_wiki/records/other.json"), warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].pointer, "/id");
}

}  // namespace
}  // namespace kwiki::detail
