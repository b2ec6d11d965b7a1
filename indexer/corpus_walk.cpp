// Finds the record files under a corpus root, refusing loops and unreadable folders.
#include "corpus_walk.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>
#include <set>

#include "kwiki/error.hpp"

namespace kwiki::detail {
namespace {

struct WalkState {
  std::string root;
  std::string source;
  std::string records_dir;
  bool internal = false;
  std::vector<std::pair<dev_t, ino_t>> ancestors;  // folders on the current path, for loop detection
  std::vector<RecordFile> out;
};

[[noreturn]] void throw_stat_error(const std::string& path, int err) {
  if (err == ELOOP)
    throw Error(ErrorCode::kSymlinkLoop, "symbolic link loop; remove or fix the link", path);
  if (err == EACCES || err == EPERM)
    throw Error(ErrorCode::kUnreadable, std::string("cannot read: ") + std::strerror(err) + "; fix its permissions", path);
  throw Error(ErrorCode::kUnreadable, std::string("cannot read: ") + std::strerror(err), path);
}

// Closes a directory stream on scope exit.
struct DirCloser {
  void operator()(DIR* d) const { ::closedir(d); }
};

void walk_dir(WalkState& state, const std::string& dir, const std::string& rel) {
  std::unique_ptr<DIR, DirCloser> stream(::opendir(dir.c_str()));
  if (!stream) throw_stat_error(dir, errno);
  const int dir_fd = ::dirfd(stream.get());
  struct stat st {};
  if (::fstat(dir_fd, &st) != 0) throw_stat_error(dir, errno);
  const std::pair<dev_t, ino_t> identity{st.st_dev, st.st_ino};
  if (std::find(state.ancestors.begin(), state.ancestors.end(), identity) != state.ancestors.end())
    throw Error(ErrorCode::kSymlinkLoop, "symbolic link loop: this folder is its own ancestor; remove or fix the link", dir);
  state.ancestors.push_back(identity);

  std::vector<std::string> names;
  for (;;) {
    errno = 0;
    const dirent* entry = ::readdir(stream.get());
    if (entry == nullptr) {
      if (errno != 0) throw_stat_error(dir, errno);
      break;
    }
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());

  for (const auto& name : names) {
    const std::string path = dir + "/" + name;
    const std::string child_rel = rel.empty() ? name : rel + "/" + name;
    // Relative to the open folder: no walk of the whole path per entry (symbolic links are followed, as stat does).
    struct stat cst {};
    if (::fstatat(dir_fd, name.c_str(), &cst, 0) != 0) throw_stat_error(path, errno);
    if (S_ISDIR(cst.st_mode)) {
      walk_dir(state, path, child_rel);
    } else if (S_ISREG(cst.st_mode) && name.size() > 5 && name.ends_with(".json") && name != "index.json") {
      RecordFile file;
      file.path = path;
      file.rel_path = state.records_dir + "/" + child_rel;
      file.root = state.root;
      file.source = state.source;
      file.internal = state.internal;
      file.size = static_cast<std::uintmax_t>(cst.st_size);
      file.mtime_ns = static_cast<std::int64_t>(cst.st_mtim.tv_sec) * 1000000000LL + cst.st_mtim.tv_nsec;
      state.out.push_back(std::move(file));
    }
  }
  state.ancestors.pop_back();
}

}  // namespace

std::vector<RecordFile> walk_corpus(const std::string& root, bool internal) {
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) {
    if (errno == ENOENT) throw Error(ErrorCode::kNotCorpus, "corpus root does not exist", root);
    throw_stat_error(root, errno);
  }
  if (!S_ISDIR(st.st_mode)) throw Error(ErrorCode::kNotCorpus, "corpus root is not a folder", root);
  std::vector<RecordFile> all;
  bool found = false;
  for (const char* source : {"hardware_wiki", "kernel_wiki"}) {
    const std::string records = root + "/" + source + "/records";
    struct stat rst {};
    if (::stat(records.c_str(), &rst) != 0) {
      if (errno == ENOENT) continue;
      throw_stat_error(records, errno);
    }
    found = true;
    WalkState state;
    state.root = root;
    state.source = source;
    state.records_dir = std::string(source) + "/records";
    state.internal = internal;
    walk_dir(state, records, "");
    all.insert(all.end(), std::make_move_iterator(state.out.begin()), std::make_move_iterator(state.out.end()));
  }
  if (!found)
    throw Error(ErrorCode::kNotCorpus, "not a corpus root: it has neither hardware_wiki/records nor kernel_wiki/records", root);
  return all;
}

}  // namespace kwiki::detail
