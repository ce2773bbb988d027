# docker/engine.sh: sourced by the image tests. Makes sure this machine (root, Debian 12, Debian's
# mirror reachable but no container registry) has a running Docker engine and the base image
# debian:bookworm-slim, and gives checkout_tar. Expects `die` and `repo` (the checkout) from the
# caller. Idempotent.

missing=()
# dockerd, not just a docker CLI: a client alone cannot build or run anything.
command -v dockerd >/dev/null && command -v docker >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ ${#missing[@]} -gt 0 ]; then
    echo "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
    # No systemd on a CI runner: start the engine ourselves, detached so it outlives this script
    # (the next run finds it answering).
    echo "starting dockerd (log: /var/log/dockerd-pyops-ci.log)"
    setsid dockerd >/var/log/dockerd-pyops-ci.log 2>&1 </dev/null &
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null 2>&1 || die "dockerd did not come up; see /var/log/dockerd-pyops-ci.log"
fi

# No registry here, so debootstrap the base when it is missing.
"$(dirname "${BASH_SOURCE[0]}")/make-base-image.sh" debian:bookworm-slim || die "could not make debian:bookworm-slim"

# The CA bundle pip needs behind a TLS-inspecting proxy (PYOPS_CA, else pip's own setting, else
# the system's bundle).
ca=${PYOPS_CA:-${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}}

# The checkout as the image and the containers get it, a tar stream on stdout: its files but
# .dockerignore's (caches, venvs, .git) and artifacts/, then any further tar arguments. Tar's
# status 1 ("file changed as we read it") is the checkout's root gaining an entry meanwhile: tox's
# .tox, a log in artifacts/, both left out, as CI's phases beside it make them. Not a failure.
checkout_tar() {
    local rc=0
    tar -C "$repo" --exclude-from="$repo/.dockerignore" --exclude=./artifacts --warning=no-file-changed \
        -cf - . "$@" || rc=$?
    [ "$rc" -le 1 ]
}
