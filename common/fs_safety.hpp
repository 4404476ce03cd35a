// Which files SOL may trust, and how it creates its own.
//
// Trust follows ssh's StrictModes (secure_filename) and git's ownership check: a file is trusted
// when nobody but the current user (or root) could have written it or swapped it for another. A
// file that names code to load, or a cache of compiled binaries, from a place another user can
// write would run that user's code in this process.
//
// Creation never follows a symbolic link and never writes into a file that is not SOL's, so a
// shared or world-writable trace directory cannot be used to overwrite someone's file.
#pragma once

#include <string>

namespace sol::fs_safety {

// "" when `path` is trusted, else why not ("/srv/x is writable by group or others"). Walks every
// directory from / to the file as the kernel resolves it, symbolic links included:
// - every entry on the way and the file itself belong to the current user or to root;
// - no directory on the way is writable by group or others, except a sticky one like /tmp (there
//   only an entry's owner can rename or delete it, and the entry is ours or root's);
// - the file itself (or the final directory) is not writable by group or others, sticky or not.
// With `missing_ok` a path whose tail does not exist yet is judged by its existing part: the
// caller is about to create the rest (see make_private_dir).
std::string untrusted_reason(const std::string& path, bool missing_ok = false);

// dlopen(name, flags), which runs the library's constructors in this process, for a bare soname
// (libopenblas.so.0: the loader searches the system's directories, as for the program's own
// libraries) or a path that untrusted_reason accepts. nullptr with `why` set otherwise; a library
// refused as untrusted also gets one line. A library it loads afresh is noted as SOL's own
// (note_own_library).
void* open_library(const std::string& name, int flags, std::string& why);

// mkdir -p, creating missing directories 0700; then "" when `dir` is trusted, else why not
// (checked after creating, so a directory someone else created first in /tmp is caught).
std::string make_private_dir(const std::string& dir);

// Opens a new file for writing with mode 0600 (O_CREAT | O_EXCL | O_NOFOLLOW; `flags` adds
// O_APPEND and the like), or returns -1 with `error` set. A regular file of the current user
// already there (a previous process with the same pid) is removed first; anything else there (a
// symbolic link, another user's file) is left alone and reported.
int open_new_private(const std::string& path, int flags, std::string& error);

// rename(from, to), unless `to` exists and is not a regular file of the current user: the new
// file then stays at `from` and `error` says why.
bool rename_over_own(const std::string& from, const std::string& to, std::string& error);

// Replaces `path` with a file holding `text`, atomically: written to a new private temporary file
// beside it (unique per process, thread and call) and renamed over it with rename_over_own, so
// concurrent writers each put a whole file in place and readers never see a part. false with
// `error` set otherwise; no temporary file is left behind.
bool replace_file(const std::string& path, const std::string& text, std::string& error);

// Reads a whole file of at most `max_bytes` into `text`. Without `follow_links` a symbolic link
// in the last component is refused (O_NOFOLLOW): for SOL's own files, which it never creates as
// links. false with `error` set ("larger than N MiB", or the system's reason, errno kept).
bool read_file(const std::string& path, size_t max_bytes, bool follow_links, std::string& text,
               std::string& error);

// Whether this is a secure-execution process (set-user-ID, set-group-ID, file capabilities:
// the kernel's AT_SECURE), where the environment belongs to someone less privileged.
bool secure_execution() noexcept;

}  // namespace sol::fs_safety
