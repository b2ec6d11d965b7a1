// Integrity of a generation's files: the full-text manifest, and the checks of `kwiki stats`.
#pragma once

#include <string>
#include <vector>

namespace kwiki::detail {

/// File in a generation folder listing each full-text file (path relative to the folder, size,
/// hash64), written when the generation is built.
inline constexpr const char* kFullTextManifest = "FULLTEXT";

/// Writes the manifest of `files` (absolute paths inside `generation_dir`). Throws kwiki::Error kIo.
void write_full_text_manifest(const std::string& generation_dir, const std::vector<std::string>& files);

/// Verifies the full-text files against the manifest before Xapian reads them (a damaged file
/// must be an error, never a crash inside Xapian). Hashing runs only when a file's size, inode or
/// modification time differs from the last verification (remembered in the folder when it is
/// writable), so a query normally pays a few stat calls; `always` hashes every time.
/// Throws kwiki::Error kIndexCorrupt naming the file and what to run.
void verify_full_text(const std::string& generation_dir, bool always = false);

/// The deep checks of `kwiki stats` / `kwiki index --check`: SQLite quick_check of the store,
/// every record's checksum, the full-text manifest (hashing every file) and Xapian's own
/// consistency check. Returns the problems found (empty: intact). Throws only kwiki::Error kIo.
std::vector<std::string> check_generation(const std::string& generation_dir);

}  // namespace kwiki::detail
