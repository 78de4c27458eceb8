#!/usr/bin/env bash
# Make podman use an OCI runtime that can start containers on this machine.
# crun refuses cgroups v1/"hybrid" hosts; runc works there. Where crun works, nothing is changed.
set -euo pipefail
conf=/etc/containers/containers.conf
runtime=$(podman info --format '{{.Host.OCIRuntime.Name}}' 2>/dev/null || echo unknown)
cgroups=$(podman info --format '{{.Host.CgroupsVersion}}' 2>/dev/null || echo unknown)
if [ "$runtime" = crun ] && [ "$cgroups" != v2 ]; then
  if [ -e "$conf" ] && ! grep -q 'k26deploy' "$conf"; then
    echo "[setup] $conf exists and podman uses crun on cgroups $cgroups: set runtime = \"runc\" under [engine] there" >&2
    exit 1
  fi
  echo "[setup] cgroups $cgroups: configuring podman to use runc ($conf)"
  mkdir -p "$(dirname "$conf")"
  printf '# written by k26deploy scripts/configure_podman.sh: crun cannot run on cgroups %s here\n[engine]\nruntime = "runc"\n' "$cgroups" > "$conf"
fi
