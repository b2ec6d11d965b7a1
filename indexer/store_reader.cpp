// Read access to the serving index generation: records by id, hardware facts, statistics.
#include <sqlite3.h>

#include <filesystem>
#include <memory>

#include "generation.hpp"
#include "integrity.hpp"
#include "kwiki/error.hpp"
#include "kwiki/store.hpp"
#include "sqlite_check.hpp"
#include "store_writer.hpp"

namespace kwiki {
namespace {

constexpr const char* kRecordColumns =
    "key,id,store,source,schema,type,vendor,arch,product,dsl,operator_family,level,status,applies_to,payload,"
    "confidence,tier,worth,path,root,checksum";

Record record_from_row(const detail::Statement& s) {
  Record r;
  r.key = s.text(0);
  r.id = s.text(1);
  r.store = s.text(2);
  r.source = s.text(3);
  r.schema = s.text(4);
  r.type = s.text(5);
  r.vendor = s.text(6);
  r.arch = s.text(7);
  r.product = s.text(8);
  r.dsl = s.text(9);
  r.operator_family = s.text(10);
  r.level = s.text(11);
  r.status = s.text(12);
  r.applies_to_json = s.text(13);
  r.payload = s.text(14);
  r.confidence = s.text(15);
  r.tier = s.text(16);
  r.worth = sqlite3_column_double(s.get(), 17);
  r.path = s.text(18);
  r.root = s.text(19);
  if (static_cast<std::uint64_t>(sqlite3_column_int64(s.get(), 20)) != detail::record_checksum(r.key, r.payload))
    throw Error(ErrorCode::kIndexCorrupt, "record \"" + r.key + "\" fails its integrity check (the store is damaged); rebuild with `kwiki index --force`");
  return r;
}

}  // namespace

struct Store::Impl {
  std::string dir;
  std::string generation;
  sqlite3* db = nullptr;
  // Prepared once: a query serves ~20 records, and preparing costs more than stepping.
  std::unique_ptr<detail::Statement> by_key, by_id, facts;
  ~Impl() {
    by_key.reset();
    by_id.reset();
    facts.reset();
    if (db) sqlite3_close(db);
  }
};

Store::Store(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

Store Store::open(const std::string& index_dir) {
  const std::string generation = detail::serving_generation(index_dir);
  auto impl = std::make_unique<Impl>();
  impl->generation = generation;
  impl->dir = index_dir + "/" + generation;
  const std::string path = impl->dir + "/" + detail::kStoreFile;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(ErrorCode::kIndexCorrupt, "the serving generation has no store; rebuild with `kwiki index --force`", path);
  // A published generation never changes: open it immutable, with no locking or journal.
  const std::string uri = "file:" + path + "?immutable=1";
  const int rc = sqlite3_open_v2(uri.c_str(), &impl->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  if (rc != SQLITE_OK)
    throw Error(ErrorCode::kIndexCorrupt, std::string("cannot open the store: ") + sqlite3_errstr(rc) +
                                              "; rebuild with `kwiki index --force`", path);
  try {
    detail::Statement check(impl->db, "SELECT value FROM meta WHERE key='store_format'");
    if (!check.step() || check.text(0) != std::to_string(detail::kStoreFormat))
      throw Error(ErrorCode::kIndexCorrupt, "index was written by another kwiki version; rebuild with `kwiki index --force`", path);
  } catch (const Error& e) {
    throw Error(ErrorCode::kIndexCorrupt, std::string(e.what()), path);
  }
  return Store(std::move(impl));
}

std::optional<Record> Store::get(std::string_view key) const {
  if (!impl_->by_key) {
    const std::string sql = std::string("SELECT ") + kRecordColumns + " FROM records WHERE key=?1";
    impl_->by_key = std::make_unique<detail::Statement>(impl_->db, sql.c_str());
    // A bare id may name a record of the private store only.
    const std::string by_id = std::string("SELECT ") + kRecordColumns + " FROM records WHERE id=?1 ORDER BY store LIMIT 1";
    impl_->by_id = std::make_unique<detail::Statement>(impl_->db, by_id.c_str());
  }
  for (detail::Statement* s : {impl_->by_key.get(), impl_->by_id.get()}) {
    s->bind(1, std::string(key));
    const bool found = s->step();
    std::optional<Record> out;
    if (found) out = record_from_row(*s);
    s->reset();
    if (found) return out;
  }
  return std::nullopt;
}

std::vector<HardwareFact> Store::facts(std::string_view key) const {
  if (!impl_->facts)
    impl_->facts = std::make_unique<detail::Statement>(impl_->db, "SELECT path,value,number,unit,evidence FROM hw_facts WHERE key=?1 ORDER BY path");
  detail::Statement& s = *impl_->facts;
  struct Reset {
    detail::Statement& s;
    ~Reset() { s.reset(); }
  } reset{s};
  s.bind(1, std::string(key));
  std::vector<HardwareFact> out;
  while (s.step()) {
    HardwareFact f;
    f.path = s.text(0);
    f.value_json = s.text(1);
    f.is_number = sqlite3_column_type(s.get(), 2) != SQLITE_NULL;
    f.number = sqlite3_column_double(s.get(), 2);
    f.unit = s.text(3);
    f.evidence = s.text(4);
    out.push_back(std::move(f));
  }
  return out;
}

StoreStats Store::stats() const {
  StoreStats st;
  st.generation = impl_->generation;
  st.shard_dirs = detail::shard_dirs(generation_dir());
  {
    detail::Statement m(impl_->db, "SELECT key,value FROM meta");
    while (m.step()) {
      if (m.text(0) == "created_at") st.created_at = m.text(1);
      if (m.text(0) == "warnings") st.warnings = std::stoul(m.text(1));
    }
  }
  auto count_by = [&](const char* column, std::map<std::string, std::size_t>& out) {
    const std::string sql = std::string("SELECT coalesce(") + column + ",'-'),count(*) FROM records GROUP BY 1 ORDER BY 1";
    detail::Statement s(impl_->db, sql.c_str());
    while (s.step()) out[s.text(0)] = static_cast<std::size_t>(sqlite3_column_int64(s.get(), 1));
  };
  count_by("store", st.by_store);
  count_by("type", st.by_type);
  count_by("vendor", st.by_vendor);
  count_by("arch", st.by_arch);
  count_by("source", st.by_source);
  for (const auto& [k, v] : st.by_store) st.records += v;
  {
    detail::Statement t(impl_->db,
                        "SELECT coalesce(arch,'-'),operator_family,count(*) FROM records WHERE operator_family IS NOT NULL AND operator_family<>'' "
                        "GROUP BY 1,2 ORDER BY 1,2");
    while (t.step()) st.topics_by_arch[t.text(0)][t.text(1)] = static_cast<std::size_t>(sqlite3_column_int64(t.get(), 2));
  }
  detail::Statement r(impl_->db, "SELECT store,path,records FROM roots ORDER BY rowid");
  while (r.step()) st.roots.push_back({r.text(0), r.text(1), static_cast<std::size_t>(sqlite3_column_int64(r.get(), 2))});
  return st;
}

std::vector<std::string> Store::check_integrity() const { return detail::check_generation(impl_->dir); }

const std::string& Store::generation_dir() const { return impl_->dir; }
const std::string& Store::generation() const { return impl_->generation; }
sqlite3* Store::sqlite() const { return impl_->db; }

}  // namespace kwiki
