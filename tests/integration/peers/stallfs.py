#!/usr/bin/env python3
"""A filesystem whose reads can be made to hang, as a stuck NFS server's do: a passthrough FUSE
mount of BACKING_DIR on MOUNTPOINT (fusepy over libfuse 2, in the foreground, multithreaded, so
one stuck read blocks no other operation: stat, readdir, reads of other files, writes).

    stallfs.py [--held FILE] BACKING_DIR MOUNTPOINT

While a file `.stall` exists in BACKING_DIR, every read of a file whose path under the mount
(e.g. `sub/a.jsonl`) contains the text in `.stall` (less a trailing newline; empty: every file)
blocks, looking again every 10 ms, until `.stall` is removed (or no longer names it). `.stall` is
not seen through the mount (readdir leaves it out, a lookup of it finds nothing). The handler
itself waits, so a read blocks in the kernel exactly as a read from a hung server does; a reader
that gets a signal meanwhile (kill -9 too) is answered EINTR, as a hard NFS mount lets it be.
With --held, FILE holds the number of reads being held now, written (atomically) whenever it
changes: a test can wait until its reader is really stuck.

Everything is passed through to BACKING_DIR: getattr (with the backing inode numbers), readdir,
open, create, read, write (O_APPEND kept: an append lands at the backing file's true end),
truncate, flush, fsync, release, unlink, rename, link, symlink, readlink, mkdir, rmdir, chmod,
chown, utimens, statfs. The kernel caches nothing (direct_io, zero attribute and entry
timeouts): every read reaches the handler, and a file grown in BACKING_DIR shows its new size
at once. inotify on the mount sees only what is done through the mount (the kernel's own
events for its own calls); a write made directly in BACKING_DIR fires nothing there.

Prints "mounted" once the mount answers. On SIGTERM, SIGINT or SIGHUP: stalled reads are let go
(they read and answer), the mount is detached (lazily: it goes at once from the namespace; files
still open on it answer until they are closed, or for 2 s at most, when the process exits and
they fail with ENOTCONN) and the process exits 0. Exits 3, with the
reason on stderr, when FUSE cannot be used (no fusepy, no libfuse2, mount refused).
"""
import argparse
import ctypes
import ctypes.util
import errno
import os
import signal
import subprocess
import sys
import threading
import time

# The exit code for "FUSE cannot be used here".
UNAVAILABLE = 3

try:
    try:
        import fuse as fusepy  # fusepy from PyPI
        from fuse import FUSE, FuseOSError, Operations
    except ImportError:
        import fusepy  # Debian's python3-fusepy
        from fusepy import FUSE, FuseOSError, Operations
except (ImportError, OSError) as e:  # OSError: fusepy loads libfuse.so.2 when imported
    print(f"stallfs: unavailable: no fusepy (PyPI fusepy, or Debian's python3-fusepy) with libfuse2: {e}", file=sys.stderr)
    sys.exit(UNAVAILABLE)

CONTROL = ".stall"
POLL = 0.010


class StallFs(Operations):
    use_ns = True

    def __init__(self, root, held_file):
        self.root = os.path.realpath(root)
        self.stopping = threading.Event()
        self.held_file = held_file
        self.held = 0
        self.lock = threading.Lock()

    def count_held(self, n):
        with self.lock:
            self.held += n
            if self.held_file:
                tmp = self.held_file + ".tmp"
                with open(tmp, "w") as f:
                    f.write(str(self.held))
                os.rename(tmp, self.held_file)

    def full(self, path):
        if path.lstrip("/") == CONTROL:
            raise FuseOSError(errno.ENOENT)
        return os.path.join(self.root, path.lstrip("/"))

    def stalled(self, path):
        """The text in `.stall` is in `path`, and the process is not stopping."""
        if self.stopping.is_set():
            return False
        try:
            with open(os.path.join(self.root, CONTROL), "rb") as f:
                text = f.read().decode(errors="replace").rstrip("\n")
        except FileNotFoundError:
            return False
        return text in path.lstrip("/")

    # Files and directories.

    def getattr(self, path, fi=None):
        st = os.fstat(fi.fh) if fi else os.lstat(self.full(path))
        keys = ("st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")
        attrs = {k.removesuffix("_ns"): getattr(st, k) for k in keys}
        attrs["st_blksize"] = st.st_blksize
        return attrs

    def readdir(self, path, fh):
        names = [".", ".."] + os.listdir(self.full(path))
        return [n for n in names if not (path == "/" and n == CONTROL)]

    def readlink(self, path):
        return os.readlink(self.full(path))

    def mknod(self, path, mode, dev):
        os.mknod(self.full(path), mode, dev)

    def mkdir(self, path, mode):
        os.mkdir(self.full(path), mode)

    def rmdir(self, path):
        os.rmdir(self.full(path))

    def unlink(self, path):
        os.unlink(self.full(path))

    def symlink(self, target, source):
        os.symlink(source, self.full(target))

    def link(self, target, source):
        os.link(self.full(source), self.full(target))

    def rename(self, old, new):
        os.rename(self.full(old), self.full(new))

    def chmod(self, path, mode):
        os.chmod(self.full(path), mode)

    def chown(self, path, uid, gid):
        os.chown(self.full(path), uid, gid)

    def utimens(self, path, times=None):
        os.utime(self.full(path), ns=times) if times else os.utime(self.full(path))

    def truncate(self, path, length, fi=None):
        if fi:
            os.ftruncate(fi.fh, length)
        else:
            os.truncate(self.full(path), length)

    def access(self, path, amode):
        if not os.access(self.full(path), amode):
            raise FuseOSError(errno.EACCES)

    def statfs(self, path):
        sv = os.statvfs(self.full(path))
        keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")
        return {k: getattr(sv, k) for k in keys}

    # Open files (raw_fi: the kernel's open flags are seen, O_APPEND among them).

    def open(self, path, fi):
        fi.fh = os.open(self.full(path), fi.flags)
        return 0

    def create(self, path, mode, fi):
        fi.fh = os.open(self.full(path), fi.flags | os.O_CREAT, mode)
        return 0

    def read(self, path, size, offset, fi):
        # A file unlinked while open has no path any more (hard_remove): it cannot be named.
        if path is not None and self.stalled(path):
            self.count_held(1)
            try:
                while self.stalled(path):
                    # The reader got a signal: the kernel asks (FUSE_INTERRUPT) for an answer.
                    # Without one, a reader killed meanwhile could never finish dying.
                    if fusepy._libfuse.fuse_interrupted():
                        raise FuseOSError(errno.EINTR)
                    time.sleep(POLL)
            finally:
                self.count_held(-1)
        return os.pread(fi.fh, size, offset)

    def write(self, path, data, offset, fi):
        # On a descriptor opened O_APPEND, pwrite appends whatever the offset (Linux).
        return os.pwrite(fi.fh, data, offset)

    def flush(self, path, fi):
        return 0

    def fsync(self, path, datasync, fi):
        os.fdatasync(fi.fh) if datasync else os.fsync(fi.fh)

    def release(self, path, fi):
        os.close(fi.fh)


def unmount(mountpoint):
    """Lazily: umount2(MNT_DETACH) as root, else `fusermount -uz`."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.umount2(os.fsencode(mountpoint), 2) == 0:
        return
    subprocess.run(["fusermount", "-uz", mountpoint], stderr=subprocess.DEVNULL, check=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--held")
    ap.add_argument("backing")
    ap.add_argument("mountpoint")
    args = ap.parse_args()
    mountpoint = os.path.realpath(args.mountpoint)
    if not os.path.exists("/dev/fuse"):
        print("stallfs: unavailable: no /dev/fuse", file=sys.stderr)
        sys.exit(UNAVAILABLE)
    fs = StallFs(args.backing, args.held)
    done = threading.Event()

    # The signals are taken by one thread (sigwait), blocked in every other: libfuse's own
    # handler would end its loop, which then waits for its worker threads, one of them held in
    # a stalled read for ever. Set before any thread starts, so all of them inherit it.
    sigs = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigs)

    def on_signal():
        signal.sigwait(sigs)
        fs.stopping.set()
        unmount(mountpoint)
        # The loop ends once the kernel drops the connection: at once, unless a file of the
        # mount is still open somewhere. Exiting closes /dev/fuse, which drops it.
        done.wait(2)
        os._exit(0)

    def announce():
        while not done.is_set():
            if os.path.ismount(mountpoint):
                print("mounted", flush=True)
                return
            time.sleep(POLL)

    threading.Thread(target=on_signal, daemon=True).start()
    threading.Thread(target=announce, daemon=True).start()
    try:
        FUSE(
            fs,
            mountpoint,
            raw_fi=True,
            foreground=True,
            nothreads=False,
            fsname="stallfs",
            use_ino=True,
            # Unlinking an open file removes it (no .fuse_hidden file left in its directory).
            hard_remove=True,
            # No cache: every read reaches read() above, every stat getattr().
            direct_io=True,
            attr_timeout=0,
            entry_timeout=0,
            negative_timeout=0,
        )
    except RuntimeError as e:
        # fuse_main failed: most often the mount was refused (no CAP_SYS_ADMIN, no fusermount).
        done.set()
        print(f"stallfs: unavailable: mounting failed ({e})", file=sys.stderr)
        sys.exit(UNAVAILABLE)
    done.set()


if __name__ == "__main__":
    main()
