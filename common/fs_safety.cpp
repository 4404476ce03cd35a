#include "common/fs_safety.hpp"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/log.hpp"
#include "common/native.hpp"

namespace sol::fs_safety {
namespace {

// Root can replace any file anyway, so a root-owned file (/etc/sol.toml, /usr/lib) is trusted.
bool trusted_owner(uid_t uid) {
  return uid == ::geteuid() || uid == 0;
}

bool others_can_write(const struct stat& st) {
  return (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
}

std::string errno_text(const std::string& path) {
  return path + ": " + std::strerror(errno);
}

std::string foreign_owner(const std::string& path, const struct stat& st) {
  return path + " belongs to uid " + std::to_string(st.st_uid) + ", not to you or root";
}

// Pushes the components of `path` onto a stack whose back is visited next.
void push_components(std::vector<std::string>& todo, const std::string& path) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < path.size();) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) parts.emplace_back(path, i, j - i);
    i = j + 1;
  }
  todo.insert(todo.end(), parts.rbegin(), parts.rend());
}

// "" when `path` is a regular file of the current user (SOL's own from an earlier process), or
// does not exist; else why it must be left alone.
std::string not_ours(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return errno == ENOENT ? std::string() : errno_text(path);
  if (S_ISLNK(st.st_mode)) return path + " is a symbolic link; SOL does not write through one";
  if (!S_ISREG(st.st_mode)) return path + " exists and is not a regular file";
  if (st.st_uid != ::geteuid()) return path + " exists and belongs to uid " + std::to_string(st.st_uid);
  return {};
}

}  // namespace

std::string untrusted_reason(const std::string& path, bool missing_ok) {
  if (path.empty()) return "the path is empty";
  std::vector<std::string> todo;
  push_components(todo, path);
  if (path[0] != '/') {
    // The current directory's own path is walked like the rest: it is visited first.
    char cwd[PATH_MAX];
    if (!::getcwd(cwd, sizeof cwd))
      return "cannot tell the current directory: " + std::string(std::strerror(errno));
    push_components(todo, cwd);
  }
  struct stat root;
  if (::lstat("/", &root) != 0) return errno_text("/");
  if (!trusted_owner(root.st_uid)) return foreign_owner("/", root);
  if (others_can_write(root)) return "/ is writable by group or others";

  std::string cur = "/";
  struct stat st = root;  // of `cur`
  int links = 0;
  while (!todo.empty()) {
    const std::string name = std::move(todo.back());
    todo.pop_back();
    if (name == ".") continue;
    if (name == "..") {
      // `cur` holds no symbolic link, so its lexical parent is its real parent.
      const size_t slash = cur.rfind('/');
      cur = slash == 0 ? "/" : cur.substr(0, slash);
      if (::lstat(cur.c_str(), &st) != 0) return errno_text(cur);
      continue;
    }
    const struct stat parent = st;
    const std::string next = (cur == "/" ? "/" : cur + "/") + name;
    if (::lstat(next.c_str(), &st) != 0) {
      if (errno != ENOENT || !missing_ok) return errno_text(next);
      // Created by the caller next, in a directory only we (or, sticky, only its entries'
      // owners) can change.
      if (others_can_write(parent) && !(parent.st_mode & S_ISVTX))
        return cur + " is writable by group or others";
      return {};
    }
    // Whoever can write to `cur` can replace `next`, except in a sticky directory, where only
    // next's owner (checked here) can.
    if (!trusted_owner(st.st_uid)) return foreign_owner(next, st);
    if (others_can_write(parent) && !(parent.st_mode & S_ISVTX))
      return cur + " is writable by group or others";
    if (S_ISLNK(st.st_mode)) {
      if (++links > 40) return next + ": too many levels of symbolic links";
      char target[PATH_MAX];
      const ssize_t n = ::readlink(next.c_str(), target, sizeof target);
      if (n < 0) return errno_text(next);
      if (static_cast<size_t>(n) == sizeof target) return next + ": the link's target is too long";
      push_components(todo, std::string(target, static_cast<size_t>(n)));
      if (target[0] == '/') {
        cur = "/";
        st = root;
      } else {
        st = parent;  // the link's target is resolved from the directory holding it
      }
      continue;
    }
    cur = next;
  }
  // The end of the path itself: a sticky bit does not stop others from adding files to it.
  if (others_can_write(st)) return cur + " is writable by group or others";
  return {};
}

void* open_library(const std::string& name, int flags, std::string& why) {
  if (name.find('/') != std::string::npos) {
    const std::string unsafe = untrusted_reason(name);
    if (!unsafe.empty()) {
      why = name + " is not loaded: " + unsafe;
      log::once(log::Level::warn, why, "%s", why.c_str());
      return nullptr;
    }
  }
  // Already loaded: the program's own (the reference dlopen takes is all that changes).
  void* loaded = ::dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (loaded) ::dlclose(loaded);
  void* lib = ::dlopen(name.c_str(), flags);
  if (!lib) {
    const char* e = ::dlerror();
    why = e ? e : "cannot open " + name;
  } else if (!loaded) {
    note_own_library(lib);
  }
  return lib;
}

std::string make_private_dir(const std::string& dir) {
  std::string why = untrusted_reason(dir, true);
  if (!why.empty()) return why;
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) return errno_text(part);
  }
  why = untrusted_reason(dir);
  if (!why.empty()) return why;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return dir + " is not a directory";
  return {};
}

int open_new_private(const std::string& path, int flags, std::string& error) {
  const int oflags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | flags;
  int fd = ::open(path.c_str(), oflags, 0600);
  if (fd < 0 && errno == EEXIST) {
    error = not_ours(path);
    if (!error.empty()) return -1;
    // Our own file from an earlier process: removed, then created anew. Should anyone plant
    // something in between, O_EXCL fails rather than write into it.
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
      error = errno_text(path);
      return -1;
    }
    fd = ::open(path.c_str(), oflags, 0600);
  }
  if (fd < 0) error = errno_text(path);
  return fd;
}

bool rename_over_own(const std::string& from, const std::string& to, std::string& error) {
  error = not_ours(to);
  if (!error.empty()) return false;
  if (::rename(from.c_str(), to.c_str()) != 0) {
    error = errno_text(to);
    return false;
  }
  return true;
}

bool replace_file(const std::string& path, const std::string& text, std::string& error) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(::gettid()) + "." +
                          std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  const int fd = open_new_private(tmp, 0, error);
  if (fd < 0) return false;
  bool ok = true;
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
    else error = errno_text(tmp);
  }
  ok = ::close(fd) == 0 && ok;
  if (ok && rename_over_own(tmp, path, error)) return true;
  if (error.empty()) error = errno_text(tmp);
  ::unlink(tmp.c_str());
  return false;
}

bool secure_execution() noexcept {
  return ::getauxval(AT_SECURE) != 0;
}

bool read_file(const std::string& path, size_t max_bytes, bool follow_links, std::string& text,
               std::string& error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    const int e = errno;
    error = std::strerror(e);
    errno = e;  // for the caller that tells a missing file apart
    return false;
  }
  text.clear();
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      error = std::strerror(errno);
      ::close(fd);
      return false;
    }
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes) {
      ::close(fd);
      error = "larger than " + std::to_string(max_bytes >> 20) + " MiB";
      return false;
    }
  }
  ::close(fd);
  return true;
}

}  // namespace sol::fs_safety
