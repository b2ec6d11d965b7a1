// Opens the full-text shards of a generation, local or served by xapian-tcpsrv, as one database.
#pragma once

#include <string>
#include <vector>

#include <xapian.h>

#include "kwiki/error.hpp"

namespace kwiki::detail {

/// Where one shard lives: a local database folder, or a xapian-tcpsrv endpoint.
struct ShardEndpoint {
  std::string path;   ///< local folder (empty for remote)
  std::string host;   ///< remote host (empty for local)
  unsigned port = 0;  ///< remote port
  std::size_t index = 0;  ///< position K of K/N, read from the shard's metadata

  std::string name() const { return path.empty() ? host + ":" + std::to_string(port) : path; }
};

/// Parses "HOST:PORT[,HOST:PORT|PATH...]" (from --remote) into endpoints; a PATH that is a Xapian
/// stub file contributes its own lines ("auto PATH", "glass PATH", "remote :HOST:PORT").
/// Throws kwiki::Error kUsage for an entry that is neither.
std::vector<ShardEndpoint> parse_shard_list(const std::string& list);

/// The shards opened together. Remote reads time out after `timeout_ms` rather than hang.
class ShardSet {
 public:
  /// Opens every endpoint, checks that each carries `fingerprint` (the local store's) and that
  /// together they are shards 0..N-1 of one generation, and combines them in shard order, so
  /// document ids equal the single database's. Throws kwiki::Error kShardUnavailable naming
  /// the shard that cannot be reached or does not match.
  ShardSet(std::vector<ShardEndpoint> endpoints, const std::string& fingerprint, unsigned timeout_ms);

  Xapian::Database& database() { return db_; }
  const std::vector<ShardEndpoint>& endpoints() const { return endpoints_; }

  /// Turns a Xapian failure during a search into an error naming the shard that stopped
  /// answering (each is probed with a short timeout); kIndexCorrupt when all still answer.
  [[nodiscard]] Error explain(const Xapian::Error& failure) const;

 private:
  std::vector<ShardEndpoint> endpoints_;
  unsigned timeout_ms_;
  Xapian::Database db_;
};

}  // namespace kwiki::detail
