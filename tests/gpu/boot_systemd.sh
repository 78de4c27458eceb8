#!/usr/bin/env bash
# Boot a real systemd on a GPU machine whose PID 1 is not systemd (a container or microVM image), from the
# Debian 12 packages tests/gpu/fetch.sh put into DEBS (default .gpu/debs). systemd becomes PID 1 of new
# pid/mount/cgroup namespaces, on a cgroup2 hierarchy of its own and a tmpfs on /run; it logs to the kernel log.
# Prints the PID (as seen from here) of that systemd; run commands inside with
#   nsenter -t PID -p -m COMMAND
# Reuses a systemd that is already running. Verified on the device tool's nvidia-h200 (Ubuntu 24.04, kernel 6.18).
set -euo pipefail
DEBS=${1:-.gpu/debs}

running() {
  local pid
  pid=$(pgrep -x systemd | head -n1 || true)
  [ -n "$pid" ] && nsenter -t "$pid" -p -m systemctl is-system-running 2>/dev/null | grep -qE '^(running|degraded)$' \
    && echo "$pid"
}

if pid=$(running); then echo "$pid"; exit 0; fi

# --keep-directory-symlink: the image's /lib is a symlink to usr/lib; dpkg -x would replace it by a directory.
for deb in "$DEBS"/*.deb; do
  dpkg-deb --fsys-tarfile "$deb" | tar -x --keep-directory-symlink --skip-old-files -C /
done
ldconfig
echo on > /proc/sys/kernel/printk_devkmsg 2>/dev/null || true

inner=$(mktemp /tmp/k26-systemd-inner.XXXXXX)
cat > "$inner" <<'INNER'
umount -l /sys/fs/cgroup 2>/dev/null || true
mount -t cgroup2 cgroup2 /sys/fs/cgroup
mount -t tmpfs tmpfs /run
mkdir -p /run/lock
exec env container=podman /lib/systemd/systemd --system --log-target=kmsg --log-level=info
INNER
outer=$(mktemp /tmp/k26-systemd-outer.XXXXXX)
cat > "$outer" <<OUTER
# systemd must not start in the caller's cgroup: give it one of its own first.
mkdir -p /sys/fs/cgroup/k26-systemd
echo \$\$ > /sys/fs/cgroup/k26-systemd/cgroup.procs
exec unshare --pid --fork --mount --cgroup --mount-proc --propagation private bash $inner
OUTER
setsid bash "$outer" >/dev/null 2>&1 </dev/null &

for _ in $(seq 1 60); do
  if pid=$(running); then echo "$pid"; exit 0; fi
  sleep 0.5
done
echo "[boot_systemd] systemd did not reach running; its messages:" >&2
dmesg | grep -i systemd | tail -n 20 >&2
exit 1
