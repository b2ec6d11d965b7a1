// Index generations on disk: CURRENT names the serving one; switches are atomic renames.
#include "generation.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "kwiki/error.hpp"

namespace kwiki::detail {
namespace fs = std::filesystem;
namespace {

constexpr const char* kCurrentFile = "CURRENT";
constexpr const char* kGenerationPrefix = "gen-";
constexpr const char* kStagingSuffix = ".staging";

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

long generation_number(const std::string& name) {
  if (name.rfind(kGenerationPrefix, 0) != 0) return -1;
  const std::string digits = name.substr(std::strlen(kGenerationPrefix), 6);
  if (digits.size() != 6 || digits.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stol(digits);
}

}  // namespace

std::optional<std::string> read_current_generation(const std::string& index_dir) {
  std::ifstream in(index_dir + "/" + kCurrentFile);
  if (!in) return std::nullopt;
  std::string name;
  std::getline(in, name);
  if (generation_number(name) < 0 || name.find('/') != std::string::npos) return std::nullopt;
  return name;
}

WriterLock::WriterLock(const std::string& index_dir) {
  std::error_code ec;
  fs::create_directories(index_dir, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot create the index folder: " + ec.message(), index_dir);
  const std::string path = index_dir + "/.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(ErrorCode::kIo, std::string("cannot open the index lock: ") + std::strerror(errno), path);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    std::fprintf(stderr, "kwiki: waiting for another kwiki writing %s\n", index_dir.c_str());
    if (::flock(fd_, LOCK_EX) != 0) {
      ::close(fd_);
      throw Error(ErrorCode::kBusy, "cannot lock the index", path);
    }
  }
}

WriterLock::~WriterLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

std::pair<std::string, std::string> create_staging_generation(const std::string& index_dir) {
  long highest = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(index_dir, ec)) {
    highest = std::max(highest, generation_number(entry.path().filename().string()));
  }
  char name[32];
  std::snprintf(name, sizeof name, "%s%06ld", kGenerationPrefix, highest + 1);
  const std::string staging = index_dir + "/" + name + kStagingSuffix;
  remove_tree_quietly(staging);
  fs::create_directories(staging, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot create a staging generation: " + ec.message(), staging);
  return {staging, name};
}

void publish_generation(const std::string& index_dir, const std::string& staging, const std::string& name) {
  const std::string final_dir = index_dir + "/" + name;
  if (::rename(staging.c_str(), final_dir.c_str()) != 0)
    throw Error(ErrorCode::kIo, std::string("cannot publish the generation: ") + std::strerror(errno), final_dir);
  const std::optional<std::string> previous = read_current_generation(index_dir);
  const std::string tmp = index_dir + "/" + kCurrentFile + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << name << "\n";
    out.flush();
    if (!out) throw Error(ErrorCode::kIo, "cannot write the generation pointer", tmp);
  }
  // The renamed folder's entry and the new pointer's text must both be on disk before CURRENT
  // switches; neither depends on the other, so they are flushed in one round.
  sync_to_disk({index_dir, tmp});
  // rename(2) replaces CURRENT atomically: readers see the old name or the new one.
  if (::rename(tmp.c_str(), (index_dir + "/" + kCurrentFile).c_str()) != 0)
    throw Error(ErrorCode::kIo, std::string("cannot switch the generation: ") + std::strerror(errno), index_dir);
  fsync_dir(index_dir);

  // Keep the new and the previous generation (a reader may still hold the previous one open).
  std::error_code ec;
  std::vector<std::string> doomed;
  for (const auto& entry : fs::directory_iterator(index_dir, ec)) {
    const std::string n = entry.path().filename().string();
    const bool staging_dir = n.size() > std::strlen(kStagingSuffix) && n.ends_with(kStagingSuffix);
    if (staging_dir || (generation_number(n) >= 0 && n != name && (!previous || n != *previous)))
      doomed.push_back(entry.path().string());
  }
  for (const auto& path : doomed) remove_tree_quietly(path);
}

void sync_to_disk(const std::vector<std::string>& paths) {
  std::vector<int> errors(paths.size(), 0);
  auto sync_one = [&](std::size_t i) {
    const int fd = ::open(paths[i].c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      errors[i] = errno;
      return;
    }
    // EINVAL: a file system that cannot sync this kind of file; nothing more can be done.
    if (::fsync(fd) != 0 && errno != EINVAL) errors[i] = errno;
    ::close(fd);
  };
  // One thread per path: concurrent fsyncs share one journal commit and device flush, where
  // one after another each waits for its own (7-25 ms apiece on the shared CI VM).
  std::vector<std::thread> threads;
  try {
    for (std::size_t i = 1; i < paths.size(); ++i) threads.emplace_back(sync_one, i);
  } catch (...) {
    for (auto& t : threads) t.join();
    throw;
  }
  if (!paths.empty()) sync_one(0);
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < paths.size(); ++i)
    if (errors[i] != 0)
      throw Error(ErrorCode::kIo, std::string("cannot flush to disk: ") + std::strerror(errors[i]), paths[i]);
}

void remove_tree_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

}  // namespace kwiki::detail
