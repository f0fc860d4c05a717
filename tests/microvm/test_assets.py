"""test_assets.py — the microVM assets (scripts/microvm-assets.py) for real:
the initramfs layout (modes, module order, reproducible bytes), the rootfs
cache key, and a smoke boot of the Debian cloud kernel under QEMU microvm
with smoke_init.c as /init in place of sbx-vm: modules load in the listed
order, the sbx.link port and /dev/vda appear, the squashfs root mounts and
holds python3.  Skips, saying why, without QEMU, gcc, mksquashfs or a cached
kernel (scripts/install-deps.sh fetches one).

  /usr/bin/python3 -m pytest -q tests/microvm/test_assets.py
"""
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "microvm-assets.py")
CACHE = os.environ.get("SANDBOXD_MICROVM_CACHE", "/var/cache/sandboxd/microvm")
QEMU = "qemu-system-x86_64"
BOOT_TIMEOUT = 90  # ~2 s under TCG; generous for a loaded 2-core CI host

sys.path.insert(0, os.path.join(REPO, "scripts"))
import debkernel  # noqa: E402


def assets(*args):
    r = subprocess.run(["/usr/bin/python3", SCRIPT, *args], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=300)
    assert r.returncode == 0, f"microvm-assets {' '.join(args)}:\n{r.stdout}\n{r.stderr}"
    return r.stdout


def cached_kernel():
    pointer = os.path.join(CACHE, "kernels", "bookworm-linux-image-cloud-amd64.current")
    if not os.path.exists(pointer):
        return None
    pkg = open(pointer).read().strip()
    return os.path.isdir(os.path.join(CACHE, "kernels", pkg, "boot"))


def need(tool, why):
    if not shutil.which(tool):
        pytest.skip(f"{tool} not installed ({why}; scripts/install-deps.sh installs it)")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """vmlinuz, the smoke initrd and the rootfs, built by the script."""
    need("gcc", "compiles the smoke init")
    need("mksquashfs", "squashfs-tools builds the rootfs")
    if not cached_kernel():
        pytest.skip(f"no cached microVM kernel in {CACHE} (run scripts/microvm-assets.py kernel "
                    "or scripts/install-deps.sh)")
    d = tmp_path_factory.mktemp("microvm")
    smoke = d / "smoke_init"
    subprocess.run(["gcc", "-static", "-O2", "-Wall", "-Werror", "-o", str(smoke),
                    os.path.join(HERE, "smoke_init.c")], check=True)
    out = assets("kernel", "--cache", CACHE)
    vmlinuz = out.split("vmlinuz ", 1)[1].split("\n")[0]
    # the smoke init stands in for both binaries: only the layout is tested
    assets("initrd", "--cache", CACHE, "--sbx-vm", str(smoke), "--sbx-init", str(smoke),
           "--out", str(d / "initrd.img"))
    rootfs_out = assets("rootfs", "--out", str(d / "rootfs.sqfs"))
    return {"dir": d, "vmlinuz": vmlinuz, "smoke": smoke, "initrd": d / "initrd.img",
            "rootfs": d / "rootfs.sqfs", "rootfs_out": rootfs_out}


def read_newc(path):
    """{name: (mode, rdev major, rdev minor, data)} of a newc archive."""
    data, off, out = open(path, "rb").read(), 0, {}
    while True:
        assert data[off:off + 6] == b"070701", f"bad cpio magic at {off}"
        f = [int(data[off + 6 + 8 * i:off + 14 + 8 * i], 16) for i in range(13)]
        mode, size, rmaj, rmin, namesize = f[1], f[6], f[9], f[10], f[11]
        name = data[off + 110:off + 110 + namesize - 1].decode()
        off += 110 + namesize
        off += -off % 4
        if name == "TRAILER!!!":
            return out
        out[name] = (mode, rmaj, rmin, data[off:off + size])
        off += size
        off += -off % 4


def test_initrd_layout(built):
    ent = read_newc(built["initrd"])
    smoke = open(built["smoke"], "rb").read()
    for name in ("init", "sbx-init"):
        assert ent[name][0] == stat.S_IFREG | 0o755 and ent[name][3] == smoke
    for d in ("dev", "proc", "sys", "newroot", "modules"):
        assert stat.S_ISDIR(ent[d][0]), d
    assert ent["dev/console"][:3] == (stat.S_IFCHR | 0o600, 5, 1)
    order = ent["modules/order"][3].decode().split()
    mods = sorted(n[len("modules/"):] for n in ent if n.startswith("modules/") and n.endswith(".ko"))
    assert sorted(order) == mods and order == sorted(order), "order lists every module, NN-prefixed"
    names = [o.split("-", 1)[1][:-3] for o in order]
    for want in ("virtio_console", "virtio_blk", "virtio_net", "squashfs", "overlay"):
        assert want in names
    # dependencies first: each module's depends= are earlier in the list
    for i, o in enumerate(order):
        for dep in debkernel.modinfo_depends(ent["modules/" + o][3]):
            assert dep.replace("-", "_") in names[:i], f"{o} needs {dep} before it"
    assert list(ent) == sorted(ent), "entries sorted"


def test_initrd_reproducible(built):
    again = built["dir"] / "initrd2.img"
    assets("initrd", "--cache", CACHE, "--sbx-vm", str(built["smoke"]),
           "--sbx-init", str(built["smoke"]), "--out", str(again))
    assert open(again, "rb").read() == open(built["initrd"], "rb").read()


def test_rootfs_rerun_is_noop(built):
    assert "built" in built["rootfs_out"]
    key = open(str(built["rootfs"]) + ".key").read()
    mtime = os.stat(built["rootfs"]).st_mtime_ns
    out = assets("rootfs", "--out", str(built["rootfs"]))
    assert "unchanged" in out
    assert os.stat(built["rootfs"]).st_mtime_ns == mtime
    assert open(str(built["rootfs"]) + ".key").read() == key


def test_smoke_boot(built):
    need(QEMU, "boots the smoke guest")
    d = built["dir"]
    sock = str(d / "link.sock")
    cmdline = (f"console=ttyS0 quiet reboot=k panic=-1 tsc_early_khz={debkernel.host_khz()} "
               "tsc=reliable no_timer_check pci=off i8042.noaux i8042.nokbd i8042.nopnp "
               "8250.nr_uarts=1 random.trust_cpu=on")
    # ACPI stays on: the Debian kernel finds microvm's virtio-mmio devices
    # only through its DSDT (no virtio_mmio.device= support)
    args = [QEMU, "-M", "microvm,x-option-roms=off,isa-serial=on,pcie=off", "-accel", "tcg",
            "-cpu", "max", "-m", "256", "-smp", "1", "-nodefaults", "-no-user-config",
            "-nographic", "-no-reboot", "-serial", "stdio", "-kernel", built["vmlinuz"],
            "-initrd", str(built["initrd"]), "-append", cmdline,
            "-device", "virtio-serial-device",
            "-chardev", f"socket,id=c0,path={sock},server=on,wait=off",
            "-device", "virtserialport,chardev=c0,name=sbx.link",
            "-drive", f"file={built['rootfs']},if=none,id=d0,format=raw,readonly=on",
            "-device", "virtio-blk-device,drive=d0"]
    t0 = time.time()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=BOOT_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, _ = p.communicate()
        pytest.fail(f"guest still running after {BOOT_TIMEOUT} s:\n{out.decode(errors='replace')}")
    secs = time.time() - t0
    text = out.decode(errors="replace")
    assert "SMOKE OK" in text, text
    assert p.returncode == 0, text
    # the number docs/microvm.md quotes: spawn to power-off, TCG
    print(f"\nsmoke boot: {secs:.2f} s spawn to power-off;",
          " ".join(ln for ln in text.splitlines() if ln.startswith("SMOKE ")))
