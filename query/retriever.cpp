// Kernel-knowledge retrieval: BM25 over the Xapian index inside the scope, staged widening, rerank.
#include "retriever.hpp"

#include <xapian.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>
#include <sstream>

#include "kwiki/error.hpp"
#include "store_writer.hpp"
#include "text_util.hpp"

namespace kwiki::detail {
namespace {

struct HitData {
  std::string key, type, vendor, arch, dsl;
  std::vector<std::string> products, operators, symptoms, tags, links;
};

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t end = s.find(sep, start);
    out.emplace_back(s.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

HitData decode(const std::string& data) {
  const auto f = split(data, '\t');
  HitData h;
  auto at = [&](std::size_t i) { return i < f.size() ? f[i] : std::string(); };
  h.key = at(0);
  h.type = at(1);
  h.vendor = at(2);
  h.arch = at(3);
  h.dsl = at(4);
  h.products = split(at(5), ',');
  h.operators = split(at(6), ',');
  h.symptoms = split(at(7), ',');
  h.tags = split(at(8), ',');
  h.links = split(at(10), ',');  // at(9) is the store
  return h;
}

bool overlaps(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (const auto& x : a)
    if (std::find(b.begin(), b.end(), x) != b.end()) return true;
  return false;
}

// Record types that serve each intent.
bool type_serves(const std::string& type, const std::vector<std::string>& intents) {
  for (const auto& i : intents) {
    if (i == "technique" && (type == "technique-card" || type == "strategy" || type == "reference-kernel" || type == "dispatch-rule")) return true;
    if (i == "pitfall" && type == "anti-strategy") return true;
    if (i == "documentation" && (type == "doc" || type == "arch-feature" || type == "instruction")) return true;
    if (i == "diagnosis" && (type == "symptom-card" || type == "technique-card")) return true;
    if (i == "correctness" && (type == "numerics-rule" || type == "anti-strategy")) return true;
  }
  return false;
}

Xapian::Query any_of(const char* prefix, const std::vector<std::string>& values) {
  std::vector<Xapian::Query> terms;
  for (const auto& v : values) terms.emplace_back(prefix + v);
  return Xapian::Query(Xapian::Query::OP_OR, terms.begin(), terms.end());
}


// "a", "a and b", "a, b and c": a list as a note reads it.
std::string join_and(const std::vector<std::string>& items) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : i + 1 == items.size() ? " and " : ", ") + items[i];
  return out;
}

// A fresh match-everything query. Not Xapian::Query::MatchAll: copies of that shared static
// bump a non-atomic reference count, a data race when engines run on several threads.
Xapian::Query match_all() { return Xapian::Query(std::string()); }

// Relevance feedback from the leading records' technique tags (see rank_by_shared_tags).
constexpr std::size_t kFeedbackRecords = 3;
constexpr double kSharedTagWeight = 0.10;  ///< per shared tag of idf weight 1
constexpr double kSharedTagCap = 3.0;      ///< at most this much idf weight counts

// Link feedback: the leading records' links (see_also, cited_records) are what their authors
// would read next. Each of the first kLinkVoters records votes for the records it links to
// (kLinkVote, divided by its rank) and, more weakly, for the records that link to it (a
// technique card naming the instruction it uses); the voters keep their places and the rest
// is re-ranked (see vote_by_links). Then up to kLinkedPlaces of the leader's links still
// ranked below kLinkedPlace move up to it (see place_links).
constexpr std::size_t kLinkVoters = 2;
constexpr double kLinkVote = 0.4;
constexpr double kBackLinkVote = 0.1;
constexpr std::size_t kLinkedPlace = 6;   ///< 1-based rank a linked record is lifted to
constexpr std::size_t kLinkedPlaces = 3;  ///< at most this many are lifted

// A record tied to operators the request does not name (an attention card for a GEMM request).
constexpr double kOtherOperatorPenalty = -0.2;

// A pure hardware request: a record tagged with what the requested numbers serve (lexicon).
constexpr double kHardwareUseBonus = 0.25;

// A record of another architecture of the request's vendor, reached through an exact record's
// link (a CDNA4 card naming its CDNA3 counterpart): labelled, and ranked below an exact record
// or a neutral one of the same strength.
constexpr double kOtherArchitecturePenalty = -0.10;

// The text part of a score is a record's BM25 weight over the pool's best, but never over less
// than kTextEvidence x ln(records): about one rare word fully matched. A request with almost
// no words beyond its labels ("how many SMs on an H100 PCIe card") then lets its labels rank,
// instead of crowning whichever record best matches "card".
constexpr double kTextEvidence = 1.5;

// With several architectures named, each one's best record is at most at this 1-based place.
constexpr std::size_t kEachArchitecturePlace = 3;

// A link names a record id; a private record's key carries the store prefix.
std::string_view id_of(std::string_view key) {
  const std::string_view prefix = kInternalPrefix;
  return key.starts_with(prefix) ? key.substr(prefix.size()) : key;
}
bool links_to(const HitData& from, std::string_view key) {
  const std::string_view id = id_of(key);
  return std::find(from.links.begin(), from.links.end(), id) != from.links.end();
}

// Rank order: higher score first, ties broken by key.
bool ranks_before(const Candidate& a, const Candidate& b) {
  if (a.score != b.score) return a.score > b.score;
  return a.key < b.key;
}

struct WeightedTerm {
  std::string term;
  double weight;
  std::string source;
};

}  // namespace

struct Retriever::Impl {
  Xapian::Database db;
  std::unique_ptr<ShardSet> shards;  ///< set when the full text is sharded across endpoints
  // Term frequencies already asked for: the generation never changes under an engine, and on
  // remote shards each lookup is a network round trip per shard.
  std::unordered_map<std::string, Xapian::doccount> termfreq_cache;
  // Decoded hit data and worth of documents already seen, by docid: reading a document's values
  // costs more than ranking it, and the generation never changes under an engine.
  using CachedHit = std::pair<std::shared_ptr<const HitData>, double>;  ///< hit data, worth
  std::unordered_map<Xapian::docid, CachedHit> hit_cache;

  CachedHit hit_data(const Xapian::MSetIterator& it) {
    if (auto found = hit_cache.find(*it); found != hit_cache.end()) return found->second;
    const Xapian::Document doc = it.get_document();
    CachedHit entry{std::make_shared<const HitData>(decode(doc.get_value(term::kSlotHit))),
                    Xapian::sortable_unserialise(doc.get_value(term::kSlotWorth))};
    if (hit_cache.size() >= 100000) hit_cache.clear();
    hit_cache.emplace(*it, entry);
    return entry;
  }

  Xapian::doccount termfreq(const std::string& term) {
    if (auto it = termfreq_cache.find(term); it != termfreq_cache.end()) return it->second;
    const Xapian::doccount f = db.get_termfreq(term);
    if (termfreq_cache.size() >= 100000) termfreq_cache.clear();
    termfreq_cache.emplace(term, f);
    return f;
  }
  Xapian::Stem stemmer{"english"};

  std::vector<WeightedTerm> text_terms(const Intent& intent, const Lexicon& lex) {
    std::vector<WeightedTerm> out;
    std::set<std::string> seen;
    auto add = [&](const std::string& word, double weight, const std::string& source) {
      for (const auto& token : Lexicon::tokenize(word)) {
        // Index terms are stemmed, dot-free words (the TermGenerator splits on '.', '_' stays).
        for (auto piece : split(token, '.')) {
          if (piece.size() < 2 || lex.is_stopword(piece)) continue;
          std::string term = stemmer(piece);
          if (seen.insert(term).second) out.push_back({term, weight, source});
        }
      }
    };
    for (const auto& t : intent.free_terms) {
      add(t, 1.0, "free");
      if (const auto* syn = lex.synonyms(t))
        for (const auto& s : *syn) add(s, 0.35, "synonym");
    }
    for (const auto& o : intent.operators) {
      std::string words = o;
      std::replace(words.begin(), words.end(), '-', ' ');
      add(words, 1.5, "operator");
    }
    for (const auto& s : intent.symptoms) {
      std::string words = s;
      std::replace(words.begin(), words.end(), '-', ' ');
      add(words, 1.2, "symptom");
    }
    for (const auto& m : intent.mnemonics) add(m, 2.0, "mnemonic");
    for (const auto& d : intent.dsls) add(d, 0.6, "dsl");
    for (const auto& d : intent.dtypes) add(d, 0.9, "dtype");
    for (const auto& f : intent.hardware_fields) {
      std::string words = f;
      std::replace_if(words.begin(), words.end(), [](char c) { return c == '.' || c == '_'; }, ' ');
      add(words, 0.4, "hardware");
    }
    return out;
  }

  Xapian::Query text_query(const std::vector<WeightedTerm>& terms) {
    std::vector<Xapian::Query> parts;
    for (const auto& t : terms) parts.emplace_back(Xapian::Query::OP_SCALE_WEIGHT, Xapian::Query(t.term), t.weight);
    if (parts.empty()) return match_all();
    return Xapian::Query(Xapian::Query::OP_OR, parts.begin(), parts.end());
  }

  // Nearest indexed word within two edits, for a word the index has never seen.
  std::string correct(const std::string& word) {
    if (word.size() < 4) return {};
    std::string best;
    std::size_t best_distance = 3;
    std::size_t scanned = 0;
    for (auto it = db.allterms_begin(word.substr(0, 1)); it != db.allterms_end(word.substr(0, 1)) && scanned < 50000; ++it, ++scanned) {
      const std::string term = *it;
      if (term.empty() || std::isupper(static_cast<unsigned char>(term[0]))) continue;
      if (term.size() + 2 < word.size() || term.size() > word.size() + 2) continue;
      const std::size_t d = edit_distance(word, term);
      if (d < best_distance || (d == best_distance && !best.empty() && termfreq(term) > termfreq(best))) {
        best_distance = d;
        best = term;
      }
    }
    return best;
  }
};

Retriever::Retriever(const std::string& xapian_dir) : impl_(std::make_unique<Impl>()) {
  try {
    impl_->db = Xapian::Database(xapian_dir);
  } catch (const Xapian::Error& e) {
    throw Error(ErrorCode::kIndexCorrupt, "cannot open the full-text index: " + e.get_description() +
                                              "; rebuild with `kwiki index --force`", xapian_dir);
  }
}

Retriever::Retriever(std::unique_ptr<ShardSet> shards) : impl_(std::make_unique<Impl>()) {
  impl_->db = shards->database();
  impl_->shards = std::move(shards);
}

Retriever::~Retriever() = default;

bool Retriever::knows_word(const std::string& word) {
  try {
    const std::string stem = impl_->stemmer(word);
    return impl_->termfreq(stem) > 0 || (stem != word && impl_->termfreq(word) > 0);
  } catch (const Xapian::Error& e) {
    if (impl_->shards) throw impl_->shards->explain(e);
    return false;
  }
}

std::vector<Candidate> Retriever::retrieve(const Intent& intent, std::size_t want, const std::map<std::string, double>& worth_adjust,
                                           std::vector<std::string>& notes, nlohmann::ordered_json& stages, bool explain) {
  const Lexicon& lex = Lexicon::embedded();
  try {
    std::vector<WeightedTerm> terms = impl_->text_terms(intent, lex);
    // Spelling: a free word the index has never seen is replaced by its nearest indexed word.
    for (auto& t : terms) {
      if (t.source != "free" || impl_->termfreq(t.term) > 0) continue;
      const std::string fixed = impl_->correct(t.term);
      if (!fixed.empty()) {
        notes.push_back("spelling: read \"" + t.term + "\" as \"" + fixed + "\"");
        t.term = fixed;
      }
    }
    const Xapian::Query text = impl_->text_query(terms);

    // Hardware fact records are answered by exact lookup, never ranked.
    const Xapian::Query exact_only(Xapian::Query::OP_OR, Xapian::Query(std::string(term::kType) + "spec-sheet"),
                                   Xapian::Query(std::string(term::kType) + "measured-ceiling"));
    std::string vendor = intent.vendor;
    const std::string arch = intent.arch;
    const std::vector<std::string> arches = intent.exact_arches();  // every one named is exact scope
    auto is_exact = [&](const std::string& a) { return std::find(arches.begin(), arches.end(), a) != arches.end(); };
    Xapian::Query vendor_filter = match_all();
    if (!vendor.empty())
      vendor_filter = Xapian::Query(Xapian::Query::OP_OR, Xapian::Query(std::string(term::kVendor) + vendor),
                                    Xapian::Query(std::string(term::kVendor) + "generic"));
    const Xapian::Query neutral(std::string(term::kArch) + "generic");
    Xapian::Query scope = vendor_filter;
    if (!arch.empty()) {
      scope = Xapian::Query(Xapian::Query::OP_FILTER, vendor_filter,
                            Xapian::Query(Xapian::Query::OP_OR, any_of(term::kArch, arches), neutral));
    } else if (!vendor.empty() && !intent.unresolved_arch.empty()) {
      // An architecture kwiki cannot resolve: the vendor's neutral records first; its other
      // architectures only as the labelled last step.
      scope = Xapian::Query(Xapian::Query::OP_FILTER, vendor_filter, neutral);
    }

    struct Stage {
      std::string name;
      Xapian::Query filter;
      bool other_architecture = false;
      bool text_optional = false;  ///< the filter alone selects; the text only weighs
    };
    // Candidate generation widens in stages (primary operator and symptom, operator, any named
    // operator, symptom, the whole scope); the pooled candidates are then ranked together, so a
    // cross-cutting record can outrank a weak operator match. Other architectures come last.
    std::vector<Stage> plan;
    const bool has_op = !intent.operators.empty();
    const bool has_sym = !intent.symptoms.empty();
    const bool measured_symptom = std::any_of(intent.measured.begin(), intent.measured.end(), [](const MeasuredSymptom& m) { return m.applies; });
    // Records name operators as frameworks do ("rms_norm", "matmul"): match every spelling.
    auto spellings_of = [&](const std::vector<std::string>& ops) {
      std::vector<std::string> out;
      for (const auto& o : ops) {
        push_unique(out, o);
        for (const auto& s : lex.operator_spellings(o)) push_unique(out, s);
      }
      return out;
    };
    const std::vector<std::string> primary_ops = has_op ? spellings_of({intent.operators.front()}) : std::vector<std::string>{};
    const std::vector<std::string> named_ops = spellings_of(intent.operators);
    // Two searches cover the stages: the named operators inside the scope (so a weak text match
    // on the operator is still a candidate), then the whole scope. Symptom and primary-operator
    // matches are ranked from each hit's labels, not searched again.
    auto within = [&](const Xapian::Query& q) { return Xapian::Query(Xapian::Query::OP_FILTER, scope, q); };
    if (has_op) plan.push_back({"operator", within(any_of(term::kOperator, named_ops))});
    // A request for hardware numbers alone: the records that use those numbers (sm_count ->
    // wave quantization; the lexicon's "serves") are candidates, whatever their words.
    std::vector<std::string> hardware_uses;
    if (!has_op && !has_sym && !measured_symptom)
      for (const auto& f : intent.hardware_fields)
        for (const auto& t : lex.hardware_serves(f)) push_unique(hardware_uses, t);
    if (!hardware_uses.empty()) plan.push_back({"hardware use", within(any_of(term::kTag, hardware_uses)), false, true});
    plan.push_back({"scope", scope});
    const bool widen_arch = !vendor.empty() && (!arch.empty() || !intent.unresolved_arch.empty());

    std::string scope_note = "scope: ";
    if (vendor.empty() && arch.empty()) scope_note += "no vendor or architecture named; all records eligible";
    else if (vendor.empty())
      scope_note += "architectures " + join_and(arches) + " of the products named (exact, then architecture-neutral)";
    else if (!arch.empty())
      scope_note += "vendor " + vendor + (arches.size() > 1 ? ", architectures " : ", architecture ") + join_and(arches) + " (exact, then architecture-neutral)";
    else if (!intent.unresolved_arch.empty()) scope_note += "vendor " + vendor + " (architecture-neutral; architecture not resolved)";
    else scope_note += "vendor " + vendor + " (no architecture named: all " + vendor + " architectures)";
    notes.push_back(scope_note);

    Xapian::Enquire enquire(impl_->db);
    enquire.set_weighting_scheme(Xapian::BM25Weight());
    const std::size_t depth = std::clamp<std::size_t>(want * 2, 30, 200);
    std::set<Xapian::docid> seen_docs;
    struct Hit {
      std::shared_ptr<const HitData> data;  // shared with the engine's hit cache
      double weight = 0;
      double worth = 0.5;
      int stage = 0;
    };
    Xapian::doccount last_matches = 0;  // estimated matches of the last stage run
    auto run_stage = [&](const Stage& stage, int index, std::vector<Hit>& hits, std::set<std::string>& seen) {
      const Xapian::Query selected = stage.text_optional
                                         ? Xapian::Query(Xapian::Query::OP_AND_MAYBE, Xapian::Query(Xapian::Query::OP_SCALE_WEIGHT, stage.filter, 0), text)
                                         : Xapian::Query(Xapian::Query::OP_FILTER, text, stage.filter);
      enquire.set_query(Xapian::Query(Xapian::Query::OP_AND_NOT, selected, exact_only));
      const Xapian::MSet mset = enquire.get_mset(0, static_cast<Xapian::doccount>(depth));
      mset.fetch();  // remote shards: every hit's document in one round trip, not one each
      std::size_t added = 0;
      for (auto it = mset.begin(); it != mset.end(); ++it) {
        if (seen_docs.contains(*it)) continue;
        Hit h;
        std::tie(h.data, h.worth) = impl_->hit_data(it);
        if (stage.other_architecture && (is_exact(h.data->arch) || h.data->arch == "generic")) continue;
        if (!seen.insert(h.data->key).second) continue;
        seen_docs.insert(*it);
        h.weight = it.get_weight();
        h.stage = index;
        hits.push_back(std::move(h));
        ++added;
      }
      last_matches = mset.get_matches_estimated();
      stages.push_back({{"stage", stage.name}, {"matches", last_matches}, {"added", added}});
      return added;
    };

    const double text_floor = kTextEvidence * std::log(std::max<double>(2, impl_->db.get_doccount()));
    auto score_hits = [&](std::vector<Hit>& hits, const std::string& stage_label, bool other_architecture) {
      double text_norm = text_floor;
      for (const auto& h : hits) text_norm = std::max(text_norm, h.weight);
      std::vector<Candidate> found;
      for (std::size_t index = 0; index < hits.size(); ++index) {
        const Hit& hit = hits[index];
        const HitData& h = *hit.data;
        Candidate c;
        c.hit = index;
        c.key = h.key;
        c.type = h.type;
        c.stage = hit.stage;
        c.bm25 = hit.weight;
        const double text_part = c.bm25 / text_norm;
        nlohmann::ordered_json parts;
        if (explain) {
          parts["bm25"] = std::round(c.bm25 * 1000) / 1000;
          parts["text"] = std::round(text_part * 1000) / 1000;
        }
        double score = text_part;
        auto bonus = [&](const char* name, double value) {
          score += value;
          if (explain) parts[name] = value;
        };
        if (is_exact(h.arch)) {
          c.match_arch = "exact";
          bonus("arch_exact", 0.15);
          c.why.push_back("architecture " + h.arch);
        } else if (h.arch == "generic") {
          c.match_arch = "architecture-neutral";
        } else if (other_architecture || !arch.empty()) {  // the scope admits no other way in
          c.match_arch = "other-architecture";
          bonus("other_arch", kOtherArchitecturePenalty);
          c.why.push_back("widened to architecture " + h.arch);
        } else {
          c.match_arch = "fallback";
        }
        if (has_op) {
          if (overlaps(h.operators, primary_ops)) {
            bonus("operator", 0.35);
            c.why.push_back("operator " + primary_ops.front());
          } else if (overlaps(h.operators, named_ops)) {
            bonus("operator", 0.12);
            for (const auto& o : intent.operators)
              if (overlaps(h.operators, spellings_of({o}))) { c.why.push_back("operator " + o); break; }
          } else if (!h.operators.empty()) {
            bonus("other_operator", kOtherOperatorPenalty);
          }
        }
        if (has_sym && overlaps(h.symptoms, intent.symptoms)) {
          // A symptom backed by a measured number is what the request is about.
          bonus("symptom", measured_symptom ? 0.45 : 0.20);
          for (const auto& sy : intent.symptoms)
            if (std::find(h.symptoms.begin(), h.symptoms.end(), sy) != h.symptoms.end()) { c.why.push_back("symptom " + sy); break; }
        }
        if (!intent.dsls.empty()) {
          if (std::find(intent.dsls.begin(), intent.dsls.end(), h.dsl) != intent.dsls.end()) {
            bonus("dsl", 0.30);
            c.why.push_back("dsl " + h.dsl);
          } else if (!h.dsl.empty() && h.dsl != "any") {
            bonus("other_dsl", -0.15);
          }
        }
        if (type_serves(h.type, intent.intents)) bonus("intent_type", 0.20);
        if (overlaps(h.tags, hardware_uses)) {
          bonus("hardware_use", kHardwareUseBonus);
          c.why.push_back("uses the requested hardware numbers");
        }
        for (const auto& p : intent.products) {
          if (std::find(h.products.begin(), h.products.end(), p) == h.products.end()) continue;
          bonus("product", 0.10);
          c.why.push_back("product " + p);  // the named product the record is for
          break;
        }
        for (const auto& m : intent.mnemonics) {
          std::string compact = m;
          std::replace(compact.begin(), compact.end(), '.', '-');
          std::replace(compact.begin(), compact.end(), '_', '-');
          bool hit_tag = false;
          for (const auto& tag : h.tags) hit_tag = hit_tag || tag == m || compact.rfind(tag, 0) == 0 || tag.rfind(compact, 0) == 0;
          if (hit_tag) {
            bonus("mnemonic", 0.40);
            c.why.push_back("instruction " + m);
            break;
          }
        }
        double prior = 0.10 * (hit.worth - 0.5);
        if (auto adj = worth_adjust.find(h.key); adj != worth_adjust.end()) prior += adj->second;
        prior = std::clamp(prior, -0.15, 0.15);
        bonus("worth", std::round(prior * 1000) / 1000);
        if (c.why.empty() || text_part > 0.5) c.why.push_back("text match");
        c.score = score;
        if (explain) {
          parts["score"] = std::round(score * 1000) / 1000;
          parts["stage"] = stage_label.empty() ? plan[static_cast<std::size_t>(hit.stage)].name : stage_label;
          c.explain = std::move(parts);
        }
        found.push_back(std::move(c));
      }
      std::stable_sort(found.begin(), found.end(), ranks_before);
      return found;
    };

    // Relevance feedback: the leading records' technique tags name the building blocks the
    // request needs (a norm kernel's block reduction, its vectorized loads); pooled records that
    // share them move up, a rarer tag counting more. A leading record's own tags are no evidence
    // for itself. No further search: the shared-tag records worth showing are in the pool.
    auto rank_by_shared_tags = [&](std::vector<Candidate>& ranked, const std::vector<Hit>& hits) {
      struct Carried {
        const std::string* tag;
        std::size_t leader;  // the one leading record carrying it, or kMany
        double idf;
      };
      constexpr std::size_t kMany = static_cast<std::size_t>(-1);
      std::vector<Carried> carried;  // a handful: linear search beats a map here
      for (std::size_t i = 0; i < ranked.size() && i < kFeedbackRecords; ++i) {
        for (const auto& t : hits[ranked[i].hit].data->tags) {
          auto it = std::find_if(carried.begin(), carried.end(), [&](const Carried& c) { return *c.tag == t; });
          if (it != carried.end()) it->leader = kMany;
          else carried.push_back({&t, ranked[i].hit, 0});
        }
      }
      if (carried.empty()) return;
      const double docs = std::max<double>(2, impl_->db.get_doccount());
      for (auto& c : carried) c.idf = std::log(docs / std::max<double>(1, impl_->termfreq(std::string(term::kTag) + *c.tag))) / std::log(docs);
      bool moved = false;
      for (auto& c : ranked) {
        double shared = 0;
        for (const auto& t : hits[c.hit].data->tags)
          for (const auto& carrier : carried)
            if (*carrier.tag == t && carrier.leader != c.hit) shared += carrier.idf;
        if (shared <= 0) continue;
        const double value = std::round(kSharedTagWeight * std::min(shared, kSharedTagCap) * 1000) / 1000;
        c.score += value;
        moved = true;
        if (explain) {
          c.explain["related"] = value;
          c.explain["score"] = std::round(c.score * 1000) / 1000;
        }
      }
      if (moved)
        std::stable_sort(ranked.begin(), ranked.end(), ranks_before);
    };

    // The first kLinkVoters records vote by their links; they keep their places.
    auto vote_by_links = [&](std::vector<Candidate>& ranked, const std::vector<Hit>& hits) {
      const std::size_t voters = std::min(ranked.size(), kLinkVoters);
      bool moved = false;
      for (std::size_t i = voters; i < ranked.size(); ++i) {
        Candidate& c = ranked[i];
        double vote = 0;
        for (std::size_t v = 0; v < voters; ++v) {
          const HitData& voter = *hits[ranked[v].hit].data;
          const bool named_by = links_to(voter, c.key), names = links_to(*hits[c.hit].data, voter.key);
          if (named_by) vote += kLinkVote / static_cast<double>(v + 1);
          if (names) vote += kBackLinkVote / static_cast<double>(v + 1);
          if (named_by || names) c.why.push_back((named_by ? "see also of " : "links to ") + voter.key);
        }
        if (vote <= 0) continue;
        vote = std::round(vote * 1000) / 1000;
        c.score += vote;
        moved = true;
        if (explain) {
          c.explain["link_vote"] = vote;
          c.explain["score"] = std::round(c.score * 1000) / 1000;
        }
      }
      if (moved) std::stable_sort(ranked.begin() + static_cast<std::ptrdiff_t>(voters), ranked.end(), ranks_before);
    };

    auto place_links = [&](std::vector<Candidate>& ranked, const std::vector<Hit>& hits, std::size_t leader) {
      std::size_t lifted = 0;
      for (std::size_t i = kLinkedPlace; i < ranked.size() && lifted < kLinkedPlaces; ++i) {
        if (!links_to(*hits[leader].data, ranked[i].key) || ranked[i].match_arch == "other-architecture") continue;
        Candidate moving = std::move(ranked[i]);
        ranked.erase(ranked.begin() + static_cast<std::ptrdiff_t>(i));
        const std::string why = "see also of " + hits[leader].data->key;
        if (std::find(moving.why.begin(), moving.why.end(), why) == moving.why.end()) moving.why.push_back(why);
        if (explain) moving.explain["linked_from"] = hits[leader].data->key;
        ranked.insert(ranked.begin() + static_cast<std::ptrdiff_t>(kLinkedPlace - 1 + lifted), std::move(moving));
        ++lifted;
      }
    };

    // No architecture named: the per-architecture variants of one operator's technique (a
    // silu-and-mul card for Hopper, CDNA3 and CDNA4) would crowd the answer with one idea. The
    // best-ranked variant keeps its place; variants for other architectures follow the rest.
    auto spread_architectures = [&](std::vector<Candidate>& ranked, const std::vector<Hit>& hits) {
      if (!arch.empty()) return;
      std::vector<std::pair<std::string, const std::string*>> first_arch;  // type + operator -> its arch
      std::vector<Candidate> kept, variants;
      for (auto& c : ranked) {
        const HitData& h = *hits[c.hit].data;
        if (h.arch.empty() || h.arch == "generic" || h.operators.empty()) {
          kept.push_back(std::move(c));
          continue;
        }
        const std::string group = h.type + '/' + h.operators.front();
        auto it = std::find_if(first_arch.begin(), first_arch.end(), [&](const auto& g) { return g.first == group; });
        if (it != first_arch.end() && *it->second != h.arch) {
          variants.push_back(std::move(c));
          continue;
        }
        if (it == first_arch.end()) first_arch.emplace_back(group, &h.arch);
        kept.push_back(std::move(c));
      }
      for (auto& c : variants) kept.push_back(std::move(c));
      ranked = std::move(kept);
    };

    // Several architectures named ("moved my gemm from H100 to MI300X"): an architecture whose
    // best record ranks below kEachArchitecturePlace has it moved there (the next one below it),
    // so one architecture's links cannot fill the head of the answer.
    auto show_each_architecture = [&](std::vector<Candidate>& ranked, const std::vector<Hit>& hits) {
      if (arches.size() < 2) return;
      std::size_t lifted = 0;
      for (const auto& a : arches) {
        auto best = std::find_if(ranked.begin(), ranked.end(), [&](const Candidate& c) { return hits[c.hit].data->arch == a; });
        const auto place = static_cast<std::ptrdiff_t>(kEachArchitecturePlace - 1 + lifted);
        if (best == ranked.end() || best - ranked.begin() <= place) continue;
        Candidate moving = std::move(*best);
        ranked.erase(best);
        ranked.insert(ranked.begin() + place, std::move(moving));
        ++lifted;
      }
    };

    std::vector<Hit> pool;
    std::set<std::string> seen;
    // Every stage runs: the pool is ranked as a whole, so stopping once enough candidates are
    // found would let the first filter's weak matches crowd out the scope's strong ones. Only a
    // saturated narrower filter stops the widening: the pool is at the full candidate depth and
    // that filter alone matched at least kSaturation x the depth. That happens on large corpora
    // (1M records: the scope-wide search was a third of the query's time), never on gpu-wiki.
    constexpr Xapian::doccount kSaturation = 10;
    for (std::size_t s = 0; s < plan.size(); ++s) {
      if (s > 0 && pool.size() >= depth && last_matches >= kSaturation * depth) break;
      const std::size_t added = run_stage(plan[s], static_cast<int>(s), pool, seen);
      if (s > 0 && added > 0) notes.push_back("widened: " + plan[s - 1].name + " filter relaxed to " + plan[s].name);
    }
    std::vector<Candidate> out = score_hits(pool, "", false);
    rank_by_shared_tags(out, pool);
    // Link feedback: the voters' links outside the pool are fetched inside the scope (whatever
    // their words), then voted for and placed.
    if (!out.empty()) {
      const std::size_t leader = out.front().hit;
      std::vector<std::string> unpooled;
      for (std::size_t v = 0; v < out.size() && v < kLinkVoters; ++v) {
        const HitData& voter = *pool[out[v].hit].data;
        const bool private_voter = voter.key != id_of(voter.key);
        for (const auto& id : voter.links) {
          const std::string key = private_voter ? kInternalPrefix + id : id;
          for (const std::string& k : {id, key})
            if (!seen.contains(k)) push_unique(unpooled, k);
        }
      }
      if (!unpooled.empty()) {
        // A link may cross to another architecture of the request's vendor (a CDNA4 card naming
        // its CDNA3 counterpart); such a record is labelled other-architecture. Never another vendor.
        const Xapian::Query ids = any_of(term::kId, unpooled);
        const bool cross = !vendor.empty() && !arch.empty();
        plan.push_back({"linked", cross ? Xapian::Query(Xapian::Query::OP_FILTER, vendor_filter, ids) : within(ids), false, true});
        if (run_stage(plan.back(), static_cast<int>(plan.size() - 1), pool, seen) > 0) {
          out = score_hits(pool, "", false);
          rank_by_shared_tags(out, pool);
        }
      }
      vote_by_links(out, pool);
      place_links(out, pool, leader);
    }
    spread_architectures(out, pool);
    show_each_architecture(out, pool);
    if (out.size() > want) out.resize(want);
    std::vector<std::string> linked_arches;  // other architectures reached through links
    for (const auto& c : out)
      if (c.match_arch == "other-architecture") push_unique(linked_arches, pool[c.hit].data->arch);
    if (!linked_arches.empty())
      notes.push_back("followed links to other " + vendor + " architectures: " + join_and(linked_arches) + " (labelled other-architecture)");
    if (out.size() < want && widen_arch) {
      std::vector<Hit> others;
      plan.push_back({"other architectures of " + vendor, vendor_filter, true});
      if (run_stage(plan.back(), static_cast<int>(plan.size() - 1), others, seen) > 0) {
        notes.push_back("widened to other " + vendor + " architectures (labelled other-architecture)");
        for (auto& c : score_hits(others, plan.back().name, true)) {
          if (out.size() >= want) break;
          out.push_back(std::move(c));
        }
      }
    }
    return out;
  } catch (const Xapian::Error& e) {
    if (impl_->shards) throw impl_->shards->explain(e);
    throw Error(ErrorCode::kIndexCorrupt, "full-text search failed: " + e.get_description());
  }
}

}  // namespace kwiki::detail
