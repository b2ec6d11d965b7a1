// Full-text shards: parsing --remote lists and stub files, opening and checking the shards, and
// naming the one that failed.
#include "shards.hpp"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "store_writer.hpp"

namespace kwiki::detail {
namespace {

namespace fs = std::filesystem;

// "HOST:PORT" or "[V6HOST]:PORT"; false when the text is not of that form.
bool parse_host_port(const std::string& text, ShardEndpoint& out) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return false;
  unsigned port = 0;
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  const auto [end, ec] = std::from_chars(first, last, port);
  if (ec != std::errc() || end != last || port == 0 || port > 65535) return false;
  std::string host = text.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  out = ShardEndpoint{};
  out.host = host;
  out.port = port;
  return true;
}

// The lines of a Xapian stub database file this reader understands.
std::vector<ShardEndpoint> parse_stub(const fs::path& stub) {
  std::ifstream in(stub);
  if (!in) throw Error(ErrorCode::kUnreadable, "cannot read the stub database file", stub.string());
  std::vector<ShardEndpoint> out;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream words(line);
    std::string type, arg, extra;
    words >> type >> arg;
    ShardEndpoint e;
    if ((type == "auto" || type == "glass" || type == "chert" || type == "honey") && !arg.empty()) {
      const fs::path p(arg);
      e.path = (p.is_absolute() ? p : stub.parent_path() / p).lexically_normal().string();
    } else if (type == "remote" && arg.size() > 1 && arg[0] == ':' && parse_host_port(arg.substr(1), e)) {
    } else if (type == "tcp" && (words >> extra) && parse_host_port(arg + ":" + extra, e)) {
    } else {
      throw Error(ErrorCode::kBadInput,
                  "line " + std::to_string(number) + " is not \"auto PATH\", \"remote :HOST:PORT\" or \"tcp HOST PORT\": " + line,
                  stub.string());
    }
    out.push_back(std::move(e));
  }
  if (out.empty()) throw Error(ErrorCode::kBadInput, "the stub database file lists no shards", stub.string());
  return out;
}

Xapian::Database open_endpoint(const ShardEndpoint& e, unsigned timeout_ms) {
  if (!e.path.empty()) return Xapian::Database(e.path);
  // Connecting is quick or never: cap it so a dead host is named in seconds.
  return Xapian::Remote::open(e.host, e.port, timeout_ms, std::min(timeout_ms, 3000u));
}

}  // namespace

std::vector<ShardEndpoint> parse_shard_list(const std::string& list) {
  std::vector<ShardEndpoint> out;
  std::stringstream items(list);
  std::string item;
  while (std::getline(items, item, ',')) {
    if (item.empty()) continue;
    std::error_code ec;
    ShardEndpoint e;
    if (fs::is_directory(item, ec)) {
      e.path = item;
      out.push_back(std::move(e));
    } else if (fs::is_regular_file(item, ec)) {
      for (auto& s : parse_stub(item)) out.push_back(std::move(s));
    } else if (parse_host_port(item, e)) {
      out.push_back(std::move(e));
    } else {
      throw Error(ErrorCode::kUsage, "shard \"" + item + "\" is neither HOST:PORT nor an existing shard folder or stub file");
    }
  }
  if (out.empty()) throw Error(ErrorCode::kUsage, "--remote needs at least one HOST:PORT");
  return out;
}

ShardSet::ShardSet(std::vector<ShardEndpoint> endpoints, const std::string& fingerprint, unsigned timeout_ms)
    : endpoints_(std::move(endpoints)), timeout_ms_(timeout_ms) {
  const std::size_t n = endpoints_.size();
  std::vector<Xapian::Database> opened;
  std::vector<bool> taken(n, false);
  for (auto& e : endpoints_) {
    Xapian::Database db;
    std::string position, stored_fingerprint;
    try {
      db = open_endpoint(e, timeout_ms_);
      position = db.get_metadata(kShardKey);
      stored_fingerprint = db.get_metadata(kFingerprintKey);
    } catch (const Xapian::Error& x) {
      throw Error(ErrorCode::kShardUnavailable, "cannot open shard " + e.name() + ": " + x.get_description());
    }
    std::size_t k = 0, of = 0;
    if (std::sscanf(position.c_str(), "%zu/%zu", &k, &of) != 2 || of == 0 || k >= of)
      throw Error(ErrorCode::kShardUnavailable, "shard " + e.name() + " is not a servable kwiki shard (no kwiki:shard metadata): build the index with `kwiki index --shards N` (N >= 2) and serve the xapian-shard-K folders it prints");
    if (stored_fingerprint != fingerprint)
      throw Error(ErrorCode::kShardUnavailable, "shard " + e.name() + " belongs to another index generation (fingerprint " + stored_fingerprint +
                                                    ", local store " + fingerprint + "); serve this generation's shards");
    if (of != n)
      throw Error(ErrorCode::kShardUnavailable, "shard " + e.name() + " is shard " + position + ", but " + std::to_string(n) +
                                                    " shard(s) were given: name every shard of the index, once");
    if (taken[k]) throw Error(ErrorCode::kShardUnavailable, "shard " + e.name() + " repeats shard " + position);
    taken[k] = true;
    e.index = k;
    opened.push_back(std::move(db));
  }
  // Combined in shard order, the interleaved document ids are the single database's.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[endpoints_[i].index] = i;
  std::vector<ShardEndpoint> sorted;
  for (std::size_t k = 0; k < n; ++k) {
    db_.add_database(opened[order[k]]);
    sorted.push_back(endpoints_[order[k]]);
  }
  endpoints_ = std::move(sorted);
}

Error ShardSet::explain(const Xapian::Error& failure) const {
  for (const auto& e : endpoints_) {
    try {
      Xapian::Database probe = open_endpoint(e, std::min(timeout_ms_, 2000u));
      (void)probe.get_doccount();
    } catch (const Xapian::Error& x) {
      return Error(ErrorCode::kShardUnavailable, "shard " + std::to_string(e.index) + "/" + std::to_string(endpoints_.size()) + " at " +
                                                     e.name() + " stopped answering: " + x.get_description());
    }
  }
  return Error(ErrorCode::kIndexCorrupt, "full-text search failed: " + failure.get_description());
}

}  // namespace kwiki::detail
