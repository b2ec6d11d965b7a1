// QueryEngine: intent -> exact hardware facts + ranked kernel knowledge -> a budgeted answer.
#include <algorithm>
#include <fstream>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <set>

#include "budget.hpp"
#include "coverage.hpp"
#include "hardware_lookup.hpp"
#include "integrity.hpp"
#include "kwiki/error.hpp"
#include "kwiki/query.hpp"
#include "lexicon.hpp"
#include "retriever.hpp"
#include "spelling.hpp"
#include "state_db.hpp"
#include "store_writer.hpp"

namespace kwiki {
namespace {

using ordered_json = nlohmann::ordered_json;

std::string make_query_id(const std::string& generation, const std::string& request, const QueryOptions& o) {
  std::uint64_t h = 1469598103934665603ULL;
  auto add = [&](const std::string& s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
    h ^= 0xff;
    h *= 1099511628211ULL;
  };
  add(generation);
  add(request);
  add(std::to_string(o.brief) + "/" + std::to_string(o.max_bytes) + "/" + std::to_string(o.max_records) + "/" +
      std::to_string(o.explain) + (o.sources ? "/sources" : ""));
  char buf[24];
  std::snprintf(buf, sizeof buf, "q-%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// The spec-sheet field a measured ceiling is the practical limit of ("memory.bandwidth_tb_s"),
// from its "spec_reference": "<sheet id>:<field>"; "" when it names none (launch ceilings). Read
// from the stored text: ids and field paths hold no escapes.
std::string ceiling_field(const Record& ceiling) {
  const std::string_view payload = ceiling.payload;
  const auto key = payload.find("\"spec_reference\"");
  if (key == std::string_view::npos) return {};
  const auto open = payload.find('"', payload.find(':', key + 16) + 1);
  const auto close = open == std::string_view::npos ? open : payload.find('"', open + 1);
  if (close == std::string_view::npos) return {};
  const std::string_view reference = payload.substr(open + 1, close - open - 1);
  const auto colon = reference.rfind(':');
  return colon == std::string_view::npos ? std::string() : std::string(reference.substr(colon + 1));
}

// True when a ceiling measures `asked` (a field or a group of fields).
bool ceiling_measures(const std::string& field, const std::string& asked) {
  if (field.empty()) return false;
  if (asked == "roofline") return field.rfind("memory.bandwidth", 0) == 0 || field.rfind("peak_compute.", 0) == 0;
  return field == asked || field.rfind(asked + ".", 0) == 0 || asked.rfind(field + ".", 0) == 0;
}

// A measured ceiling answers a hardware request when it measures a requested field, when the
// whole sheet is asked for, or, for a launch ceiling, when the request is about launch cost.
bool ceiling_serves(const Record& ceiling, const Intent& intent) {
  const std::string field = ceiling_field(ceiling);
  for (const auto& asked : intent.hardware_fields) {
    if (asked == "spec") return true;
    if (ceiling_measures(field, asked)) return true;
  }
  return field.empty() && std::find(intent.symptoms.begin(), intent.symptoms.end(), "launch-bound") != intent.symptoms.end();
}

std::string normalized_request(const std::string& text) {
  std::string out;
  for (const auto& t : detail::Lexicon::tokenize(text)) out += (out.empty() ? "" : " ") + t;
  return out;
}

}  // namespace

struct QueryEngine::Impl {
  std::string index_dir;
  Store store;
  detail::Retriever retriever;
  detail::StateDb state;
  detail::StatementCache statements;

  Impl(std::string dir, Store s, const OpenOptions& options)
      : index_dir(std::move(dir)), store(std::move(s)), retriever(open_full_text(store, options)), state(index_dir),
        statements(store.sqlite()) {}

  static detail::Retriever open_full_text(const Store& store, const OpenOptions& options) {
    if (options.shards.empty()) {
      detail::verify_full_text(store.generation_dir());  // Xapian never reads a damaged file
      return detail::Retriever(store.generation_dir() + "/" + detail::kXapianDir);
    }
    std::ifstream in(store.generation_dir() + "/FINGERPRINT");
    std::string fingerprint;
    in >> fingerprint;
    return detail::Retriever(std::make_unique<detail::ShardSet>(detail::parse_shard_list(options.shards), fingerprint,
                                                                options.remote_timeout_ms));
  }

  AnswerRecord record_entry(const std::string& key, const std::string& match, std::vector<std::string> why) {
    AnswerRecord a;
    a.record = *store.get(key);
    a.match_arch = match;
    a.why = std::move(why);
    return a;
  }

  // ---- the steps of a query ----

  // The intent of the request; a typo of a lexicon word is read as that word, and the request
  // understood again (the fixes are reported in the notes).
  Intent understand(const std::string& text, const std::optional<nlohmann::json>& upstream, std::vector<std::string>& notes) {
    if (upstream) return intent_from_upstream(*upstream);
    Intent intent = extract_intent(text);
    const detail::SpellingResult spelling = detail::correct_spelling(text, intent, retriever, detail::Lexicon::embedded());
    if (spelling.fixes.empty()) return intent;
    for (const auto& fix : spelling.fixes) notes.push_back(detail::spelling_note(fix));
    return extract_intent(spelling.text);
  }

  // Hardware facts, exact or absent, never ranked: the named products' sheets and the fields
  // asked for, the measured ceilings that serve the request, and a derivative's base product.
  // Returns true when a named product is not recorded.
  bool answer_hardware(const Intent& intent, Answer& answer, std::set<std::string>& used) {
    const detail::Lexicon& lex = detail::Lexicon::embedded();
    const bool wants_hw = intent.wants_hardware() && (!intent.products.empty() || intent.symptoms.empty());
    if (!wants_hw) return false;
    if (intent.products.empty()) answer.notes.push_back("hardware facts are per product: name one (e.g. H200, MI300X) for exact numbers");
    bool missing = false;
    const std::vector<std::string> recorded = detail::recorded_products(statements);
    std::vector<std::pair<Record, std::string>> bases;  // (named derivative's sheet, its base product)
    for (const auto& product : intent.products) {
      const std::string key = detail::spec_sheet_key(statements, product);
      if (key.empty()) {
        missing = true;
        answer.notes.push_back(detail::not_recorded_note(lex, product, recorded));
        continue;
      }
      if (used.insert(key).second) answer.records.push_back(record_entry(key, "exact", {"product " + product}));
      const Record& sheet = answer.records.back().record;
      if (std::string base = detail::base_product(sheet); !base.empty()) bases.emplace_back(sheet, std::move(base));
      for (const auto& field : intent.hardware_fields) {
        if (field == "spec") continue;
        auto found = detail::lookup_fields(store, sheet, field);
        if (found.empty()) answer.notes.push_back(product + " records no " + field);
        for (auto& f : found) {
          if (f.value.is_null()) answer.notes.push_back(product + " " + field + " is not recorded: " + f.derivation);
          answer.facts.push_back(std::move(f));
        }
      }
      for (const auto& ceiling : detail::measured_ceiling_keys(statements, product)) {
        if (used.contains(ceiling)) continue;
        AnswerRecord entry = record_entry(ceiling, "exact", {"measured on " + product});
        if (!ceiling_serves(entry.record, intent)) continue;
        used.insert(ceiling);
        answer.records.push_back(std::move(entry));
      }
    }
    // A derivative's base product (same silicon) follows the named sheets, labelled as its base:
    // people porting from or comparing with it want both sheets. Its numbers never enter "hardware".
    for (const auto& [derivative, base] : bases) {
      const std::string key = detail::spec_sheet_key(statements, base);
      if (key.empty()) continue;
      const std::string why = "base product of " + derivative.product;
      const auto named = std::find_if(answer.records.begin(), answer.records.end(), [&](const AnswerRecord& a) { return a.record.key == key; });
      if (named != answer.records.end()) {
        named->why.push_back(why);
        continue;
      }
      AnswerRecord entry = record_entry(key, "exact", {why});
      if (entry.record.vendor != derivative.vendor) continue;  // records never cross vendors
      if (entry.record.arch != derivative.arch) entry.match_arch = "other-architecture";
      used.insert(key);
      answer.records.push_back(std::move(entry));
    }
    return missing;
  }

  // Kernel knowledge, ranked inside the architecture boundary; feedback adjusts the prior, so
  // the candidates found are ranked once more with their adjustments.
  detail::Retrieval retrieve_knowledge(const Intent& intent, std::size_t want, bool explain) {
    detail::Retrieval found = retriever.retrieve({intent, want, nullptr, explain});
    std::vector<std::string> keys;
    for (const auto& c : found.candidates) keys.push_back(c.key);
    const auto adjust = state.worth_adjustments(keys);
    if (!adjust.empty()) found.candidates = retriever.retrieve({intent, want, &adjust, explain}).candidates;
    return found;
  }
};

QueryEngine::QueryEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
QueryEngine::QueryEngine(QueryEngine&&) noexcept = default;
QueryEngine& QueryEngine::operator=(QueryEngine&&) noexcept = default;
QueryEngine::~QueryEngine() = default;

QueryEngine QueryEngine::open(const std::string& index_dir, const OpenOptions& options) {
  Store store = Store::open(index_dir);
  return QueryEngine(std::make_unique<Impl>(index_dir, std::move(store), options));
}

const Store& QueryEngine::store() const { return impl_->store; }

QueryResult QueryEngine::query(const std::string& text, const QueryOptions& options, const std::optional<nlohmann::json>& upstream_intent) {
  if (options.max_bytes != 0 && options.max_bytes < detail::kMinAnswerBytes)
    throw Error(ErrorCode::kUsage, "--max-bytes " + std::to_string(options.max_bytes) + " is below the smallest answer (" +
                                       std::to_string(detail::kMinAnswerBytes) + " bytes)");
  const bool brief_form = options.brief || options.max_bytes != 0;
  const std::size_t max_records = options.max_records != 0 ? options.max_records : options.brief ? kDefaultBriefRecords : kDefaultRecords;
  std::vector<std::string> spelling_notes;
  const Intent intent = impl_->understand(text, upstream_intent, spelling_notes);
  const std::string request_key = upstream_intent ? json_text(*upstream_intent) : normalized_request(text);
  if (request_key.empty()) throw Error(ErrorCode::kUsage, "empty request: describe the kernel, the GPU or the facts you need");

  QueryResult result;
  Answer& answer = result.answer;
  answer.query_id = make_query_id(impl_->store.generation(), request_key, options);
  answer.notes = intent.notes;
  answer.notes.insert(answer.notes.end(), spelling_notes.begin(), spelling_notes.end());

  // 1. Hardware facts: exact or absent.
  std::set<std::string> used;
  const bool hardware_missing = impl_->answer_hardware(intent, answer, used);
  const bool answered_exactly = !answer.facts.empty() || !answer.records.empty();

  // 2. Kernel knowledge. A hardware-only request about unrecorded products is answered "not
  // recorded", nothing else; a request with nothing to search for (only stopwords) finds nothing.
  const bool searchable = !intent.free_terms.empty() || !intent.operators.empty() || !intent.symptoms.empty() ||
                          !intent.dsls.empty() || !intent.mnemonics.empty() || !intent.products.empty() || !intent.arch.empty() ||
                          !intent.dtypes.empty() || !intent.hardware_fields.empty() || !intent.intents.empty();
  if (!searchable) answer.notes.push_back("nothing to search for: name an operator, a GPU, a symptom or a topic");
  ordered_json stages = ordered_json::array();
  bool covered = true;
  const std::size_t room = max_records > answer.records.size() ? max_records - answer.records.size() : 0;
  if (searchable && room > 0 && !(intent.hardware_only() && hardware_missing && answer.records.empty())) {
    detail::Retrieval found = impl_->retrieve_knowledge(intent, room + used.size(), options.explain);
    answer.search_notes = std::move(found.notes);
    stages = std::move(found.stages);
    // 3. Coverage: the leading records share an operator, symptom, instruction or topic with
    // the request, or the answer says the corpus does not cover it and names what is nearest.
    const detail::Coverage coverage = detail::assess_coverage(intent, found.candidates, answered_exactly);
    covered = coverage.covered;
    if (!covered) answer.notes.insert(answer.notes.begin(), coverage.note);
    // Not covered: the nearest records only, as the note names them.
    const std::size_t limit = covered ? max_records : std::min(max_records, answer.records.size() + detail::kCoverageLeaders);
    for (auto& c : found.candidates) {
      if (answer.records.size() >= limit) break;
      if (!used.insert(c.key).second) continue;
      AnswerRecord a = impl_->record_entry(c.key, c.match_arch, std::move(c.why));
      if (options.explain) a.explain_json = json_text(c.explain);
      answer.records.push_back(std::move(a));
    }
  }
  // A measured symptom ("70% of DRAM bandwidth") makes the request a diagnosis: the technique
  // records lead, and the hardware records it cited follow them (the facts stay in "hardware").
  const bool diagnosis = std::any_of(intent.measured.begin(), intent.measured.end(), [](const MeasuredSymptom& m) { return m.applies; });
  if (diagnosis && !intent.hardware_only()) {
    std::stable_partition(answer.records.begin(), answer.records.end(), [](const AnswerRecord& a) {
      return a.record.type != "spec-sheet" && a.record.type != "measured-ceiling";
    });
  }
  if (options.explain) {
    ordered_json explain;
    explain["intent"] = intent.to_json();
    explain["stages"] = stages;
    answer.explain_json = json_text(explain);
  }

  // 4. The exit status, then the answer in its form and budget.
  if (answer.records.empty() && answer.facts.empty()) result.exit_code = intent.hardware_only() && hardware_missing ? 3 : 1;
  else if (!covered) result.exit_code = 1;
  answer.form = brief_form ? AnswerForm::kBrief : AnswerForm::kFull;
  answer.fact_sources = !brief_form || options.sources;
  result.json = options.max_bytes != 0 ? detail::fill_budget(answer, options.max_bytes, !options.brief) : render_answer_json(answer);

  if (options.log) {
    std::vector<std::string> served;
    for (const auto& a : answer.records) served.push_back(a.record.key);
    impl_->state.log_query(answer.query_id, upstream_intent ? json_text(*upstream_intent) : text, json_text(intent.to_json()), served,
                           impl_->store.generation());
  }
  return result;
}

HardwareAnswer QueryEngine::hardware(const std::string& product, const HardwareOptions& options) {
  const detail::Lexicon& lex = detail::Lexicon::embedded();
  HardwareAnswer out;
  Answer& answer = out.answer;
  const auto recorded = detail::recorded_products(impl_->statements);
  for (const auto& spelling : {product, options.vs}) {
    if (spelling.empty()) continue;
    const auto r = detail::resolve_product(impl_->statements, lex, spelling);
    if (r.status == detail::ProductResolution::Status::kRecorded) {
      answer.records.push_back(impl_->record_entry(r.key, "exact", {"product " + r.product}));
      // The measured ceilings beside the sheet: all of them, or those of the field asked for.
      for (const auto& ceiling : detail::measured_ceiling_keys(impl_->statements, r.product)) {
        AnswerRecord entry = impl_->record_entry(ceiling, "exact", {"measured on " + r.product});
        if (options.field.empty() || ceiling_measures(ceiling_field(entry.record), options.field)) answer.records.push_back(std::move(entry));
      }
      continue;
    }
    std::string list;
    for (const auto& p : recorded) list += (list.empty() ? "" : ", ") + p;
    if (r.status == detail::ProductResolution::Status::kKnownUnrecorded)
      answer.notes.push_back(detail::not_recorded_note(lex, r.product, recorded));
    else
      answer.notes.push_back("unknown product \"" + spelling + "\". Recorded products: " + list + ".");
    out.exit_code = 3;
  }
  std::vector<const Record*> sheets;
  for (const auto& a : answer.records)
    if (a.record.type == "spec-sheet") sheets.push_back(&a.record);
  const std::string& field = options.field;
  if (out.exit_code == 0) {
    for (const Record* sheet : sheets) {
      auto found = detail::lookup_fields(impl_->store, *sheet, field.empty() ? "peak_compute" : field);
      if (field.empty()) {
        for (const char* group : {"memory", "compute_units", "clocks", "power"}) {
          auto more = detail::lookup_fields(impl_->store, *sheet, group);
          found.insert(found.end(), more.begin(), more.end());
        }
      }
      if (found.empty()) {
        answer.notes.push_back(sheet->product + " records no " + field);
        out.exit_code = 3;
      }
      for (auto& f : found) {
        if (f.value.is_null()) {
          answer.notes.push_back(sheet->product + " " + f.field + " is not recorded: " + f.derivation);
          if (!field.empty()) out.exit_code = 3;
        }
        answer.facts.push_back(std::move(f));
      }
    }
    if (sheets.size() == 2) {
      answer.comparison = ordered_json::array();
      for (const auto& a : answer.facts) {
        if (a.product != sheets[0]->product || !a.value.is_number()) continue;
        for (const auto& b : answer.facts) {
          if (b.product != sheets[1]->product || b.field != a.field || !b.value.is_number()) continue;
          ordered_json row;
          row["field"] = a.field;
          row[sheets[0]->product] = a.value;
          row[sheets[1]->product] = b.value;
          row["unit"] = a.unit;
          const double bv = b.value.get<double>();
          row["ratio"] = bv != 0 ? ordered_json(std::round(a.value.get<double>() / bv * 10000) / 10000) : ordered_json();
          answer.comparison.push_back(row);
        }
      }
    }
  }
  answer.form = options.brief ? AnswerForm::kBrief : AnswerForm::kFull;
  answer.fact_sources = !options.brief || options.sources;
  out.json = render_answer_json(answer);
  return out;
}

QueryResult QueryEngine::get(const std::vector<std::string>& ids) const {
  QueryResult out;
  Answer& answer = out.answer;
  std::set<std::string> served;
  for (const auto& id : ids) {
    auto record = impl_->store.get(id);
    if (!record) {
      answer.notes.push_back("unknown id: " + id);
      continue;
    }
    if (!served.insert(record->key).second) {
      answer.notes.push_back("repeated id served once: " + id);
      continue;
    }
    AnswerRecord a;
    a.record = std::move(*record);
    a.why = {"requested by id"};
    answer.records.push_back(std::move(a));
  }
  out.exit_code = answer.records.empty() ? 1 : 0;
  out.json = render_answer_json(answer);
  return out;
}

void QueryEngine::feedback(const std::string& query_id, const std::string& record_id, const std::string& outcome) {
  impl_->state.record_feedback(query_id, record_id, outcome);
}

}  // namespace kwiki
