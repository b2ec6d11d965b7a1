// QueryEngine: intent -> exact hardware facts + ranked kernel knowledge -> a budgeted answer.
#include <algorithm>
#include <fstream>
#include <cmath>
#include <cstdio>
#include <cctype>
#include <set>

#include "budget.hpp"
#include "hardware_lookup.hpp"
#include "integrity.hpp"
#include "kwiki/error.hpp"
#include "kwiki/query.hpp"
#include "lexicon.hpp"
#include "retriever.hpp"
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
      std::to_string(o.explain));
  char buf[24];
  std::snprintf(buf, sizeof buf, "q-%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// Splices extra top-level members into a rendered answer object.
std::string with_members(std::string json, const ordered_json& extra) {
  if (extra.empty()) return json;
  json.pop_back();
  for (auto it = extra.begin(); it != extra.end(); ++it)
    json += "," + ordered_json(it.key()).dump() + ":" + it->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  json += '}';
  return json;
}

// A measured ceiling answers a hardware request when it measures a requested field (its
// spec_reference names the sheet field it is the practical limit of), when the whole sheet or
// a roofline is asked for, or, for a launch ceiling, when the request is about launch cost.
bool ceiling_serves(const Record& ceiling, const Intent& intent) {
  // "spec_reference": "<sheet id>:<field>"; read from the stored text, no parse of the whole
  // payload for one string (ids and field paths hold no escapes).
  std::string field;
  const std::string_view payload = ceiling.payload;
  if (auto key = payload.find("\"spec_reference\""); key != std::string_view::npos) {
    const auto open = payload.find('"', payload.find(':', key + 16) + 1);
    const auto close = open == std::string_view::npos ? open : payload.find('"', open + 1);
    if (close != std::string_view::npos) {
      const std::string_view reference = payload.substr(open + 1, close - open - 1);
      if (const auto colon = reference.rfind(':'); colon != std::string_view::npos) field = reference.substr(colon + 1);
    }
  }
  for (const auto& asked : intent.hardware_fields) {
    if (asked == "spec") return true;
    if (field.empty()) continue;
    if (asked == "roofline" && (field.rfind("memory.bandwidth", 0) == 0 || field.rfind("peak_compute.", 0) == 0)) return true;
    if (field == asked || field.rfind(asked + ".", 0) == 0) return true;
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
  if (options.max_records == 0) throw Error(ErrorCode::kUsage, "--max-records must be at least 1");
  const detail::Lexicon& lex = detail::Lexicon::embedded();
  Intent intent = upstream_intent ? intent_from_upstream(*upstream_intent) : extract_intent(text);
  // Spelling, lexicon first: a word the index has never seen that is one or two edits from a
  // known name ("rmsnrom") is read as that name, and the request is understood again.
  std::vector<std::string> spelling_notes;
  if (!upstream_intent) {
    std::string corrected = text;
    for (const auto& word : intent.free_terms) {
      if (impl_->retriever.knows_word(word)) continue;
      const std::string fixed = lex.nearest_word(word);
      if (fixed.empty() || fixed == word) continue;
      std::string lowered = corrected;
      std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      const auto pos = lowered.find(word);
      if (pos == std::string::npos) continue;
      corrected.replace(pos, word.size(), fixed);
      spelling_notes.push_back("spelling: read \"" + word + "\" as \"" + fixed + "\"");
    }
    if (!spelling_notes.empty()) intent = extract_intent(corrected);
  }
  const std::string request_key = upstream_intent ? json_text(*upstream_intent) : normalized_request(text);
  if (request_key.empty()) throw Error(ErrorCode::kUsage, "empty request: describe the kernel, the GPU or the facts you need");

  QueryResult result;
  Answer& answer = result.answer;
  answer.query_id = make_query_id(impl_->store.generation(), request_key, options);
  answer.notes = intent.notes;
  answer.notes.insert(answer.notes.end(), spelling_notes.begin(), spelling_notes.end());

  // Hardware facts: exact or absent, never ranked.
  std::vector<FactAnswer> facts;
  bool hardware_missing = false;
  std::set<std::string> used;
  const bool wants_hw = intent.wants_hardware() && (!intent.products.empty() || intent.symptoms.empty());
  if (wants_hw && intent.products.empty())
    answer.notes.push_back("hardware facts are per product: name one (e.g. H200, MI300X) for exact numbers");
  const std::vector<std::string> recorded = wants_hw ? detail::recorded_products(impl_->statements) : std::vector<std::string>{};
  std::vector<std::pair<Record, std::string>> bases;  // (named derivative's sheet, its base product)
  for (const auto& product : wants_hw ? intent.products : std::vector<std::string>{}) {
    const std::string key = detail::spec_sheet_key(impl_->statements, product);
    if (key.empty()) {
      hardware_missing = true;
      answer.notes.push_back(detail::not_recorded_note(lex, product, recorded));
      continue;
    }
    if (used.insert(key).second) answer.records.push_back(impl_->record_entry(key, "exact", {"product " + product}));
    const Record& sheet = answer.records.back().record;
    if (std::string base = detail::base_product(sheet); !base.empty()) bases.emplace_back(sheet, std::move(base));
    for (const auto& field : intent.hardware_fields) {
      if (field == "spec") continue;
      auto found = detail::lookup_fields(impl_->store, sheet, field);
      if (found.empty()) answer.notes.push_back(product + " records no " + field);
      for (auto& f : found) {
        if (f.value.is_null()) answer.notes.push_back(product + " " + field + " is not recorded: " + f.derivation);
        facts.push_back(std::move(f));
      }
    }
    for (const auto& ceiling : detail::measured_ceiling_keys(impl_->statements, product)) {
      if (used.contains(ceiling)) continue;
      AnswerRecord entry = impl_->record_entry(ceiling, "exact", {"measured on " + product});
      if (!ceiling_serves(entry.record, intent)) continue;
      used.insert(ceiling);
      answer.records.push_back(std::move(entry));
    }
  }

  // A derivative's base product (same silicon) follows the named sheets, labelled as its base:
  // people porting from or comparing with it want both sheets. Its numbers never enter "hardware".
  for (const auto& [derivative, base] : bases) {
    const std::string key = detail::spec_sheet_key(impl_->statements, base);
    if (key.empty()) continue;
    const std::string why = "base product of " + derivative.product;
    const auto named = std::find_if(answer.records.begin(), answer.records.end(), [&](const AnswerRecord& a) { return a.record.key == key; });
    if (named != answer.records.end()) {
      named->why.push_back(why);
      continue;
    }
    AnswerRecord entry = impl_->record_entry(key, "exact", {why});
    if (entry.record.vendor != derivative.vendor) continue;  // records never cross vendors
    if (entry.record.arch != derivative.arch) entry.match_arch = "other-architecture";
    used.insert(key);
    answer.records.push_back(std::move(entry));
  }

  // Kernel knowledge, ranked inside the architecture boundary.
  ordered_json stages = ordered_json::array();
  // A hardware-only request about unrecorded products is answered "not recorded", nothing else;
  // a request with nothing to search for (only stopwords) finds nothing.
  const bool searchable = !intent.free_terms.empty() || !intent.operators.empty() || !intent.symptoms.empty() ||
                          !intent.dsls.empty() || !intent.mnemonics.empty() || !intent.products.empty() || !intent.arch.empty() ||
                          !intent.dtypes.empty() || !intent.hardware_fields.empty() || !intent.intents.empty();
  if (!searchable) answer.notes.push_back("nothing to search for: name an operator, a GPU, a symptom or a topic");
  if (searchable && !(intent.hardware_only() && hardware_missing && answer.records.empty())) {
    const std::size_t room = options.max_records > answer.records.size() ? options.max_records - answer.records.size() : 0;
    if (room > 0) {
      std::vector<std::string> dummy;
      auto candidates = impl_->retriever.retrieve(intent, room + used.size(), {}, answer.notes, stages, options.explain);
      // Feedback adjusts the prior: rerank once with the adjustments of the candidates found.
      std::vector<std::string> keys;
      for (const auto& c : candidates) keys.push_back(c.key);
      const auto adjust = impl_->state.worth_adjustments(keys);
      if (!adjust.empty()) {
        ordered_json ignored = ordered_json::array();
        std::vector<std::string> ignored_notes;
        candidates = impl_->retriever.retrieve(intent, room + used.size(), adjust, ignored_notes, ignored, options.explain);
      }
      for (auto& c : candidates) {
        if (answer.records.size() >= options.max_records) break;
        if (!used.insert(c.key).second) continue;
        AnswerRecord a = impl_->record_entry(c.key, c.match_arch, c.why);
        if (options.explain) a.explain_json = json_text(c.explain);
        answer.records.push_back(std::move(a));
      }
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

  if (options.brief)
    for (auto& a : answer.records) a.payload_override = detail::brief_payload(a.record.payload, a.record.source, detail::BriefLevel::kBrief);
  if (options.explain) {
    ordered_json explain;
    explain["intent"] = intent.to_json();
    explain["stages"] = stages;
    answer.explain_json = json_text(explain);
  }
  ordered_json extra;
  if (!facts.empty()) extra["hardware"] = detail::facts_to_json(facts);
  std::size_t budget = options.max_bytes;
  const std::size_t extra_size = extra.empty() ? 0 : json_text(extra).size() + 16;
  if (budget != 0) budget = budget > extra_size + detail::kMinAnswerBytes ? budget - extra_size : detail::kMinAnswerBytes;
  result.json = with_members(detail::fit_answer(answer, budget), extra);
  if (options.max_bytes != 0 && result.json.size() > options.max_bytes) {
    // The hardware facts themselves do not fit: keep the answer, drop them, say so.
    answer.notes.push_back("hardware facts dropped for the byte budget; ask kwiki hw");
    result.json = detail::fit_answer(answer, options.max_bytes);
  }
  if (!answer.records.empty() || !facts.empty()) result.exit_code = 0;
  else if (intent.hardware_only() && hardware_missing) result.exit_code = 3;
  else result.exit_code = 1;

  if (options.log) {
    std::vector<std::string> served;
    for (const auto& a : answer.records) served.push_back(a.record.key);
    impl_->state.log_query(answer.query_id, upstream_intent ? json_text(*upstream_intent) : text, json_text(intent.to_json()), served,
                           impl_->store.generation());
  }
  return result;
}

HardwareAnswer QueryEngine::hardware(const std::string& product, const std::string& field, const std::string& vs) {
  const detail::Lexicon& lex = detail::Lexicon::embedded();
  HardwareAnswer out;
  const auto recorded = detail::recorded_products(impl_->statements);
  std::vector<const Record*> sheets;
  for (const auto& spelling : {product, vs}) {
    if (spelling.empty()) continue;
    const auto r = detail::resolve_product(impl_->statements, lex, spelling);
    if (r.status == detail::ProductResolution::Status::kRecorded) {
      out.answer.records.push_back(impl_->record_entry(r.key, "exact", {"product " + r.product}));
      for (const auto& ceiling : detail::measured_ceiling_keys(impl_->statements, r.product))
        out.answer.records.push_back(impl_->record_entry(ceiling, "exact", {"measured on " + r.product}));
      continue;
    }
    std::string list;
    for (const auto& p : recorded) list += (list.empty() ? "" : ", ") + p;
    if (r.status == detail::ProductResolution::Status::kKnownUnrecorded)
      out.answer.notes.push_back(detail::not_recorded_note(lex, r.product, recorded));
    else
      out.answer.notes.push_back("unknown product \"" + spelling + "\". Recorded products: " + list + ".");
    out.exit_code = 3;
  }
  for (const auto& a : out.answer.records)
    if (a.record.type == "spec-sheet") sheets.push_back(&a.record);
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
        out.answer.notes.push_back(sheet->product + " records no " + field);
        out.exit_code = 3;
      }
      for (auto& f : found) {
        if (f.value.is_null()) {
          out.answer.notes.push_back(sheet->product + " " + f.field + " is not recorded: " + f.derivation);
          if (!field.empty()) out.exit_code = 3;
        }
        out.facts.push_back(std::move(f));
      }
    }
    if (sheets.size() == 2) {
      out.comparison = ordered_json::array();
      for (const auto& a : out.facts) {
        if (a.product != sheets[0]->product || !a.value.is_number()) continue;
        for (const auto& b : out.facts) {
          if (b.product != sheets[1]->product || b.field != a.field || !b.value.is_number()) continue;
          ordered_json row;
          row["field"] = a.field;
          row[sheets[0]->product] = a.value;
          row[sheets[1]->product] = b.value;
          row["unit"] = a.unit;
          const double bv = b.value.get<double>();
          row["ratio"] = bv != 0 ? ordered_json(std::round(a.value.get<double>() / bv * 10000) / 10000) : ordered_json();
          out.comparison.push_back(row);
        }
      }
    }
  }
  ordered_json extra;
  extra["hardware"] = detail::facts_to_json(out.facts);
  if (!out.comparison.is_null()) extra["comparison"] = out.comparison;
  out.json = with_members(render_answer_json(out.answer), extra);
  return out;
}

void QueryEngine::feedback(const std::string& query_id, const std::string& record_id, const std::string& outcome) {
  impl_->state.record_feedback(query_id, record_id, outcome);
}

}  // namespace kwiki
