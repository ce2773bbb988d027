# The pyops lab's grading image: Debian's python3, the conformance suite and the lab's paths.
#   docker build -t pyops-lab .                  (grading; `--target lab` for a learner's lab)
#   docker run --rm -v "$PWD/runner.py:/root/pyops/sub/runner.py:ro" -v "$PWD/results:/results" pyops-lab
# Plain Dockerfile syntax (no RUN --mount, no COPY --chmod), so the legacy builder and BuildKit
# both build it. README's "Grading in Docker" says more.
ARG BASE=debian:bookworm-slim

# ---- build: a venv with the suite and its dependencies (pip and build tools stay here) ----
FROM ${BASE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv \
 && rm -rf /var/lib/apt/lists/*
COPY . /src
# Behind a TLS-inspecting proxy, put its CA bundle in the context as .build-ca.pem (the CI
# script does this in a throw-away context); it lives in this stage only, never in the image.
# Graders install nothing, so pip and setuptools are dropped from the venv (about 15 MB).
RUN set -eu; \
    if [ -s /src/.build-ca.pem ]; then export PIP_CERT=/src/.build-ca.pem; fi; \
    python3 -m venv /opt/pyops-lab/venv; \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 /opt/pyops-lab/venv/bin/pip install "/src[watch]"; \
    /opt/pyops-lab/venv/bin/pip uninstall -y -q pip setuptools; \
    site=$(/opt/pyops-lab/venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
    mkdir -p /out/reference; mv "$site/runner" /out/reference/; \
    install -D -m 0755 /src/docker/entrypoint.sh /out/pyops-grade; \
    install -d -m 0755 /out/bin; \
    install -m 0755 /src/fixtures/pyops/bin/*.sh /out/bin/

# ---- lab: the environment a learner works in (`docker build --target lab`): python3, tini, the
# fixtures, the lab's folders and the suite for self-checks, but no reference runner. procps:
# ps/pgrep/pkill for debugging in `docker run -it ... bash` (the suite itself uses psutil) ----
FROM ${BASE} AS lab
COPY --from=build /opt/pyops-lab/venv /opt/pyops-lab/venv
COPY --from=build /out/bin/ /opt/fixtures/pyops/bin/
COPY --from=build /out/pyops-grade /usr/local/bin/pyops-grade
# System roots for the chroot isolation (conformance/harness/roots.py): a grading platform's container
# cannot make mount namespaces, but it can chroot, so each check gets a root of its own and checks
# run in parallel. The roots are hard links of /usr and /etc, made in the same layer as python3
# so that most of what they link costs no space twice. No reference, no suite in them.
RUN set -eu; \
    apt-get update; \
    apt-get install -y --no-install-recommends python3 tini procps; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; \
    /opt/pyops-lab/venv/bin/pyops-conformance roots make --count 8
# Runner uids of the image's own range: a host that also grades outside containers sees these
# processes, and must never sweep them as its own runners' (see conformance/harness/identity.py).
# The suite's venv stays off PATH: `python3` is the system's, the one that runs every runner, so a
# learner's runner behaves in the lab as it is graded (it cannot import the suite or its packages).
ENV LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYOPS_RUNNER_UIDS=1900100000
WORKDIR /root/pyops/sub
# /root 0711: each runner runs as a uid of its own, which must pass through /root to the lab
# (but not list it). state/ present and empty, as a learner finds the lab. image-build names this
# build in every grading's provenance (conformance/reporting/provenance.py).
RUN set -eu; \
    chmod 0711 /root; \
    mkdir -p -m 0755 /root/pyops/sub/state; \
    ln -s /opt/pyops-lab/venv/bin/pyops-conformance /usr/local/bin/pyops-conformance; \
    echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) $(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
        >/opt/pyops-lab/image-build; \
    /opt/pyops-lab/venv/bin/python3 -c 'import conformance.plugin, xdist, psutil, watchfiles'; \
    ! python3 -c 'import conformance' 2>/dev/null; \
    pyops-conformance --help >/dev/null
# tini is PID 1: it reaps the orphans a runner under test leaves (zombies would count as left-over
# processes) and passes docker stop's SIGTERM on to the grading, which then restores the lab.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/pyops-grade"]

# ---- the grading image (the default target): the lab plus the reference runner, readable by
# root only, so no runner under test (each runs as a uid of its own) can hand it in as its own ----
FROM lab
COPY --from=build /out/reference/ /opt/pyops-lab/reference/
# Smoke check: the bundled reference runs a command and logs it; then the lab is left exactly as
# a learner finds it (no runs.jsonl, state/ present and empty).
RUN set -eu; \
    suite=/opt/pyops-lab/venv/bin/python3; \
    site=$($suite -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'); \
    mv /opt/pyops-lab/reference/runner "$site/runner"; \
    rmdir /opt/pyops-lab/reference; \
    chmod -R go-rwx "$site/runner"; \
    reference=$($suite -c 'import runner.runner as r; print(r.__file__)'); \
    python3 "$reference" run -- true; \
    python3 -c 'import json; [json.loads(l) for l in open("/root/pyops/sub/runs.jsonl")]'; \
    rm -f /root/pyops/sub/runs.jsonl; \
    test -z "$(ls -A /root/pyops/sub/state)"
