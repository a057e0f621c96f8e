# The LiteLLM proxy with the memory hook: the official LiteLLM image of the validated version plus
# this package, run as a non-root user.
#   docker build -t litellm-memory .
#   docker run -p 4000:4000 -e LITELLM_MEMORY_REDIS__URL=redis://your-redis:6379/0 litellm-memory
#   docker compose up          (Redis with AOF, the proxy and one extraction worker)
# Without a Redis URL the container runs the embedded Redis (data in /app/.litellm-memory: mount
# a volume there to keep it). Mount your own config.yaml over /app/config.yaml for real models.
ARG LITELLM_VERSION=1.108.7
FROM ghcr.io/berriai/litellm:main-v${LITELLM_VERSION}
ARG LITELLM_VERSION

USER root
WORKDIR /app
COPY pyproject.toml README.md config.yaml /app/
COPY litellm_memory_hook /app/litellm_memory_hook
# litellm[proxy] is already in the base image at this version; pip adds only what is missing and
# fails rather than replacing LiteLLM with another version.
RUN pip install --no-cache-dir "/app" "litellm[proxy]==${LITELLM_VERSION}" \
    && litellm-memory --help > /dev/null

# A non-root user (Debian-based images have useradd, Wolfi-based ones busybox adduser).
RUN (command -v useradd > /dev/null 2>&1 \
        && useradd --create-home --home-dir /home/memory --uid 10001 --shell /sbin/nologin memory) \
    || adduser -D -u 10001 -h /home/memory -s /sbin/nologin memory
RUN mkdir -p /app/.litellm-memory && chown -R 10001 /app/.litellm-memory /home/memory
USER 10001
ENV HOME=/home/memory \
    PYTHONUNBUFFERED=1 \
    LITELLM_LOCAL_MODEL_COST_MAP=True

EXPOSE 4000
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:4000/health/liveliness', timeout=4)"]
ENTRYPOINT ["litellm-memory"]
CMD ["serve", "--config", "/app/config.yaml", "--host", "0.0.0.0", "--port", "4000"]
