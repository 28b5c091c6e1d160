#!/usr/bin/env bash
# Unit tests of intentd_plfs, the power-loss simulating FUSE file system.
#   plfs_test.sh PATH/TO/intentd_plfs
# Mounts a fresh instance on temporary directories (unmounted on exit, also on
# failure), runs each named case, prints "ok NAME" or "FAILED NAME: why", and as
# last line "N passed, M failed"; exits 1 if any case failed. The RocksDB case is
# compiled only when the librocksdb headers are installed. PLFS_FUSE_ARGS replaces
# the default FUSE options "-s" (single-threaded loop), e.g. PLFS_FUSE_ARGS= for
# the multi-threaded one.
set -euo pipefail
if [[ $# -lt 1 || ! -x "$1" ]]; then
  echo "usage: $0 PATH/TO/intentd_plfs" >&2
  exit 2
fi
PLFS=$(realpath "$1")
export PLFS
exec python3 - "$@" <<'PY'
import errno, os, shutil, signal, socket, subprocess, sys, tempfile, time, traceback

PLFS = os.environ["PLFS"]
work = tempfile.mkdtemp(prefix="plfs_test.")
backing, mnt, ctl_path = f"{work}/backing", f"{work}/mnt", f"{work}/ctl.sock"
os.mkdir(backing)
os.mkdir(mnt)
proc = None


def mounted():
    with open("/proc/mounts") as f:
        return any(line.split()[1] == mnt for line in f)


def cleanup():
    if mounted() and subprocess.run(["fusermount3", "-u", mnt], check=False).returncode != 0:
        subprocess.run(["fusermount3", "-u", "-z", mnt], check=False)  # busy: detach lazily
    if proc and proc.poll() is None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
    if not mounted():
        shutil.rmtree(work, ignore_errors=True)


def on_signal(signum, frame):
    cleanup()
    sys.exit(1)


signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)


def ctl(command):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(ctl_path)
    s.sendall(command.encode() + b"\n")
    reply = b""
    while chunk := s.recv(4096):
        reply += chunk
    s.close()
    reply = reply.decode().strip()
    if reply.startswith("error"):
        raise RuntimeError(reply)
    return reply


def p(name):
    return os.path.join(mnt, name)


def fsync_dir(name="."):
    fd = os.open(p(name), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write(name, data, offset=None, flags=0, sync=None):
    """Writes data (at offset, or appends); sync in (None, 'fsync', 'fdatasync')."""
    fd = os.open(p(name), os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        if offset is None:
            offset = os.fstat(fd).st_size
        os.pwrite(fd, data, offset)
        if sync == "fsync":
            os.fsync(fd)
        elif sync == "fdatasync":
            os.fdatasync(fd)
    finally:
        os.close(fd)


def durable(name, data=b"", parent="."):
    """A file whose content and name are durable."""
    write(name, data, 0, os.O_TRUNC, sync="fsync")
    fsync_dir(parent)


def read(name):
    try:
        with open(p(name), "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def expect(got, want, what):
    if got != want:
        show = lambda v: f"{len(v)} bytes {v[:16]!r}..." if isinstance(v, bytes) and len(v) >= 40 else v
        raise AssertionError(f"{what}: got {show(got)!r}, want {show(want)!r}")


# ------------------------------------------------------------------ cases

def case_unsynced_write_lost():
    durable("w1")
    write("w1", b"abc")
    write("w1_new", b"never synced")
    ctl("cut")
    expect(read("w1"), b"", "unsynced write")
    expect(read("w1_new"), None, "unsynced new file")


def case_fsync_survives():
    durable("w2", b"hello")
    ctl("cut")
    expect(read("w2"), b"hello", "fsynced file")


def case_fdatasync_keeps_data():
    durable("w3")
    write("w3", b"data", sync="fdatasync")
    ctl("cut")
    expect(read("w3"), b"data", "fdatasync'd data")


def case_write_after_sync_lost_prefix_stays():
    durable("w4", b"A" * 100)
    write("w4", b"B" * 50)
    write("w4", b"C" * 10, offset=0)
    expect(read("w4"), b"C" * 10 + b"A" * 90 + b"B" * 50, "before cut")
    ctl("cut")
    expect(read("w4"), b"A" * 100, "synced prefix")


def case_truncate_extend_revert():
    durable("t1", b"x" * 100)
    os.truncate(p("t1"), 10)
    ctl("cut")
    expect(read("t1"), b"x" * 100, "after shrink + cut")
    fd = os.open(p("t1"), os.O_RDWR)
    os.ftruncate(fd, 5000)
    os.close(fd)
    ctl("cut")
    expect(read("t1"), b"x" * 100, "after extend + cut")
    write("t1", b"new", flags=os.O_TRUNC)
    ctl("cut")
    expect(read("t1"), b"x" * 100, "after O_TRUNC + cut")


def case_created_fsynced_without_dirsync_disappears():
    write("c1", b"content", sync="fsync")
    ctl("cut")
    expect(read("c1"), None, "file without directory fsync")


def case_created_with_dirsync_survives():
    durable("c2", b"content")
    os.mkdir(p("c2dir"))
    fsync_dir()
    durable("c2dir/f", b"inner", parent="c2dir")
    ctl("cut")
    expect(read("c2"), b"content", "file with directory fsync")
    expect(read("c2dir/f"), b"inner", "file in fsynced subdirectory")


def case_mkdir_without_parent_sync_reverts():
    os.mkdir(p("m1"))
    durable("m1/f", b"x", parent="m1")
    ctl("cut")
    expect(os.path.exists(p("m1")), False, "directory whose parent was not fsynced")


def case_rename_reverts():
    durable("r_src", b"S")
    os.rename(p("r_src"), p("r_dst"))
    ctl("cut")
    expect(read("r_src"), b"S", "rename source back")
    expect(read("r_dst"), None, "rename target gone")


def case_rename_over_existing_target_reverts():
    durable("r2_src", b"S")
    durable("r2_dst", b"D")
    os.rename(p("r2_src"), p("r2_dst"))
    expect(read("r2_dst"), b"S", "before cut")
    ctl("cut")
    expect(read("r2_src"), b"S", "source back")
    expect(read("r2_dst"), b"D", "old target back")


def case_rename_with_dirsync_survives():
    durable("r3_src", b"S")
    durable("r3_dst", b"D")
    os.rename(p("r3_src"), p("r3_dst"))
    fsync_dir()
    ctl("cut")
    expect(read("r3_src"), None, "source")
    expect(read("r3_dst"), b"S", "target")


def case_rename_across_dirs_reverts():
    os.mkdir(p("ra"))
    os.mkdir(p("rb"))
    fsync_dir()
    durable("ra/f", b"F", parent="ra")
    os.rename(p("ra/f"), p("rb/f"))
    ctl("cut")
    expect(read("ra/f"), b"F", "source back")
    expect(read("rb/f"), None, "target gone")
    os.rename(p("ra/f"), p("rb/f"))
    fsync_dir("rb")  # the rename commits both directories
    ctl("cut")
    expect(read("ra/f"), None, "source after target dir fsync")
    expect(read("rb/f"), b"F", "target after target dir fsync")


def case_directory_rename_carries_pending_children():
    os.mkdir(p("dr_a"))
    fsync_dir()
    durable("dr_a/kept", b"K", parent="dr_a")
    write("dr_a/pending", b"P", sync="fsync")  # its directory is never fsynced
    os.rename(p("dr_a"), p("dr_b"))
    fsync_dir()  # the rename is durable, the creation of dr_b/pending is not
    ctl("cut")
    expect(os.path.exists(p("dr_a")), False, "old directory name")
    expect(read("dr_b/kept"), b"K", "durable child under the new name")
    expect(read("dr_b/pending"), None, "child whose creation was not durable")


def case_append_reverts():
    durable("ap", b"base")
    write("ap", b"more", flags=os.O_APPEND)
    expect(read("ap"), b"basemore", "before cut")
    ctl("cut")
    expect(read("ap"), b"base", "O_APPEND write after cut")


def case_unlink_reverts():
    durable("u1", b"U" * 10)
    write("u1", b"unsynced")
    os.unlink(p("u1"))
    ctl("cut")
    expect(read("u1"), b"U" * 10, "unlinked file back with synced content")
    os.unlink(p("u1"))
    fsync_dir()
    ctl("cut")
    expect(read("u1"), None, "unlink with directory fsync")


def case_rmdir_reverts():
    os.mkdir(p("d1"))
    fsync_dir()
    os.rmdir(p("d1"))
    ctl("cut")
    expect(os.path.isdir(p("d1")), True, "removed directory back")


def case_odsync_survives():
    durable("ds")
    write("ds", b"D" * 100, flags=os.O_DSYNC)
    write("ds", b"S" * 10, flags=os.O_SYNC)
    write("ds", b"lost")
    ctl("cut")
    expect(read("ds"), b"D" * 100 + b"S" * 10, "O_DSYNC/O_SYNC writes")


def case_fallocate_not_durable():
    durable("fa", b"f" * 10)
    fd = os.open(p("fa"), os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, 1 << 20)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    expect(size, 1 << 20, "size after fallocate")
    ctl("cut")
    expect(os.stat(p("fa")).st_size, 10, "synced size after cut")
    fd = os.open(p("fa"), os.O_RDWR)
    os.posix_fallocate(fd, 0, 1 << 20)
    os.fsync(fd)
    os.close(fd)
    ctl("cut")
    expect(os.stat(p("fa")).st_size, 1 << 20, "fsynced fallocate")


def prefix_states(writes):
    """Contents after each prefix of writes (offset, data) on an empty file."""
    states, content = [b""], bytearray()
    for offset, data in writes:
        if len(content) < offset:
            content += bytes(offset - len(content))
        content[offset:offset + len(data)] = data
        states.append(bytes(content))
    return states


def case_keep_prefix_in_write_order():
    writes = [(0, b"a" * 100), (50, b"b" * 100), (10, b"c" * 20), (150, b"d" * 30), (0, b"e" * 5),
              (180, b"f" * 1000), (400, b"g" * 10)]
    states = prefix_states(writes)
    seen = set()
    for seed in range(1, 25):
        durable("kp", b"")
        fd = os.open(p("kp"), os.O_WRONLY)
        for offset, data in writes:
            os.pwrite(fd, data, offset)
        os.close(fd)
        ctl(f"cut keep-prefix {seed}")
        got = read("kp")
        if got not in states:
            raise AssertionError(f"seed {seed}: {len(got)} bytes are no prefix state")
        seen.add(states.index(got))
    if len(seen) < 3 or not seen & set(range(1, len(writes))):
        raise AssertionError(f"prefix lengths not random: {sorted(seen)}")


def case_torn_tears_only_last_page():
    page = 4096
    first, second = b"p" * page, b"q" * (2 * page + 100)
    torn_inside = False
    for seed in range(1, 40):
        durable("tp", b"")
        fd = os.open(p("tp"), os.O_WRONLY)
        os.pwrite(fd, first, 0)
        os.pwrite(fd, second, page)
        os.close(fd)
        ctl(f"cut torn {seed}")
        got = read("tp")
        full = first + second
        if got != full[:len(got)]:
            raise AssertionError(f"seed {seed}: not a prefix of the writes")
        n = len(got)
        # k = 0: nothing; k = 1: part of page 0; k = 2: first + second's full pages + part of its last page.
        last_page = page + 2 * page
        if not (n < page or last_page <= n < len(full)):
            raise AssertionError(f"seed {seed}: {n} bytes kept, torn outside the last page")
        torn_inside |= last_page < n < len(full)
    if not torn_inside:
        raise AssertionError("no seed tore the last page in its middle")


def case_torn_restores_overwritten_bytes():
    durable("to", b"o" * 8192)
    write("to", b"n" * 8192, offset=0)
    ctl("cut torn 7")
    got = read("to")
    expect(len(got), 8192, "size")
    k = got.count(b"n")
    expect(got, b"n" * k + b"o" * (8192 - k), "new prefix then old bytes")
    if not (k == 0 or 4096 <= k < 8192):
        raise AssertionError(f"{k} new bytes: torn outside the last page")


def case_stale_handle_eio():
    durable("st", b"s")
    fd = os.open(p("st"), os.O_RDWR)
    os.write(fd, b"before")
    ctl("cut")
    try:
        for what, call in [("write", lambda: os.write(fd, b"after")), ("fsync", lambda: os.fsync(fd)),
                           ("read", lambda: os.pread(fd, 1, 0))]:
            try:
                call()
            except OSError as e:
                expect(e.errno, errno.EIO, f"{what} errno")
                continue
            raise AssertionError(f"{what} on a stale handle succeeded")
    finally:
        os.close(fd)
    expect(read("st"), b"s", "content")


def case_stats():
    durable("sx", b"12345")
    write("sx", b"678")
    fields = dict(kv.split("=") for kv in ctl("stats").split())
    for key in ("cuts", "synced_bytes", "unsynced_bytes", "written_bytes"):
        if key not in fields:
            raise AssertionError(f"stats lacks {key}: {fields}")
    if int(fields["unsynced_bytes"]) < 3 or int(fields["synced_bytes"]) < 5:
        raise AssertionError(f"stats: {fields}")
    ctl("cut")


def case_pending_lists_namespace_changes():
    write("pn", b"")
    expect(ctl("pending"), "create pn", "pending after a create")
    ctl("cut")
    expect(ctl("pending"), "none", "pending after the cut")


ROCKSDB_PROGRAM = r"""
#include <rocksdb/db.h>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
// rocks DIR write FIRST COUNT: puts key<i> for i in [FIRST, FIRST+COUNT) with sync,
//   then one unsynced key, then exits without closing (a crash).
// rocks DIR check COUNT: key<i> for i in [0, COUNT) must be present, the unsynced
//   key absent (the cut reached RocksDB's WAL).
int main(int argc, char** argv) {
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, argv[1], &db);
  if (!s.ok()) { std::fprintf(stderr, "open: %s\n", s.ToString().c_str()); return 1; }
  std::string mode = argv[2];
  if (mode == "write") {
    int first = std::atoi(argv[3]), count = std::atoi(argv[4]);
    rocksdb::WriteOptions sync;
    sync.sync = true;
    for (int i = first; i < first + count; ++i) {
      s = db->Put(sync, "key" + std::to_string(i), std::string(100, 'v'));
      if (!s.ok()) { std::fprintf(stderr, "put: %s\n", s.ToString().c_str()); return 1; }
    }
    db->Put(rocksdb::WriteOptions(), "unsynced", "x");
    _exit(0);
  }
  std::string ignored;
  if (!db->Get(rocksdb::ReadOptions(), "unsynced", &ignored).IsNotFound()) {
    std::fprintf(stderr, "the unsynced key survived the cut\n");
    return 1;
  }
  int count = std::atoi(argv[3]);
  for (int i = 0; i < count; ++i) {
    std::string value;
    s = db->Get(rocksdb::ReadOptions(), "key" + std::to_string(i), &value);
    if (!s.ok()) { std::fprintf(stderr, "get key%d: %s\n", i, s.ToString().c_str()); return 1; }
  }
  delete db;
  return 0;
}
"""


def case_rocksdb_sync_writes_survive():
    if not os.path.exists("/usr/include/rocksdb/db.h"):
        print("   (skipped: librocksdb-dev not installed)")
        return
    src, exe = f"{work}/rocks.cc", f"{work}/rocks"
    with open(src, "w") as f:
        f.write(ROCKSDB_PROGRAM)
    subprocess.run(["g++", "-std=c++17", "-O1", src, "-o", exe, "-lrocksdb"], check=True)
    db = p("db")
    # RocksDB creates its directory without fsyncing the parent: in this strict
    # model the whole DB would vanish at a cut. The parent is synced here, as a
    # deployment that pre-creates the data directory would.
    os.mkdir(db)
    fsync_dir()
    run = lambda *a: subprocess.run([exe, db, *map(str, a)], capture_output=True, text=True)
    total = 0
    for round_ in range(3):
        r = run("write", total, 50)
        if r.returncode != 0:
            raise AssertionError(f"round {round_} write: {r.stderr.strip()}")
        total += 50
        ctl("cut")
        r = run("check", total)
        if r.returncode != 0:
            raise AssertionError(f"round {round_} check after cut: {r.stderr.strip()}")


def case_fault_full_refuses_growth_not_overwrites():
    durable("f1", b"A" * 100)
    ctl("fault full")
    try:
        try:
            write("f1", b"B" * 10)  # an append grows the file
            raise AssertionError("an append succeeded on a full disk")
        except OSError as e:
            expect(e.errno, errno.ENOSPC, "append on a full disk")
        write("f1", b"C" * 10, offset=0)  # an overwrite takes no space
        try:
            write("f1_new", b"x")
            raise AssertionError("a create succeeded on a full disk")
        except OSError as e:
            expect(e.errno, errno.ENOSPC, "create on a full disk")
    finally:
        ctl("fault space")
    write("f1", b"D", sync="fsync")
    expect(read("f1"), b"C" * 10 + b"A" * 90 + b"D", "after space came back")


def case_fault_enospc_rate_one_fails_every_write():
    durable("f2", b"")
    ctl("fault enospc 1 7")
    try:
        failed = 0
        for _ in range(10):
            try:
                write("f2", b"x" * 100)
            except OSError as e:
                expect(e.errno, errno.ENOSPC, "injected ENOSPC")
                failed += 1
        expect(failed, 10, "writes failed at rate 1")
    finally:
        ctl("fault clear")
    stats = dict(kv.split("=") for kv in ctl("stats").split())
    if int(stats["enospc"]) < 10:
        raise AssertionError(f"stats count {stats['enospc']} ENOSPC")


def case_fault_eio_fsync_loses_the_pages_a_later_fsync_does_not_write():
    durable("f3", b"A" * 4096)
    write("f3", b"B" * 4096)  # page 1, unsynced
    ctl("fault eio-fsync 1 3")
    try:
        fd = os.open(p("f3"), os.O_WRONLY)
        try:
            os.fsync(fd)
            raise AssertionError("fsync succeeded")
        except OSError as e:
            expect(e.errno, errno.EIO, "injected EIO")
        finally:
            os.close(fd)
    finally:
        ctl("fault clear")
    expect(read("f3"), b"A" * 4096 + b"B" * 4096, "reads see the pages of a failed fsync")
    write("f3", b"C" * 4096, sync="fsync")  # page 2, and a successful fsync
    ctl("cut")
    # Page 1 was marked clean by the failed fsync and never written again: lost
    # (zeros); page 2 was synced.
    expect(read("f3"), b"A" * 4096 + b"\0" * 4096 + b"C" * 4096, "after the cut")


def case_fault_eio_fsync_page_written_again_and_synced_survives():
    durable("f4", b"A" * 4096)
    write("f4", b"B" * 4096)
    ctl("fault eio-fsync 1 4")
    try:
        fd = os.open(p("f4"), os.O_WRONLY)
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)
    finally:
        ctl("fault clear")
    write("f4", b"b", offset=4096, sync="fsync")  # dirties page 1 again: written whole
    ctl("cut")
    expect(read("f4"), b"A" * 4096 + b"b" + b"B" * 4095, "a page written again and synced")


def case_vanish_and_return_a_directory():
    os.mkdir(p("vd"))
    durable("vd/file", b"kept", parent="vd")
    fsync_dir()
    ctl("vanish vd")
    expect(os.path.exists(p("vd")), False, "vanished")
    expect(read("vd.vanished/file"), b"kept", "moved away")
    ctl("return vd")
    expect(read("vd/file"), b"kept", "back")


CASES = [v for k, v in list(globals().items()) if k.startswith("case_")]


def main():
    global proc
    fuse_args = os.environ.get("PLFS_FUSE_ARGS", "-s").split()  # "": multi-threaded loop
    proc = subprocess.Popen([PLFS, backing, mnt, "--control", ctl_path, "-f", *fuse_args])
    deadline = time.time() + 10
    while not (mounted() and os.path.exists(ctl_path)):
        if time.time() > deadline or proc.poll() is not None:
            print("FAILED mount")
            return 1
        time.sleep(0.05)
    passed = failed = 0
    for case in CASES:
        name = case.__name__[len("case_"):]
        try:
            case()
            print(f"ok {name}")
            passed += 1
        except Exception as e:
            print(f"FAILED {name}: {e}")
            if not isinstance(e, AssertionError):
                traceback.print_exc()
            failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


try:
    rc = main()
finally:
    cleanup()
sys.exit(rc)
PY
