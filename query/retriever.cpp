// Kernel-knowledge retrieval: BM25 over the Xapian index inside the scope, staged widening, rerank.
#include "retriever.hpp"

#include <xapian.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>

#include "kwiki/error.hpp"
#include "rank_weights.hpp"
#include "store_writer.hpp"
#include "text_util.hpp"

namespace kwiki::detail {
namespace {

// What the ranker reads of a hit (the document's kSlotHit value).
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

bool contains(const std::vector<std::string>& list, const std::string& value) {
  return std::find(list.begin(), list.end(), value) != list.end();
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

double round3(double v) { return std::round(v * 1000) / 1000; }

// True when `word` is one spelling of `pattern` ("v_mfma_f32_{16x16x32,32x32x16}_{bf16,f16}",
// "v_smfmac_{f32,i32}_*"), or a spelling cut before one of its '_' or '.' separators
// ("v_permlane32_swap" of "v_permlane32_swap_b32").
bool spells(std::string_view pattern, std::string_view word) {
  if (pattern.empty()) return word.empty();
  if (word.empty()) return pattern.front() == '_' || pattern.front() == '.';
  const char p = pattern.front();
  if (p == '*') return spells(pattern.substr(1), word) || spells(pattern, word.substr(1));
  if (p == '{') {
    const std::size_t close = pattern.find('}');
    if (close == std::string_view::npos) return false;
    const std::string_view rest = pattern.substr(close + 1);
    for (std::size_t start = 1; start <= close;) {
      const std::size_t end = std::min(pattern.find(',', start), close);
      const std::string_view choice = pattern.substr(start, end - start);
      if (word.starts_with(choice) && spells(rest, word.substr(choice.size()))) return true;
      start = end + 1;
    }
    return false;
  }
  return p == word.front() && spells(pattern.substr(1), word.substr(1));
}

// True when an instruction tag ("ds_bpermute_b32 / ds_permute_b32", "v_mfma_f32_16x16x16_bf16
// (lane map)") names `mnemonic` in one of its alternatives.
bool names_instruction(const std::string& tag, const std::string& mnemonic) {
  for (std::size_t start = 0; start < tag.size();) {
    std::size_t end = tag.find(" / ", start);
    if (end == std::string::npos) end = tag.size();
    std::string_view alternative = std::string_view(tag).substr(start, end - start);
    alternative = alternative.substr(0, alternative.find(' '));  // "(lane map)", "... lds"
    if (alternative.size() >= 3 && spells(alternative, mnemonic)) return true;
    start = end + 3;
  }
  return false;
}

struct WeightedTerm {
  std::string term;
  double weight;
};

// One hit of the pool: its data (shared with the engine's hit cache), BM25 weight and prior.
struct Hit {
  std::shared_ptr<const HitData> data;
  Xapian::docid docid = 0;
  double weight = 0;
  double worth = 0.5;
  int stage = 0;
};

// One search of the widening: a filter over the scope.
struct Stage {
  std::string name;
  Xapian::Query filter;
  bool other_architecture = false;  ///< admits only records of other architectures of the vendor
  bool text_optional = false;       ///< the filter alone selects; the text only weighs
};

// Everything the steps of one retrieval share: what the request asks, the queries made from
// it, and the pool of hits.
struct Search {
  Search(const RetrieveRequest& r, const Lexicon& l, Retrieval& o) : request(r), intent(r.intent), lex(l), out(o) {}
  const RetrieveRequest& request;
  const Intent& intent;
  const Lexicon& lex;
  const RankWeights& w = kRankWeights;
  Retrieval& out;

  // the request, read for ranking
  std::string vendor, arch;
  std::vector<std::string> arches;  ///< every architecture named is exact scope
  bool has_op = false, has_sym = false, measured_symptom = false;
  std::vector<std::string> primary_ops, named_ops;  ///< every spelling records use
  std::vector<std::string> hardware_uses;           ///< tags of records that use the numbers asked for

  // the queries
  Xapian::Query text, exact_only, vendor_filter, scope;
  std::vector<Stage> plan;
  bool widen_arch = false;  ///< other architectures of the vendor as the last, labelled step
  std::size_t depth = 0;
  double text_floor = 0;

  // the pool
  std::vector<Hit> pool;
  std::set<std::string> seen;
  std::set<Xapian::docid> seen_docs;
  Xapian::doccount last_matches = 0;  ///< estimated matches of the last stage run

  bool is_exact(const std::string& a) const { return contains(arches, a); }
  bool explain() const { return request.explain; }
  Xapian::Query within(const Xapian::Query& q) const { return Xapian::Query(Xapian::Query::OP_FILTER, scope, q); }
  // Records name operators as frameworks do ("rms_norm", "matmul"): every spelling.
  std::vector<std::string> spellings_of(const std::vector<std::string>& ops) const {
    std::vector<std::string> all;
    for (const auto& o : ops) {
      push_unique(all, o);
      for (const auto& s : lex.operator_spellings(o)) push_unique(all, s);
    }
    return all;
  }
};

// ---- shape: the order the answer shows ----

// The first link_voters records vote by their links; they keep their places.
void vote_by_links(const Search& s, std::vector<Candidate>& ranked, const std::vector<Hit>& hits) {
  const std::size_t voters = std::min(ranked.size(), s.w.link_voters);
  bool moved = false;
  for (std::size_t i = voters; i < ranked.size(); ++i) {
    Candidate& c = ranked[i];
    double vote = 0;
    for (std::size_t v = 0; v < voters; ++v) {
      const HitData& voter = *hits[ranked[v].hit].data;
      const bool named_by = links_to(voter, c.key), names = links_to(*hits[c.hit].data, voter.key);
      if (named_by) vote += s.w.link_vote / static_cast<double>(v + 1);
      if (names) vote += s.w.back_link_vote / static_cast<double>(v + 1);
      if (named_by || names) c.why.push_back((named_by ? "see also of " : "links to ") + voter.key);
    }
    if (vote <= 0) continue;
    vote = round3(vote);
    c.score += vote;
    moved = true;
    if (s.explain()) {
      c.explain["link_vote"] = vote;
      c.explain["score"] = round3(c.score);
    }
  }
  if (moved) std::stable_sort(ranked.begin() + static_cast<std::ptrdiff_t>(voters), ranked.end(), ranks_before);
}

// Up to linked_places of the leader's links still ranked below linked_place move up to it.
void place_links(const Search& s, std::vector<Candidate>& ranked, const std::vector<Hit>& hits, std::size_t leader) {
  std::size_t lifted = 0;
  for (std::size_t i = s.w.linked_place; i < ranked.size() && lifted < s.w.linked_places; ++i) {
    if (!links_to(*hits[leader].data, ranked[i].key) || ranked[i].match_arch == "other-architecture") continue;
    Candidate moving = std::move(ranked[i]);
    ranked.erase(ranked.begin() + static_cast<std::ptrdiff_t>(i));
    const std::string why = "see also of " + hits[leader].data->key;
    if (!contains(moving.why, why)) moving.why.push_back(why);
    if (s.explain()) moving.explain["linked_from"] = hits[leader].data->key;
    ranked.insert(ranked.begin() + static_cast<std::ptrdiff_t>(s.w.linked_place - 1 + lifted), std::move(moving));
    ++lifted;
  }
}

// No architecture named: the per-architecture variants of one operator's technique (a
// silu-and-mul card for Hopper, CDNA3 and CDNA4) would crowd the answer with one idea. The
// best-ranked variant keeps its place; variants for other architectures follow the rest.
void spread_architectures(const Search& s, std::vector<Candidate>& ranked, const std::vector<Hit>& hits) {
  if (!s.arch.empty()) return;
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
}

// Several architectures named ("moved my gemm from H100 to MI300X"): an architecture whose
// best record ranks below each_architecture_place has it moved there (the next one below it),
// so one architecture's links cannot fill the head of the answer.
void show_each_architecture(const Search& s, std::vector<Candidate>& ranked, const std::vector<Hit>& hits) {
  if (s.arches.size() < 2) return;
  std::size_t lifted = 0;
  for (const auto& a : s.arches) {
    auto best = std::find_if(ranked.begin(), ranked.end(), [&](const Candidate& c) { return hits[c.hit].data->arch == a; });
    const auto place = static_cast<std::ptrdiff_t>(s.w.each_architecture_place - 1 + lifted);
    if (best == ranked.end() || best - ranked.begin() <= place) continue;
    Candidate moving = std::move(*best);
    ranked.erase(best);
    ranked.insert(ranked.begin() + place, std::move(moving));
    ++lifted;
  }
}

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
  Xapian::Stem stemmer{"english"};

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

  // ---- read: the request's words and labels ----

  // The BM25 query's terms: each kind of request word with its weight (RankWeights).
  std::vector<WeightedTerm> text_terms(const Search& s) {
    std::vector<WeightedTerm> terms;
    std::set<std::string> seen;
    auto add = [&](const std::string& words, double weight) {
      for (auto token : Lexicon::tokenize(words)) {
        // Index terms are stemmed words as the TermGenerator splits them: on '.', '/' and ':'
        // ("rtol/atol" is two words), not on '_'.
        std::replace_if(token.begin(), token.end(), [](char c) { return c == '/' || c == ':'; }, '.');
        for (auto piece : split(token, '.')) {
          if (piece.size() < 2 || s.lex.is_stopword(piece)) continue;
          std::string term = stemmer(piece);
          if (seen.insert(term).second) terms.push_back({term, weight});
        }
      }
    };
    auto spaced = [](std::string label, auto is_separator) {
      std::replace_if(label.begin(), label.end(), is_separator, ' ');
      return label;
    };
    const auto hyphen = [](char c) { return c == '-'; };
    const Intent& intent = s.intent;
    for (const auto& t : intent.free_terms) {
      add(t, s.w.free_term);
      if (const auto* syn = s.lex.synonyms(t))
        for (const auto& y : *syn) add(y, s.w.synonym_term);
    }
    for (const auto& o : intent.operators) add(spaced(o, hyphen), s.w.operator_term);
    for (const auto& y : intent.symptoms) add(spaced(y, hyphen), s.w.symptom_term);
    for (const auto& m : intent.mnemonics) add(m, s.w.mnemonic_term);
    for (const auto& d : intent.dsls) add(d, s.w.dsl_term);
    for (const auto& d : intent.dtypes) add(d, s.w.dtype_term);
    for (const auto& f : intent.hardware_fields) add(spaced(f, [](char c) { return c == '.' || c == '_'; }), s.w.hardware_term);
    return terms;
  }

  // The scope (vendor, architectures named and neutral records), the stages that widen inside
  // it, and the scope note.
  void plan_search(Search& s) {
    const Intent& intent = s.intent;
    std::vector<Xapian::Query> parts;
    for (const auto& t : text_terms(s)) parts.emplace_back(Xapian::Query::OP_SCALE_WEIGHT, Xapian::Query(t.term), t.weight);
    s.text = parts.empty() ? match_all() : Xapian::Query(Xapian::Query::OP_OR, parts.begin(), parts.end());

    // Hardware fact records are answered by exact lookup, never ranked.
    s.exact_only = Xapian::Query(Xapian::Query::OP_OR, Xapian::Query(std::string(term::kType) + "spec-sheet"),
                                 Xapian::Query(std::string(term::kType) + "measured-ceiling"));
    s.vendor = intent.vendor;
    s.arch = intent.arch;
    s.arches = intent.exact_arches();
    s.vendor_filter = match_all();
    if (!s.vendor.empty())
      s.vendor_filter = Xapian::Query(Xapian::Query::OP_OR, Xapian::Query(std::string(term::kVendor) + s.vendor),
                                      Xapian::Query(std::string(term::kVendor) + "generic"));
    const Xapian::Query neutral(std::string(term::kArch) + "generic");
    s.scope = s.vendor_filter;
    if (!s.arch.empty()) {
      s.scope = Xapian::Query(Xapian::Query::OP_FILTER, s.vendor_filter, Xapian::Query(Xapian::Query::OP_OR, any_of(term::kArch, s.arches), neutral));
    } else if (!s.vendor.empty() && !intent.unresolved_arch.empty()) {
      // An architecture kwiki cannot resolve: the vendor's neutral records first; its other
      // architectures only as the labelled last step.
      s.scope = Xapian::Query(Xapian::Query::OP_FILTER, s.vendor_filter, neutral);
    }

    s.has_op = !intent.operators.empty();
    s.has_sym = !intent.symptoms.empty();
    s.measured_symptom = std::any_of(intent.measured.begin(), intent.measured.end(), [](const MeasuredSymptom& m) { return m.applies; });
    s.primary_ops = s.has_op ? s.spellings_of({intent.operators.front()}) : std::vector<std::string>{};
    s.named_ops = s.spellings_of(intent.operators);
    // Candidate generation widens in stages: the named operators inside the scope (so a weak
    // text match on the operator is still a candidate), then the whole scope; the pooled
    // candidates are ranked together, so a cross-cutting record can outrank a weak operator
    // match. Symptom and primary-operator matches are ranked from each hit's labels.
    if (s.has_op) s.plan.push_back({"operator", s.within(any_of(term::kOperator, s.named_ops))});
    // A request for hardware numbers alone: the records that use those numbers (sm_count ->
    // wave quantization; the lexicon's "serves") are candidates, whatever their words.
    if (!s.has_op && !s.has_sym && !s.measured_symptom)
      for (const auto& f : intent.hardware_fields)
        for (const auto& t : s.lex.hardware_serves(f)) push_unique(s.hardware_uses, t);
    if (!s.hardware_uses.empty()) s.plan.push_back({"hardware use", s.within(any_of(term::kTag, s.hardware_uses)), false, true});
    s.plan.push_back({"scope", s.scope});
    s.widen_arch = !s.vendor.empty() && (!s.arch.empty() || !intent.unresolved_arch.empty());

    std::string note = "scope: ";
    if (s.vendor.empty() && s.arch.empty()) note += "no vendor or architecture named; all records eligible";
    else if (s.vendor.empty())
      note += "architectures " + join_and(s.arches) + " of the products named (exact, then architecture-neutral)";
    else if (!s.arch.empty())
      note += "vendor " + s.vendor + (s.arches.size() > 1 ? ", architectures " : ", architecture ") + join_and(s.arches) +
              " (exact, then architecture-neutral)";
    else if (!intent.unresolved_arch.empty()) note += "vendor " + s.vendor + " (architecture-neutral; architecture not resolved)";
    else note += "vendor " + s.vendor + " (no architecture named: all " + s.vendor + " architectures)";
    s.out.notes.push_back(note);

    s.depth = std::clamp<std::size_t>(s.request.want * 2, s.w.min_depth, s.w.max_depth);
    s.text_floor = s.w.text_evidence * std::log(std::max<double>(2, db.get_doccount()));
  }

  // ---- search: the stages, each adding the hits it finds first ----

  std::size_t run_stage(Search& s, Xapian::Enquire& enquire, std::size_t index, std::vector<Hit>& hits) {
    const Stage& stage = s.plan[index];
    const Xapian::Query selected =
        stage.text_optional ? Xapian::Query(Xapian::Query::OP_AND_MAYBE, Xapian::Query(Xapian::Query::OP_SCALE_WEIGHT, stage.filter, 0), s.text)
                            : Xapian::Query(Xapian::Query::OP_FILTER, s.text, stage.filter);
    enquire.set_query(Xapian::Query(Xapian::Query::OP_AND_NOT, selected, s.exact_only));
    const Xapian::MSet mset = enquire.get_mset(0, static_cast<Xapian::doccount>(s.depth));
    mset.fetch();  // remote shards: every hit's document in one round trip, not one each
    std::size_t added = 0;
    for (auto it = mset.begin(); it != mset.end(); ++it) {
      if (s.seen_docs.contains(*it)) continue;
      Hit h;
      std::tie(h.data, h.worth) = hit_data(it);
      if (stage.other_architecture && (s.is_exact(h.data->arch) || h.data->arch == "generic")) continue;
      if (!s.seen.insert(h.data->key).second) continue;
      s.seen_docs.insert(*it);
      h.docid = *it;
      h.weight = it.get_weight();
      h.stage = static_cast<int>(index);
      hits.push_back(std::move(h));
      ++added;
    }
    s.last_matches = mset.get_matches_estimated();
    s.out.stages.push_back({{"stage", stage.name}, {"matches", s.last_matches}, {"added", added}});
    return added;
  }

  // Every stage runs: the pool is ranked as a whole, so stopping once enough candidates are
  // found would let the first filter's weak matches crowd out the scope's strong ones. Only a
  // saturated narrower filter stops the widening (large corpora; never gpu-wiki).
  void gather(Search& s, Xapian::Enquire& enquire) {
    const std::size_t stages = s.plan.size();
    for (std::size_t i = 0; i < stages; ++i) {
      if (i > 0 && s.pool.size() >= s.depth && s.last_matches >= s.w.saturation * s.depth) break;
      const std::size_t added = run_stage(s, enquire, i, s.pool);
      if (i > 0 && added > 0) s.out.notes.push_back("widened: " + s.plan[i - 1].name + " filter relaxed to " + s.plan[i].name);
    }
  }

  // ---- score: the text part plus the label parts of RankWeights ----

  std::vector<Candidate> score(const Search& s, const std::vector<Hit>& hits, const std::string& stage_label, bool other_architecture) {
    const RankWeights& w = s.w;
    const Intent& intent = s.intent;
    double text_norm = s.text_floor;
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
      if (s.explain()) {
        parts["bm25"] = round3(c.bm25);
        parts["text"] = round3(text_part);
      }
      double total = text_part;
      auto add = [&](const char* name, double value) {
        total += value;
        if (s.explain()) parts[name] = value;
      };
      if (s.is_exact(h.arch)) {
        c.match_arch = "exact";
        add("arch_exact", w.arch_exact);
        c.why.push_back("architecture " + h.arch);
      } else if (h.arch == "generic") {
        c.match_arch = "architecture-neutral";
      } else if (other_architecture || !s.arch.empty()) {  // the scope admits no other way in
        c.match_arch = "other-architecture";
        add("other_arch", w.other_architecture);
        c.why.push_back("widened to architecture " + h.arch);
      } else {
        c.match_arch = "fallback";
      }
      if (s.has_op) {
        if (overlaps(h.operators, s.primary_ops)) {
          add("operator", w.primary_operator);
          c.why.push_back("operator " + s.primary_ops.front());
          c.evidence.operator_match = true;
        } else if (overlaps(h.operators, s.named_ops)) {
          add("operator", w.named_operator);
          c.evidence.operator_match = true;
          for (const auto& o : intent.operators)
            if (overlaps(h.operators, s.spellings_of({o}))) {
              c.why.push_back("operator " + o);
              break;
            }
        } else if (!h.operators.empty()) {
          add("other_operator", w.other_operator);
        }
      }
      if (s.has_sym && overlaps(h.symptoms, intent.symptoms)) {
        // A symptom backed by a measured number is what the request is about.
        add("symptom", s.measured_symptom ? w.measured_symptom : w.symptom);
        c.evidence.symptom = true;
        for (const auto& y : intent.symptoms)
          if (contains(h.symptoms, y)) {
            c.why.push_back("symptom " + y);
            break;
          }
      }
      if (!intent.dsls.empty()) {
        if (contains(intent.dsls, h.dsl)) {
          add("dsl", w.dsl);
          c.why.push_back("dsl " + h.dsl);
        } else if (!h.dsl.empty() && h.dsl != "any") {
          add("other_dsl", w.other_dsl);
        }
      }
      if (type_serves(h.type, intent.intents)) add("intent_type", w.intent_type);
      if (overlaps(h.tags, s.hardware_uses)) {
        add("hardware_use", w.hardware_use);
        c.why.push_back("uses the requested hardware numbers");
      }
      for (const auto& p : intent.products) {
        if (!contains(h.products, p)) continue;
        add("product", w.product);
        c.why.push_back("product " + p);  // the named product the record is for
        break;
      }
      for (const auto& m : intent.mnemonics) {
        std::string compact = m;
        std::replace(compact.begin(), compact.end(), '.', '-');
        std::replace(compact.begin(), compact.end(), '_', '-');
        bool tagged = false;
        for (const auto& tag : h.tags)
          tagged = tagged || tag == m || compact.rfind(tag, 0) == 0 || tag.rfind(compact, 0) == 0 || names_instruction(tag, m);
        if (tagged) {
          add("mnemonic", w.mnemonic);
          c.why.push_back("instruction " + m);
          c.evidence.instruction = true;
          break;
        }
      }
      double prior = w.worth_scale * (hit.worth - 0.5);
      if (s.request.worth_adjust)
        if (auto adj = s.request.worth_adjust->find(h.key); adj != s.request.worth_adjust->end()) prior += adj->second;
      prior = std::clamp(prior, -w.worth_limit, w.worth_limit);
      add("worth", round3(prior));
      if (c.why.empty() || text_part > 0.5) c.why.push_back("text match");
      c.score = total;
      if (s.explain()) {
        parts["score"] = round3(total);
        parts["stage"] = stage_label.empty() ? s.plan[static_cast<std::size_t>(hit.stage)].name : stage_label;
        c.explain = std::move(parts);
      }
      found.push_back(std::move(c));
    }
    std::stable_sort(found.begin(), found.end(), ranks_before);
    return found;
  }

  // ---- feedback: the leading records say what else the request needs ----

  // The leading records' technique tags name the building blocks the request needs (a norm
  // kernel's block reduction, its vectorized loads); pooled records that share them move up, a
  // rarer tag counting more. A leading record's own tags are no evidence for itself. No further
  // search: the shared-tag records worth showing are in the pool.
  void rank_by_shared_tags(const Search& s, std::vector<Candidate>& ranked, const std::vector<Hit>& hits) {
    struct Carried {
      const std::string* tag;
      std::size_t leader;  // the one leading record carrying it, or kMany
      double idf;
    };
    constexpr std::size_t kMany = static_cast<std::size_t>(-1);
    std::vector<Carried> carried;  // a handful: linear search beats a map here
    for (std::size_t i = 0; i < ranked.size() && i < s.w.feedback_records; ++i) {
      for (const auto& t : hits[ranked[i].hit].data->tags) {
        auto it = std::find_if(carried.begin(), carried.end(), [&](const Carried& c) { return *c.tag == t; });
        if (it != carried.end()) it->leader = kMany;
        else carried.push_back({&t, ranked[i].hit, 0});
      }
    }
    if (carried.empty()) return;
    const double docs = std::max<double>(2, db.get_doccount());
    for (auto& c : carried) c.idf = std::log(docs / std::max<double>(1, termfreq(std::string(term::kTag) + *c.tag))) / std::log(docs);
    bool moved = false;
    for (auto& c : ranked) {
      double shared = 0;
      for (const auto& t : hits[c.hit].data->tags)
        for (const auto& carrier : carried)
          if (*carrier.tag == t && carrier.leader != c.hit) shared += carrier.idf;
      if (shared <= 0) continue;
      const double value = round3(s.w.shared_tag * std::min(shared, s.w.shared_tag_cap));
      c.score += value;
      moved = true;
      if (s.explain()) {
        c.explain["related"] = value;
        c.explain["score"] = round3(c.score);
      }
    }
    if (moved) std::stable_sort(ranked.begin(), ranked.end(), ranks_before);
  }

  // The voters' links outside the pool are fetched inside the scope (whatever their words),
  // then the voters vote and the leader's links are placed.
  void follow_links(Search& s, Xapian::Enquire& enquire, std::vector<Candidate>& ranked) {
    if (ranked.empty()) return;
    const std::size_t leader = ranked.front().hit;
    std::vector<std::string> unpooled;
    for (std::size_t v = 0; v < ranked.size() && v < s.w.link_voters; ++v) {
      const HitData& voter = *s.pool[ranked[v].hit].data;
      const bool private_voter = voter.key != id_of(voter.key);
      for (const auto& id : voter.links) {
        const std::string key = private_voter ? kInternalPrefix + id : id;
        for (const std::string& k : {id, key})
          if (!s.seen.contains(k)) push_unique(unpooled, k);
      }
    }
    if (!unpooled.empty()) {
      // A link may cross to another architecture of the request's vendor (a CDNA4 card naming
      // its CDNA3 counterpart); such a record is labelled other-architecture. Never another vendor.
      const Xapian::Query ids = any_of(term::kId, unpooled);
      const bool cross = !s.vendor.empty() && !s.arch.empty();
      s.plan.push_back({"linked", cross ? Xapian::Query(Xapian::Query::OP_FILTER, s.vendor_filter, ids) : s.within(ids), false, true});
      if (run_stage(s, enquire, s.plan.size() - 1, s.pool) > 0) {
        ranked = score(s, s.pool, "", false);
        rank_by_shared_tags(s, ranked, s.pool);
      }
    }
    vote_by_links(s, ranked, s.pool);
    place_links(s, ranked, s.pool, leader);
  }

  // ---- widen: other architectures of the vendor, labelled, when the scope found too few ----

  void widen_to_other_architectures(Search& s, Xapian::Enquire& enquire, std::vector<Candidate>& ranked) {
    if (ranked.size() >= s.request.want || !s.widen_arch) return;
    std::vector<Hit> others;
    s.plan.push_back({"other architectures of " + s.vendor, s.vendor_filter, true});
    if (run_stage(s, enquire, s.plan.size() - 1, others) == 0) return;
    s.out.notes.push_back("widened to other " + s.vendor + " architectures (labelled other-architecture)");
    for (auto& c : score(s, others, s.plan.back().name, true)) {
      if (ranked.size() >= s.request.want) break;
      ranked.push_back(std::move(c));
    }
  }

  // ---- evidence: the topics the leading records share with the request ----

  // A leading record shares a topic with the request when one of its tags is a word or an
  // adjacent word pair of the request ("bank-conflicts"), or when it holds the request's words
  // that carry most of their weight (idf; a word the corpus lacks weighs most): it is about
  // what the request asks, not near it through common words.
  void mark_topics(const Search& s, std::vector<Candidate>& ranked, const std::vector<Hit>& hits, std::size_t leading) {
    // A leading record that shares a label already covers the request: the posting-list walks
    // below are spent only where coverage is in question (or --explain shows them).
    const bool labelled = std::any_of(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(std::min(ranked.size(), leading)),
                                      [](const Candidate& c) { return c.evidence.operator_match || c.evidence.symptom || c.evidence.instruction; });
    if (labelled && !s.explain()) return;
    // The request's content words: its free words and the words of the operators, symptoms and
    // instructions it names (a corpus without labels has them in its text only).
    std::vector<std::string> words, keys;
    const Intent& intent = s.intent;
    for (const auto* list : {&intent.operators, &intent.symptoms, &intent.mnemonics, &intent.free_terms}) {
      for (const auto& t : *list) {
        // As the index splits them: "rtol/atol" is two words, "sm_90a" one.
        std::string spaced = t;
        const bool label = list != &intent.free_terms && list != &intent.mnemonics;
        std::replace_if(spaced.begin(), spaced.end(), [&](char ch) { return ch == '.' || ch == '/' || ch == ':' || (label && ch == '-'); }, ' ');
        for (const auto& piece : Lexicon::tokenize(spaced))
          if (piece.size() >= 2 && !s.lex.is_stopword(piece)) push_unique(words, stemmer(piece));
      }
    }
    for (std::size_t i = 0; i < words.size(); ++i) {
      push_unique(keys, words[i]);
      if (i + 1 < words.size()) push_unique(keys, words[i] + "-" + words[i + 1]);
    }
    if (words.empty()) return;
    const std::size_t n = std::min(ranked.size(), leading);
    // Tags first (cheap): a tag equal to a word or word pair of the request.
    bool tagged = false;
    for (std::size_t i = 0; i < n; ++i) {
      Candidate& c = ranked[i];
      for (const auto& tag : hits[c.hit].data->tags) {
        std::string lower = tag, key;
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return ch == '_' ? '-' : static_cast<char>(std::tolower(ch)); });
        for (const auto& piece : split(lower, '-')) key += (key.empty() ? "" : "-") + stemmer(piece);
        if (contains(keys, key)) c.evidence.topic = tagged = true;
      }
    }
    std::vector<double> held(n, 0);
    double total = 0;
    if (!tagged || s.explain()) {
      // Which leading records hold each word: one walk of its posting list in docid order (the
      // index keeps no term lists).
      std::vector<std::size_t> order(n);
      for (std::size_t i = 0; i < n; ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return hits[ranked[a].hit].docid < hits[ranked[b].hit].docid; });
      const double docs = std::max<double>(2, db.get_doccount());
      for (const auto& w : words) {
        const Xapian::doccount df = termfreq(w);
        const double idf = std::log((docs + 1) / (df + 0.5));
        total += idf;
        if (df == 0) continue;
        Xapian::PostingIterator post = db.postlist_begin(w);
        for (const std::size_t i : order) {
          const Xapian::docid id = hits[ranked[i].hit].docid;
          post.skip_to(id);
          if (post == db.postlist_end(w)) break;
          if (*post == id) held[i] += idf;
        }
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      Candidate& c = ranked[i];
      const double share = total > 0 ? held[i] / total : 0;
      if (share >= s.w.topic_share) c.evidence.topic = true;
      if (s.explain()) {
        c.explain["topic_share"] = round3(share);
        nlohmann::ordered_json evidence = nlohmann::ordered_json::array();
        if (c.evidence.operator_match) evidence.push_back("operator");
        if (c.evidence.symptom) evidence.push_back("symptom");
        if (c.evidence.instruction) evidence.push_back("instruction");
        if (c.evidence.topic) evidence.push_back("topic");
        c.explain["evidence"] = std::move(evidence);
      }
    }
  }
};

Retriever::Retriever(const std::string& xapian_dir) : impl_(std::make_unique<Impl>()) {
  try {
    impl_->db = Xapian::Database(xapian_dir);
  } catch (const Xapian::Error& e) {
    throw Error(ErrorCode::kIndexCorrupt, "cannot open the full-text index: " + e.get_description() + "; rebuild with `kwiki index --force`",
                xapian_dir);
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

Retrieval Retriever::retrieve(const RetrieveRequest& request) {
  Retrieval out;
  try {
    Search s(request, Lexicon::embedded(), out);
    Xapian::Enquire enquire(impl_->db);
    enquire.set_weighting_scheme(Xapian::BM25Weight());
    impl_->plan_search(s);
    impl_->gather(s, enquire);
    std::vector<Candidate> ranked = impl_->score(s, s.pool, "", false);
    impl_->rank_by_shared_tags(s, ranked, s.pool);
    impl_->follow_links(s, enquire, ranked);
    spread_architectures(s, ranked, s.pool);
    show_each_architecture(s, ranked, s.pool);
    if (ranked.size() > request.want) ranked.resize(request.want);
    std::vector<std::string> linked_arches;  // other architectures reached through links
    for (const auto& c : ranked)
      if (c.match_arch == "other-architecture") push_unique(linked_arches, s.pool[c.hit].data->arch);
    if (!linked_arches.empty())
      out.notes.push_back("followed links to other " + s.vendor + " architectures: " + join_and(linked_arches) + " (labelled other-architecture)");
    impl_->mark_topics(s, ranked, s.pool, kCoverageLeaders);
    impl_->widen_to_other_architectures(s, enquire, ranked);
    out.candidates = std::move(ranked);
    return out;
  } catch (const Xapian::Error& e) {
    if (impl_->shards) throw impl_->shards->explain(e);
    throw Error(ErrorCode::kIndexCorrupt, "full-text search failed: " + e.get_description());
  }
}

}  // namespace kwiki::detail
