// Index generations on disk: CURRENT names the serving one; switches are atomic renames.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kwiki::detail {

/// The serving generation's folder name (e.g. "gen-000003"), or nullopt when none exists.
std::optional<std::string> read_current_generation(const std::string& index_dir);

/// Exclusive writer lock on an index folder (flock on <index>/.lock), released on destruction.
class WriterLock {
 public:
  explicit WriterLock(const std::string& index_dir);
  ~WriterLock();
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  int fd_ = -1;
};

/// A fresh, empty staging folder for the next generation; returns (staging path, final name).
std::pair<std::string, std::string> create_staging_generation(const std::string& index_dir);

/// Renames staging to its final name, then atomically points CURRENT at it, then removes
/// generations older than the previous one and stale staging folders. Caller holds WriterLock.
void publish_generation(const std::string& index_dir, const std::string& staging, const std::string& name);

/// Flushes each file or folder in `paths` to disk, all concurrently, and returns when every
/// one is durable. Throws kwiki::Error (kIo, naming the path) when one cannot be flushed.
void sync_to_disk(const std::vector<std::string>& paths);

/// Removes a folder tree, ignoring errors (used to discard a failed staging generation).
void remove_tree_quietly(const std::string& path);

}  // namespace kwiki::detail
