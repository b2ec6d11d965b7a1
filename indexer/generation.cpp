// Index generations on disk: CURRENT names the serving one; switches are atomic renames.
#include "generation.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
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

CurrentPointer read_current_pointer(const std::string& index_dir) {
  CurrentPointer p;
  const std::string path = index_dir + "/" + kCurrentFile;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return p;
  p.state = CurrentPointer::State::kDamaged;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    p.problem = "CURRENT cannot be read";
    return p;
  }
  char buf[64] = {};
  in.read(buf, sizeof buf - 1);
  std::string text(buf, static_cast<std::size_t>(in.gcount()));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (text.size() != std::strlen(kGenerationPrefix) + 6 || generation_number(text) < 0) {
    p.problem = text.empty() ? "CURRENT is empty" : "CURRENT does not name a generation";
    return p;
  }
  p.state = CurrentPointer::State::kValid;
  p.name = text;
  return p;
}

std::optional<std::string> read_current_generation(const std::string& index_dir) {
  CurrentPointer p = read_current_pointer(index_dir);
  if (p.state != CurrentPointer::State::kValid) return std::nullopt;
  return p.name;
}

std::string serving_generation(const std::string& index_dir) {
  const CurrentPointer p = read_current_pointer(index_dir);
  if (p.state == CurrentPointer::State::kValid) return p.name;
  const std::vector<std::string> found = published_generations(index_dir);
  if (p.state == CurrentPointer::State::kAbsent && found.empty())
    throw Error(ErrorCode::kIndexMissing, "no index here; run `kwiki index --index " + index_dir + "`", index_dir);
  const std::string problem = p.state == CurrentPointer::State::kDamaged ? p.problem : "CURRENT is missing";
  throw Error(ErrorCode::kIndexCorrupt,
              problem + " (" + std::to_string(found.size()) + " generation folder(s) present); kwiki changed and deleted nothing. "
                        "Run `kwiki index --force --index " + index_dir + "` to build and serve a new generation (the old ones are kept)",
              index_dir + "/" + kCurrentFile);
}

std::vector<std::string> published_generations(const std::string& index_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(index_dir, ec)) {
    const std::string n = entry.path().filename().string();
    if (generation_number(n) >= 0 && n.size() == std::strlen(kGenerationPrefix) + 6) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

WriterLock::WriterLock(const std::string& index_dir) {
  std::error_code ec;
  fs::create_directories(index_dir, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot create the index folder: " + ec.message(), index_dir);
  lock_ = std::make_unique<FileLock>(index_dir + "/.lock");
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
  const CurrentPointer before = read_current_pointer(index_dir);
  const std::optional<std::string> previous = before.state == CurrentPointer::State::kValid ? std::optional(before.name) : std::nullopt;
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
    // Only names kwiki gives: gen-NNNNNN and gen-NNNNNN.staging (nothing else in the folder is touched).
    const std::size_t name_size = std::strlen(kGenerationPrefix) + 6;
    const bool generation_dir = generation_number(n) >= 0 && n.size() == name_size;
    const bool staging_dir = generation_number(n) >= 0 && n.size() == name_size + std::strlen(kStagingSuffix) && n.ends_with(kStagingSuffix);
    // Without a valid previous pointer kwiki cannot tell which old generation served last: keep them all.
    if (staging_dir || (previous && generation_dir && n != name && n != *previous))
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
