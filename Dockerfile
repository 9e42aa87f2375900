# The control plane and the autoscaler (one image; the task's command picks `serve` or
# `autoscaler run`). No worker extra: no torch, no diffusers, no GPU.
#   docker build -t framefleet .
FROM python:3.11-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY framefleet framefleet
COPY kernel kernel
COPY orchestrator orchestrator
COPY autoscaler autoscaler
COPY worker_ami worker_ami
COPY simulator simulator
RUN pip install --no-cache-dir --upgrade pip \
    && pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim-bookworm
# Security updates of the base, then the wheels; nothing else.
RUN apt-get update \
    && apt-get upgrade -y --no-install-recommends \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /wheels
# /var/lib/framefleet is the service's own (ECS mounts the task's scratch volume there, and
# Fargate copies the image's folder, its owner with it, into the volume).
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels \
    && useradd --system --uid 10001 --home /var/lib/framefleet framefleet \
    && install -d -o framefleet -g framefleet /var/lib/framefleet
USER 10001
WORKDIR /var/lib/framefleet
# /healthz answers while the process lives: the task definition sets the process's metrics
# port and FRAMEFLEET_HEALTH_PORT to the same number.
HEALTHCHECK --interval=30s --timeout=5s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(\"http://127.0.0.1:\" + os.environ.get(\"FRAMEFLEET_HEALTH_PORT\", \"9100\") + \"/healthz\", timeout=4)"]
# The control plane's HTTP API and console, when FRAMEFLEET_API__PORT sets it to this port.
EXPOSE 8080
ENTRYPOINT ["framefleet"]
CMD ["serve"]
