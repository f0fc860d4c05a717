#!/bin/busybox sh
# init.sh — /init of the host lab's initramfs (lab.py builds it): loads the
# kernel's own modules, mounts the host's userland read-only (virtiofs tag
# "hostroot") under a tmpfs overlay so the guest may write anywhere without
# touching the host, mounts the results share (tag "labout"), gives /tmp,
# /run and the state dirs their own tmpfs, and hands over to the guest runner
# named by lab.guest= on the kernel command line: through a reaping shell,
# or (lab.init=systemd) through the host's systemd as PID 1.  Every failure
# powers the guest off: lab.py sees no results and fails the host, never
# waits forever.
/bin/busybox --install -s /bin
export PATH=/bin

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "LAB_MARK_INIT"
cmdline="$(cat /proc/cmdline)"

die() {
  echo "LAB_FATAL $*"
  poweroff -f
  sleep 60
}

arg() {  # arg NAME: the value of NAME= on the kernel command line
  for w in $cmdline; do
    case "$w" in "$1"=*) echo "${w#*=}"; return ;; esac
  done
}

while read -r m; do
  [ -n "$m" ] || continue
  insmod "/modules/$m.ko" 2>/tmp/insmod.err ||
    echo "lab: insmod $m: $(cat /tmp/insmod.err): $(dmesg | tail -n 2 | tr '\n' ' ')"
done </modules.order

if [ "$(arg lab.probe)" = 1 ]; then
  echo "LAB_PROBE_OK"
  poweroff -f
  sleep 60
fi

mkdir -p /lower /upper /newroot
mount -t virtiofs -o ro hostroot /lower || die "mount virtiofs hostroot"
mount -t tmpfs -o mode=0755,size=75% upper /upper || die "mount tmpfs upper"
mkdir -p /upper/u /upper/w
mount -t overlay -o lowerdir=/lower,upperdir=/upper/u,workdir=/upper/w overlay /newroot \
  || die "mount overlay root"
mkdir -p /newroot/lab/out
mount -t virtiofs labout /newroot/lab/out || die "mount virtiofs labout"

# State lives on a real filesystem, as on a host: an ext4 scratch disk
# (an overlay cannot take another overlay's directory as its upper, and
# tmpfs cannot be idmapped before 6.3, which a host's disk can).  The
# directories in lab.tmpfs= (Debian 13: /tmp) get a tmpfs instead.
mkdir -p /newroot/lab/scratch
mount -t ext4 /dev/vda /newroot/lab/scratch || die "mount the ext4 scratch disk"
mount -t tmpfs -o mode=0755 tmpfs /newroot/run || die "mount tmpfs /run"
tmpfs=",$(arg lab.tmpfs),"
for d in tmp var/tmp var/lib/sandboxd var/cache/sandboxd-test root; do
  mkdir -p "/newroot/$d" "/newroot/lab/scratch/$d"
  case "$tmpfs" in
    *",$d,"*) mount -t tmpfs -o mode=0755 tmpfs "/newroot/$d" || die "mount tmpfs /$d" ;;
    *) mount --bind "/newroot/lab/scratch/$d" "/newroot/$d" || die "bind /$d" ;;
  esac
done
chmod 1777 /newroot/tmp /newroot/var/tmp

# The project tree the suites run from may live under a directory the loop
# above replaced (a CI clone in /tmp or /root): lay the host's copy back
# over it, writable through an overlay of its own as / is.
guest="$(arg lab.guest)"
repo="${guest%/tests/hosts/guest.py}"
if [ -n "$repo" ] && [ ! -e "/newroot$guest" ]; then
  mkdir -p /upper/repo/u /upper/repo/w "/newroot$repo"
  mount -t overlay -o "lowerdir=/lower$repo,upperdir=/upper/repo/u,workdir=/upper/repo/w" \
    overlay "/newroot$repo" || die "mount the project tree at $repo"
fi

mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 shm /newroot/dev/shm
ip link set lo up

[ -n "$guest" ] || die "no lab.guest= on the command line"
if [ "$(arg lab.init)" = systemd ]; then
  # The host's own systemd as PID 1 (its state lands on the tmpfs overlay),
  # started into lab.target (--unit=): only the runner, as a Delegate=yes
  # service that powers the guest off when it ends (at once, as the shell
  # below does: systemd's own orderly shutdown hung past lab.py's budget).  No sysinit.target
  # (udev, journald, tmpfiles: hardware and log plumbing the lab does not
  # test, tens of seconds under TCG), no getty; units that want hardware
  # or a network are masked in case anything pulls them.
  [ -x /newroot/lib/systemd/systemd ] || die "lab.init=systemd but no /lib/systemd/systemd"
  u=/newroot/etc/systemd/system
  mkdir -p "$u"
  cat >"$u/lab.target" <<EOF
[Unit]
Description=host lab: the runner only
DefaultDependencies=no
Wants=lab-runner.service
AllowIsolate=yes
EOF
  cat >"$u/lab-runner.service" <<EOF
[Unit]
Description=host lab runner
DefaultDependencies=no

[Service]
Type=exec
ExecStart=/bin/busybox sh -c '/usr/bin/python3 -u $guest /lab/out/spec.json; echo "LAB_GUEST_EXIT \$\$?"; sync; exec /bin/busybox poweroff -f'
Delegate=yes
StandardInput=null
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TTYReset=no
TTYVHangup=no
LimitNOFILE=1024:524288
TimeoutStartSec=infinity
FailureAction=poweroff-immediate
EOF
  for m in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
           systemd-udev-trigger.service systemd-networkd.service systemd-resolved.service \
           systemd-timesyncd.service networking.service getty@.service serial-getty@.service \
           console-getty.service systemd-logind.service sandboxd.service sandboxd.socket; do
    ln -sf /dev/null "$u/$m"
  done
  # This machine is a container: its /.dockerenv would make systemd take
  # the guest for one too (and then ignore the kernel's command line).
  rm -f /newroot/.dockerenv
  echo "LAB_ROOT_OK"
  exec switch_root /newroot /lib/systemd/systemd --unit=lab.target --show-status=error
fi
cat >/newroot/lab/stage2 <<EOF
#!/bin/busybox sh
# PID 1 after switch_root: a shell that reaps, runs the guest runner, powers off.
/usr/bin/python3 -u $guest /lab/out/spec.json
echo "LAB_GUEST_EXIT \$?"
sync
/bin/busybox poweroff -f
/bin/busybox sleep 60
EOF
chmod 0755 /newroot/lab/stage2
echo "LAB_ROOT_OK"
exec switch_root /newroot /bin/busybox sh /lab/stage2
