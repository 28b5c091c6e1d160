// The operator subcommands: metrics and backup (through a running agent),
// restore, export and import (offline, on a store directory).
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/export_format.h"
#include "common/flags.h"
#include "store/export.h"
#include "store/open_store.h"

namespace intentd::cli {

using agent::Flags;
using agent::FlagSpec;
using agent::FlagsUsage;

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const FlagSpec kSocketFlag{
    "socket", true, "the agent's socket (default $INTENTD_SOCKET or /run/intentd/intentd.sock)"};
const FlagSpec kJsonFlag{"json", false, "print the agent's raw JSON response"};
const FlagSpec kDataDirFlag{"data-dir", true, "the store directory (required)"};

int Usage(const char* command, const std::string& message) {
  std::fprintf(stderr, "intentd %s: %s (see intentd %s --help)\n", command, message.c_str(),
               command);
  return kExitUsage;
}

int Failed(const char* command, const std::string& message) {
  std::fprintf(stderr, "intentd %s: %s\n", command, message.c_str());
  return kExitFailed;
}

// Parses flags; returns -1 to go on, else the exit code (help, usage error).
int ParseOrExit(const char* command, const char* synopsis, const char* summary,
                const std::vector<FlagSpec>& specs, const std::vector<std::string>& args,
                size_t positional, Flags* flags) {
  std::string error;
  if (!flags->Parse(specs, args, &error)) return Usage(command, error);
  if (flags->help_requested()) {
    std::fputs(FlagsUsage(command, synopsis, summary, specs).c_str(), stdout);
    return kExitOk;
  }
  if (flags->positional().size() > positional) {
    return Usage(command, "unexpected argument " + flags->positional()[positional]);
  }
  if (flags->positional().size() < positional) return Usage(command, "missing argument");
  return -1;
}

// Sends `request`; prints the agent's error and returns its exit code, or
// -1 with *response set on success.
int Call(const char* command, const Flags& flags, const json& request, json* response,
         std::string* raw) {
  std::string error;
  if (!CallAgent(flags.GetOr("socket", DefaultClientSocket()), request.dump(), raw, &error)) {
    std::fprintf(stderr, "intentd %s: %s\n", command, error.c_str());
    return kExitUnreachable;
  }
  *response = json::parse(*raw, nullptr, false);
  if (!response->is_object())
    return Failed(command, "the agent answered something that is not JSON");
  if (flags.Has("json")) {
    std::printf("%s\n", raw->c_str());
    return response->value("ok", false) ? kExitOk : kExitFailed;
  }
  if (!response->value("ok", false)) {
    const json& e = (*response)["error"];
    std::fprintf(stderr, "error %s: %s\n", e.value("code", "?").c_str(),
                 e.value("message", "").c_str());
    return kExitFailed;
  }
  return -1;
}

// Writes `text` to `path` atomically (a temporary file, then rename), so
// that a reader such as node_exporter never sees half a file.
bool WriteAtomically(const std::string& path, const std::string& text, std::string* error) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      *error = "cannot write " + tmp + ": " + std::strerror(errno);
      std::remove(tmp.c_str());
      return false;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    *error = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    std::remove(tmp.c_str());
    return false;
  }
  return true;
}

std::string Printable(const std::string& bytes) {
  for (unsigned char c : bytes) {
    if (c < 0x20 || c == 0x7f || c >= 0x80)
      return json(bytes).dump(-1, ' ', true, json::error_handler_t::replace);
  }
  return bytes;
}

}  // namespace

int RunMetrics(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = {
      kSocketFlag,
      kJsonFlag,
      {"output", true,
       "write the text to FILE atomically (for node_exporter's textfile collector)"}};
  Flags flags;
  if (int rc =
          ParseOrExit("metrics", "[--output FILE]",
                      "Prints the agent's metrics in the Prometheus text format.\n"
                      "For node_exporter's textfile collector, e.g. every minute:\n"
                      "  intentd metrics --output /var/lib/prometheus/node-exporter/intentd.prom",
                      specs, args, 0, &flags);
      rc >= 0) {
    return rc;
  }
  json response;
  std::string raw;
  if (int rc = Call("metrics", flags, {{"op", "metrics"}}, &response, &raw); rc >= 0) return rc;
  const std::string text = response.value("text", "");
  if (auto path = flags.Get("output")) {
    std::string error;
    if (!WriteAtomically(*path, text, &error)) return Failed("metrics", error);
    return kExitOk;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return kExitOk;
}

int RunBackup(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = {kSocketFlag, kJsonFlag};
  Flags flags;
  if (int rc = ParseOrExit(
          "backup", "DEST",
          "Has the running agent write a consistent copy of its store (a RocksDB checkpoint)\n"
          "into DEST while it goes on serving. DEST must not exist; its parent must be\n"
          "writable by the agent (under the packaged unit: below /var/lib/intentd). Admin.\n"
          "Restore it with `intentd restore DEST --data-dir DIR` while no agent uses DIR.",
          specs, args, 1, &flags);
      rc >= 0) {
    return rc;
  }
  std::error_code ec;
  const std::string dest = fs::absolute(flags.positional()[0], ec).lexically_normal().string();
  if (ec) return Usage("backup", "cannot resolve " + flags.positional()[0]);
  json response;
  std::string raw;
  if (int rc = Call("backup", flags, {{"op", "backup"}, {"dest", dest}}, &response, &raw);
      rc >= 0) {
    return rc;
  }
  std::printf("backup written to %s: %llu files, %llu bytes, in %lld ms\n", dest.c_str(),
              response.value("files", 0ULL), response.value("bytes", 0ULL),
              response.value("duration_ms", 0LL));
  return kExitOk;
}

namespace {

// Copies the checkpoint's files (recursively) into `dir`, synced.
bool CopyStore(const fs::path& src, const fs::path& dir, std::string* error) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(src, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const fs::path target = dir / it->path().lexically_relative(src);
    if (it->is_directory(ec)) {
      fs::create_directory(target, ec);
      if (ec) break;
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    if (it->path().filename() == "LOCK") continue;  // a lock belongs to its directory
    fs::copy_file(it->path(), target, fs::copy_options::none, ec);
    if (ec) break;
    int fd = open(target.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
      *error = "cannot sync " + target.string() + ": " + std::strerror(errno);
      if (fd >= 0) close(fd);
      return false;
    }
    close(fd);
  }
  if (ec) {
    *error = "cannot copy " + src.string() + " into " + dir.string() + ": " + ec.message();
    return false;
  }
  return true;
}

void SyncDirectory(const fs::path& dir) {
  int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    fsync(fd);
    close(fd);
  }
}

// Opens the copy as the agent would, then reads every record back.
bool VerifyStore(const std::string& dir, store::ExportCounts* counts, std::string* error) {
  store::StoreSpec spec;
  spec.dir = dir;
  std::unique_ptr<store::Store> opened;
  store::Status st = store::OpenStore(spec, &opened);
  if (!st.ok()) {
    *error = "the copy does not open as a store: " + st.message();
    return false;
  }
  opened.reset();
  st = store::ExportStore(
      {dir, nullptr}, [](const store::ExportRecord&) { return store::Status::Ok(); }, counts);
  if (!st.ok()) {
    *error = "the copy's records cannot all be read: " + st.message();
    return false;
  }
  return true;
}

}  // namespace

namespace {

// The chown a restore calls for, or "": the copied files belong to whoever
// ran the restore, and the agent runs as the owner of the directory that
// holds the store (DIR when it existed empty, else its parent; the package's
// /var/lib/intentd belongs to intentd). Only when the two differ is there
// anything to do: a dev agent run as its own user, or as root on a root's
// directory, needs none.
std::string ChownAdvice(const fs::path& dir, bool existed) {
  const fs::path holder =
      existed ? dir : (dir.parent_path().empty() ? fs::path(".") : dir.parent_path());
  struct stat st {};
  if (stat(holder.c_str(), &st) != 0 || st.st_uid == geteuid()) return "";
  auto user_name = [](uid_t uid) {
    const passwd* p = getpwuid(uid);
    return p ? std::string(p->pw_name) : std::to_string(uid);
  };
  const group* grp = getgrgid(st.st_gid);
  const std::string owner = user_name(st.st_uid);
  const std::string group_name = grp ? grp->gr_name : std::to_string(st.st_gid);
  return "the restored files belong to " + user_name(geteuid()) + ", who ran restore, but " +
         holder.string() + " belongs to " + owner + ": if the agent runs as " + owner +
         ", give them to it: " + (geteuid() == 0 ? "" : "sudo ") + "chown -R " + owner + ":" +
         group_name + " " + dir.string();
}

}  // namespace

int RunRestore(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = {kDataDirFlag,
                                       {"json", false, "print the result as one JSON object"}};
  Flags flags;
  if (int rc = ParseOrExit(
          "restore", "SRC --data-dir DIR",
          "Copies a backup (a checkpoint made by `intentd backup`) into DIR and checks that it\n"
          "opens and that every record reads back. DIR must be empty or absent: restore never\n"
          "overwrites a store (move the old one aside first). Run it while no agent uses DIR,\n"
          "as the user the agent runs as (e.g. sudo -u intentd), so that the files are its own;\n"
          "when they end up another user's than the directory holding DIR, it says what to chown.",
          specs, args, 1, &flags);
      rc >= 0) {
    return rc;
  }
  if (!flags.Has("data-dir")) return Usage("restore", "--data-dir is required");
  const fs::path src = flags.positional()[0];
  const fs::path dir = fs::path(*flags.Get("data-dir")).lexically_normal();
  std::error_code ec;
  if (!fs::exists(src / "CURRENT", ec)) {
    return Failed("restore", src.string() + " is not a backup (no CURRENT file in it)");
  }
  const bool existed = fs::exists(dir, ec);
  if (existed && (!fs::is_directory(dir, ec) || !fs::is_empty(dir, ec))) {
    return Failed("restore", dir.string() +
                                 " is not an empty directory; restore only into an empty or new "
                                 "directory (move the old store aside first)");
  }
  // A new directory is filled under a temporary name and renamed when
  // verified; an existing empty one is filled in place and emptied again on
  // failure. Either way DIR ends as it was, or as a verified store.
  const fs::path work =
      existed ? dir : fs::path(dir.string() + ".restoring." + std::to_string(getpid()));
  if (!existed) {
    fs::create_directories(work, ec);
    if (ec) return Failed("restore", "cannot create " + work.string() + ": " + ec.message());
    fs::permissions(work, fs::perms::owner_all, fs::perm_options::replace, ec);
  }
  auto undo = [&] {
    std::error_code ignored;
    if (existed) {
      for (const auto& entry : fs::directory_iterator(dir, ignored))
        fs::remove_all(entry.path(), ignored);
    } else {
      fs::remove_all(work, ignored);
    }
  };
  std::string error;
  store::ExportCounts counts;
  if (!CopyStore(src, work, &error) ||
      (SyncDirectory(work), !VerifyStore(work.string(), &counts, &error))) {
    undo();
    return Failed("restore", error + "; " + dir.string() + " was left as it was");
  }
  if (!existed) {
    fs::rename(work, dir, ec);
    if (ec) {
      undo();
      return Failed("restore",
                    "cannot rename " + work.string() + " to " + dir.string() + ": " + ec.message());
    }
    SyncDirectory(dir.parent_path().empty() ? fs::path(".") : dir.parent_path());
  }
  const std::string advice = ChownAdvice(dir, existed);
  if (flags.Has("json")) {
    json result = {{"restored", src.string()},
                   {"data_dir", dir.string()},
                   {"intents", counts.intents},
                   {"actions", counts.actions},
                   {"verified", true}};
    if (!advice.empty()) result["chown"] = advice;
    std::printf("%s\n", result.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
  } else {
    std::printf("restored %s into %s: %llu intents, %llu actions, verified\n", src.c_str(),
                dir.c_str(), static_cast<unsigned long long>(counts.intents),
                static_cast<unsigned long long>(counts.actions));
  }
  if (!advice.empty()) std::fprintf(stderr, "intentd restore: %s\n", advice.c_str());
  return kExitOk;
}

int RunExport(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = {
      kDataDirFlag,
      {"output", true, "write to FILE (created, mode 0600) instead of standard output"},
      {"json", false,
       "the summary on standard error as one JSON object (the export is JSON lines already)"}};
  Flags flags;
  if (int rc = ParseOrExit(
          "export", "--data-dir DIR [--output FILE]",
          "Writes every record of the store in DIR (intents and actions, every field) as JSON\n"
          "lines. Offline: the store must not be in use (stop the agent, or export a backup\n"
          "made by `intentd backup`). The file holds payloads and responses: keep it private.",
          specs, args, 0, &flags);
      rc >= 0) {
    return rc;
  }
  if (!flags.Has("data-dir")) return Usage("export", "--data-dir is required");
  if (std::error_code ec; !fs::exists(fs::path(*flags.Get("data-dir")) / "CURRENT", ec)) {
    return Failed("export", "no store in " + *flags.Get("data-dir") + " (no CURRENT file)");
  }
  std::FILE* out = stdout;
  std::string partial;
  const auto output = flags.Get("output");
  if (output && *output != "-") {
    partial = *output + ".partial";
    if (fs::exists(*output)) return Failed("export", *output + " exists; export never overwrites");
    int fd = open(partial.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || (out = fdopen(fd, "w")) == nullptr) {
      if (fd >= 0) close(fd);
      return Failed("export", "cannot create " + partial + ": " + std::strerror(errno));
    }
  }
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  // The header goes out with the first record (or the end line), so that a
  // store that cannot be opened (in use, unreadable) writes nothing at all.
  bool write_ok = true, header_written = false;
  auto header = [&] {
    if (header_written) return;
    header_written = true;
    write_ok = std::fprintf(out, "%s\n", ExportHeaderLine(now).c_str()) > 0;
  };
  store::ExportCounts counts;
  store::Status st = store::ExportStore(
      {*flags.Get("data-dir"), nullptr},
      [&](const store::ExportRecord& record) {
        header();
        const std::string line = ExportRecordLine(record);
        if (std::fwrite(line.data(), 1, line.size(), out) != line.size() ||
            std::fputc('\n', out) == EOF) {
          return store::Status::StorageError(std::string("cannot write the export: ") +
                                             std::strerror(errno));
        }
        return store::Status::Ok();
      },
      &counts);
  if (st.ok()) {
    header();
    write_ok =
        std::fprintf(out, "%s\n",
                     ExportEndLine(counts.intents, counts.actions, counts.counters).c_str()) > 0 &&
        write_ok;
  }
  write_ok = std::fflush(out) == 0 && write_ok;
  if (!partial.empty()) {
    write_ok = fsync(fileno(out)) == 0 && write_ok;
    write_ok = std::fclose(out) == 0 && write_ok;
    if (st.ok() && write_ok && std::rename(partial.c_str(), output->c_str()) != 0) write_ok = false;
    if (!st.ok() || !write_ok) std::remove(partial.c_str());
  }
  if (!st.ok()) return Failed("export", st.message());
  if (!write_ok)
    return Failed("export", std::string("cannot write the export: ") + std::strerror(errno));
  if (flags.Has("json")) {
    std::fprintf(stderr, "%s\n",
                 json{{"intents", counts.intents},
                      {"actions", counts.actions},
                      {"counters", counts.counters},
                      {"past_retention", counts.expired}}
                     .dump()
                     .c_str());
    return kExitOk;
  }
  std::fprintf(stderr, "intentd export: %llu intents, %llu actions%s%s\n",
               static_cast<unsigned long long>(counts.intents),
               static_cast<unsigned long long>(counts.actions),
               counts.counters > 0
                   ? (", " + std::to_string(counts.counters) + " daily counters").c_str()
                   : "",
               counts.expired > 0
                   ? (" (" + std::to_string(counts.expired) + " past retention left out)").c_str()
                   : "");
  return kExitOk;
}

int RunImport(const std::vector<std::string>& args) {
  const std::vector<FlagSpec> specs = {
      kDataDirFlag,
      {"input", true, "read FILE instead of standard input"},
      {"json", false, "print the counts as one JSON object on standard output"}};
  Flags flags;
  if (int rc = ParseOrExit(
          "import", "--data-dir DIR [--input FILE]",
          "Loads the JSON lines of `intentd export` into the store in DIR (created when absent).\n"
          "Offline: the store must not be in use. Idempotent: records already stored the same\n"
          "are left alone, so importing twice changes nothing; a stored record that differs is\n"
          "a conflict, kept as it is and reported (exit 1).",
          specs, args, 0, &flags);
      rc >= 0) {
    return rc;
  }
  if (!flags.Has("data-dir")) return Usage("import", "--data-dir is required");
  std::ifstream file;
  std::istream* in = &std::cin;
  if (auto input = flags.Get("input"); input && *input != "-") {
    file.open(*input, std::ios::binary);
    if (!file) return Failed("import", "cannot read " + *input + ": " + std::strerror(errno));
    in = &file;
  }
  std::unique_ptr<store::StoreImporter> importer;
  store::Status st = store::StoreImporter::Open({*flags.Get("data-dir"), nullptr}, &importer);
  if (!st.ok()) return Failed("import", "cannot open the store: " + st.message());

  uint64_t line_no = 0, intents = 0, actions = 0, counters = 0;
  uint64_t outcomes[4] = {0, 0, 0, 0};  // by StoreImporter::Outcome
  bool header = false, end = false;
  std::string error;
  std::string line;
  ExportLine parsed;
  while (error.empty() && std::getline(*in, line)) {
    ++line_no;
    if (line.empty()) continue;
    if (end) {
      error = "a line after the end line";
    } else if (!ParseExportLine(line, &parsed, &error)) {
      // error set
    } else if (!header && parsed.kind != ExportLine::Kind::kHeader) {
      error = "the first line is not an intentd export header";
    } else if (parsed.kind == ExportLine::Kind::kHeader) {
      if (header) error = "a second header";
      header = true;
    } else if (parsed.kind == ExportLine::Kind::kEnd) {
      end = true;
      if (parsed.end_intents != intents || parsed.end_actions != actions ||
          parsed.end_counters != counters) {
        error = "the end line counts " + std::to_string(parsed.end_intents) + " intents, " +
                std::to_string(parsed.end_actions) + " actions and " +
                std::to_string(parsed.end_counters) + " counters, but the file holds " +
                std::to_string(intents) + ", " + std::to_string(actions) + " and " +
                std::to_string(counters);
      }
    } else {
      store::StoreImporter::Outcome outcome;
      st = importer->Add(parsed.record, &outcome);
      if (!st.ok()) {
        error = st.message();
        break;
      }
      const store::ExportRecord::Kind kind = parsed.record.kind;
      ++(kind == store::ExportRecord::Kind::kIntent   ? intents
         : kind == store::ExportRecord::Kind::kAction ? actions
                                                      : counters);
      ++outcomes[static_cast<int>(outcome)];
      if (kind == store::ExportRecord::Kind::kCounter &&
          outcome == store::StoreImporter::Outcome::kConflict && outcomes[2] <= 20) {
        std::fprintf(stderr,
                     "intentd import: line %llu: conflict, kept the stored counter (tenant %s, "
                     "%s, day %lld)\n",
                     static_cast<unsigned long long>(line_no),
                     Printable(parsed.record.counter.tenant_id).c_str(),
                     Printable(parsed.record.counter.name).c_str(),
                     static_cast<long long>(parsed.record.counter.day));
      } else if (outcome == store::StoreImporter::Outcome::kConflict && outcomes[2] <= 20) {
        const bool is_intent = parsed.record.kind == store::ExportRecord::Kind::kIntent;
        std::fprintf(
            stderr, "intentd import: line %llu: conflict, kept the stored %s (tenant %s, %s %s)\n",
            static_cast<unsigned long long>(line_no), is_intent ? "intent" : "action",
            Printable(is_intent ? parsed.record.intent.tenant_id : parsed.record.action.tenant_id)
                .c_str(),
            is_intent ? "intent_ref" : "key",
            Printable(is_intent ? parsed.record.intent.intent_ref : parsed.record.action.key)
                .c_str());
      }
    }
  }
  if (error.empty() && in->bad())
    error = std::string("cannot read the input: ") + std::strerror(errno);
  if (error.empty() && !end) error = "the input ends without its end line (truncated?)";
  store::Status finished = importer->Finish();
  importer.reset();
  if (flags.Has("json")) {
    json counted = {{"added", outcomes[0]},
                    {"unchanged", outcomes[1]},
                    {"conflicts", outcomes[2]},
                    {"past_retention", outcomes[3]},
                    {"complete", error.empty() && finished.ok()}};
    std::printf("%s\n", counted.dump().c_str());
  } else {
    std::fprintf(
        stderr,
        "intentd import: %llu added, %llu unchanged, %llu conflicts (kept), %llu past "
        "retention (skipped)\n",
        static_cast<unsigned long long>(outcomes[0]), static_cast<unsigned long long>(outcomes[1]),
        static_cast<unsigned long long>(outcomes[2]), static_cast<unsigned long long>(outcomes[3]));
  }
  if (!error.empty()) {
    // With a failed flush too (a full disk, typically), the records before
    // the line are not known to be durable.
    const std::string before =
        finished.ok() ? "; the records before it were imported (importing again is safe)"
                      : "; the records before it may not be durable either (" + finished.message() +
                            "); importing again is safe once the cause is fixed";
    return Failed("import", "line " + std::to_string(line_no) + ": " + error + before);
  }
  if (!finished.ok())
    return Failed("import", "cannot make the import durable: " + finished.message());
  return outcomes[2] > 0 ? kExitFailed : kExitOk;
}

}  // namespace intentd::cli
