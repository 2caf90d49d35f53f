#!/usr/bin/env bash
# What the image test needs on the host, from Debian's packages: podman, runc (crun refuses hybrid
# cgroup hosts such as CI's) and mmdebstrap (deploy/container/base.sh's base where no registry answers).
# catatonit: the pause process of the pods `podman kube play` starts.
set -euo pipefail
PACKAGES=(podman runc mmdebstrap uidmap catatonit)
missing=()
for pkg in "${PACKAGES[@]}"; do dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg"); done
[ ${#missing[@]} -gt 0 ] || exit 0
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
