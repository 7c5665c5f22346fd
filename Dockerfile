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

# The runtime dependencies exactly as locked, every download checked against its hash; the lock also pins
# the build backend used for the bot below. Test and check tools are not in it. `./run lock` regenerates it.
COPY requirements.lock /tmp/
RUN pip install --require-hashes -r /tmp/requirements.lock \
 && rm /tmp/requirements.lock

# The tokenizer tables are fetched now, so the running container never downloads them.
RUN python -c "import tiktoken; tiktoken.get_encoding('o200k_base')" \
 && chmod -R a+rX "$TIKTOKEN_CACHE_DIR"

# An unprivileged user; it may write only the state folder (STATE_STORE=sqlite:////app/.data/state.db).
RUN groupadd --system --gid 10001 bot \
 && useradd --system --uid 10001 --gid bot --home-dir /app --no-create-home --shell /usr/sbin/nologin bot \
 && mkdir -p /app/.data \
 && chown bot:bot /app/.data

# The bot itself, into site-packages (compiled there, with its `bot` command): no dependencies (all are
# installed above) and no build isolation (the locked setuptools builds it, nothing unpinned is fetched).
COPY pyproject.toml /tmp/src/
COPY bot/ /tmp/src/bot/
RUN pip install --no-deps --no-build-isolation /tmp/src \
 && rm -rf /tmp/src

USER 10001:10001

EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('PORT', '8000'), timeout=4)"]

CMD ["python", "-m", "bot", "serve"]
