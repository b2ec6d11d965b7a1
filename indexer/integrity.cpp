// Integrity of a generation's files: the full-text manifest, and the checks of `kwiki stats`.
#include "integrity.hpp"

#include <sqlite3.h>
#include <sys/stat.h>
#include <xapian.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "file_util.hpp"
#include "kwiki/error.hpp"
#include "sqlite_check.hpp"
#include "store_writer.hpp"

namespace kwiki::detail {
namespace {

namespace fs = std::filesystem;

// Remembers the identity of files that hashed right, so the next open can skip the hashing.
constexpr const char* kVerifiedStamp = ".fulltext-verified";

struct ManifestEntry {
  std::string path;  // relative to the generation folder
  unsigned long long size = 0;
  std::string hash;
};

std::vector<ManifestEntry> read_manifest(const std::string& generation_dir) {
  const std::string path = generation_dir + "/" + kFullTextManifest;
  std::ifstream in(path);
  if (!in)
    throw Error(ErrorCode::kIndexCorrupt, "the generation has no full-text manifest; rebuild with `kwiki index --force`", path);
  std::vector<ManifestEntry> entries;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    ManifestEntry e;
    if (!(fields >> e.size >> e.hash) || !std::getline(fields >> std::ws, e.path) || e.path.empty() || e.path.find("..") != std::string::npos)
      throw Error(ErrorCode::kIndexCorrupt, "the full-text manifest is damaged; rebuild with `kwiki index --force`", path);
    entries.push_back(std::move(e));
  }
  if (entries.empty()) throw Error(ErrorCode::kIndexCorrupt, "the full-text manifest is empty; rebuild with `kwiki index --force`", path);
  return entries;
}

// size, inode, device and modification time of every listed file, one line each.
std::string identity_of(const std::string& generation_dir, const std::vector<ManifestEntry>& entries) {
  std::string out;
  for (const auto& e : entries) {
    struct stat st {};
    if (::stat((generation_dir + "/" + e.path).c_str(), &st) != 0) return {};
    out += e.path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_dev) + " " +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "\n";
  }
  return out;
}

}  // namespace

void write_full_text_manifest(const std::string& generation_dir, const std::vector<std::string>& files) {
  std::string text;
  for (const auto& file : files) {
    if (fs::is_directory(file)) continue;
    const std::string bytes = read_file(file);
    text += std::to_string(bytes.size()) + " " + hash64_hex(bytes) + " " + fs::relative(file, generation_dir).string() + "\n";
  }
  write_file_atomically(generation_dir + "/" + kFullTextManifest, text);
}

void verify_full_text(const std::string& generation_dir, bool always) {
  const std::vector<ManifestEntry> entries = read_manifest(generation_dir);
  const std::string identity = identity_of(generation_dir, entries);
  const std::string stamp_path = generation_dir + "/" + kVerifiedStamp;
  if (!always && !identity.empty()) {
    std::ifstream stamp(stamp_path, std::ios::binary);
    std::stringstream ss;
    ss << stamp.rdbuf();
    if (stamp && ss.str() == identity) return;
  }
  for (const auto& e : entries) {
    const std::string file = generation_dir + "/" + e.path;
    std::string bytes;
    try {
      bytes = read_file(file);
    } catch (const Error&) {
      throw Error(ErrorCode::kIndexCorrupt, "a full-text file is missing or unreadable; rebuild with `kwiki index --force`", file);
    }
    if (bytes.size() != e.size || hash64_hex(bytes) != e.hash)
      throw Error(ErrorCode::kIndexCorrupt, "a full-text file differs from what was indexed (damaged or changed); rebuild with `kwiki index --force`",
                  file);
  }
  if (identity.empty()) return;
  try {
    write_file_atomically(stamp_path, identity);
  } catch (const Error&) {
    // A read-only index folder: verified again next time, which only costs time.
  }
}

std::vector<std::string> check_generation(const std::string& generation_dir) {
  std::vector<std::string> problems;
  const std::string store = generation_dir + "/" + kStoreFile;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(("file:" + store + "?immutable=1").c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr) != SQLITE_OK) {
    problems.push_back("the store cannot be opened: " + store);
  } else {
    try {
      Statement quick(db, "PRAGMA quick_check");
      while (quick.step())
        if (quick.text(0) != "ok") problems.push_back("store quick_check: " + quick.text(0));
      Statement rows(db, "SELECT key,payload,checksum FROM records");
      std::size_t bad = 0;
      while (rows.step())
        if (static_cast<std::uint64_t>(sqlite3_column_int64(rows.get(), 2)) != record_checksum(rows.text(0), rows.text(1))) ++bad;
      if (bad) problems.push_back(std::to_string(bad) + " record(s) fail their checksum");
    } catch (const Error& e) {
      problems.push_back(std::string("store: ") + e.what());
    }
  }
  sqlite3_close(db);
  try {
    verify_full_text(generation_dir, true);
  } catch (const Error& e) {
    problems.push_back(e.one_line());
    return problems;  // Xapian must not read a file that fails its manifest
  }
  try {
    std::ostringstream xapian_report;
    std::vector<std::string> databases = shard_dirs(generation_dir);
    if (databases.empty()) databases.push_back(generation_dir + "/" + kXapianDir);
    for (const std::string& dir : databases)
      if (Xapian::Database::check(dir, Xapian::DBCHECK_SHORT_TREE, &xapian_report) != 0) problems.push_back("full text: Xapian reports errors in " + dir);
  } catch (const Xapian::Error& e) {
    problems.push_back("full text: " + e.get_description());
  }
  return problems;
}

}  // namespace kwiki::detail
