#!/usr/bin/env bash
# `make image`: builds the service image (FLAVOUR=cpu or gpu) and the front image with podman, or docker
# where podman is absent. Tags are the package's version, the names `render k8s` uses by default:
# hunyuan-serve:VERSION-FLAVOUR and hunyuan-serve-front:VERSION. Both build FROM the Debian base that
# base.sh finds or makes (the registry's, else one made with mmdebstrap), or BASE=IMAGE. Extra arguments
# go to every build (e.g. podman's -v DIR:/run/pip:ro --build-arg PIP_CONFIG_FILE=/run/pip/pip.conf).
set -euo pipefail
cd "$(dirname "$0")/../.."

FLAVOUR=${FLAVOUR:-cpu}
case $FLAVOUR in cpu | gpu) ;; *)
  echo "build.sh: FLAVOUR must be cpu or gpu, not '$FLAVOUR'" >&2
  exit 2
  ;;
esac
ENGINE=${ENGINE:-$(command -v podman || command -v docker || true)}
[ -n "$ENGINE" ] || {
  echo "build.sh: neither podman nor docker is installed (Debian: apt-get install podman)" >&2
  exit 2
}
VERSION=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' hunyuan_serve/__init__.py)
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if [ "$REVISION" != unknown ] && [ -n "$(git status --porcelain -- pyproject.toml README.md hunyuan_serve deploy/container)" ]; then
  REVISION="$REVISION-dirty"
fi
labels=(--build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION")
# A BASE build argument among the extra arguments (IMAGE_ARGS) is left to them.
given=""
for arg in "$@"; do case $arg in BASE=* | --build-arg=BASE=*) given=1 ;; esac; done
base=()
if [ -n "${BASE:-}" ]; then
  base=(--build-arg "BASE=$BASE")
elif [ -z "$given" ]; then
  base=(--build-arg "BASE=$(ENGINE=$ENGINE bash deploy/container/base.sh)")
fi
ignore=()
# podman: the ignore file docker finds by name, and the docker format, since OCI images have no HEALTHCHECK.
[ "$(basename "$ENGINE")" = podman ] && ignore=(--ignorefile deploy/container/Containerfile.dockerignore --format docker)

"$ENGINE" build -f deploy/container/Containerfile "${ignore[@]}" --build-arg "FLAVOUR=$FLAVOUR" "${base[@]}" "${labels[@]}" \
  -t "hunyuan-serve:$VERSION-$FLAVOUR" "$@" .
if [ "${SKIP_FRONT:-}" != 1 ]; then
  "$ENGINE" build -f deploy/container/front.Containerfile "${base[@]}" "${labels[@]}" -t "hunyuan-serve-front:$VERSION" \
    "$@" deploy/container
fi
