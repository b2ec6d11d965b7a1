// Files every component writes safely: atomic replacement, advisory locks, private temporaries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kwiki::detail {

/// Replaces `path` with `text` atomically: a private temporary beside it (mkstemp, mode 0644,
/// never following a link), fsync, rename. A crash leaves the old file or the new one, plus at
/// most a temporary named `.NAME.kwiki-tmp-XXXXXX` that remove_stale_temporaries() clears.
/// Throws kwiki::Error kIo naming the path.
void write_file_atomically(const std::string& path, std::string_view text);

/// Removes temporaries that write_file_atomically left in `dir` (a crash or kill -9) and that no
/// live writer holds: those older than `min_age_seconds`. Returns how many were removed.
int remove_stale_temporaries(const std::string& dir, int min_age_seconds = 60);

/// True for the names write_file_atomically gives its temporaries.
bool is_kwiki_temporary(std::string_view file_name);

/// An exclusive advisory lock (flock) on `path`, created when missing; waits for other holders
/// (saying so on stderr once). Released on destruction. Throws kwiki::Error kIo / kBusy.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

/// A private folder (mkdtemp, mode 0700) under $TMPDIR named <prefix>-XXXXXX, removed with
/// everything in it on destruction: kwiki's own scratch space, never a path others chose.
/// Throws kwiki::Error kIo when it cannot be made.
class PrivateFolder {
 public:
  explicit PrivateFolder(const std::string& prefix);
  ~PrivateFolder();
  PrivateFolder(const PrivateFolder&) = delete;
  PrivateFolder& operator=(const PrivateFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// The whole file, or throws kwiki::Error kUnreadable naming it.
std::string read_file(const std::string& path);

/// 64-bit hash for integrity checks (not for security): FNV-1a over 8-byte words.
std::uint64_t hash64(std::string_view data, std::uint64_t seed = 0);
/// hash64 as 16 lowercase hex digits.
std::string hash64_hex(std::string_view data);

}  // namespace kwiki::detail
