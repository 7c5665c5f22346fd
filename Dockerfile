# The Sentinel assistant for Microsoft Teams: `python -m bot serve` on port 8000, as a non-root user.
# Build: docker build -t sentinel-teams-bot .   (or in the cloud: az acr build, see deploy/README.md)
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TIKTOKEN_CACHE_DIR=/opt/tiktoken \
    HOST=0.0.0.0 \
    PORT=8000

WORKDIR /app

# requirements.txt also lists the test tools; they are left out of the image (none is imported by bot/).
COPY requirements.txt .
RUN grep -vE '^(pytest|pytest-asyncio|jsonschema|trustme)==' requirements.txt > /tmp/runtime-requirements.txt \
 && pip install -r /tmp/runtime-requirements.txt \
 && rm /tmp/runtime-requirements.txt

# The tokenizer tables are fetched now, so the running container never downloads them.
RUN python -c "import tiktoken; tiktoken.get_encoding('o200k_base')" \
 && chmod -R a+rX "$TIKTOKEN_CACHE_DIR"

# An unprivileged user; it may write only the state folder (STATE_STORE=sqlite:////app/.data/state.db).
RUN groupadd --system --gid 10001 bot \
 && useradd --system --uid 10001 --gid bot --home-dir /app --no-create-home --shell /usr/sbin/nologin bot \
 && mkdir -p /app/.data \
 && chown bot:bot /app/.data

COPY bot/ ./bot/
RUN python -m compileall -q bot

USER 10001:10001

EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8000'), timeout=4)"]

CMD ["python", "-m", "bot", "serve"]
