#!/bin/busybox sh
# init.sh — /init of the host lab's initramfs (lab.py builds it): loads the
# kernel's own modules, mounts the host's userland read-only (virtiofs tag
# "hostroot") under a tmpfs overlay so the guest may write anywhere without
# touching the host, mounts the results share (tag "labout"), gives /tmp,
# /run and the state dirs their own tmpfs, and hands over to the guest runner
# named by lab.guest= on the kernel command line.  Every failure powers the
# guest off: lab.py sees no results and fails the host, never waits forever.
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

mount --move /proc /newroot/proc
mount --move /sys /newroot/sys
mount --move /dev /newroot/dev
mkdir -p /newroot/dev/pts /newroot/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts /newroot/dev/pts
mount -t tmpfs -o mode=1777 shm /newroot/dev/shm
ip link set lo up

guest="$(arg lab.guest)"
[ -n "$guest" ] || die "no lab.guest= on the command line"
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
