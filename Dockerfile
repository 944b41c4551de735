# The stormotel analyzer image: `stormotel analyze` as a CronJob (see helm/stormotel).
# No torch: the analyzer reads telemetry from the TSDB and never imports the tracker's GPU code.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY stormotel ./stormotel
COPY analyzers ./analyzers
COPY dashboards ./dashboards
# The analyzer extra: httpx, cramjam, grafanalib … (a tracker-only install has none of them).
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[analyzer]"

FROM python:3.11-slim
LABEL org.opencontainers.image.title="stormotel analyzer" \
      org.opencontainers.image.description="Finds which rank of a training job went wrong first; writes findings to Grafana and Prometheus." \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links /wheels "stormotel[analyzer]" && rm -rf /wheels \
    && groupadd --gid 10001 stormotel \
    && useradd --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin stormotel
# Non-root and read-only-root friendly: only /tmp and the state volume are written.
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 HOME=/tmp
USER 10001:10001
WORKDIR /var/lib/stormotel
ENTRYPOINT ["stormotel"]
CMD ["analyze", "--help"]
