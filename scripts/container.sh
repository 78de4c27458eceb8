#!/usr/bin/env bash
# Start (or reuse) a systemd container from the project's image.
#   scripts/container.sh NAME [extra podman run args...]
# Waits until systemd inside has finished booting. Used by the demo and the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/image.env
name=$1; shift
if [ "$(podman container inspect -f '{{.State.Running}}' "$name" 2>/dev/null)" != true ]; then
  podman rm -f "$name" >/dev/null 2>&1 || true
  # privileged: systemd inside needs to create the namespaces of hardened units (PrivateTmp, ProtectSystem).
  # Lower ulimits: some hosts cannot raise podman's defaults (no CAP_SYS_RESOURCE).
  podman run -d --name "$name" --hostname "$name" --privileged --systemd=always \
    --ulimit nofile=16384:16384 --ulimit nproc=8192:8192 "$@" "$K26_IMAGE" /lib/systemd/systemd >/dev/null
fi
for _ in $(seq 1 100); do
  state=$(podman exec "$name" systemctl is-system-running 2>/dev/null || true)
  case "$state" in running|degraded) exit 0 ;; esac
  sleep 0.2
done
echo "[container] $name: systemd did not finish booting (state: ${state:-unknown})" >&2
exit 1
