#!/usr/bin/python3
"""debkernel.py — Debian kernels for guests we boot under QEMU, shared by the
host lab (tests/hosts/lab.py) and the microVM assets (scripts/microvm-assets.py):

  * fetch a kernel package from Debian's archive into a cache (apt-get
    download + dpkg-deb -x; never installed, /boot is never touched), and
    keep working offline from what the cache already holds;
  * the load order of a set of modules and everything they depend on, read
    from each module's ELF .modinfo (the .deb ships no modules.dep and the
    host may have no kmod);
  * newc cpio archives (what the kernel unpacks as an initramfs), byte for
    byte reproducible.

Stdlib only: both callers run on a bare /usr/bin/python3.
"""
import fnmatch
import lzma
import os
import re
import shutil
import stat
import struct
import subprocess
import time

HOST_APT_SUITE = "bookworm"
MIRRORS = {
    "trixie": ["deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
               "http://deb.debian.org/debian trixie main",
               "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "
               "http://deb.debian.org/debian-security trixie-security main"],
}


def _nolog(_msg):
    pass


def run(cmd, timeout=300, **kw):
    return subprocess.run(cmd, timeout=timeout, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kw)


# ---------------------------------------------------------------- kernels

def apt_opts(cache, suite):
    """apt options for suite: the host's own apt for the host's suite, else a
    private sources list, lists dir and archive cache under the cache, so
    the host's apt state is never touched."""
    if suite == HOST_APT_SUITE:
        return []
    if suite not in MIRRORS:
        raise SystemExit(f"debkernel: no apt source known for suite {suite}")
    d = os.path.join(cache, "apt-" + suite)
    for sub in ("lists/partial", "cache/archives/partial", "parts.d", "prefs.d"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    src = os.path.join(d, "sources.list")
    with open(src, "w") as f:
        f.write("\n".join(MIRRORS[suite]) + "\n")
    return ["-o", f"Dir::Etc::SourceList={src}", "-o", f"Dir::Etc::SourceParts={d}/parts.d",
            "-o", f"Dir::Etc::PreferencesParts={d}/prefs.d", "-o", f"Dir::State::Lists={d}/lists",
            "-o", f"Dir::Cache={d}/cache", "-o", "Dir::State::status=/dev/null"]


def resolve_kernel_pkg(cache, suite, meta):
    """The versioned image package the metapackage meta depends on."""
    opts = apt_opts(cache, suite)
    if opts:
        lists = os.path.join(cache, "apt-" + suite, "lists")
        fresh = any(n.endswith("InRelease") and time.time() - os.stat(os.path.join(lists, n)).st_mtime
                    < 86400 for n in os.listdir(lists))
        if not fresh:
            run(["apt-get", *opts, "-q", "update"], timeout=300)
    out = run(["apt-cache", *opts, "depends", meta]).stdout
    m = re.search(r"Depends: (linux-image-\S+)", out)
    if not m:
        raise RuntimeError(f"{meta} in {suite}: no linux-image dependency in:\n{out}")
    return m.group(1), opts


def _extract(kdir, pkg, opts, log):
    """apt-get download + dpkg-deb -x of pkg into kdir/pkg (atomically: a
    half-extracted tree is never taken for a kernel)."""
    root = os.path.join(kdir, pkg)
    debs = os.path.join(kdir, "debs")
    os.makedirs(debs, exist_ok=True)
    for n in os.listdir(debs):
        if n.startswith(pkg + "_"):
            os.unlink(os.path.join(debs, n))
    log(f"apt-get download {pkg}")
    run(["apt-get", *(opts or []), "-q", "download", pkg], timeout=600, cwd=debs)
    deb = [n for n in os.listdir(debs) if n.startswith(pkg + "_")][0]
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    run(["dpkg-deb", "-x", os.path.join(debs, deb), tmp], timeout=600)
    os.rename(tmp, root)
    os.unlink(os.path.join(debs, deb))


def fetch_kernel(cache, suite, meta, log=_nolog):
    """Download + extract the suite's kernel once into cache/kernels; returns
    (vmlinuz, moddir, release).  Without a network (apt-cache or the
    download fails), the kernel extracted last time for this suite and
    metapackage, named by cache/kernels/<suite>-<meta>.current."""
    kdir = os.path.join(cache, "kernels")
    os.makedirs(kdir, exist_ok=True)
    pointer = os.path.join(kdir, f"{suite}-{meta}.current")
    cached = open(pointer).read().strip() if os.path.exists(pointer) else None
    if cached and not os.path.isdir(os.path.join(kdir, cached, "boot")):
        cached = None
    try:
        pkg, opts = resolve_kernel_pkg(cache, suite, meta)
        if not os.path.isdir(os.path.join(kdir, pkg, "boot")):
            _extract(kdir, pkg, opts, log)
    except (subprocess.SubprocessError, OSError, RuntimeError, IndexError) as e:
        if not cached:
            detail = getattr(e, "stderr", None) or str(e)
            raise RuntimeError(f"{meta} ({suite}): cannot fetch and nothing cached in {kdir}: "
                               f"{detail.strip()[:300]}") from e
        pkg = cached
        log(f"{suite}: apt failed ({str(e).strip()[:120]}); using the cached {pkg}")
    tmp = pointer + ".tmp"
    with open(tmp, "w") as f:
        f.write(pkg + "\n")
    os.rename(tmp, pointer)
    root = os.path.join(kdir, pkg)
    vmlinuz = [n for n in os.listdir(os.path.join(root, "boot")) if n.startswith("vmlinuz-")][0]
    for base in ("lib/modules", "usr/lib/modules"):
        if os.path.isdir(os.path.join(root, base)):
            rel = os.listdir(os.path.join(root, base))[0]
            return os.path.join(root, "boot", vmlinuz), os.path.join(root, base, rel), rel
    raise RuntimeError(f"{pkg}: no modules directory")


# ---------------------------------------------------------------- modules

def ko_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    return lzma.decompress(data) if path.endswith(".xz") else data


def modinfo_depends(data):
    """The depends= of a module, from its ELF .modinfo section (no kmod on
    the host, and the .deb ships no modules.dep)."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)

    def sec(i):
        name, _t, _f, _a, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        return name, off, size
    _n, stroff, _s = sec(shstrndx)
    for i in range(shnum):
        name, off, size = sec(i)
        end = data.index(b"\0", stroff + name)
        if data[stroff + name:end] == b".modinfo":
            for kv in data[off:off + size].split(b"\0"):
                if kv.startswith(b"depends="):
                    return [d for d in kv[8:].decode().split(",") if d]
            return []
    return []


def module_closure(moddir, wanted):
    """Load order (dependencies first) of wanted and everything they need,
    the uncompressed bytes of each, and the names that are absent (built
    in names are dropped silently: nothing to load)."""
    index = {}
    for dirpath, _d, files in os.walk(os.path.join(moddir, "kernel")):
        for n in files:
            m = re.match(r"(.+)\.ko(\.xz)?$", n)
            if m:
                index[m.group(1).replace("-", "_")] = os.path.join(dirpath, n)
    builtin = set()
    bpath = os.path.join(moddir, "modules.builtin")
    if os.path.exists(bpath):
        for line in open(bpath):
            builtin.add(os.path.basename(line.strip())[:-3].replace("-", "_"))
    order, seen, absent, blobs = [], set(), [], {}

    def visit(name):
        name = name.replace("-", "_")
        if name in seen:
            return
        seen.add(name)
        if name not in index:
            if name not in builtin:
                absent.append(name)
            return
        blobs[name] = ko_bytes(index[name])
        for dep in sorted(modinfo_depends(blobs[name])):  # sorted: same order every run
            visit(dep)
        order.append(name)
    for w in wanted:  # a name, or an fnmatch pattern over the kernel's modules
        for name in (sorted(fnmatch.filter(index, w.replace("-", "_"))) if "*" in w else [w]):
            visit(name)
    return order, blobs, absent


# ---------------------------------------------------------------- initramfs

class Cpio:
    """A newc archive (what the kernel unpacks as an initramfs).  Every
    entry has mtime 0, uid/gid 0 and inode numbers in the order added, so
    the same calls give the same bytes; callers add entries in a fixed
    order, parents before children."""

    def __init__(self):
        self.parts, self.ino = [], 1

    def add(self, name, mode, data=b"", target=None, rdev=(0, 0)):
        if target is not None:
            data = target.encode()
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08X}" for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(nb), 0))
        self.ino += 1
        blob = hdr.encode() + nb
        blob += b"\0" * (-len(blob) % 4) + data
        blob += b"\0" * (-len(blob) % 4)
        self.parts.append(blob)

    def dir(self, name, mode=0o755):
        self.add(name, stat.S_IFDIR | mode)

    def file(self, name, data, mode=0o644):
        self.add(name, stat.S_IFREG | mode, data)

    def chardev(self, name, major, minor, mode=0o600):
        self.add(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def symlink(self, name, target):
        self.add(name, stat.S_IFLNK | 0o777, target=target)

    def bytes(self):
        return b"".join(self.parts) + _trailer()

    def write(self, path):
        """Writes the archive to path atomically (tmp + rename): a reader
        (QEMU starting a guest) never sees half an initramfs."""
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(self.bytes())
            f.flush()
            os.fsync(f.fileno())
        os.rename(tmp, path)


def _trailer():
    c = Cpio.__new__(Cpio)
    c.parts, c.ino = [], 0
    c.add("TRAILER!!!", 0)
    return c.parts[0]


# ---------------------------------------------------------------- QEMU

def host_khz():
    """The host's TSC rate in kHz, for tsc_early_khz= under TCG (without it
    the guest's PIT calibration fails about half the time and it hangs)."""
    try:
        with open("/sys/devices/system/cpu/cpu0/tsc_freq_khz") as f:
            return int(f.read())
    except (OSError, ValueError):
        pass
    for line in open("/proc/cpuinfo"):
        if line.startswith("cpu MHz"):
            return int(float(line.split(":")[1]) * 1000)
    return 2000000
