#!/usr/bin/env bash
# The images' Debian bookworm base, its name on stdout (what `make image` builds FROM, `make image-base`
# alone): the registry's debian:bookworm-slim when it is here or can be pulled; else, since Docker Hub
# cannot be reached from many networks (and from air-gapped sites) where Debian's mirrors can, a minbase
# made from Debian's mirror with mmdebstrap and imported as localhost/hunyuan-serve-base:bookworm. Made
# once: the image stays in the engine's store and its tarball under ~/.cache/hunyuan-serve/images.
# DEBIAN_MIRROR=URL names the mirror mmdebstrap fetches from (a local one on an air-gapped site);
# PULL_TIMEOUT_S bounds the pull (a blocked registry may drop packets rather than refuse them).
set -euo pipefail

ENGINE=${ENGINE:-$(command -v podman || command -v docker || true)}
[ -n "$ENGINE" ] || {
  echo "base.sh: neither podman nor docker is installed (Debian: apt-get install podman)" >&2
  exit 2
}
REGISTRY_BASE=docker.io/library/debian:bookworm-slim
LOCAL_BASE=localhost/hunyuan-serve-base:bookworm
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/hunyuan-serve/images
TARBALL=$CACHE/debian-bookworm-minbase.tar
say() { echo "base.sh: $*" >&2; }
have() { "$ENGINE" image inspect "$1" >/dev/null 2>&1; }

if have "$REGISTRY_BASE"; then
  echo "$REGISTRY_BASE"
  exit 0
fi
if have "$LOCAL_BASE"; then
  say "building on $LOCAL_BASE (a Debian bookworm minbase made earlier with mmdebstrap)"
  echo "$LOCAL_BASE"
  exit 0
fi
pulled=$(timeout "${PULL_TIMEOUT_S:-120}" "$ENGINE" pull -q "$REGISTRY_BASE" 2>&1) && {
  echo "$REGISTRY_BASE"
  exit 0
} || status=$?
reason=$(printf '%s\n' "$pulled" | tail -n 1)
[ "$status" != 124 ] || reason="no answer in ${PULL_TIMEOUT_S:-120} s"
say "$REGISTRY_BASE cannot be pulled (${reason:-$ENGINE pull exited $status})"
if [ ! -f "$TARBALL" ]; then
  command -v mmdebstrap >/dev/null || {
    say "mmdebstrap, which makes the base from Debian's mirror instead, is not installed:" \
      "apt-get install mmdebstrap, or name a base you have: make image BASE=IMAGE"
    exit 2
  }
  mirror=${DEBIAN_MIRROR:-the default Debian mirror}
  say "making a Debian bookworm minbase from $mirror with mmdebstrap (about 20 s)"
  mkdir -p "$CACHE"
  # A partial file, renamed when complete: an interrupted run leaves no tarball a later run would trust.
  mmdebstrap --quiet --variant=minbase --include=ca-certificates bookworm "$TARBALL.partial.tar" \
    ${DEBIAN_MIRROR:+"$DEBIAN_MIRROR"} >&2
  mv "$TARBALL.partial.tar" "$TARBALL"
fi
# An imported tarball has no config: PATH is set as Debian's images set it.
quiet=()
[ "$(basename "$ENGINE")" = podman ] && quiet=(--quiet)
"$ENGINE" import "${quiet[@]}" --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  "$TARBALL" "$LOCAL_BASE" >/dev/null
say "building on $LOCAL_BASE, imported from $TARBALL"
echo "$LOCAL_BASE"
