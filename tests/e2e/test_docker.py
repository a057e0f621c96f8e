"""The Docker image and the Compose file (issue 10 item 5), validated without a registry: the
Dockerfile is the official LiteLLM image at the pinned version plus this package, as a non-root
user with a health check; docker-compose.yml has Redis with AOF on a volume, the proxy and one
worker; the commands and environment variables they use run in the plain venv."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from litellm_memory_hook.errors import ConfigError
from litellm_memory_hook.settings import load_settings
from tests.support.harness import REPO
from tests.support.redis_url import real_redis_url

DOCKERFILE = REPO / "Dockerfile"
COMPOSE = REPO / "docker-compose.yml"
REDIS_URL = real_redis_url()
CLI = Path(sys.executable).parent / "litellm-memory"


def compose() -> dict[str, Any]:
    """docker-compose.yml, parsed."""
    data = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def dockerfile_instructions() -> list[tuple[str, str]]:
    """The Dockerfile's instructions (continuation lines joined), as (INSTRUCTION, rest)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def pinned_litellm() -> str:
    """The LiteLLM version CI's main run installs (``.ci/constraints.txt``; pyproject.toml
    declares the supported range around it)."""
    found = re.search(r"^litellm==(\S+)$", (REPO / ".ci" / "constraints.txt").read_text(), re.M)
    assert found
    return found.group(1)


def image_command() -> list[str]:
    """ENTRYPOINT + CMD of the image."""
    steps = dict(dockerfile_instructions())
    return [*json.loads(steps["ENTRYPOINT"]), *json.loads(steps["CMD"])]


def test_dockerfile_is_the_pinned_litellm_image_as_non_root_with_a_health_check() -> None:
    """FROM the official image at the version CI locks; the package installed with
    LiteLLM held at that version; USER is not root; HEALTHCHECK probes the proxy's liveness
    route; the default command is `litellm-memory serve` on 0.0.0.0:4000."""
    steps = dockerfile_instructions()
    args = {
        rest.split("=")[0]: rest.split("=")[1]
        for word, rest in steps
        if word == "ARG" and "=" in rest
    }
    assert args["LITELLM_VERSION"] == pinned_litellm()
    froms = [rest for word, rest in steps if word == "FROM"]
    assert froms == ["ghcr.io/berriai/litellm:main-v${LITELLM_VERSION}"]
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    assert '"litellm[proxy]==${LITELLM_VERSION}"' in runs and "pip install" in runs
    users = [rest for word, rest in steps if word == "USER"]
    assert users[-1] not in ("root", "0") and users[-1] == "10001"
    health = [rest for word, rest in steps if word == "HEALTHCHECK"]
    assert len(health) == 1 and "/health/liveliness" in health[0]
    assert image_command() == [
        "litellm-memory",
        "serve",
        "--config",
        "/app/config.yaml",
        "--host",
        "0.0.0.0",
        "--port",
        "4000",
    ]
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv", ".git", ".litellm-memory", "tests"} <= set(ignored)


def test_health_check_command_runs() -> None:
    """The HEALTHCHECK's command is valid Python that fails (non-zero, no syntax error) when
    nothing answers on port 4000 inside the container (here: when 4000 is not a proxy)."""
    health = next(rest for word, rest in dockerfile_instructions() if word == "HEALTHCHECK")
    command = json.loads(health[health.index("CMD") + 3 :].strip())
    assert command[0] == "python3"
    done = subprocess.run(
        [sys.executable, *command[1:]], capture_output=True, text=True, timeout=30, check=False
    )
    assert "SyntaxError" not in done.stderr
    if done.returncode == 0:  # something answers /health/liveliness on 4000 here
        return
    assert "URLError" in done.stderr or "HTTPError" in done.stderr or "refused" in done.stderr


def test_compose_services_volumes_and_commands() -> None:
    """redis (AOF on, everysec, noeviction, data in the named volume redis-data), proxy (the
    image's serve command, the hook's own Redis URL, in-proxy worker off, port 4000) and one
    worker (`litellm-memory worker`, calling the model through the proxy)."""
    data = compose()
    services = data["services"]
    assert set(services) == {"redis", "proxy", "worker"}
    redis_service = services["redis"]
    command = redis_service["command"]
    assert command[0] == "redis-server"
    flags = dict(zip(command[1::2], command[2::2], strict=True))
    assert flags == {
        "--appendonly": "yes",
        "--appendfsync": "everysec",
        "--maxmemory-policy": "noeviction",
    }
    assert "redis-data:/data" in redis_service["volumes"]
    assert set(data["volumes"]) == {"redis-data"}
    proxy = services["proxy"]
    assert proxy["build"] == "." and proxy["image"] == services["worker"]["image"]
    assert ["litellm-memory", *proxy["command"]] == image_command()
    assert proxy["environment"]["LITELLM_MEMORY_REDIS__URL"] == "redis://redis:6379/0"
    assert proxy["environment"]["LITELLM_MEMORY_EXTRACTION__WORKER_IN_PROXY"] == "false"
    assert "4000:4000" in proxy["ports"]
    assert proxy["depends_on"]["redis"]["condition"] == "service_healthy"
    worker = services["worker"]
    assert worker["command"] == ["worker", "--config", "/app/config.yaml"]
    assert worker["environment"]["LITELLM_MEMORY_REDIS__URL"] == "redis://redis:6379/0"
    assert worker["environment"]["LITELLM_MEMORY_EXTRACTION__BASE_URL"] == "http://proxy:4000/v1"
    assert worker["depends_on"]["proxy"]["condition"] == "service_healthy"
    for name in ("proxy", "worker"):
        assert "./config.yaml:/app/config.yaml:ro" in services[name]["volumes"]


@pytest.mark.parametrize("service", ["proxy", "worker"])
def test_compose_environment_is_accepted_by_the_settings(
    service: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every LITELLM_MEMORY_* variable the compose file sets is a known setting (unknown ones
    are rejected at start) and has the intended effect."""
    for name in [k for k in os.environ if k.startswith("LITELLM_MEMORY_")]:
        monkeypatch.delenv(name)
    for name, value in compose()["services"][service]["environment"].items():
        monkeypatch.setenv(name, str(value))
    try:
        settings = load_settings({"memory": {"storage": {"key_prefix": "mem"}}})
    except ConfigError as exc:  # pragma: no cover - the failure message is the point
        pytest.fail(f"{service}: {exc}")
    assert settings.redis.url == "redis://redis:6379/0"
    if service == "proxy":
        assert settings.extraction.worker_in_proxy is False
    else:
        assert settings.extraction.base_url == "http://proxy:4000/v1"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(CLI), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_image_commands_run_in_the_venv() -> None:
    """The console script the image runs exists; `worker --help` and the proxy command line
    (the image's CMD, with --help) parse and show examples."""
    assert CLI.exists(), f"{CLI}: pip install -e . first"
    worker = _cli("worker", "--help")
    assert worker.returncode == 0, worker.stderr
    assert "Example: litellm-memory worker" in worker.stdout
    proxy = _cli(*image_command()[1:], "--help")
    assert proxy.returncode == 0, proxy.stderr
    assert "Example: litellm-memory serve" in proxy.stdout


@pytest.mark.redis
def test_worker_service_command_runs(tmp_path: Path) -> None:
    """The worker service's command with its environment (Redis pointed at the test Redis)
    runs: `worker --once` finds nothing due and exits 0."""
    config = tmp_path / "config.yaml"
    config.write_text((REPO / "config.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    worker = compose()["services"]["worker"]
    env = {name: str(value) for name, value in worker["environment"].items()}
    env["LITELLM_MEMORY_REDIS__URL"] = REDIS_URL
    env["LITELLM_MEMORY_STORAGE__KEY_PREFIX"] = "tdk" + uuid.uuid4().hex[:10]
    command = [a if a != "/app/config.yaml" else str(config) for a in worker["command"]]
    done = _cli(*command, "--once", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing due" in done.stdout


def test_readme_describes_the_compose_file() -> None:
    """The operations page's Compose section names the three services, the volume and the worker
    command."""
    readme = (REPO / "docs" / "operations.md").read_text(encoding="utf-8")
    assert "docker compose" in readme
    for name in (*compose()["services"], *compose()["volumes"], "litellm-memory worker"):
        assert name in readme, name
    assert "appendonly" in readme or "AOF" in readme
