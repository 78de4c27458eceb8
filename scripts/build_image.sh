#!/usr/bin/env bash
# Build the local Debian 12 image (K26_IMAGE_SUITE=trixie: Debian 13) with systemd and python3 (no container registry):
# debootstrap a minimal root file system from the machine's own Debian mirror, import it into podman.
# The tag carries a hash of the recipe, so the image is rebuilt only when missing or when the recipe changes.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/image.env
# The image Molecule's scenarios name when K26_IMAGE is not exported: always this recipe's build (of Debian 12;
# another release's is SUITE-current).
CURRENT=localhost/k26-systemd:current
[ "$K26_IMAGE_SUITE" = bookworm ] || CURRENT=localhost/k26-systemd:$K26_IMAGE_SUITE-current
if podman image exists "$K26_IMAGE"; then
  podman tag "$K26_IMAGE" "$CURRENT"
  exit 0
fi
mirror=${K26_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # The machine's own apt source: deb822 files first, then the one-line format.
  mirror=$(grep -h '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}' | grep -v -- '-security' | head -n1 || true)
  [ -n "$mirror" ] || mirror=$(grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}' | grep -v -- '-security' | head -n1 || true)
fi
if [ -z "$mirror" ]; then
  echo "[image] no Debian mirror found in the apt sources; set K26_DEBIAN_MIRROR" >&2
  exit 1
fi
rootfs=$(mktemp -d /var/tmp/k26-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT
echo "[image] building $K26_IMAGE with debootstrap (about 90 s)"
debootstrap --variant=minbase --include="$K26_IMAGE_PACKAGES" "$K26_IMAGE_SUITE" "$rootfs" "$mirror" > "$rootfs.log" 2>&1 || {
  tail -n 30 "$rootfs.log" >&2; rm -f "$rootfs.log"; exit 1; }
rm -f "$rootfs.log"
# A container has no console to log in on; keep the boot quiet and quick.
chroot "$rootfs" systemctl mask getty.target systemd-logind.service console-getty.service >/dev/null 2>&1 || true
# The distribution's periodic jobs never run in a test container: they change files the tests hold still (at
# midnight dpkg-db-backup.timer wrote /var/backups/*.0 inside test_bad_input's "nothing changed" window: CI of f9e8a55).
chroot "$rootfs" systemctl mask apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer \
  fstrim.timer >/dev/null 2>&1 || true
# Ansible's modules compiled once per container instead of once per module run (the file says why)
site=$(chroot "$rootfs" python3 -c 'import site; print(site.getsitepackages()[0])')
mkdir -p "$rootfs$site" "$rootfs/var/cache/k26-zipimport"
install -m 0644 "$K26_IMAGE_ZIPIMPORT_CACHE" "$rootfs$site/k26_zipimport_cache.py"
echo 'import k26_zipimport_cache' >"$rootfs$site/k26_zipimport_cache.pth"
# Prometheus runs only where the sglang_monitoring role enables it, not in every test container.
chroot "$rootfs" systemctl disable prometheus.service >/dev/null
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | podman import --change 'CMD ["/lib/systemd/systemd"]' - "$K26_IMAGE" >/dev/null
podman tag "$K26_IMAGE" "$CURRENT"
echo "[image] built $K26_IMAGE (also $CURRENT)"
