#!/usr/bin/python3
"""microvm-assets.py — owns the three files the microvm driver boots
(docs/microvm.md, "Kernel, initramfs and root filesystem"):

  kernel  --cache DIR                      Debian bookworm's cloud kernel, fetched
                                           into DIR (never installed); prints the
                                           vmlinuz path and the modules dir
  initrd  --cache DIR --sbx-vm P --sbx-init P --out FILE
                                           newc cpio: /init (sbx-vm), /sbx-init, the
                                           virtio/squashfs/overlay modules and their
                                           load order
  rootfs  --out FILE [--extra PATH ...]    the host pack as a read-only squashfs
  all     --cache DIR --build B --out O    all three into O as vmlinuz, initrd.img,
                                           rootfs.sqfs

Stdlib only (/usr/bin/python3); the Debian kernel code is shared with the host
lab through scripts/debkernel.py.
"""
import argparse
import concurrent.futures
import hashlib
import os
import shutil
import stat
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import debkernel  # noqa: E402

DEFAULT_CACHE = "/var/cache/sandboxd/microvm"
SUITE, META = "bookworm", "linux-image-cloud-amd64"
# What sbx-vm loads before it can talk to the host and mount the root:
# virtio_mmio (microvm's transport, found through the ACPI DSDT), the
# console port (the sbx.link channel), the block device holding rootfs.sqfs,
# the network device, squashfs itself and overlay for the writable upper.
MODULES = ["virtio_mmio", "virtio_console", "virtio_blk", "virtio_net", "squashfs", "overlay"]


def log(msg):
    print("microvm-assets: " + msg, file=sys.stderr, flush=True)


def die(msg):
    log(msg)
    sys.exit(1)


# ---------------------------------------------------------------- kernel

def kernel(cache):
    """(vmlinuz, moddir, release) of the cached cloud kernel, fetched first
    when apt can reach the archive."""
    try:
        return debkernel.fetch_kernel(cache, SUITE, META, log=log)
    except (RuntimeError, OSError, IndexError) as e:
        die(f"kernel: {e}")


def cmd_kernel(args):
    vmlinuz, moddir, _rel = kernel(args.cache)
    print(f"vmlinuz {vmlinuz}")
    print(f"modules {moddir}")


# ---------------------------------------------------------------- initrd

def build_initrd(moddir, release, sbx_vm, sbx_init, out):
    """Writes the initramfs for the kernel whose modules are in moddir to
    out; returns (module file names, bytes).

    Uncompressed on purpose: under TCG the kernel's inflate runs emulated,
    on every sandbox start, while the archive is small (two static binaries
    and ~1 MB of modules, ~2.5-3 MB in all) and would shrink by only a
    couple of MB: disk and page cache are cheaper than boot time here."""
    order, blobs, absent = debkernel.module_closure(moddir, MODULES)
    missing = [m for m in absent if m in MODULES]
    if missing:
        die(f"initrd: {release} has no module {', '.join(missing)} (and it is not built in)")
    width = max(2, len(str(len(order))))
    names = [f"{i + 1:0{width}d}-{name}.ko" for i, name in enumerate(order)]
    entries = {}  # path in the archive -> (kind, payload): emitted sorted
    for d in ("dev", "proc", "sys", "newroot", "modules"):
        entries[d] = ("dir", None)
    entries["dev/console"] = ("chr", (5, 1))  # the kernel opens it for PID 1's stdio before devtmpfs
    for path, src in (("init", sbx_vm), ("sbx-init", sbx_init)):
        with open(src, "rb") as f:
            entries[path] = ("exe", f.read())
    for fname, name in zip(names, order):
        entries["modules/" + fname] = ("file", blobs[name])
    entries["modules/order"] = ("file", "".join(n + "\n" for n in names).encode())
    c = debkernel.Cpio()
    for path in sorted(entries):  # sorted: parents before children, same bytes every run
        kind, payload = entries[path]
        if kind == "dir":
            c.dir(path)
        elif kind == "chr":
            c.chardev(path, *payload)
        else:
            c.file(path, payload, 0o755 if kind == "exe" else 0o644)
    c.write(out)
    return names, os.path.getsize(out)


def cmd_initrd(args):
    for p in (args.sbx_vm, args.sbx_init):
        if not os.path.isfile(p):
            die(f"initrd: {p}: no such file")
    t0 = time.time()
    _vmlinuz, moddir, release = kernel(args.cache)
    names, size = build_initrd(moddir, release, args.sbx_vm, args.sbx_init, args.out)
    print(f"initrd {args.out} {size} bytes, {len(names)} modules "
          f"({' '.join(n[:-3] for n in names)}), {time.time() - t0:.1f} s")


# ---------------------------------------------------------------- rootfs

# Debian packages whose programs and libraries the image carries: the
# interpreters sandboxes run and the everyday tools of the container driver's
# host pack (which binds the host's whole /usr; an image cannot, so it takes
# what code in a sandbox commonly calls).  Missing packages are skipped.
PACKAGES = [
    "bash", "dash", "coreutils", "grep", "sed", "mawk", "findutils", "diffutils", "patch",
    "tar", "gzip", "bzip2", "xz-utils", "zstd", "unzip", "zip", "debianutils", "less",
    "procps", "file", "libmagic-mgc", "bsdextrautils", "hostname", "jq", "sqlite3", "curl",
    "wget", "ca-certificates", "netbase", "tzdata", "util-linux", "git",
    "python3", "python3-minimal", "python3.11", "python3.11-minimal", "libpython3.11-minimal",
    "libpython3.11-stdlib", "nodejs",
]
# Whole trees, walked on disk rather than taken from dpkg -L, because they
# hold files no package lists: the stdlib's __pycache__ (compiled at install
# time; without it every cold python start recompiles under TCG), npm's
# tree, the generated certificate links.
TREES = ["/usr/lib/python3.11", "/usr/lib/node_modules", "/etc/ssl/certs"]
# Never copied: documentation, headers, and the 25 MB static libpython for
# embedding.  (/etc is synthesized, except ETC_KEEP.)
EXCLUDE = ["/usr/share/doc", "/usr/share/man", "/usr/share/info", "/usr/share/locale",
           "/usr/share/lintian", "/usr/share/bash-completion", "/usr/share/menu",
           "/usr/include", "/usr/lib/python3.11/config-3.11-x86_64-linux-gnu",
           "/usr/lib/python3.11/test", "/etc",
           # tkinter's C half: no display in a sandbox, and it drags in Tcl/Tk and X11
           "/usr/lib/python3.11/lib-dynload/_tkinter.cpython-311-x86_64-linux-gnu.so"]
ETC_KEEP = ["/etc/ssl", "/etc/services", "/etc/protocols", "/etc/python3.11", "/etc/magic",
            "/etc/magic.mime", "/etc/localtime"]
# The top-level dirs the host has as links into /usr (merged /usr), made the
# same in the image, as the container driver does (isolation/box.c).
TOPS = ["bin", "sbin", "lib", "lib32", "lib64", "libx32"]
MOUNTPOINTS = {"proc": 0o555, "sys": 0o555, "dev": 0o755, "tmp": 0o1777, "work": 0o755,
               "run": 0o755, "root": 0o700, "home": 0o755}
# /etc as the container driver writes it for a host-pack sandbox
# (isolation/mount.c, etc_files): same users, same resolver order.
ETC_FILES = {
    "passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n"
              "sandbox:x:1000:1000:sandbox:/work:/bin/sh\n"
              "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "group": "root:x:0:\ntty:x:5:\nsandbox:x:1000:\nnogroup:x:65534:\n",
    "hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    "hostname": "sandbox\n",
    "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                     "networks: files\nprotocols: files\nservices: files\n",
    "resolv.conf": "# no network in this sandbox\n",
}
MKSQUASHFS = ["-comp", "lz4", "-noappend", "-all-root", "-mkfs-time", "0", "-all-time", "0",
              "-no-progress", "-quiet"]


def excluded(path):
    if any(path == k or path.startswith(k + "/") for k in ETC_KEEP):
        return False
    return any(path == x or path.startswith(x + "/") for x in EXCLUDE)


def package_files(packages):
    """The non-directory files of the installed ones of packages."""
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Status}\n", *packages],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    have = [ln.split()[0] for ln in out.splitlines() if ln.endswith("install ok installed")]
    skipped = sorted(set(packages) - set(have))
    if skipped:
        log(f"rootfs: not installed, skipped: {' '.join(skipped)}")
    listing = debkernel.run(["dpkg", "-L", *have]).stdout.splitlines()
    return [p for p in listing if p.startswith("/") and not excluded(p)
            and os.path.lexists(p) and (os.path.islink(p) or not os.path.isdir(p))]


class Tree:
    """The image's contents as {path in image: host path or None (a
    directory)}, each added path with every symlink on the way to its file,
    so /bin/awk -> /etc/alternatives/awk -> /usr/bin/mawk arrives whole."""

    def __init__(self):
        self.files, self.dirs = {}, set()

    def add(self, path):
        path = os.path.normpath(path)
        if path in ("/", ""):
            return
        # canonical parent: /lib/x86_64-linux-gnu/libc.so.6 lives in
        # /usr/lib/…, and the image gets /lib -> usr/lib like the host
        parent = os.path.realpath(os.path.dirname(path))
        path = os.path.join(parent, os.path.basename(path))
        if path in self.files or path in self.dirs or not os.path.lexists(path):
            return
        if os.path.islink(path):
            self.files[path] = path
            target = os.readlink(path)
            self.add(os.path.join(parent, target))
        elif os.path.isdir(path):
            self.dirs.add(path)
        else:
            self.files[path] = path
        while parent != "/":
            self.dirs.add(parent)
            parent = os.path.dirname(parent)

    def add_tree(self, top):
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = sorted(d for d in dirnames if not excluded(os.path.join(dirpath, d)))
            self.add(dirpath)
            for n in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
                if not excluded(os.path.join(dirpath, n)):
                    self.add(os.path.join(dirpath, n))


LOADER = "/lib64/ld-linux-x86-64.so.2"


def is_dynamic_elf(path):
    """True for an ELF file with a PT_DYNAMIC segment (a dynamic executable
    or shared object): the loader can list its needs.  Static binaries are
    left out, since `ld.so --list` crashes on them (ldd checks the same)."""
    try:
        with open(path, "rb") as f:
            hdr = f.read(64)
            if len(hdr) < 64 or hdr[:4] != b"\x7fELF" or hdr[4] != 2:  # 64-bit only
                return False
            phoff, = struct.unpack_from("<Q", hdr, 0x20)
            phentsize, phnum = struct.unpack_from("<HH", hdr, 0x36)
            f.seek(phoff)
            ph = f.read(phentsize * phnum)
        return any(struct.unpack_from("<I", ph, i * phentsize)[0] == 2 for i in range(phnum))
    except (OSError, struct.error):
        return False


def needed_libs(path):
    """The libraries path needs, as ldd reports them.  ldd is a shell
    wrapper around the loader's --list; calling the loader directly gives
    the same closure (it is the real loader's search) at 1/8 of the cost,
    which is most of this script's run time."""
    r = subprocess.run([LOADER, "--list", path], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL, text=True, timeout=30)
    libs = []
    for line in r.stdout.splitlines():
        line = line.strip()
        lib = line.split("=>", 1)[1] if "=>" in line else line
        lib = lib.split("(")[0].strip()
        if lib.startswith("/"):
            libs.append(lib)
        elif "not found" in line:
            log(f"rootfs: {path}: {line}")
    return libs


def ldd_closure(tree):
    """Adds the shared libraries every dynamic ELF file in tree needs (the
    loader lists the whole closure, so one pass is enough)."""
    elves = sorted(p for p in tree.files if not os.path.islink(p) and is_dynamic_elf(p))
    with concurrent.futures.ThreadPoolExecutor(len(os.sched_getaffinity(0)) * 2) as pool:
        needed = set(lib for libs in pool.map(needed_libs, elves) for lib in libs)
    for lib in sorted(needed):
        tree.add(lib)
    return len(elves)


def rootfs_tree(extras):
    tree = Tree()
    for p in package_files(PACKAGES):
        tree.add(p)
    for top in TREES + list(extras):
        if os.path.isdir(top) and not os.path.islink(top):
            tree.add_tree(top)
        elif os.path.lexists(top):
            tree.add(top)
        else:
            log(f"rootfs: {top}: absent, skipped")
    tree.add("/etc/ld.so.cache")
    add_alternatives(tree)
    for top in TOPS:
        if os.path.islink("/" + top):
            tree.add("/" + top)
    nelf = ldd_closure(tree)
    return tree, nelf


def add_alternatives(tree):
    """The /usr/bin names that reach a program of the tree through
    /etc/alternatives (awk -> mawk, pager -> less): maintainer scripts make
    them, so no dpkg -L lists them."""
    for bindir in ("/usr/bin", "/usr/sbin"):
        for n in sorted(os.listdir(bindir)):
            p = os.path.join(bindir, n)
            if os.path.islink(p) and os.readlink(p).startswith("/etc/alternatives/") \
                    and os.path.realpath(p) in tree.files:
                tree.add(p)


def tree_key(tree):
    """sha256 over everything that decides the image's bytes: each path with
    its type, size, mode and mtime (or link target), this script and the
    mksquashfs options."""
    h = hashlib.sha256()
    with open(os.path.abspath(__file__), "rb") as f:
        h.update(f.read())
    h.update(" ".join(MKSQUASHFS).encode())
    for p in sorted(tree.files):
        st = os.lstat(p)
        extra = os.readlink(p) if stat.S_ISLNK(st.st_mode) else f"{st.st_size} {st.st_mtime_ns}"
        h.update(f"{p}\0{st.st_mode:o}\0{extra}\n".encode())
    for d in sorted(tree.dirs):
        h.update(f"{d}/\n".encode())
    return h.hexdigest()


def stage(tree, root):
    """The image's tree under root: hard links to the host's files where the
    filesystem allows (no copy; mksquashfs reads through them), copies
    otherwise, and for set-id files (the bits are dropped: nothing in a
    sandbox may gain privilege from the image)."""
    os.makedirs(root)
    for d in sorted(tree.dirs):
        os.makedirs(root + d, exist_ok=True)
    for p in sorted(tree.files):
        dst = root + p
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(p), dst)
        elif st.st_mode & (stat.S_ISUID | stat.S_ISGID):
            shutil.copyfile(p, dst)
            os.chmod(dst, stat.S_IMODE(st.st_mode) & 0o777)
        else:
            try:
                os.link(p, dst)
            except OSError:
                shutil.copy2(p, dst)
    etc = os.path.join(root, "etc")
    os.makedirs(etc, exist_ok=True)
    for name, text in ETC_FILES.items():
        with open(os.path.join(etc, name), "w") as f:
            f.write(text)
    for name, mode in MOUNTPOINTS.items():
        os.makedirs(os.path.join(root, name), exist_ok=True)
        os.chmod(os.path.join(root, name), mode)


def build_rootfs(out, extras, force=False):
    """Builds out unless its sidecar out.key already names this input;
    returns (built?, size, seconds)."""
    t0 = time.time()
    if not shutil.which("mksquashfs"):
        die("rootfs: mksquashfs not found (apt-get install squashfs-tools, or "
            "scripts/install-deps.sh)")
    tree, nelf = rootfs_tree(extras)
    key = tree_key(tree)
    keyfile = out + ".key"
    if not force and os.path.exists(out) and os.path.exists(keyfile) \
            and open(keyfile).read().strip() == key:
        return False, os.path.getsize(out), time.time() - t0
    staging, tmp = out + ".staging", f"{out}.tmp{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        stage(tree, staging)
        nproc = str(max(1, len(os.sched_getaffinity(0))))
        r = subprocess.run(["mksquashfs", staging, tmp, *MKSQUASHFS, "-processors", nproc],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            die(f"rootfs: mksquashfs failed:\n{r.stdout}")
        os.rename(tmp, out)
        with open(keyfile + ".tmp", "w") as f:
            f.write(key + "\n")
        os.rename(keyfile + ".tmp", keyfile)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if os.path.exists(tmp):
            os.unlink(tmp)
    log(f"rootfs: {len(tree.files)} files ({nelf} ELF) from {len(PACKAGES)} packages and "
        f"{len(TREES) + len(extras)} trees")
    return True, os.path.getsize(out), time.time() - t0


def cmd_rootfs(args):
    built, size, secs = build_rootfs(args.out, args.extra or [], args.force)
    print(f"rootfs {args.out} {size} bytes ({size / 1048576:.1f} MiB), "
          f"{'built' if built else 'unchanged'} in {secs:.1f} s")


# ---------------------------------------------------------------- all

def replace_symlink(target, link):
    tmp = f"{link}.tmp{os.getpid()}"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.rename(tmp, link)


def cmd_all(args):
    os.makedirs(args.out, exist_ok=True)
    sbx_vm = os.path.join(args.build, "src", "vm", "sbx-vm")
    sbx_init = os.path.join(args.build, "src", "init", "sbx-init")
    for p in (sbx_vm, sbx_init):
        if not os.path.isfile(p):
            die(f"all: {p}: no such file (build first: make)")
    t0 = time.time()
    vmlinuz, moddir, release = kernel(args.cache)
    replace_symlink(vmlinuz, os.path.join(args.out, "vmlinuz"))
    print(f"vmlinuz {os.path.join(args.out, 'vmlinuz')} -> {vmlinuz} ({release})")
    initrd = os.path.join(args.out, "initrd.img")
    names, size = build_initrd(moddir, release, sbx_vm, sbx_init, initrd)
    print(f"initrd {initrd} {size} bytes, {len(names)} modules")
    rootfs = os.path.join(args.out, "rootfs.sqfs")
    built, size, secs = build_rootfs(rootfs, args.extra or [])
    print(f"rootfs {rootfs} {size} bytes ({size / 1048576:.1f} MiB), "
          f"{'built' if built else 'unchanged'} in {secs:.1f} s")
    print(f"all done in {time.time() - t0:.1f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("kernel", help="fetch the Debian cloud kernel into the cache")
    k.add_argument("--cache", default=DEFAULT_CACHE)
    i = sub.add_parser("initrd", help="the initramfs: sbx-vm as /init, sbx-init, modules")
    i.add_argument("--cache", default=DEFAULT_CACHE)
    i.add_argument("--sbx-vm", required=True, help="the binary that becomes /init")
    i.add_argument("--sbx-init", required=True)
    i.add_argument("--out", required=True)
    r = sub.add_parser("rootfs", help="the host pack as a read-only squashfs image")
    r.add_argument("--out", required=True)
    r.add_argument("--extra", nargs="*", metavar="PATH",
                   help="more host files or trees (with their libraries), e.g. "
                        "/usr/lib/python3/dist-packages")
    r.add_argument("--force", action="store_true", help="rebuild even if the key matches")
    a = sub.add_parser("all", help="kernel, initrd and rootfs into OUT")
    a.add_argument("--cache", default=DEFAULT_CACHE)
    a.add_argument("--build", required=True, help="the meson build dir (sbx-vm, sbx-init)")
    a.add_argument("--out", required=True)
    a.add_argument("--extra", nargs="*", metavar="PATH", help="as for rootfs")
    args = ap.parse_args()
    {"kernel": cmd_kernel, "initrd": cmd_initrd, "rootfs": cmd_rootfs, "all": cmd_all}[args.cmd](args)


if __name__ == "__main__":
    main()
