// intentd_plfs: a FUSE 3 pass-through file system that simulates power loss.
//
//   intentd_plfs BACKING_DIR MOUNTPOINT [--control SOCKET] [--trace] [FUSE options: -f -s -o ...]
//   intentd_plfs ctl SOCKET COMMAND...        (client: sends one command, prints the reply)
//
// Every operation on MOUNTPOINT is passed through to BACKING_DIR. The file system
// remembers what has not been made durable yet and, on a "cut" command, throws it
// away: the mount then serves what a machine would find after losing power.
//
// Durability model (what survives a cut):
//  * File contents and size. A file's content and size as of its last fsync or
//    fdatasync (on any handle of that inode) survive. Every later content change
//    (write, truncate, ftruncate, open with O_TRUNC, fallocate, punch hole) is
//    undone. The undo log records, per change, the size before it and the bytes it
//    overwrote inside the old size; appends therefore cost no memory and fsync only
//    drops the log, whatever the file's size. Overwrites cost their size in memory
//    until the next sync.
//  * A write through a handle opened with O_SYNC or O_DSYNC is durable when it
//    returns, together with every earlier unsynced change of that file (as if an
//    fdatasync followed; a kernel only has to write the range, ext4 in practice
//    commits more).
//  * fallocate that grows the file is not durable until fsync: the synced size stays.
//  * O_DIRECT writes are not durable without fsync (a disk's volatile write cache).
//    O_DIRECT, O_SYNC and O_DSYNC are not passed to the backing file.
//  * sync_file_range is not a FUSE operation and makes nothing durable; neither do
//    close, flush or syncfs.
//  * Names. Each namespace change (create, mkdir, symlink, link, unlink, rmdir,
//    rename) touches directories: the parent(s) of the changed entries, and for
//    rmdir the removed directory itself. A change is durable once any directory it
//    touches is fsynced (fsyncdir, or fsync on a handle opened on the directory,
//    which FUSE delivers as fsyncdir) after it. Durability is then closed under
//    "earlier change touching a directory that a durable change touches": each
//    directory keeps a durable prefix of its changes, and a rename made durable
//    through one directory commits the other one too, as a journaling file system
//    does. Everything else is reverted at a cut, newest first: a created file or
//    directory disappears (a directory with all its contents); a rename goes back,
//    and a target it replaced returns; an unlinked file or removed directory
//    returns, with its synced content. Removed and replaced objects are kept in
//    BACKING_DIR/.plfs/trash until the change is durable. A file created and
//    fsynced whose directory was never fsynced disappears (strict ext4-like model).
//  * Attributes (chmod, chown, utimens) are not modelled: they survive a cut.
//  * A write larger than the kernel's FUSE max_write (128 KiB by default) arrives
//    as several writes, each a separate change for "keep-prefix" and "torn".
//
// Cut variants (control commands):
//   cut                 revert every unsynced change (contents and names).
//   cut keep-prefix S   per file, keep a random prefix (in write order) of the
//                       unsynced content changes; seed S. Names revert fully.
//   cut torn S          as keep-prefix, and when the last kept change is a write,
//                       its last 4 KiB page is torn: only a random part (possibly
//                       nothing) of the write's bytes in that page is kept.
//   stats               one line: counters of written/synced/unsynced bytes, cuts,
//                       faults injected.
//   pending             the namespace changes a cut would revert, oldest first.
//
// Faults on demand (control commands; a seed makes the random ones repeatable):
//   fault enospc RATE SEED   each write, fallocate, create or mkdir fails with
//                            ENOSPC with probability RATE (0..1); a failed write
//                            of more than 512 bytes is, one time in two, a short
//                            write instead (a random prefix written, its length
//                            returned), as a file system that fills up mid-write.
//   fault full               the disk is full: every write that grows a file,
//                            fallocate, create and mkdir fail with ENOSPC;
//                            overwrites inside a file's size succeed.
//   fault space              the disk has space again (ends `full`).
//   fault eio-fsync RATE SEED
//                            each fsync/fdatasync of a file fails with EIO with
//                            probability RATE, and then behaves as Linux does:
//                            the file's unsynced pages are marked clean, so a
//                            later fsync that succeeds does not write them; reads
//                            still see them, but a cut loses them (restores the
//                            durable content, zeros past the durable size) unless
//                            a write dirtied the page again and a later fsync
//                            succeeded.
//   fault clear              no faults.
//   vanish PATH              the directory PATH (relative to the mount) is moved
//                            away to PATH.vanished, as an operator's `mv` would
//                            (a namespace change like any other).
//   return PATH              moves PATH.vanished back.
// Each command gets a one-line reply ("ok" for cuts, "error: ..." if unknown).
// --trace logs every modifying operation (and opens) to stderr.
//
// Ending the process (unmount) is not a cut: pending changes are then simply
// kept, and objects still in the trash are deleted at the next start.
// A cut is atomic with respect to file operations (one global lock). Handles
// opened before a cut are stale: every I/O on them (read, write, fsync, ftruncate,
// fallocate) fails with EIO, so a surviving writer cannot resurrect lost data.
//
// The backing directory itself is never fsynced: durability here is logical.
// Kernel caching is disabled (direct_io, zero attribute and entry timeouts) so
// that every read after a cut sees the surviving state. POSIX and flock locks are
// left to the kernel (no lock operation): they work for processes on this host.

#define FUSE_USE_VERSION 35

#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr off_t kPage = 4096;

// One content change of a file, enough to undo it: the size before, and the
// bytes of [offset, offset + length) that lay inside that size.
struct Undo {
  off_t old_size = 0;
  off_t offset = 0;
  off_t length = 0;  // for writes: bytes written; else the range saved
  std::string old;   // old bytes of [offset, min(offset + length, old_size))
  bool is_write = false;
};

// Unsynced content changes of one inode. `fd` is a private read-write handle
// that keeps the inode alive (even if unlinked) until the log is dropped.
struct FileLog {
  int fd = -1;
  std::vector<Undo> changes;
  uint64_t unsynced_bytes = 0;
};

enum class NsKind { kCreate, kMkdir, kUnlink, kRmdir, kRename };

// One namespace change not yet durable. Paths are relative to the backing root
// and are kept current when an enclosing directory is renamed.
struct NsChange {
  NsKind kind;
  std::set<ino_t> dirs;  // directories touched (backing inode numbers)
  std::string path;      // created/removed entry, or rename source
  std::string target;    // rename target
  std::string trash;     // removed object or replaced rename target, if any
  bool durable = false;
};

struct Handle {
  int fd = -1;
  uint64_t generation = 0;
  bool sync = false;    // O_SYNC / O_DSYNC
  bool append = false;  // O_APPEND: the kernel's offset is ignored by pwrite
};

struct Stats {
  uint64_t written = 0, synced = 0, cuts = 0, fsyncs = 0, fsyncdirs = 0;
  uint64_t enospc = 0, short_writes = 0, eio_fsyncs = 0;
};

// Faults on demand ("fault" commands).
struct Faults {
  double enospc_rate = 0;
  bool full = false;
  double eio_fsync_rate = 0;
  std::mt19937_64 rng{1};
  bool roll(double rate) {
    return rate > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < rate;
  }
};

// Pages of one inode whose last fsync failed (Linux marks them clean): the
// content a cut restores, kPage bytes each (zeros past the durable size).
// `fd` keeps the inode alive.
struct Doomed {
  int fd = -1;
  std::map<off_t, std::string> pages;  // page index -> durable content
};

struct Fs {
  std::mutex mu;
  int root = -1;
  bool trace = false;
  std::string control;
  uint64_t generation = 0;
  uint64_t trash_seq = 0;
  std::map<ino_t, FileLog> files;
  std::map<ino_t, Doomed> doomed;
  std::vector<NsChange> journal;
  Stats stats;
  Faults faults;
};

Fs g;

const std::string kMeta = ".plfs";
const std::string kTrash = ".plfs/trash";

void trace(const char* op, const char* path, const std::string& extra = "") {
  if (g.trace) std::fprintf(stderr, "plfs: %s %s %s\n", op, path, extra.c_str());
}

// Mount path "/a/b" -> backing path "a/b" (relative to g.root).
std::string rel(const char* path) { return path[1] ? std::string(path + 1) : std::string("."); }

bool hidden(const char* path) {
  std::string r = rel(path);
  return r == kMeta || r.rfind(kMeta + "/", 0) == 0;
}

std::string parent_of(const std::string& r) {
  auto slash = r.rfind('/');
  return slash == std::string::npos ? "." : r.substr(0, slash);
}

ino_t ino_of(const std::string& r) {
  struct stat st {};
  return fstatat(g.root, r.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ? st.st_ino : 0;
}

Handle* handle(fuse_file_info* fi) { return reinterpret_cast<Handle*>(fi->fh); }
bool stale(const Handle* h) { return h->generation != g.generation; }

// ---------------------------------------------------------------- contents

FileLog* log_for(int fd, struct stat* st) {
  if (fstat(fd, st) != 0) return nullptr;
  auto [it, inserted] = g.files.try_emplace(st->st_ino);
  if (inserted) {
    std::string self = "/proc/self/fd/" + std::to_string(fd);
    it->second.fd = open(self.c_str(), O_RDWR | O_CLOEXEC);
    if (it->second.fd < 0) {
      g.files.erase(it);
      return nullptr;
    }
  }
  return &it->second;
}

// Saves what a change of [offset, offset + length) on `fd` is about to destroy.
int record(int fd, off_t offset, off_t length, bool is_write) {
  struct stat st {};
  FileLog* log = log_for(fd, &st);
  if (!log) return -errno;
  Undo u;
  u.old_size = st.st_size;
  u.offset = offset;
  u.length = length;
  u.is_write = is_write;
  off_t end = std::min<off_t>(offset + length, st.st_size);
  if (end > offset) {
    u.old.resize(end - offset);
    if (pread(log->fd, u.old.data(), u.old.size(), offset) != static_cast<ssize_t>(u.old.size()))
      return -EIO;
  }
  if (is_write) log->unsynced_bytes += length;
  log->changes.push_back(std::move(u));
  return 0;
}

void drop_log(std::map<ino_t, FileLog>::iterator it) {
  close(it->second.fd);
  g.files.erase(it);
}

// The pages [offset, offset + length) touches.
std::pair<off_t, off_t> pages_of(off_t offset, off_t length) {
  if (length <= 0) return {0, 0};
  return {offset / kPage, (offset + length - 1) / kPage + 1};
}

// fsync/fdatasync/O_DSYNC: everything written to the inode so far is durable,
// the pages of an earlier failed fsync included where a write dirtied them
// again (the kernel writes whole pages).
void mark_synced(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return;
  auto it = g.files.find(st.st_ino);
  if (it == g.files.end()) return;
  if (auto d = g.doomed.find(st.st_ino); d != g.doomed.end()) {
    for (const Undo& u : it->second.changes) {
      auto [first, end] = pages_of(u.offset, u.length);
      for (off_t p = first; p < end; ++p) d->second.pages.erase(p);
    }
    if (d->second.pages.empty()) {
      close(d->second.fd);
      g.doomed.erase(d);
    }
  }
  g.stats.synced += it->second.unsynced_bytes;
  drop_log(it);
}

// A failed fsync of `fd` (injected EIO): the unsynced pages stay readable but
// are no longer dirty, so a later fsync does not write them; remembered with
// their durable content for the next cut.
void doom_unsynced(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return;
  auto it = g.files.find(st.st_ino);
  if (it == g.files.end()) return;
  FileLog& log = it->second;
  // The pages as they are now, then each change undone, newest first: what
  // the disk holds (zeros past the size before the first unsynced change).
  std::map<off_t, std::string> pages;
  for (const Undo& u : log.changes) {
    auto [first, end] = pages_of(u.offset, std::max(u.length, static_cast<off_t>(u.old.size())));
    for (off_t p = first; p < end; ++p) {
      if (pages.count(p)) continue;
      std::string page(kPage, '\0');
      ssize_t n = pread(log.fd, page.data(), kPage, p * kPage);
      if (n < 0) n = 0;
      pages.emplace(p, std::move(page));
    }
  }
  for (auto u = log.changes.rbegin(); u != log.changes.rend(); ++u) {
    for (size_t i = 0; i < u->old.size(); ++i) {
      const off_t at = u->offset + static_cast<off_t>(i);
      auto page = pages.find(at / kPage);
      if (page != pages.end()) page->second[at % kPage] = u->old[i];
    }
  }
  const off_t durable_size = log.changes.empty() ? st.st_size : log.changes.front().old_size;
  for (auto& [p, page] : pages) {
    for (off_t i = 0; i < kPage; ++i) {
      if (p * kPage + i >= durable_size) page[i] = '\0';
    }
  }
  auto [d, inserted] = g.doomed.try_emplace(st.st_ino);
  if (inserted) d->second.fd = dup(log.fd);
  for (auto& [p, page] : pages) d->second.pages.emplace(p, std::move(page));  // older content wins
  drop_log(it);
}

// Undoes `u` from byte `from` on: restores its saved old bytes at or after `from`
// and shrinks the file to what it was, keeping [offset, from) of a write that
// grew it. from == offset undoes the change entirely.
void undo_tail(int fd, const Undo& u, off_t from) {
  off_t saved_end = u.offset + static_cast<off_t>(u.old.size());
  if (from < saved_end) (void)!pwrite(fd, u.old.data() + (from - u.offset), saved_end - from, from);
  struct stat st {};
  fstat(fd, &st);
  off_t size = std::max(u.old_size, std::min<off_t>(st.st_size, from));
  if (from <= u.offset) size = u.old_size;
  (void)!ftruncate(fd, size);
}

enum class CutMode { kAll, kKeepPrefix, kTorn };

void revert_file(FileLog& log, CutMode mode, std::mt19937_64& rng) {
  size_t n = log.changes.size();
  size_t keep = mode == CutMode::kAll ? 0 : std::uniform_int_distribution<size_t>(0, n)(rng);
  for (size_t i = n; i > keep; --i)
    undo_tail(log.fd, log.changes[i - 1], log.changes[i - 1].offset);
  if (mode == CutMode::kTorn && keep > 0) {
    const Undo& last = log.changes[keep - 1];
    if (last.is_write && last.length > 0) {
      off_t end = last.offset + last.length;
      off_t page = std::max(last.offset, (end - 1) / kPage * kPage);
      off_t tear = page + std::uniform_int_distribution<off_t>(0, end - page - 1)(rng);
      undo_tail(log.fd, last, tear);
    }
  }
}

// ---------------------------------------------------------------- names

std::string new_trash() { return kTrash + "/" + std::to_string(++g.trash_seq); }

void remove_tree(const std::string& r) {
  struct stat st {};
  if (fstatat(g.root, r.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return;
  if (!S_ISDIR(st.st_mode)) {
    unlinkat(g.root, r.c_str(), 0);
    return;
  }
  int fd = openat(g.root, r.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    DIR* d = fdopendir(fd);
    std::vector<std::string> names;
    while (dirent* e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) names.push_back(e->d_name);
    closedir(d);
    for (const auto& name : names) remove_tree(r + "/" + name);
  }
  unlinkat(g.root, r.c_str(), AT_REMOVEDIR);
}

// A directory moved from `from` to `to`: pending paths below it follow.
void move_paths(const std::string& from, const std::string& to) {
  std::string prefix = from + "/";
  auto fix = [&](std::string& p) {
    if (p.rfind(prefix, 0) == 0) p = to + p.substr(from.size());
  };
  for (auto& c : g.journal) {
    fix(c.path);
    fix(c.target);
  }
}

void journal_add(NsChange c) { g.journal.push_back(std::move(c)); }

void revert_change(const NsChange& c) {
  switch (c.kind) {
    case NsKind::kCreate:
    case NsKind::kMkdir:
      remove_tree(c.path);
      break;
    case NsKind::kUnlink:
    case NsKind::kRmdir:
      renameat(g.root, c.trash.c_str(), g.root, c.path.c_str());
      break;
    case NsKind::kRename: {
      struct stat st {};
      bool dir =
          fstatat(g.root, c.target.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
      renameat(g.root, c.target.c_str(), g.root, c.path.c_str());
      if (dir) move_paths(c.target, c.path);
      if (!c.trash.empty()) renameat(g.root, c.trash.c_str(), g.root, c.target.c_str());
      break;
    }
  }
}

void finalize_change(const NsChange& c) {
  if (!c.trash.empty()) remove_tree(c.trash);
}

// fsync of directory `dir`: its changes and their closure become durable.
void sync_directory(ino_t dir) {
  for (auto& c : g.journal)
    if (c.dirs.count(dir)) c.durable = true;
  std::set<ino_t> reached;
  for (auto it = g.journal.rbegin(); it != g.journal.rend(); ++it) {
    bool touches =
        std::any_of(it->dirs.begin(), it->dirs.end(), [&](ino_t d) { return reached.count(d); });
    if (touches) it->durable = true;
    if (it->durable) reached.insert(it->dirs.begin(), it->dirs.end());
  }
  std::vector<NsChange> pending;
  for (auto& c : g.journal) {
    if (c.durable)
      finalize_change(c);
    else
      pending.push_back(std::move(c));
  }
  g.journal = std::move(pending);
}

// ---------------------------------------------------------------- cut

std::string cut(CutMode mode, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (auto& [ino, log] : g.files) {
    revert_file(log, mode, rng);
    close(log.fd);
  }
  g.files.clear();
  for (auto& [ino, d] : g.doomed) {
    struct stat st {};
    fstat(d.fd, &st);
    for (const auto& [p, page] : d.pages) {
      const off_t at = p * kPage;
      if (at >= st.st_size) continue;
      (void)!pwrite(d.fd, page.data(), std::min<off_t>(kPage, st.st_size - at), at);
    }
    close(d.fd);
  }
  g.doomed.clear();
  for (auto it = g.journal.rbegin(); it != g.journal.rend(); ++it) revert_change(*it);
  g.journal.clear();
  ++g.generation;
  ++g.stats.cuts;
  return "ok";
}

std::string stats_line() {
  uint64_t unsynced = 0;
  for (auto& [ino, log] : g.files) unsynced += log.unsynced_bytes;
  std::ostringstream out;
  out << "cuts=" << g.stats.cuts << " written_bytes=" << g.stats.written
      << " synced_bytes=" << g.stats.synced << " unsynced_bytes=" << unsynced
      << " unsynced_files=" << g.files.size() << " pending_names=" << g.journal.size()
      << " fsyncs=" << g.stats.fsyncs << " fsyncdirs=" << g.stats.fsyncdirs
      << " enospc=" << g.stats.enospc << " short_writes=" << g.stats.short_writes
      << " eio_fsyncs=" << g.stats.eio_fsyncs << " doomed_files=" << g.doomed.size();
  return out.str();
}

const char* kind_name(NsKind k) {
  switch (k) {
    case NsKind::kCreate:
      return "create";
    case NsKind::kMkdir:
      return "mkdir";
    case NsKind::kUnlink:
      return "unlink";
    case NsKind::kRmdir:
      return "rmdir";
    case NsKind::kRename:
      return "rename";
  }
  return "?";
}

// The namespace changes a cut would revert, oldest first, "; "-separated.
std::string pending_line() {
  std::string out;
  for (const auto& c : g.journal) {
    if (!out.empty()) out += "; ";
    out +=
        std::string(kind_name(c.kind)) + " " + c.path + (c.target.empty() ? "" : " -> " + c.target);
  }
  return out.empty() ? "none" : out;
}

int do_rename(const std::string& f, const std::string& t, unsigned int flags);

std::string fault_command(std::istringstream& in) {
  std::string kind;
  in >> kind;
  double rate = 0;
  uint64_t seed = 1;
  if (kind == "enospc" || kind == "eio-fsync") {
    if (!(in >> rate >> seed) || rate < 0 || rate > 1) return "error: fault " + kind + " RATE SEED";
    g.faults.rng.seed(seed);
    (kind == "enospc" ? g.faults.enospc_rate : g.faults.eio_fsync_rate) = rate;
    return "ok";
  }
  if (kind == "full" || kind == "space") {
    g.faults.full = kind == "full";
    return "ok";
  }
  if (kind == "clear") {
    g.faults.enospc_rate = g.faults.eio_fsync_rate = 0;
    g.faults.full = false;
    return "ok";
  }
  return "error: unknown fault: " + kind;
}

std::string command(const std::string& line) {
  std::istringstream in(line);
  std::string verb, variant;
  uint64_t seed = 0;
  in >> verb;
  std::lock_guard lock(g.mu);
  if (verb == "fault") return fault_command(in);
  if (verb == "vanish" || verb == "return") {
    std::string path;
    in >> path;
    while (!path.empty() && path.front() == '/') path.erase(0, 1);
    if (path.empty() || path.find("..") != std::string::npos || path.rfind(kMeta, 0) == 0)
      return "error: " + verb + " PATH (a directory under the mount)";
    const std::string away = path + ".vanished";
    int rc = verb == "vanish" ? do_rename(path, away, RENAME_NOREPLACE)
                              : do_rename(away, path, RENAME_NOREPLACE);
    return rc == 0 ? "ok" : "error: " + verb + " " + path + ": " + std::strerror(-rc);
  }
  in >> variant >> seed;
  if (verb == "cut" && variant.empty()) return cut(CutMode::kAll, 0);
  if (verb == "cut" && variant == "keep-prefix") return cut(CutMode::kKeepPrefix, seed);
  if (verb == "cut" && variant == "torn") return cut(CutMode::kTorn, seed);
  if (verb == "stats") return stats_line();
  if (verb == "pending") return pending_line();
  return "error: unknown command: " + line;
}

void control_loop(int listener) {
  for (;;) {
    int c = accept(listener, nullptr, nullptr);
    if (c < 0) {
      if (errno == EINTR) continue;
      return;
    }
    std::string line;
    char ch;
    while (read(c, &ch, 1) == 1 && ch != '\n') line += ch;
    std::string reply = command(line) + "\n";
    (void)!write(c, reply.data(), reply.size());
    close(c);
  }
}

int unix_socket(const std::string& path, bool listen_on) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (s < 0 || path.size() >= sizeof addr.sun_path) return -1;
  std::strcpy(addr.sun_path, path.c_str());
  if (listen_on) {
    unlink(path.c_str());
    if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(s, 8) != 0)
      return -1;
  } else if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return -1;
  }
  return s;
}

// ---------------------------------------------------------------- FUSE ops

void* op_init(fuse_conn_info*, fuse_config* cfg) {
  cfg->use_ino = 1;
  cfg->hard_remove = 1;  // no .fuse_hidden renames for unlinked open files
  cfg->direct_io = 1;
  cfg->kernel_cache = 0;
  cfg->entry_timeout = 0;
  cfg->attr_timeout = 0;
  cfg->negative_timeout = 0;
  if (!g.control.empty()) {
    int s = unix_socket(g.control, true);
    if (s < 0) {
      std::perror("plfs: control socket");
      std::exit(2);
    }
    std::thread(control_loop, s).detach();
  }
  return nullptr;
}

int op_getattr(const char* path, struct stat* st, fuse_file_info* fi) {
  std::lock_guard lock(g.mu);
  if (hidden(path)) return -ENOENT;
  if (fi && fi->fh) return fstat(handle(fi)->fd, st) == 0 ? 0 : -errno;
  return fstatat(g.root, rel(path).c_str(), st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

int op_access(const char* path, int mask) {
  std::lock_guard lock(g.mu);
  if (hidden(path)) return -ENOENT;
  return faccessat(g.root, rel(path).c_str(), mask, 0) == 0 ? 0 : -errno;
}

int op_readlink(const char* path, char* buf, size_t size) {
  std::lock_guard lock(g.mu);
  ssize_t n = readlinkat(g.root, rel(path).c_str(), buf, size - 1);
  if (n < 0) return -errno;
  buf[n] = '\0';
  return 0;
}

int op_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, fuse_file_info*,
               fuse_readdir_flags) {
  std::lock_guard lock(g.mu);
  if (hidden(path)) return -ENOENT;
  int fd = openat(g.root, rel(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return -errno;
  DIR* d = fdopendir(fd);
  bool root = rel(path) == ".";
  while (dirent* e = readdir(d)) {
    if (root && e->d_name == kMeta) continue;
    struct stat st {};
    st.st_ino = e->d_ino;
    st.st_mode = static_cast<mode_t>(DTTOIF(e->d_type));
    if (fill(buf, e->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0))) break;
  }
  closedir(d);
  return 0;
}

int make_entry(const char* path, NsKind kind, std::set<ino_t> extra = {}) {
  std::string r = rel(path);
  NsChange c{kind, {ino_of(parent_of(r))}, r, "", ""};
  c.dirs.insert(extra.begin(), extra.end());
  journal_add(std::move(c));
  return 0;
}

// An injected ENOSPC for an operation that takes space (fault enospc/full).
bool no_space() {
  if (g.faults.full || g.faults.roll(g.faults.enospc_rate)) {
    ++g.stats.enospc;
    return true;
  }
  return false;
}

int op_mkdir(const char* path, mode_t mode) {
  std::lock_guard lock(g.mu);
  trace("mkdir", path);
  if (hidden(path)) return -EACCES;
  if (no_space()) return -ENOSPC;
  if (mkdirat(g.root, rel(path).c_str(), mode) != 0) return -errno;
  return make_entry(path, NsKind::kMkdir);
}

int op_symlink(const char* target, const char* path) {
  std::lock_guard lock(g.mu);
  trace("symlink", path, target);
  if (hidden(path)) return -EACCES;
  if (symlinkat(target, g.root, rel(path).c_str()) != 0) return -errno;
  return make_entry(path, NsKind::kCreate);
}

int op_link(const char* from, const char* to) {
  std::lock_guard lock(g.mu);
  trace("link", to, from);
  if (hidden(from) || hidden(to)) return -EACCES;
  if (linkat(g.root, rel(from).c_str(), g.root, rel(to).c_str(), 0) != 0) return -errno;
  return make_entry(to, NsKind::kCreate);
}

bool empty_dir(const std::string& r) {
  int fd = openat(g.root, r.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return false;
  DIR* d = fdopendir(fd);
  bool empty = true;
  while (dirent* e = readdir(d))
    if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, "..")) empty = false;
  closedir(d);
  return empty;
}

// unlink and rmdir: the object moves to the trash until the change is durable.
int remove_entry(const char* path, bool dir) {
  if (hidden(path)) return -EACCES;
  std::string r = rel(path);
  struct stat st {};
  if (fstatat(g.root, r.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  if (dir != S_ISDIR(st.st_mode)) return dir ? -ENOTDIR : -EISDIR;
  if (dir && !empty_dir(r)) return -ENOTEMPTY;
  std::string trash = new_trash();
  ino_t parent = ino_of(parent_of(r));
  if (renameat(g.root, r.c_str(), g.root, trash.c_str()) != 0) return -errno;
  NsChange c{dir ? NsKind::kRmdir : NsKind::kUnlink, {parent}, r, "", trash};
  if (dir) c.dirs.insert(st.st_ino);
  journal_add(std::move(c));
  return 0;
}

int op_unlink(const char* path) {
  std::lock_guard lock(g.mu);
  trace("unlink", path);
  return remove_entry(path, false);
}

int op_rmdir(const char* path) {
  std::lock_guard lock(g.mu);
  trace("rmdir", path);
  return remove_entry(path, true);
}

int op_rename(const char* from, const char* to, unsigned int flags) {
  std::lock_guard lock(g.mu);
  trace("rename", from, std::string("-> ") + to);
  if (hidden(from) || hidden(to)) return -EACCES;
  if (flags & ~RENAME_NOREPLACE) return -EINVAL;
  return do_rename(rel(from), rel(to), flags);
}

// A rename of backing paths, journaled (g.mu held).
int do_rename(const std::string& f, const std::string& t, unsigned int flags) {
  struct stat sf {
  }, st{};
  if (fstatat(g.root, f.c_str(), &sf, AT_SYMLINK_NOFOLLOW) != 0) return -errno;
  bool target_exists = fstatat(g.root, t.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
  if (target_exists && (flags & RENAME_NOREPLACE)) return -EEXIST;
  if (target_exists && st.st_ino == sf.st_ino) return 0;
  if (S_ISDIR(sf.st_mode) && t.rfind(f + "/", 0) == 0) return -EINVAL;
  std::string trash;
  if (target_exists) {
    if (S_ISDIR(st.st_mode) && !S_ISDIR(sf.st_mode)) return -EISDIR;
    if (!S_ISDIR(st.st_mode) && S_ISDIR(sf.st_mode)) return -ENOTDIR;
    if (S_ISDIR(st.st_mode) && !empty_dir(t)) return -ENOTEMPTY;
    trash = new_trash();
    if (renameat(g.root, t.c_str(), g.root, trash.c_str()) != 0) return -errno;
  }
  if (renameat(g.root, f.c_str(), g.root, t.c_str()) != 0) {
    int err = errno;
    if (!trash.empty()) renameat(g.root, trash.c_str(), g.root, t.c_str());
    return -err;
  }
  if (S_ISDIR(sf.st_mode)) move_paths(f, t);
  journal_add(NsChange{NsKind::kRename, {ino_of(parent_of(f)), ino_of(parent_of(t))}, f, t, trash});
  return 0;
}

int op_chmod(const char* path, mode_t mode, fuse_file_info*) {
  std::lock_guard lock(g.mu);
  if (hidden(path)) return -ENOENT;
  return fchmodat(g.root, rel(path).c_str(), mode, 0) == 0 ? 0 : -errno;
}

int op_chown(const char* path, uid_t uid, gid_t gid, fuse_file_info*) {
  std::lock_guard lock(g.mu);
  if (hidden(path)) return -ENOENT;
  return fchownat(g.root, rel(path).c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

int op_utimens(const char* path, const timespec tv[2], fuse_file_info*) {
  std::lock_guard lock(g.mu);
  if (hidden(path)) return -ENOENT;
  return utimensat(g.root, rel(path).c_str(), tv, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

// A recorded truncate of `fd` to `size`.
int truncate_fd(int fd, off_t size) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return -errno;
  if (int rc = record(fd, size, std::max<off_t>(st.st_size - size, 0), false)) return rc;
  return ftruncate(fd, size) == 0 ? 0 : -errno;
}

int op_truncate(const char* path, off_t size, fuse_file_info* fi) {
  std::lock_guard lock(g.mu);
  trace("truncate", path, std::to_string(size));
  if (fi && fi->fh) {
    if (stale(handle(fi))) return -EIO;
    return truncate_fd(handle(fi)->fd, size);
  }
  if (hidden(path)) return -ENOENT;
  int fd = openat(g.root, rel(path).c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  int rc = truncate_fd(fd, size);
  close(fd);
  return rc;
}

constexpr int kStripped = O_DIRECT | O_SYNC | O_DSYNC | O_TRUNC | O_CREAT | O_EXCL;

int open_handle(const char* path, int flags, mode_t mode, bool may_create, fuse_file_info* fi) {
  if (hidden(path)) return -ENOENT;
  std::string r = rel(path);
  int base = (flags & ~kStripped) | O_CLOEXEC;
  int fd = openat(g.root, r.c_str(), base);
  if (fd < 0 && errno == ENOENT && may_create) {
    if (no_space()) return -ENOSPC;
    fd = openat(g.root, r.c_str(), base | O_CREAT | O_EXCL, mode);
    if (fd < 0) return -errno;
    make_entry(path, NsKind::kCreate);
  } else if (fd < 0) {
    return -errno;
  } else if (may_create && (flags & O_EXCL)) {
    close(fd);
    return -EEXIST;
  }
  if (flags & O_TRUNC) {
    struct stat st {};
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
      if (int rc = truncate_fd(fd, 0)) {
        close(fd);
        return rc;
      }
    }
  }
  auto* h = new Handle{fd, g.generation, (flags & O_DSYNC) != 0, (flags & O_APPEND) != 0};
  fi->fh = reinterpret_cast<uint64_t>(h);
  fi->direct_io = 1;
  return 0;
}

int op_create(const char* path, mode_t mode, fuse_file_info* fi) {
  std::lock_guard lock(g.mu);
  trace("create", path, "flags=" + std::to_string(fi->flags));
  return open_handle(path, fi->flags, mode, true, fi);
}

int op_open(const char* path, fuse_file_info* fi) {
  std::lock_guard lock(g.mu);
  trace("open", path, "flags=" + std::to_string(fi->flags));
  return open_handle(path, fi->flags, 0, false, fi);
}

int op_read(const char*, char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  std::lock_guard lock(g.mu);
  Handle* h = handle(fi);
  if (stale(h)) return -EIO;
  ssize_t n = pread(h->fd, buf, size, offset);
  return n < 0 ? -errno : static_cast<int>(n);
}

int op_write(const char* path, const char* buf, size_t size, off_t offset, fuse_file_info* fi) {
  std::lock_guard lock(g.mu);
  Handle* h = handle(fi);
  if (g.trace)
    trace("write", path,
          std::to_string(offset) + "+" + std::to_string(size) + (h->sync ? " dsync" : ""));
  if (stale(h)) return -EIO;
  off_t at = offset;
  if (h->append) {
    struct stat st {};
    if (fstat(h->fd, &st) != 0) return -errno;
    at = st.st_size;
  }
  {
    struct stat st {};
    if (fstat(h->fd, &st) != 0) return -errno;
    const bool grows = at + static_cast<off_t>(size) > st.st_size;
    if ((g.faults.full && grows) || g.faults.roll(g.faults.enospc_rate)) {
      ++g.stats.enospc;
      const bool short_write = !g.faults.full && size > 512 && g.faults.rng() % 2 == 0;
      if (!short_write) return -ENOSPC;
      ++g.stats.short_writes;
      size = 1 + g.faults.rng() % (size - 1);
    }
  }
  if (int rc = record(h->fd, at, static_cast<off_t>(size), true)) return rc;
  ssize_t n = pwrite(h->fd, buf, size, offset);
  if (n < 0) return -errno;
  g.stats.written += n;
  if (h->sync) mark_synced(h->fd);
  return static_cast<int>(n);
}

int op_statfs(const char*, struct statvfs* st) {
  std::lock_guard lock(g.mu);
  return fstatvfs(g.root, st) == 0 ? 0 : -errno;
}

int op_flush(const char*, fuse_file_info*) { return 0; }

int op_release(const char*, fuse_file_info* fi) {
  std::lock_guard lock(g.mu);
  Handle* h = handle(fi);
  close(h->fd);
  delete h;
  return 0;
}

int op_fsync(const char* path, int datasync, fuse_file_info* fi) {
  std::lock_guard lock(g.mu);
  trace(datasync ? "fdatasync" : "fsync", path);
  Handle* h = handle(fi);
  if (stale(h)) return -EIO;
  ++g.stats.fsyncs;
  if (g.faults.roll(g.faults.eio_fsync_rate)) {
    ++g.stats.eio_fsyncs;
    doom_unsynced(h->fd);
    return -EIO;
  }
  mark_synced(h->fd);
  return 0;
}

int op_fsyncdir(const char* path, int, fuse_file_info*) {
  std::lock_guard lock(g.mu);
  trace("fsyncdir", path);
  if (hidden(path)) return -ENOENT;
  ino_t dir = ino_of(rel(path));
  if (dir == 0) return -errno;
  ++g.stats.fsyncdirs;
  sync_directory(dir);
  return 0;
}

int op_fallocate(const char* path, int mode, off_t offset, off_t length, fuse_file_info* fi) {
  std::lock_guard lock(g.mu);
  trace("fallocate", path,
        std::to_string(mode) + " " + std::to_string(offset) + "+" + std::to_string(length));
  Handle* h = handle(fi);
  if (stale(h)) return -EIO;
  bool changes_bytes = mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE |
                               FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE);
  if (mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE)) return -EOPNOTSUPP;
  if (!(mode & FALLOC_FL_PUNCH_HOLE) && no_space()) return -ENOSPC;
  if (int rc = record(h->fd, offset, changes_bytes ? length : 0, false)) return rc;
  return fallocate(h->fd, mode, offset, length) == 0 ? 0 : -errno;
}

fuse_operations make_ops() {
  fuse_operations ops{};
  ops.init = op_init;
  ops.getattr = op_getattr;
  ops.access = op_access;
  ops.readlink = op_readlink;
  ops.readdir = op_readdir;
  ops.mkdir = op_mkdir;
  ops.symlink = op_symlink;
  ops.link = op_link;
  ops.unlink = op_unlink;
  ops.rmdir = op_rmdir;
  ops.rename = op_rename;
  ops.chmod = op_chmod;
  ops.chown = op_chown;
  ops.utimens = op_utimens;
  ops.truncate = op_truncate;
  ops.create = op_create;
  ops.open = op_open;
  ops.read = op_read;
  ops.write = op_write;
  ops.statfs = op_statfs;
  ops.flush = op_flush;
  ops.release = op_release;
  ops.fsync = op_fsync;
  ops.fsyncdir = op_fsyncdir;
  ops.fallocate = op_fallocate;
  return ops;
}

int client(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: intentd_plfs ctl SOCKET COMMAND...\n");
    return 2;
  }
  int s = unix_socket(argv[2], false);
  if (s < 0) {
    std::perror("plfs: connect");
    return 1;
  }
  std::string line;
  for (int i = 3; i < argc; ++i) line += std::string(i > 3 ? " " : "") + argv[i];
  line += "\n";
  (void)!write(s, line.data(), line.size());
  std::string reply;
  char buf[256];
  for (ssize_t n; (n = read(s, buf, sizeof buf)) > 0;) reply.append(buf, n);
  close(s);
  std::fputs(reply.c_str(), stdout);
  return reply.rfind("error", 0) == 0 ? 1 : 0;
}

int usage() {
  std::fprintf(
      stderr,
      "usage: intentd_plfs BACKING_DIR MOUNTPOINT [--control SOCKET] [--trace] [-f] [-s] [-o opt]\n"
      "       intentd_plfs ctl SOCKET cut | cut keep-prefix SEED | cut torn SEED | stats | "
      "pending\n"
      "                               | fault enospc RATE SEED | fault full | fault space\n"
      "                               | fault eio-fsync RATE SEED | fault clear\n"
      "                               | vanish PATH | return PATH\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "ctl") return client(argc, argv);
  std::vector<char*> fuse_args{argv[0]};
  std::string backing;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--control" && i + 1 < argc) {
      g.control = argv[++i];
    } else if (a == "--trace") {
      g.trace = true;
    } else if (a == "-o" && i + 1 < argc) {
      fuse_args.push_back(argv[i]);
      fuse_args.push_back(argv[++i]);
    } else if (a[0] != '-' && backing.empty()) {
      backing = a;
    } else {
      fuse_args.push_back(argv[i]);
    }
  }
  if (backing.empty() || fuse_args.size() < 2) return usage();
  g.root = open(backing.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (g.root < 0) {
    std::perror("plfs: backing dir");
    return 2;
  }
  // A fresh trash per mount: leftovers of a previous run are not pending changes.
  remove_tree(kTrash);
  mkdirat(g.root, kMeta.c_str(), 0700);
  if (mkdirat(g.root, kTrash.c_str(), 0700) != 0) {
    std::perror("plfs: trash dir");
    return 2;
  }
  if (!g.control.empty() && g.control[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) g.control = std::string(cwd) + "/" + g.control;
  }
  fuse_operations ops = make_ops();
  return fuse_main(static_cast<int>(fuse_args.size()), fuse_args.data(), &ops, nullptr);
}
