#!/usr/bin/env python3
"""A filesystem that loses, on command, everything a power loss would: a passthrough FUSE mount
of BACKING_DIR on MOUNTPOINT (fusepy over libfuse 2) that remembers what was made durable, and
on a crash puts BACKING_DIR back to exactly that. The test peer of the power-loss suite (our own
equivalent of LazyFS, whose source CI cannot fetch).

    lossfs.py --control SOCKET --state DIR [--log FILE] BACKING_DIR MOUNTPOINT

The durability model (strict POSIX, stricter than ext4's ordered mode; the point is to catch a
missing fsync):
- A file's data and size (writes, truncates) and its mode and owner are durable when that file
  is fsynced or fdatasynced (through any descriptor of it). Until then the durable content is
  what the last sync left (an empty file for one never synced).
- A name (create, mkdir, symlink, link, rename, unlink, rmdir) is durable when the directory it
  is in is fsynced: the directory's durable entries become its live entries, each naming the
  inode it names now. A file fsynced but whose directory was not is lost whole; a directory
  fsynced whose new file was not is left with that file empty. A rename between two directories
  is durable on the side whose directory was synced (both names remain if only the new one's
  was: a crash mid-rename shows the file twice, as fsck may leave it).
- Nothing else is durable: ext4 would also commit a new file's name with its fsync, and a
  rename over a file with the data of the file renamed (auto_da_alloc); this model does not, so
  code that relies on either is caught.
Everything in BACKING_DIR at mount time is durable.

Inode numbers seen through the mount are the model's (stable across crashes, as a disk's are;
the backing files are made anew by each crash); the device is the mount's.

Control: one command per connection to the Unix socket SOCKET, answered with one line
(`ok ...` or `error ...`; `ops` answers its lines) and the connection closed:
- `crash`: power loss now. Every open file of the mount is dead (its operations fail with EIO,
  as a process that outlived the power would see nothing), BACKING_DIR is put back to the
  durable state, and the filesystem is down: every operation fails with EIO until `up`.
- `up`: the filesystem answers again (the machine rebooted).
- `arm OP N WHEN [PATTERN]`: crash at the N-th (from now, 1-based) operation named OP (`any`:
  every counted operation; several names: `fsync,fsyncdir`) whose path (or one of its two
  paths) contains PATTERN (none: every path), WHEN `before` it takes effect or `after` it did;
  either way that operation answers EIO. Replaces what was armed.
- `arm-random P SEED`: crash before each counted operation with probability P.
- `disarm`; `status` (`ok up|down ops=N crashes=N fired=OP:PATH|-`);
- `ops`: the counted operations since `clear`, one a line: `SEQ OP PATH [PATH2]`; `clear`.
- `sync`: make everything durable now (as sync(1) and fsync of every directory would).
The counted operations: create, mknod, mkdir, symlink, link, unlink, rmdir, rename, write,
truncate, chmod, chown, utimens, fsync, fdatasync, fsyncdir. Reads are not counted.

An unlink of a file still open, or a rename over one, is under libfuse 2 a rename of that file
to a hidden name (`.fuse_hiddenN`, never listed, never durable, removed when it is closed),
counted as `unlink` of it (then, for a rename, the `rename`).

Supported: getattr, readdir, open (O_APPEND kept: the backing descriptor has it, so a write
lands at the true end), create, read, write, truncate, flush, fsync, release, opendir, fsyncdir,
releasedir, unlink, rename, link, symlink, readlink, mkdir, rmdir, chmod, chown, utimens,
statfs. O_TMPFILE is not (FUSE under libfuse 2 has no tmpfile: callers get EOPNOTSUPP, as on
any FUSE mount). The kernel caches nothing (direct_io, zero attribute and entry timeouts).
All operations are serialised by one lock: the durable state is never looked at mid-operation.

Prints "mounted" once the mount answers. On SIGTERM, SIGINT or SIGHUP it detaches the mount
(lazily) and exits 0. Exits 3, with the reason on stderr, when FUSE cannot be used.
"""
import argparse
import ctypes
import ctypes.util
import errno
import os
import random
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

UNAVAILABLE = 3

try:
    try:
        import fuse as fusepy  # fusepy from PyPI
        from fuse import FUSE, FuseOSError, Operations
    except ImportError:
        import fusepy  # Debian's python3-fusepy
        from fusepy import FUSE, FuseOSError, Operations
except (ImportError, OSError) as e:  # OSError: fusepy loads libfuse.so.2 when imported
    print(f"lossfs: unavailable: no fusepy (PyPI fusepy, or Debian's python3-fusepy) with libfuse2: {e}", file=sys.stderr)
    sys.exit(UNAVAILABLE)

ROOT_ID = 1
COUNTED = {
    "create", "mknod", "mkdir", "symlink", "link", "unlink", "rmdir", "rename", "write", "truncate",
    "chmod", "chown", "utimens", "fsync", "fdatasync", "fsyncdir",
}


class Crashed(Exception):
    """An armed crash fired: the operation answers EIO."""


class Node:
    """An inode's durable metadata (its data is the shadow file `<state>/shadow/<id>`)."""

    __slots__ = ("kind", "mode", "uid", "gid", "target")

    def __init__(self, kind, mode, uid, gid, target=None):
        self.kind, self.mode, self.uid, self.gid, self.target = kind, mode, uid, gid, target


class Handle:
    __slots__ = ("fd", "id", "dead")

    def __init__(self, fd, node_id):
        self.fd, self.id, self.dead = fd, node_id, False


def hidden(path):
    """A name libfuse gives a file unlinked (or renamed over) while open: not a real name."""
    return os.path.basename(path).startswith(".fuse_hidden")


def kind_of(mode):
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    return "f"


class LossFs(Operations):
    use_ns = True

    def __init__(self, root, state, log):
        self.root = os.path.realpath(root)
        self.shadow = os.path.join(state, "shadow")
        os.makedirs(self.shadow, exist_ok=True)
        self.mutex = threading.RLock()
        self.log_file = open(log, "a") if log else None
        self.next_id = ROOT_ID + 1
        self.ids = {}  # backing inode number -> model id
        self.dur_dirs = {ROOT_ID: {}}  # dir id -> {name: id}
        self.dur_nodes = {}
        self.handles = {}
        self.next_fh = 1
        self.down = False
        self.armed = None  # (ops set, n, when, pattern)
        self.random = None  # (p, Random)
        self.seq = 0
        self.oplog = []
        self.crashes = 0
        self.fired = "-"
        st = os.lstat(self.root)
        self.ids[st.st_ino] = ROOT_ID
        self.dur_nodes[ROOT_ID] = Node("d", st.st_mode, st.st_uid, st.st_gid)
        self.sync_all()

    def note(self, msg):
        if self.log_file:
            self.log_file.write(msg + "\n")
            self.log_file.flush()

    # The model.

    def full(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def id_of_ino(self, ino):
        i = self.ids.get(ino)
        if i is None:
            i = self.new_id(ino)
        return i

    def new_id(self, ino):
        i = self.next_id
        self.next_id += 1
        self.ids[ino] = i
        return i

    def id_of(self, path):
        return self.id_of_ino(os.lstat(self.full(path)).st_ino)

    def shadow_of(self, i):
        return os.path.join(self.shadow, str(i))

    def persist_file(self, i, fd=None, path=None):
        """The inode's data, size, mode and owner become durable."""
        st = os.fstat(fd) if fd is not None else os.lstat(path)
        tmp = self.shadow_of(i) + ".tmp"
        # The descriptor may be write-only: the inode is opened again for reading (through
        # /proc, so an unlinked file is read too).
        src = os.open(f"/proc/self/fd/{fd}" if fd is not None else path, os.O_RDONLY)
        try:
            with open(tmp, "wb") as out:
                off = 0
                while True:
                    chunk = os.pread(src, 1 << 20, off)
                    if not chunk:
                        break
                    out.write(chunk)
                    off += len(chunk)
        finally:
            os.close(src)
        os.rename(tmp, self.shadow_of(i))
        self.dur_nodes[i] = Node("f", st.st_mode, st.st_uid, st.st_gid)

    def persist_dir(self, dir_id, dir_path):
        """The directory's entries become durable, each naming the inode it names now."""
        entries = {}
        for name in os.listdir(dir_path):
            if hidden(name):
                continue  # unlinked, still open: it has no name
            p = os.path.join(dir_path, name)
            st = os.lstat(p)
            cid = self.id_of_ino(st.st_ino)
            entries[name] = cid
            if cid not in self.dur_nodes:
                k = kind_of(st.st_mode)
                self.dur_nodes[cid] = Node(k, st.st_mode, st.st_uid, st.st_gid, os.readlink(p) if k == "l" else None)
                if k == "d":
                    self.dur_dirs.setdefault(cid, {})
        self.dur_dirs[dir_id] = entries

    def sync_all(self):
        for dirpath, dirnames, filenames in os.walk(self.root):
            did = self.id_of_ino(os.lstat(dirpath).st_ino)
            self.persist_dir(did, dirpath)
            for n in filenames:
                p = os.path.join(dirpath, n)
                if os.path.isfile(p) and not os.path.islink(p):
                    self.persist_file(self.id_of_ino(os.lstat(p).st_ino), path=p)

    def crash(self):
        """Power loss: open files die, BACKING_DIR becomes the durable state, the fs goes down."""
        self.crashes += 1
        self.down = True
        for h in self.handles.values():
            if not h.dead:
                h.dead = True
                try:
                    os.close(h.fd)
                except OSError:
                    pass
        for name in os.listdir(self.root):
            p = os.path.join(self.root, name)
            if os.path.isdir(p) and not os.path.islink(p):
                shutil.rmtree(p)
            else:
                os.unlink(p)
        self.ids = {os.lstat(self.root).st_ino: ROOT_ID}
        made = {}

        def build(dir_id, dir_path, seen):
            for name, cid in self.dur_dirs.get(dir_id, {}).items():
                node = self.dur_nodes[cid]
                p = os.path.join(dir_path, name)
                if node.kind == "d":
                    if cid in seen:
                        continue
                    os.mkdir(p, node.mode & 0o7777)
                    build(cid, p, seen | {cid})
                elif node.kind == "l":
                    os.symlink(node.target, p)
                elif cid in made:
                    os.link(made[cid], p)
                else:
                    sh = self.shadow_of(cid)
                    if os.path.exists(sh):
                        shutil.copyfile(sh, p)
                    else:
                        open(p, "wb").close()
                    os.chmod(p, node.mode & 0o7777)
                    made[cid] = p
                if node.kind != "l":
                    try:
                        os.lchown(p, node.uid, node.gid)
                    except OSError:
                        pass
                self.ids[os.lstat(p).st_ino] = cid

        build(ROOT_ID, self.root, {ROOT_ID})
        self.note(f"crash {self.crashes}: {self.fired}")

    # Counting and crash injection: every counted operation goes through `op`.

    def op(self, name, paths, do):
        with self.mutex:
            if self.down:
                raise FuseOSError(errno.EIO)
            self.seq += 1
            shown = " ".join(p for p in paths if p is not None)
            self.oplog.append(f"{self.seq} {name} {shown}")
            when = None
            if self.armed:
                ops, n, w, pattern = self.armed
                if ("any" in ops or name in ops) and (pattern is None or any(p is not None and pattern in p for p in paths)):
                    n -= 1
                    self.armed = (ops, n, w, pattern)
                    if n == 0:
                        when, self.armed = w, None
            if when is None and self.random and self.random[1].random() < self.random[0]:
                when = "before"
            if when == "before":
                self.fired = f"{name}:{shown}:before"
                self.crash()
                raise FuseOSError(errno.EIO)
            r = do()
            if when == "after":
                self.fired = f"{name}:{shown}:after"
                self.crash()
                raise FuseOSError(errno.EIO)
            return r

    def quiet_even_down(self, do):
        with self.mutex:
            return do()

    def quiet(self, do):
        """An operation that changes nothing: answered unless the fs is down."""
        with self.mutex:
            if self.down:
                raise FuseOSError(errno.EIO)
            return do()

    def handle(self, fh):
        h = self.handles.get(fh)
        if h is None or h.dead:
            raise FuseOSError(errno.EIO)
        return h

    def add_handle(self, fd):
        node_id = self.id_of_ino(os.fstat(fd).st_ino)
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = Handle(fd, node_id)
        return fh

    # Control.

    def command(self, line):
        words = line.split()
        if not words:
            return "error empty"
        c = words[0]
        with self.mutex:
            if c == "ping":
                return "ok"
            if c == "crash":
                self.fired = "command"
                self.crash()
                return "ok crashed"
            if c == "up":
                self.down = False
                return "ok"
            if c == "arm" and len(words) in (4, 5) and words[3] in ("before", "after"):
                self.armed = (set(words[1].split(",")), int(words[2]), words[3], words[4] if len(words) == 5 else None)
                return "ok"
            if c == "arm-random" and len(words) == 3:
                self.random = (float(words[1]), random.Random(int(words[2])))
                return "ok"
            if c == "disarm":
                self.armed, self.random = None, None
                return "ok"
            if c == "status":
                return f"ok {'down' if self.down else 'up'} ops={self.seq} crashes={self.crashes} fired={self.fired}"
            if c == "ops":
                return "\n".join(self.oplog)
            if c == "clear":
                self.oplog = []
                self.fired = "-"
                return "ok"
            if c == "sync":
                if self.down:
                    return "error down"
                self.sync_all()
                return "ok"
        return f"error unknown command {line!r}"

    def serve(self, sock_path):
        try:
            os.unlink(sock_path)
        except FileNotFoundError:
            pass
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(sock_path)
        srv.listen(16)
        while True:
            conn, _ = srv.accept()
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                try:
                    answer = self.command(data.decode().strip())
                except Exception as e:  # a bad command must not end the server
                    answer = f"error {e!r}"
                conn.sendall(answer.encode() + b"\n")

    # Files and directories.

    def getattr(self, path, fi=None):
        def do():
            if fi is not None and fi.fh in self.handles:
                h = self.handle(fi.fh)
                st, i = os.fstat(h.fd), h.id
            else:
                st = os.lstat(self.full(path))
                i = self.id_of_ino(st.st_ino)
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")
            attrs = {k.removesuffix("_ns"): getattr(st, k) for k in keys}
            attrs["st_ino"] = i
            attrs["st_blksize"] = st.st_blksize
            return attrs

        return self.quiet(do)

    def readdir(self, path, fh):
        return self.quiet(lambda: [".", ".."] + [n for n in os.listdir(self.full(path)) if not hidden(n)])

    def readlink(self, path):
        return self.quiet(lambda: os.readlink(self.full(path)))

    def opendir(self, path):
        return self.quiet(lambda: 0)

    def releasedir(self, path, fh):
        return 0

    def fsyncdir(self, path, datasync, fh):
        def do():
            self.persist_dir(self.id_of(path), self.full(path))
            return 0

        return self.op("fsyncdir", [path], do)

    def mknod(self, path, mode, dev):
        def do():
            os.mknod(self.full(path), mode, dev)
            self.new_id(os.lstat(self.full(path)).st_ino)

        return self.op("mknod", [path], do)

    def mkdir(self, path, mode):
        def do():
            os.mkdir(self.full(path), mode)
            self.new_id(os.lstat(self.full(path)).st_ino)

        return self.op("mkdir", [path], do)

    def rmdir(self, path):
        return self.op("rmdir", [path], lambda: os.rmdir(self.full(path)))

    def unlink(self, path):
        if hidden(path):
            # libfuse removing a hidden file once it is closed: it had no name already.
            def gone():
                try:
                    os.unlink(self.full(path))
                except FileNotFoundError:
                    pass  # a crash took it

            return self.quiet_even_down(gone)
        return self.op("unlink", [path], lambda: os.unlink(self.full(path)))

    def symlink(self, target, source):
        def do():
            os.symlink(source, self.full(target))
            self.new_id(os.lstat(self.full(target)).st_ino)

        return self.op("symlink", [target], do)

    def link(self, target, source):
        return self.op("link", [target, source], lambda: os.link(self.full(source), self.full(target)))

    def rename(self, old, new):
        if hidden(new):
            # libfuse hiding a file still open that is unlinked or renamed over: the unlink.
            return self.op("unlink", [old], lambda: os.rename(self.full(old), self.full(new)))
        return self.op("rename", [old, new], lambda: os.rename(self.full(old), self.full(new)))

    def chmod(self, path, mode):
        return self.op("chmod", [path], lambda: os.chmod(self.full(path), mode))

    def chown(self, path, uid, gid):
        return self.op("chown", [path], lambda: os.chown(self.full(path), uid, gid))

    def utimens(self, path, times=None):
        return self.op("utimens", [path], lambda: os.utime(self.full(path), ns=times) if times else os.utime(self.full(path)))

    def truncate(self, path, length, fi=None):
        def do():
            if fi is not None and fi.fh in self.handles:
                os.ftruncate(self.handle(fi.fh).fd, length)
            else:
                os.truncate(self.full(path), length)

        return self.op("truncate", [path], do)

    def access(self, path, amode):
        def do():
            if not os.access(self.full(path), amode):
                raise FuseOSError(errno.EACCES)

        return self.quiet(do)

    def statfs(self, path):
        def do():
            sv = os.statvfs(self.full(path))
            keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
            return {k: getattr(sv, k) for k in keys}

        return self.quiet(do)

    # Open files (raw_fi: the kernel's open flags are seen, O_APPEND among them).

    def open(self, path, fi):
        def do():
            fi.fh = self.add_handle(os.open(self.full(path), fi.flags))
            return 0

        if fi.flags & os.O_TRUNC:
            return self.op("truncate", [path], do)
        return self.quiet(do)

    def create(self, path, mode, fi):
        def do():
            fd = os.open(self.full(path), fi.flags | os.O_CREAT, mode)
            self.new_id(os.fstat(fd).st_ino)
            fi.fh = self.add_handle(fd)
            return 0

        return self.op("create", [path], do)

    def read(self, path, size, offset, fi):
        return self.quiet(lambda: os.pread(self.handle(fi.fh).fd, size, offset))

    def write(self, path, data, offset, fi):
        # On a descriptor opened O_APPEND, pwrite appends whatever the offset (Linux).
        return self.op("write", [path], lambda: os.pwrite(self.handle(fi.fh).fd, data, offset))

    def flush(self, path, fi):
        return self.quiet(lambda: self.handle(fi.fh) and 0)

    def fsync(self, path, datasync, fi):
        def do():
            h = self.handle(fi.fh)
            self.persist_file(h.id, fd=h.fd)
            return 0

        return self.op("fdatasync" if datasync else "fsync", [path], do)

    def release(self, path, fi):
        with self.mutex:
            h = self.handles.pop(fi.fh, None)
            if h is not None and not h.dead:
                os.close(h.fd)
        return 0


def unmount(mountpoint):
    """Lazily: umount2(MNT_DETACH) as root, else `fusermount -uz`."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.umount2(os.fsencode(mountpoint), 2) == 0:
        return
    subprocess.run(["fusermount", "-uz", mountpoint], stderr=subprocess.DEVNULL, check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--control", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--log")
    ap.add_argument("backing")
    ap.add_argument("mountpoint")
    args = ap.parse_args()
    mountpoint = os.path.realpath(args.mountpoint)
    if not os.path.exists("/dev/fuse"):
        print("lossfs: unavailable: no /dev/fuse", file=sys.stderr)
        sys.exit(UNAVAILABLE)
    fs = LossFs(args.backing, args.state, args.log)
    done = threading.Event()
    sigs = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)

    def on_signal():
        signal.sigwait(sigs)
        unmount(mountpoint)
        done.wait(2)
        os._exit(0)

    def announce():
        while not done.is_set():
            if os.path.ismount(mountpoint):
                print("mounted", flush=True)
                return
            time.sleep(0.01)

    threading.Thread(target=on_signal, daemon=True).start()
    threading.Thread(target=fs.serve, args=(args.control,), daemon=True).start()
    threading.Thread(target=announce, daemon=True).start()
    try:
        FUSE(
            fs,
            mountpoint,
            raw_fi=True,
            foreground=True,
            nothreads=False,
            fsname="lossfs",
            use_ino=True,
            # Not hard_remove: a file unlinked while open must still answer fstat (libfuse 2
            # finds no path for it otherwise), so libfuse renames it to `.fuse_hiddenN` until
            # it is closed; that name is not shown, not durable, and the rename is counted as
            # the unlink it stands for.
            direct_io=True,
            attr_timeout=0,
            entry_timeout=0,
            negative_timeout=0,
        )
    except RuntimeError as e:
        done.set()
        print(f"lossfs: unavailable: mounting failed ({e})", file=sys.stderr)
        sys.exit(UNAVAILABLE)
    done.set()


if __name__ == "__main__":
    main()
