// Files every component writes safely: atomic replacement, advisory locks, private temporaries.
#include "file_util.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kwiki/error.hpp"

namespace kwiki::detail {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kTempMarker = ".kwiki-tmp-";

}  // namespace

bool is_kwiki_temporary(std::string_view name) {
  const auto at = name.find(kTempMarker);
  return !name.empty() && name.front() == '.' && at != std::string_view::npos && name.size() == at + kTempMarker.size() + 6;
}

void write_file_atomically(const std::string& path, std::string_view text) {
  const fs::path target(path);
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string tmp = (dir / ("." + target.filename().string() + std::string(kTempMarker) + "XXXXXX")).string();
  // mkstemp creates a new file with O_EXCL: a link or file planted under that name is never used.
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::kIo, std::string("cannot create a temporary file: ") + std::strerror(errno), dir.string());
  ::fchmod(fd, 0644);
  std::size_t written = 0;
  bool ok = true;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ok = false;
      break;
    }
    written += static_cast<std::size_t>(n);
  }
  const int saved = errno;
  ok = ok && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(ok ? errno : saved);
    ::unlink(tmp.c_str());
    throw Error(ErrorCode::kIo, "cannot write the file: " + why, path);
  }
}

int remove_stale_temporaries(const std::string& dir, int min_age_seconds) {
  int removed = 0;
  std::error_code ec;
  const std::time_t now = std::time(nullptr);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_kwiki_temporary(name)) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (now - st.st_mtime < min_age_seconds) continue;  // a writer may still be filling it
    if (::unlink(entry.path().c_str()) == 0) ++removed;
  }
  return removed;
}

FileLock::FileLock(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw Error(ErrorCode::kIo, std::string("cannot open the lock file: ") + std::strerror(errno), path);
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  std::fprintf(stderr, "kwiki: waiting for another kwiki holding %s\n", path.c_str());
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    ::close(fd_);
    fd_ = -1;
    throw Error(ErrorCode::kBusy, "cannot take the lock", path);
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

PrivateFolder::PrivateFolder(const std::string& prefix) {
  std::string pattern = (fs::temp_directory_path() / (prefix + "-XXXXXX")).string();
  if (!::mkdtemp(pattern.data())) throw Error(ErrorCode::kIo, std::string("cannot create a private folder: ") + std::strerror(errno), pattern);
  path_ = pattern;
}

PrivateFolder::~PrivateFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kUnreadable, "cannot read the file", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::uint64_t hash64(std::string_view data, std::uint64_t seed) {
  constexpr std::uint64_t kPrime = 1099511628211ULL;
  std::uint64_t h = 1469598103934665603ULL ^ seed;
  std::size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    std::uint64_t word;
    std::memcpy(&word, data.data() + i, 8);
    h = (h ^ word) * kPrime;
    h ^= h >> 29;
  }
  for (; i < data.size(); ++i) h = (h ^ static_cast<unsigned char>(data[i])) * kPrime;
  h ^= data.size();
  h *= kPrime;
  return h ^ (h >> 32);
}

std::string hash64_hex(std::string_view data) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash64(data)));
  return buf;
}

}  // namespace kwiki::detail
