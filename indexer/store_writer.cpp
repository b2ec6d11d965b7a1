// Writes one index generation: the SQLite structured store and the Xapian full-text database.
#include "store_writer.hpp"

#include <sqlite3.h>
#include <xapian.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "generation.hpp"
#include "sqlite_check.hpp"
#include "integrity.hpp"
#include "text_util.hpp"

namespace kwiki::detail {
namespace {

constexpr const char* kSchemaSql = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE roots(store TEXT NOT NULL, path TEXT NOT NULL, records INTEGER NOT NULL DEFAULT 0);
CREATE TABLE records(
  key TEXT PRIMARY KEY, id TEXT NOT NULL, store TEXT NOT NULL, source TEXT NOT NULL, schema TEXT NOT NULL,
  type TEXT NOT NULL, vendor TEXT, arch TEXT, product TEXT, dsl TEXT, operator_family TEXT, level TEXT,
  status TEXT, applies_to TEXT NOT NULL, payload TEXT NOT NULL, confidence TEXT, tier TEXT, worth REAL,
  path TEXT NOT NULL, root TEXT NOT NULL, docid INTEGER NOT NULL, checksum INTEGER NOT NULL);
CREATE TABLE scopes(key TEXT NOT NULL, field TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE hw_facts(key TEXT NOT NULL, product TEXT, path TEXT NOT NULL, value TEXT NOT NULL, number REAL,
  unit TEXT, evidence TEXT);
CREATE TABLE aliases(alias TEXT NOT NULL, kind TEXT NOT NULL, target TEXT NOT NULL, key TEXT NOT NULL);
CREATE TABLE warnings(file TEXT NOT NULL, pointer TEXT, message TEXT NOT NULL);
)sql";

constexpr const char* kIndexSql = R"sql(
CREATE INDEX scopes_by_value ON scopes(field, value);
CREATE INDEX scopes_by_key ON scopes(key);
CREATE INDEX hw_facts_by_product ON hw_facts(product, path);
CREATE INDEX hw_facts_by_key ON hw_facts(key, path);
CREATE INDEX aliases_by_alias ON aliases(alias, kind);
CREATE INDEX records_by_id ON records(id);
CREATE INDEX records_by_type_product ON records(type, product);
)sql";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

// At most this many documents wait for the full-text thread: enough to ride out one of
// Xapian's periodic flushes (every 10,000 documents) without stalling the record workers.
constexpr std::size_t kMaxQueuedDocuments = 2048;
// The full-text thread is woken once this many documents wait, not for each one: it is faster
// than the records arrive, and a wake-up per document cost a context switch per document.
constexpr std::size_t kWakeFullTextAt = 32;

struct StoreWriter::Impl {
  std::string dir;
  sqlite3* db = nullptr;
  std::vector<Xapian::WritableDatabase> shards;  ///< one unless sharded
  std::size_t queued = 0;                        ///< documents handed to the full-text thread so far
  std::unique_ptr<Statement> insert_record, insert_scope, insert_fact, insert_alias, insert_warning;

  // The full-text thread adds documents in the order add() queued them, beside the SQLite
  // inserts on the caller's thread; finish() closes the queue and it commits.
  struct PendingDocument {
    Xapian::Document document;
    std::string file;  ///< named in an indexing error
  };
  std::thread full_text_thread;
  std::mutex queue_mutex;
  std::condition_variable queue_filled, queue_drained;
  std::deque<PendingDocument> queue;
  bool queue_closed = false;
  const std::map<std::string, std::string>* commit_meta = nullptr;  ///< set by finish(): commit after the last document
  std::vector<std::string> full_text_files;                         ///< what the commit wrote
  std::exception_ptr full_text_failure;                             ///< the thread's first failure
};

StoreWriter::StoreWriter(const std::string& generation_dir, std::size_t shards) : impl_(std::make_unique<Impl>()) {
  if (shards == 0) throw Error(ErrorCode::kUsage, "--shards must be at least 1");
  impl_->dir = generation_dir;
  const std::string db_path = generation_dir + "/" + kStoreFile;
  KWIKI_SQLITE_CHECK(impl_->db, sqlite3_open_v2(db_path.c_str(), &impl_->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr),
                     ErrorCode::kIo);
  // A generation is written once by one process and published only after finish(): no journal.
  exec_sql(impl_->db, "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=8192;");
  exec_sql(impl_->db, kSchemaSql);
  exec_sql(impl_->db, "BEGIN");
  impl_->insert_record = std::make_unique<Statement>(impl_->db,
      "INSERT INTO records VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16,?17,?18,?19,?20,?21,?22)");
  impl_->insert_scope = std::make_unique<Statement>(impl_->db, "INSERT INTO scopes VALUES(?1,?2,?3)");
  impl_->insert_fact = std::make_unique<Statement>(impl_->db, "INSERT INTO hw_facts VALUES(?1,?2,?3,?4,?5,?6,?7)");
  impl_->insert_alias = std::make_unique<Statement>(impl_->db, "INSERT INTO aliases VALUES(?1,?2,?3,?4)");
  impl_->insert_warning = std::make_unique<Statement>(impl_->db, "INSERT INTO warnings VALUES(?1,?2,?3)");
  try {
    constexpr int kFlags = Xapian::DB_CREATE_OR_OVERWRITE | Xapian::DB_NO_SYNC | Xapian::DB_DANGEROUS;
    if (shards == 1) {
      // One local database: no termlists (the ranker never reads them; they cost a third of the build).
      impl_->shards.emplace_back(generation_dir + "/" + kXapianDir, kFlags | Xapian::DB_NO_TERMLIST);
    } else {
      // Shards may be served by xapian-tcpsrv, whose protocol needs termlists.
      for (std::size_t k = 0; k < shards; ++k) impl_->shards.emplace_back(generation_dir + "/" + shard_dir_name(k), kFlags);
    }
  } catch (const Xapian::Error& e) {
    throw Error(ErrorCode::kIo, "cannot create the full-text index: " + e.get_description(), generation_dir);
  }
  impl_->full_text_thread = std::thread([this] { write_full_text(); });
}

StoreWriter::~StoreWriter() {
  close_full_text_queue(nullptr);
  if (impl_->full_text_thread.joinable()) impl_->full_text_thread.join();
  impl_->insert_record.reset();
  impl_->insert_scope.reset();
  impl_->insert_fact.reset();
  impl_->insert_alias.reset();
  impl_->insert_warning.reset();
  if (impl_->db) sqlite3_close(impl_->db);
}

std::vector<std::string> shard_dirs(const std::string& generation_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::size_t k = 0;; ++k) {
    std::string dir = generation_dir + "/" + shard_dir_name(k);
    if (!std::filesystem::is_directory(dir, ec)) return out;
    out.push_back(std::move(dir));
  }
}

std::string encode_search_data(const Record& r) {
  auto join = [](const std::vector<std::string>& v) {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
    return out;
  };
  // Tab-separated: what the ranker needs per hit without a store round trip.
  return r.key + '\t' + r.type + '\t' + r.vendor + '\t' + r.arch + '\t' + r.dsl + '\t' + join(r.products) + '\t' +
         join(r.operators) + '\t' + join(r.symptoms) + '\t' + join(r.tags) + '\t' + r.store + '\t' + join(r.links);
}

namespace {

// The English stemmer with a memo of the words it has seen: a corpus repeats its vocabulary,
// and Snowball stemming was 10% of indexing time. Not thread-safe (one per term generator).
class MemoizedStem : public Xapian::StemImplementation {
 public:
  std::string operator()(const std::string& word) override {
    if (auto it = stems_.find(word); it != stems_.end()) return it->second;
    if (stems_.size() >= kMaxWords) stems_.clear();  // bounds memory on an open-ended vocabulary
    return stems_.emplace(word, english_(word)).first->second;
  }
  std::string get_description() const override { return "memoized " + english_.get_description(); }

 private:
  static constexpr std::size_t kMaxWords = 1 << 16;  // a few MB at most
  Xapian::Stem english_{"english"};
  std::unordered_map<std::string, std::string> stems_;
};

}  // namespace

Xapian::TermGenerator make_term_generator() {
  Xapian::TermGenerator generator;
  generator.set_stemmer(Xapian::Stem(new MemoizedStem));
  generator.set_stemming_strategy(Xapian::TermGenerator::STEM_ALL);
  return generator;
}

Xapian::Document make_search_document(const Record& r, Xapian::TermGenerator& generator) {
  Xapian::Document doc;
  // No document data: nothing reads it (the key is in kSlotKey and the Q term), and Xapian
  // zlib-compresses each document's data on the writing thread (10% of indexing instructions).
  // Values are read without inflating the document data: the ranker reads this slot per hit.
  doc.add_value(term::kSlotHit, encode_search_data(r));
  doc.add_value(term::kSlotKey, r.key);
  doc.add_value(term::kSlotWorth, Xapian::sortable_serialise(r.worth));
  doc.add_boolean_term(std::string(term::kId) + r.key);
  auto add_term = [&](const char* prefix, const std::string& value) {
    if (!value.empty()) doc.add_boolean_term(prefix + lower(value));
  };
  add_term(term::kType, r.type);
  add_term(term::kVendor, r.vendor);
  add_term(term::kArch, r.arch);
  add_term(term::kDsl, r.dsl);
  add_term(term::kStore, r.store);
  add_term(term::kSource, r.source);
  add_term(term::kWorkload, r.workload_family);
  for (const auto& v : r.operators) add_term(term::kOperator, v);
  for (const auto& v : r.symptoms) add_term(term::kSymptom, v);
  for (const auto& v : r.tags) add_term(term::kTag, v);
  for (const auto& v : r.products) add_term(term::kProduct, v);
  generator.set_document(doc);
  // Title-like text weighs three times the body; the id's words and the labels count double.
  // No positions: ranking is BM25 over terms, never phrase search, and positions double the cost.
  std::string id_words = r.id;
  std::replace_if(id_words.begin(), id_words.end(), [](char c) { return c == '.' || c == '-' || c == '_'; }, ' ');
  generator.index_text_without_positions(id_words, 2);
  generator.index_text_without_positions(r.title_text, 3);
  std::string label_words;
  for (const auto& t : r.tags) label_words += t + " ";
  for (const auto& t : r.operators) label_words += t + " ";
  for (const auto& t : r.symptoms) label_words += t + " ";
  generator.index_text_without_positions(label_words, 2);
  generator.index_text_without_positions(r.body_text);
  // The generator must not keep a handle on the document: it goes to another thread, and
  // Xapian's reference counts are not atomic (the next set_document would race with it).
  generator.set_document(Xapian::Document());
  return doc;
}

void StoreWriter::add(const Record& r, Xapian::Document document, const std::vector<HardwareFact>& facts) {
  // Round-robin over N fresh databases: record a goes to shard a % N as its local id a / N + 1,
  // whose combined id (l - 1) * N + k + 1 is a + 1, the id the single database would give it,
  // so ties break the same way in every layout (the full-text thread checks it).
  const Xapian::docid docid = static_cast<Xapian::docid>(impl_->queued + 1);
  bool wake_full_text = false;
  {
    std::unique_lock lock(impl_->queue_mutex);
    impl_->queue_drained.wait(lock, [&] {
      return impl_->queue.size() < kMaxQueuedDocuments || impl_->full_text_failure;
    });
    if (impl_->full_text_failure) std::rethrow_exception(impl_->full_text_failure);
    impl_->queue.push_back({std::move(document), r.root + "/" + r.path});
    ++impl_->queued;
    wake_full_text = impl_->queue.size() >= kWakeFullTextAt;
  }
  if (wake_full_text) impl_->queue_filled.notify_one();

  Statement& s = *impl_->insert_record;
  s.bind(1, r.key);
  s.bind(2, r.id);
  s.bind(3, r.store);
  s.bind(4, r.source);
  s.bind(5, r.schema);
  s.bind(6, r.type);
  s.bind(7, r.vendor, true);
  s.bind(8, r.arch, true);
  s.bind(9, r.product, true);
  s.bind(10, r.dsl, true);
  s.bind(11, r.operator_family, true);
  s.bind(12, r.level, true);
  s.bind(13, r.status, true);
  s.bind(14, r.applies_to_json);
  s.bind(15, r.payload);
  s.bind(16, r.confidence, true);
  s.bind(17, r.tier, true);
  s.bind(18, r.worth);
  s.bind(19, r.path);
  s.bind(20, r.root);
  s.bind(21, static_cast<long long>(docid));
  s.bind(22, static_cast<long long>(record_checksum(r.key, r.payload)));
  s.step();
  s.reset();

  auto scope = [&](const char* field, const std::vector<std::string>& values) {
    for (const auto& v : values) {
      impl_->insert_scope->bind(1, r.key);
      impl_->insert_scope->bind(2, std::string(field));
      impl_->insert_scope->bind(3, v);
      impl_->insert_scope->step();
      impl_->insert_scope->reset();
    }
  };
  scope("operator", r.operators);
  scope("symptom", r.symptoms);
  scope("tag", r.tags);
  scope("product", r.products);

  for (const auto& f : facts) {
    Statement& fs = *impl_->insert_fact;
    fs.bind(1, r.key);
    fs.bind(2, r.product, true);
    fs.bind(3, f.path);
    fs.bind(4, f.value_json);
    if (f.is_number) fs.bind(5, f.number);
    fs.bind(6, f.unit, true);
    fs.bind(7, f.evidence, true);
    fs.step();
    fs.reset();
  }
  if (r.type == "spec-sheet" && !r.product.empty()) {
    std::vector<std::string> names = r.aliases;
    names.push_back(r.product);
    std::sort(names.begin(), names.end());
    std::string last;
    for (const auto& name : names) {
      const std::string alias = normalize_alias(name);
      if (alias.empty() || alias == last) continue;
      last = alias;
      Statement& as = *impl_->insert_alias;
      as.bind(1, alias);
      as.bind(2, std::string("product"));
      as.bind(3, r.product);
      as.bind(4, r.key);
      as.step();
      as.reset();
    }
  }
}

void StoreWriter::add_warning(const Diagnostic& w) {
  Statement& s = *impl_->insert_warning;
  s.bind(1, w.file);
  s.bind(2, w.pointer, true);
  s.bind(3, w.message);
  s.step();
  s.reset();
}

void StoreWriter::finish_store(const std::map<std::string, std::string>& meta,
                               const std::vector<std::pair<std::string, std::string>>& roots_by_store) {
  {
    Statement m(impl_->db, "INSERT INTO meta VALUES(?1,?2)");
    for (const auto& [k, v] : meta) {
      m.bind(1, k);
      m.bind(2, v);
      m.step();
      m.reset();
    }
    Statement roots(impl_->db,
                    "INSERT INTO roots VALUES(?1,?2,(SELECT count(*) FROM records WHERE store=?1 AND root=?2))");
    for (const auto& [store, path] : roots_by_store) {
      roots.bind(1, store);
      roots.bind(2, path);
      roots.step();
      roots.reset();
    }
  }
  exec_sql(impl_->db, kIndexSql);
  exec_sql(impl_->db, "COMMIT");
  impl_->insert_record.reset();
  impl_->insert_scope.reset();
  impl_->insert_fact.reset();
  impl_->insert_alias.reset();
  impl_->insert_warning.reset();
  KWIKI_SQLITE_CHECK(impl_->db, sqlite3_close(impl_->db), ErrorCode::kIo);
  impl_->db = nullptr;
  sync_to_disk({impl_->dir + "/" + kStoreFile});
}

std::vector<std::string> StoreWriter::finish_full_text(const std::map<std::string, std::string>& meta) {
  const std::size_t n = impl_->shards.size();
  const auto fp = meta.find("fingerprint");
  std::vector<std::string> folders;
  try {
    for (std::size_t k = 0; k < n; ++k) {
      // Only servable shards say what they are: a remote reader refuses a termlist-free database.
      if (n > 1) {
        impl_->shards[k].set_metadata(kShardKey, std::to_string(k) + "/" + std::to_string(n));
        impl_->shards[k].set_metadata(kFingerprintKey, fp == meta.end() ? "" : fp->second);
      }
      impl_->shards[k].commit();
      impl_->shards[k].close();
      folders.push_back(n == 1 ? kXapianDir : shard_dir_name(k));
    }
  } catch (const Xapian::Error& e) {
    throw Error(ErrorCode::kIo, "full-text index commit failed: " + e.get_description(), impl_->dir);
  }
  std::vector<std::string> written;
  if (n > 1) {
    // The stub makes the shards one database for local readers (paths relative to the stub).
    const std::string stub = impl_->dir + "/" + kXapianDir;
    std::ofstream out(stub);
    for (const auto& f : folders) out << "auto " << f << "\n";
    out.close();
    if (!out) throw Error(ErrorCode::kIo, "cannot write the shard stub file", stub);
    written.push_back(stub);
  }
  std::error_code ec;
  for (const auto& f : folders)
    for (const auto& entry : std::filesystem::directory_iterator(impl_->dir + "/" + f, ec))
      written.push_back(entry.path().string());
  return written;
}

void StoreWriter::write_full_text() {
  const std::size_t n = impl_->shards.size();
  std::size_t added = 0;
  for (;;) {
    Impl::PendingDocument next;
    {
      std::unique_lock lock(impl_->queue_mutex);
      impl_->queue_filled.wait(lock, [&] { return !impl_->queue.empty() || impl_->queue_closed; });
      if (impl_->queue.empty()) break;
      next = std::move(impl_->queue.front());
      impl_->queue.pop_front();
    }
    impl_->queue_drained.notify_one();
    try {
      const std::size_t k = added % n;
      const Xapian::docid local = impl_->shards[k].add_document(next.document);
      if (local != added / n + 1)
        throw Error(ErrorCode::kInternal, "full-text document id " + std::to_string(local) + " is not the expected " +
                                              std::to_string(added / n + 1), next.file);
      ++added;
    } catch (const Xapian::Error& e) {
      fail_full_text(std::make_exception_ptr(
          Error(ErrorCode::kIo, "full-text indexing failed: " + e.get_description(), next.file)));
      return;
    } catch (...) {
      fail_full_text(std::current_exception());
      return;
    }
  }
  // The queue was closed: by finish() (commit_meta set), or by the destructor (nothing to keep).
  if (impl_->commit_meta == nullptr) return;
  try {
    impl_->full_text_files = finish_full_text(*impl_->commit_meta);
  } catch (...) {
    fail_full_text(std::current_exception());
  }
}

void StoreWriter::fail_full_text(std::exception_ptr failure) {
  {
    std::lock_guard lock(impl_->queue_mutex);
    if (!impl_->full_text_failure) impl_->full_text_failure = failure;
    impl_->queue.clear();
  }
  impl_->queue_drained.notify_all();
}

void StoreWriter::close_full_text_queue(const std::map<std::string, std::string>* commit_meta) {
  {
    std::lock_guard lock(impl_->queue_mutex);
    if (impl_->queue_closed) return;
    impl_->commit_meta = commit_meta;
    impl_->queue_closed = true;
    if (commit_meta == nullptr) impl_->queue.clear();  // abandoned: nothing queued will be kept
  }
  impl_->queue_filled.notify_all();
}

void StoreWriter::finish(const std::map<std::string, std::string>& meta,
                         const std::vector<std::pair<std::string, std::string>>& roots_by_store) {
  // The full-text thread adds what is queued and commits while this one finishes the SQLite
  // store (indexes, commit, close, sync): separate files, and together the serial tail of a build.
  close_full_text_queue(&meta);
  try {
    finish_store(meta, roots_by_store);
  } catch (...) {
    impl_->full_text_thread.join();
    throw;
  }
  impl_->full_text_thread.join();
  if (impl_->full_text_failure) std::rethrow_exception(impl_->full_text_failure);
  // The databases were written with DB_NO_SYNC (one sync here is cheaper than one per flush):
  // make them durable before the generation can be published.
  sync_to_disk(impl_->full_text_files);
  // Readers check the full text against this manifest before Xapian touches it; verifying it
  // here once also leaves the stamp that spares the first query the hashing.
  write_full_text_manifest(impl_->dir, impl_->full_text_files);
  verify_full_text(impl_->dir);
}

}  // namespace kwiki::detail
