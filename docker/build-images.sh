#!/bin/bash
# docker/build-images.sh: the engine, the base image and both images of the Dockerfile, built from
# this checkout: the grading image (PYOPS_IMAGE, default pyops-lab:ci) and the lab image
# (`--target lab`, the same tag with -lab). Idempotent, and quick once built (every layer cached):
# docker/ci-test.sh calls it first, and .ci/run starts it early, beside work that waits on the
# network more than on the CPUs, so that the image tests find it done.
#   PYOPS_CA   CA bundle pip needs behind a TLS-inspecting proxy (see docker/engine.sh)
# Prints one PASS line per image; on a failure, the build log's tail and a FAIL line, exit 1.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
image=${PYOPS_IMAGE:-pyops-lab:ci}
work=$(mktemp -d /tmp/pyops-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
die() { echo "FAIL: $*"; exit 1; }

source "$repo/docker/engine.sh"

# The context goes in as a tar stream so the proxy's CA bundle can be added to it as
# .build-ca.pem without writing anything into the working tree; the Dockerfile uses it in its
# build stage only. A tar stream also works with the legacy builder and with BuildKit alike.
ca_args=()
if [ -r "$ca" ]; then
    ca_args=(-C "$(dirname "$ca")" --transform "s,^$(basename "$ca")\$,.build-ca.pem," "$(basename "$ca")")
fi
build() {  # build TAG [DOCKER BUILD ARGS...]
    local tag=$1; shift
    checkout_tar "${ca_args[@]}" | docker build -t "$tag" "$@" - >"$work/build.log" 2>&1
}
if build "$image"; then echo "PASS: docker build ($image)"
else tail -30 "$work/build.log"; die "docker build failed"; fi
if build "$image-lab" --target lab; then echo "PASS: docker build --target lab ($image-lab)"
else tail -30 "$work/build.log"; die "docker build --target lab failed"; fi
