# The pyops lab's grading image: Debian's python3, the conformance suite and the lab's paths.
#   docker build -t pyops-lab .
#   docker run --rm -v "$PWD/runner.py:/root/pyops/sub/runner.py:ro" -v "$PWD/results:/results" pyops-lab
# Plain Dockerfile syntax (no RUN --mount, no COPY --chmod), so the legacy builder and BuildKit
# both build it. See docker/README-section.md.
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
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 /opt/pyops-lab/venv/bin/pip install /src; \
    /opt/pyops-lab/venv/bin/pip uninstall -y -q pip setuptools; \
    install -D -m 0755 /src/docker/entrypoint.sh /out/pyops-grade; \
    install -d -m 0755 /out/bin; \
    install -m 0755 /src/fixtures/pyops/bin/*.sh /out/bin/

# ---- the image: python3, tini and the lab's paths, owned by root and writable by their owner,
# so grading works even with --cap-drop ALL (no CAP_DAC_OVERRIDE). procps: ps/pgrep/pkill for
# learners debugging in `docker run -it pyops-lab bash` (the suite itself uses psutil) ----
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 tini procps \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin
COPY --from=build /opt/pyops-lab/venv /opt/pyops-lab/venv
COPY --from=build /out/bin/ /opt/fixtures/pyops/bin/
COPY --from=build /out/pyops-grade /usr/local/bin/pyops-grade
ENV PATH=/opt/pyops-lab/venv/bin:$PATH \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /root/pyops/sub
# Smoke check: the bundled reference runs a command and logs it; then the lab is left exactly as
# a learner finds it (no runs.jsonl, state/ present and empty).
RUN set -eu; \
    mkdir -p -m 0755 /root/pyops/sub/state; \
    reference=$(python3 -c 'import runner.runner as r; print(r.__file__)'); \
    python3 "$reference" run -- true; \
    python3 -c 'import json; [json.loads(l) for l in open("/root/pyops/sub/runs.jsonl")]'; \
    rm -f /root/pyops/sub/runs.jsonl; \
    test -z "$(ls -A /root/pyops/sub/state)"; \
    python3 -c 'import conformance.plugin, xdist, psutil'; \
    pyops-conformance --help >/dev/null
# tini is PID 1: it reaps the orphans a runner under test leaves (zombies would count as left-over
# processes) and passes docker stop's SIGTERM on to the suite, which then restores the lab.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/pyops-grade"]
