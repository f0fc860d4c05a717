"""boot_smoke.py — boots src/vm/boot.c for real: Debian bookworm's cloud
kernel in a QEMU microvm (TCG unless SANDBOXD_MICROVM_ACCEL=kvm), an
initramfs whose /init is tests/microvm/boot_smoke.c linked with boot.c, and a
squashfs root holding a static busybox.  The guest reports "BOOT OK
<hostname> <release>" (or "BOOT FAIL <why>") on the sbx.link virtio-serial
port; the console shows how long sbx_vm_boot took.

  pytest -s tests/microvm/boot_smoke.py

Skips when qemu, gcc, mksquashfs, busybox or the kernel (apt, cached under
$SANDBOXD_TEST_CACHE, default /var/cache/sandboxd-test, as the host lab's)
are missing.  Until the asset script (scripts/microvm-assets.py) lands, the
initramfs is built here with the same layout."""
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "hosts"))
import lab  # noqa: E402  (kernel fetch and module closure)

QEMU = "qemu-system-x86_64"
BUSYBOX = "/bin/busybox"
CACHE = os.environ.get("SANDBOXD_TEST_CACHE", "/var/cache/sandboxd-test")
MODULES = ["virtio_mmio", "virtio_console", "virtio_blk", "squashfs", "overlay"]
CFLAGS = ["-std=gnu11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-O2", "-static"]
BOOT_TIMEOUT = 60  # TCG reaches /init in ~2 s; a loaded CI host is slower


def need(tool):
    if not shutil.which(tool):
        pytest.skip(f"{tool} not installed")


class Cpio:
    """newc archive: what the kernel unpacks as an initramfs."""

    def __init__(self):
        self.parts, self.ino = [], 1

    def add(self, name, mode, data=b"", rdev=(0, 0)):
        nb = name.encode() + b"\0"
        fields = (self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(nb), 0)
        self.ino += 1
        blob = ("070701" + "".join(f"{v:08X}" for v in fields)).encode() + nb
        blob += b"\0" * (-len(blob) % 4) + data
        self.parts.append(blob + b"\0" * (-len(blob) % 4))

    def bytes(self):
        self.add("TRAILER!!!", 0)
        return b"".join(self.parts)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    for tool in (QEMU, "gcc", "mksquashfs"):
        need(tool)
    if not os.path.exists(BUSYBOX):
        pytest.skip(f"{BUSYBOX} missing")
    try:
        vmlinuz, moddir, release = lab.fetch_kernel(CACHE, "bookworm", "linux-image-cloud-amd64")
    except Exception as e:  # no network and nothing cached
        pytest.skip(f"no bookworm cloud kernel: {e}")
    d = tmp_path_factory.mktemp("bootsmoke")
    init = d / "boot_smoke"
    subprocess.run(["gcc", *CFLAGS, "-I", os.path.join(REPO, "src"), "-o", str(init),
                    os.path.join(HERE, "boot_smoke.c"), os.path.join(REPO, "src/vm/boot.c")],
                   check=True)
    order, blobs, absent = lab.module_closure(moddir, MODULES)
    assert not [m for m in absent if m in MODULES], f"{release} lacks {absent}"
    root = d / "rootdir"
    (root / "usr/bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "usr/bin/busybox")
    os.symlink("usr/bin", root / "bin")
    sqfs = d / "root.sqfs"
    subprocess.run(["mksquashfs", str(root), str(sqfs), "-noappend", "-quiet", "-all-root"],
                   check=True, stdout=subprocess.DEVNULL)
    return {"dir": d, "vmlinuz": vmlinuz, "release": release, "init": init, "sqfs": sqfs,
            "order": order, "blobs": blobs}


def sbx_init_binary():
    """Any static binary will do: boot only copies it into a memfd."""
    built = os.path.join(REPO, "build", "src", "init", "sbx-init")
    return built if os.path.exists(built) else BUSYBOX


def initramfs(a, path, console_node=True):
    """The asset script's layout: /init, /sbx-init, /modules/NN-name.ko and
    /modules/order, empty /dev /proc /sys /newroot (plus /dev/console, which
    the asset script adds; without it the kernel starts /init with no fds)."""
    c = Cpio()
    for dname in ("dev", "proc", "sys", "newroot", "modules"):
        c.add(dname, stat.S_IFDIR | 0o755)
    if console_node:
        c.add("dev/console", stat.S_IFCHR | 0o600, rdev=(5, 1))
    c.add("init", stat.S_IFREG | 0o755, a["init"].read_bytes())
    c.add("sbx-init", stat.S_IFREG | 0o755, open(sbx_init_binary(), "rb").read())
    names = [f"{i + 1:02d}-{n}.ko" for i, n in enumerate(a["order"])]
    for fname, n in zip(names, a["order"]):
        c.add("modules/" + fname, stat.S_IFREG | 0o644, a["blobs"][n])
    c.add("modules/order", stat.S_IFREG | 0o644, ("\n".join(names) + "\n").encode())
    path.write_bytes(c.bytes())


def boot(a, name, extra_cmdline, console_node=True, link=True):
    """Boots one guest; returns (link line, console text)."""
    d = a["dir"]
    initrd, sock = d / f"{name}.cpio", d / f"{name}.sock"
    initramfs(a, initrd, console_node)
    cmdline = (f"console=ttyS0 quiet reboot=k panic=-1 tsc_early_khz={lab.host_khz()} "
               "tsc=reliable no_timer_check pci=off i8042.noaux i8042.nokbd i8042.nopnp "
               "8250.nr_uarts=1 random.trust_cpu=on " + extra_cmdline)
    accel = os.environ.get("SANDBOXD_MICROVM_ACCEL", "tcg")
    cmd = [QEMU, "-M", "microvm,x-option-roms=off,isa-serial=on,pcie=off", "-accel", accel,
           "-cpu", "max" if accel == "tcg" else "host", "-m", "256", "-smp", "1",
           "-nodefaults", "-no-user-config", "-nographic", "-no-reboot", "-serial", "stdio",
           "-kernel", a["vmlinuz"], "-initrd", str(initrd), "-append", cmdline,
           "-device", "virtio-serial-device",
           "-chardev", f"socket,id=c0,path={sock},server=on,wait=off",
           "-device", f"virtserialport,chardev=c0,name={'sbx.link' if link else 'other'}",
           "-drive", f"file={a['sqfs']},if=none,id=d0,format=raw,readonly=on",
           "-device", "virtio-blk-device,drive=d0"]
    log = open(d / f"{name}.console", "wb")
    qemu = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        line = read_link(sock, qemu)
        qemu.wait(timeout=BOOT_TIMEOUT)
    finally:
        if qemu.poll() is None:
            qemu.kill()
            qemu.wait()
        log.close()
    return line, (d / f"{name}.console").read_text(errors="replace")


def read_link(sock, qemu):
    """Connects to the port's chardev, reads one line, acks it with a byte."""
    deadline = time.monotonic() + BOOT_TIMEOUT
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    while True:
        try:
            s.connect(str(sock))
            break
        except (FileNotFoundError, ConnectionRefusedError):
            if qemu.poll() is not None or time.monotonic() > deadline:
                return ""
            time.sleep(0.02)
    buf = b""
    with s:
        while b"\n" not in buf and time.monotonic() < deadline and qemu.poll() is None:
            s.settimeout(max(0.1, deadline - time.monotonic()))
            try:
                chunk = s.recv(256)
            except socket.timeout:
                break
            if not chunk:
                break
            buf += chunk
        if b"\n" in buf:
            s.sendall(b"k")
    return buf.decode(errors="replace").strip()


def boot_ms(console):
    m = re.search(r"sbx-vm: booted in (\d+) ms \(([^)]*)\); (\d+) ms since the kernel", console)
    assert m, f"no timing line on the console:\n{console}"
    print(f"\nsbx_vm_boot: {m.group(1)} ms ({m.group(2)}); ready {m.group(3)} ms after "
          "the kernel started")
    return int(m.group(1))


def guest_clock(console):
    m = re.search(r"boot_smoke: clock (\d+)", console)
    assert m, console
    return int(m.group(1))


def test_boot(assets):
    t = int(time.time()) + 10 * 86400  # clearly not the RTC's idea of now
    line, console = boot(assets, "ok", f"sbx.hostname=test1 sbx.disk=67108864 sbx.time={t} "
                         f"sbx.seed={'ab' * 32} sbx.memory=268435456 sbx.future=1")
    assert line == f"BOOT OK test1 {assets['release']}", console
    assert "malformed" not in console, console
    assert t <= guest_clock(console) < t + BOOT_TIMEOUT, console
    boot_ms(console)


def test_malformed_keys_fall_back(assets):
    """Bad values are reported and defaulted; no /dev/console node in the
    initramfs: sbx_vm_boot opens devtmpfs's for fds 0-2."""
    line, console = boot(assets, "bad", "sbx.hostname=-x sbx.disk=12k sbx.seed=00 sbx.time=x",
                         console_node=False)
    assert line == f"BOOT OK sandbox {assets['release']}", console
    assert abs(guest_clock(console) - time.time()) < BOOT_TIMEOUT  # the RTC's time stays
    for key in ("hostname", "disk", "seed", "time"):
        assert f"ignoring malformed sbx.{key}" in console, console


def test_missing_port_is_reported(assets):
    """No port named sbx.link: boot gives up after its bound and says why."""
    line, console = boot(assets, "noport", "sbx.hostname=test1", link=False)
    assert line == "", console
    assert "no virtio-serial port named sbx.link after 5000 ms" in console, console
