# The LiteLLM proxy with the memory hook, on the official LiteLLM image of the validated version.
#   docker build -t litellm-memory .
#   docker run -p 4000:4000 -e REDIS_URL=redis://redis:6379/0 litellm-memory
# Without REDIS_URL the container runs the embedded Redis (data in /app/.litellm-memory: mount a
# volume there to keep it). Mount your own config.yaml over /app/config.yaml for real models.
ARG LITELLM_IMAGE=ghcr.io/berriai/litellm:main-v1.108.7
FROM ${LITELLM_IMAGE}

WORKDIR /app
COPY pyproject.toml README.md config.yaml /app/
COPY litellm_memory_hook /app/litellm_memory_hook
# litellm[proxy]==1.108.7 is already in the base image; pip adds only what is missing.
RUN pip install --no-cache-dir /app

ENV LITELLM_LOCAL_MODEL_COST_MAP=True
EXPOSE 4000
ENTRYPOINT ["litellm-memory", "serve", "--config", "/app/config.yaml", "--host", "0.0.0.0", "--port", "4000"]
