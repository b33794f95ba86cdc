# One image for the five kuota services; the command selects the service:
#
#   docker run --rm kuota:0.1.0 kuota-ingest       (also kuota-admission,
#   kuota-preemption, kuota-actuator, kuota-webhook; `kuota` is the CLI, the
#   default command)
#
# Configuration is environment only (see docs/deploy.md). HEALTHCHECK runs
# `kuota healthcheck`, which GETs the service's /metrics on 127.0.0.1, at
# $KUOTA_METRICS_PORT or, when that is unset, the default port of the service
# running as PID 1 (ingest 9101, admission 9102, preemption 9103, actuator 9104,
# webhook 9105).
#
# Build: docker build -t kuota:0.1.0 .

ARG PYTHON_IMAGE=python:3.11-slim

# ---------------------------------------------------------------- build stage
FROM ${PYTHON_IMAGE} AS build

# A C compiler for dependencies without a wheel for the build platform
# (faust-streaming has none for linux/arm64); it stays in this stage.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1

RUN python -m venv /opt/kuota

WORKDIR /src
# The dependencies first (pinned in pyproject.toml, transitive ones in
# constraints.txt), so a source change does not reinstall them: install them
# from the metadata alone.
COPY pyproject.toml constraints.txt ./
RUN python -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /tmp/requirements.txt \
    && /opt/kuota/bin/pip install -r /tmp/requirements.txt -c constraints.txt

COPY shared ./shared
COPY services ./services
# Not editable: the package is copied into the venv, /src is left behind.
# (pip writes the bytecode, so nothing is compiled at run time.)
RUN /opt/kuota/bin/pip install --no-deps . \
    && /opt/kuota/bin/kuota --help >/dev/null
# The core's hot path compiled with mypyc (docs/design/native-core.md), its
# libraries kept under /opt/kuota/native so they travel with the venv; mypy is
# needed only to compile.
COPY scripts/native.py scripts/native_finder.py ./scripts/
RUN /opt/kuota/bin/pip install mypy -c constraints.txt \
    && KUOTA_CACHE=/opt/kuota /opt/kuota/bin/python scripts/native.py build --venv /opt/kuota \
    && /opt/kuota/bin/pip uninstall -y mypy \
    && /opt/kuota/bin/python scripts/native.py status

# -------------------------------------------------------------- runtime stage
FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="kuota" \
      org.opencontainers.image.description="Quota admission, borrowing, preemption and fair sharing for DRA GPU jobs, event-sourced on Kafka" \
      org.opencontainers.image.version="0.1.0"

# A fixed numeric uid/gid, so Kubernetes' runAsNonRoot can verify it.
RUN groupadd --gid 10001 kuota \
    && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin kuota

COPY --from=build /opt/kuota /opt/kuota

ENV PATH=/opt/kuota/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

USER 10001:10001
WORKDIR /tmp

# kuota-webhook's HTTPS port and the five metrics ports
EXPOSE 9443 9101 9102 9103 9104 9105

HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
    CMD ["kuota", "healthcheck"]

CMD ["kuota", "--help"]
