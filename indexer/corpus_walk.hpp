// Finds the record files under a corpus root, refusing loops and unreadable folders.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kwiki::detail {

/// One record file found by the walk.
struct RecordFile {
  std::string path;      ///< path as reached (root joined with rel_path)
  std::string rel_path;  ///< relative to the corpus root, '/'-separated
  std::string root;      ///< the corpus root as given
  std::string source;    ///< hardware_wiki | kernel_wiki
  bool internal = false;
  std::uintmax_t size = 0;
  std::int64_t mtime_ns = 0;
};

/// Lists `<root>/hardware_wiki/records/**.json` and `<root>/kernel_wiki/records/**.json`
/// (index.json manifests excluded), sorted by path. Follows symbolic links. Throws kwiki::Error:
/// kNotCorpus when neither folder exists, kSymlinkLoop, kUnreadable.
std::vector<RecordFile> walk_corpus(const std::string& root, bool internal);

}  // namespace kwiki::detail
