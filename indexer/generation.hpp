// Index generations on disk: CURRENT names the serving one; switches are atomic renames.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "file_util.hpp"

namespace kwiki::detail {

/// What an index folder's CURRENT pointer says.
struct CurrentPointer {
  enum class State { kAbsent, kValid, kDamaged };
  State state = State::kAbsent;
  std::string name;     ///< the generation folder (kValid)
  std::string problem;  ///< what is wrong with it (kDamaged)
};

/// Reads CURRENT: absent, a valid generation name, or damaged (unreadable, empty, not a
/// generation name). A damaged pointer is never read as "no index": nothing is rebuilt or
/// deleted on its account.
CurrentPointer read_current_pointer(const std::string& index_dir);

/// The serving generation's folder name (e.g. "gen-000003"), or nullopt unless CURRENT is valid.
std::optional<std::string> read_current_generation(const std::string& index_dir);

/// The serving generation's name. Throws kwiki::Error kIndexMissing when the folder holds no
/// index at all, kIndexCorrupt (with what to run, and that nothing was deleted) when CURRENT is
/// damaged or missing beside existing generations.
std::string serving_generation(const std::string& index_dir);

/// The published generation folders (gen-NNNNNN, not staging) in the index folder, sorted.
std::vector<std::string> published_generations(const std::string& index_dir);

/// Exclusive writer lock on an index folder (flock on <index>/.lock, created with the folder),
/// released on destruction.
class WriterLock {
 public:
  explicit WriterLock(const std::string& index_dir);

 private:
  std::unique_ptr<FileLock> lock_;
};

/// A fresh, empty staging folder for the next generation; returns (staging path, final name).
std::pair<std::string, std::string> create_staging_generation(const std::string& index_dir);

/// Renames staging to its final name, then atomically points CURRENT at it, then removes
/// generations older than the previous one and stale staging folders; when the previous
/// pointer was damaged or missing, every existing generation is kept. Caller holds WriterLock.
void publish_generation(const std::string& index_dir, const std::string& staging, const std::string& name);

/// Flushes each file or folder in `paths` to disk, all concurrently, and returns when every
/// one is durable. Throws kwiki::Error (kIo, naming the path) when one cannot be flushed.
void sync_to_disk(const std::vector<std::string>& paths);

/// Removes a folder tree, ignoring errors (used to discard a failed staging generation).
void remove_tree_quietly(const std::string& path);

}  // namespace kwiki::detail
