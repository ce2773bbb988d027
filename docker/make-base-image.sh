#!/bin/sh
# make-base-image.sh [TAG]: build a local stand-in for debian:bookworm-slim with debootstrap.
# For machines that reach Debian's package mirror but no container registry (so `docker pull`
# fails). Does nothing when TAG already exists. Needs root, debootstrap and a running engine.
set -eu
tag=${1:-debian:bookworm-slim}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "make-base-image: $tag exists, nothing to do"
    exit 0
fi
root=$(mktemp -d /var/tmp/bookworm-root.XXXXXX)
trap 'rm -rf "$root"' EXIT
# minbase: essential packages + apt only, the same set the official slim image starts from.
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -20 "$root.log" >&2; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
# The same trimming as the official slim image: no package lists, caches, docs or locales, so
# the base stays small (the Dockerfile runs apt-get update itself).
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
       "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
       "$root"/usr/share/locale/* "$root"/var/log/*.log
cat >"$root/etc/dpkg/dpkg.cfg.d/slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
CFG
printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb http://deb.debian.org/debian-security bookworm-security main\n' \
    "$mirror" "$mirror" >"$root/etc/apt/sources.list"
tar --numeric-owner -C "$root" -c . | docker import -c 'CMD ["bash"]' - "$tag" >/dev/null
echo "make-base-image: imported $tag ($(docker image inspect -f '{{.Size}}' "$tag") bytes)"
