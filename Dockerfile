# syntax=docker/dockerfile:1
# queuescope: one process, scheduler and visibility server (docs/cluster.md#manifests).
#
#   docker build -t queuescope:0.1.0 .
#
# The builder makes the wheel and installs it with its dependencies into a virtual
# environment; the final image gets only that environment: no compiler, no pip cache, no
# sources. Both stages use the same Python image, so the environment's interpreter links
# stay valid when copied.

ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
COPY visibility_server ./visibility_server
COPY queuescope ./queuescope
RUN python -m pip wheel --no-deps --wheel-dir /wheels . \
 && python -m venv /opt/queuescope \
 && /opt/queuescope/bin/pip install /wheels/queuescope-*.whl \
 && /opt/queuescope/bin/pip uninstall -y pip \
 && /opt/queuescope/bin/queuescope --help > /dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="queuescope" \
      org.opencontainers.image.description="Kueue-compatible batch admission controller with on-demand visibility of pending work" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=builder /opt/queuescope /opt/queuescope
ENV PATH=/opt/queuescope/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# Numeric, so that the kubelet can check runAsNonRoot without reading /etc/passwd; the
# Deployment runs as the same 65532:65532 with a read-only root filesystem.
USER 65532:65532
WORKDIR /tmp
EXPOSE 8443
ENTRYPOINT ["queuescope"]
CMD ["serve"]
