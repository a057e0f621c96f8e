"""The packaging end-to-end check (``tests/e2e/test_package.py``): the package built as a wheel,
installed into a clean venv together with one LiteLLM version, named in a config.yaml's
``callbacks:`` and driven through LiteLLM's own ``litellm`` command with the wheel's stand-in
model, exactly as a team adds it to the LiteLLM it already runs (or to LiteLLM's Docker image:
``pip install litellm_memory_hook-*.whl``).

Usable without pytest, e.g. to try a LiteLLM version by hand::

    python -m tests.support.package_venv 1.110.2 /tmp/try-1.110.2
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis
import yaml

from litellm_memory_hook.tools.processes import (
    free_port,
    spawn,
    terminate_all,
    wait_http,
)
from tests.support.paths import REPO

PACKAGE = REPO / "litellm_memory_hook"
MASTER_KEY = "sk-package-test"
#: environment variables of this process the venv's processes must not see: they would import
#: the checkout instead of the wheel, or move the memory settings.
HIDDEN_ENV = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
#: the newest LiteLLM release this package was tested with (``tests/e2e/test_package.py`` installs
#: it beside the oldest supported one); raise it when a newer release passes that test.
NEWEST_TESTED = "1.108.7"
#: seconds one ``pip install`` into the venv may take.
INSTALL_TIMEOUT_S = 1200


def supported_range() -> tuple[str, str]:
    """``(oldest, below)``: the LiteLLM range pyproject.toml declares, ``>=oldest,<below``."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    found = re.search(r'"litellm\[proxy\]>=([0-9.]+),<([0-9.]+)"', text)
    if not found:
        raise AssertionError('pyproject.toml declares no "litellm[proxy]>=X,<Y" range')
    return found.group(1), found.group(2)


def locked_litellm() -> str:
    """The LiteLLM version CI's main run installs (``.ci/constraints.txt``)."""
    text = (REPO / ".ci" / "constraints.txt").read_text(encoding="utf-8")
    found = re.search(r"^litellm==([0-9.]+)\s*$", text, re.MULTILINE)
    if not found:
        raise AssertionError(".ci/constraints.txt pins no litellm==X")
    return found.group(1)


def packaged_data_files() -> list[str]:
    """Every file of the source package that is not Python (stand-in pages, the inspector's
    static files, word lists): what ``serve`` and the hook read at run time, as wheel paths."""
    return sorted(
        path.relative_to(REPO).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix not in (".py", ".pyc")
    )


def build_wheel(out: Path) -> Path:
    """``pip wheel`` of the checkout (no dependencies) into ``out``; returns the wheel."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(REPO)],
        check=True,
        timeout=INSTALL_TIMEOUT_S,
        env=clean_env(),
    )
    (wheel,) = out.glob("litellm_memory_hook-*.whl")
    return wheel


def wheel_names(wheel: Path) -> set[str]:
    """The file names inside ``wheel``."""
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without :data:`HIDDEN_ENV` and ``LITELLM_MEMORY_*``, with
    LiteLLM's bundled cost map (no download at start), plus ``extra``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in HIDDEN_ENV and not k.startswith("LITELLM_MEMORY_")
    }
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    env.update(extra)
    return env


@dataclass(frozen=True)
class Venv:
    """A clean venv with the wheel and one LiteLLM installed."""

    path: Path
    litellm: str
    install_s: float

    def bin(self, name: str) -> str:
        """A program of the venv."""
        return str(self.path / "bin" / name)


def make_venv(folder: Path, wheel: Path, litellm: str) -> Venv:
    """A new venv in ``folder/venv`` (the running Python's version, no system packages) with
    ``wheel`` and ``litellm[proxy]==litellm`` installed by pip.

    Raises:
        subprocess.CalledProcessError: pip could not install them (its output in
            ``folder/pip.log``).
    """
    venv = folder / "venv"
    python = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([python, "-m", "venv", str(venv)], check=True, env=clean_env())
    started = time.monotonic()
    with (folder / "pip.log").open("wb") as log:
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                str(wheel),
                f"litellm[proxy]=={litellm}",
            ],
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=INSTALL_TIMEOUT_S,
            env=clean_env(),
        )
    return Venv(venv, litellm, time.monotonic() - started)


def installed(venv: Venv) -> dict[str, str]:
    """What the venv's Python imports: ``{"litellm": version, "hook": file of the package}``."""
    out = subprocess.run(
        [
            venv.bin("python"),
            "-c",
            "import json, importlib.metadata as m, litellm_memory_hook as h; "
            "print(json.dumps({'litellm': m.version('litellm'), 'hook': h.__file__, "
            "'hook_version': m.version('litellm-memory-hook')}))",
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=venv.path,
        env=clean_env(),
    ).stdout
    data = json.loads(out.strip().splitlines()[-1])
    assert isinstance(data, dict)
    return {str(k): str(v) for k, v in data.items()}


def write_config(path: Path, standin_port: int, prefix: str) -> Path:
    """A config.yaml as a user writes it beside an installed package: one memory alias served
    by the stand-in, the callback named by its import path, the master key."""
    config = {
        "model_list": [
            {
                "model_name": "demo",
                "litellm_params": {
                    "model": "openai/standin",
                    "api_base": f"http://127.0.0.1:{standin_port}/v1",
                    "api_key": "not-needed",
                },
                "model_info": {"memory": {"enabled": True}},
            }
        ],
        "litellm_settings": {"callbacks": "litellm_memory_hook.proxy_callback.memory_hook"},
        "callback_settings": {"memory": {"storage": {"key_prefix": prefix}}},
        "general_settings": {"master_key": MASTER_KEY},
    }
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


@dataclass(frozen=True)
class ChatResult:
    """What one run of :func:`chat_twice` saw."""

    replies: list[str]
    #: the chat requests the stand-in received (extraction calls left out), oldest first.
    upstream: list[dict[str, Any]]
    #: ``GET /memory/v1/users`` of the proxy (the package's own routes).
    users: dict[str, Any]
    #: the status and the start of ``GET /memory/ui`` (the inspector page, a packaged file).
    inspector: tuple[int, str]
    #: ``/memory/ui/inspector.js``'s status (a packaged static file).
    inspector_js: int
    #: the ``x-memory-layers`` header of a chat sent with ``x-memory-debug: 1`` ("" when none).
    debug_layers: str


def _is_extraction(body: dict[str, Any]) -> bool:
    from litellm_memory_hook.extraction.prompt import is_extraction_call

    return bool(is_extraction_call(body.get("messages")))


def chat_twice(venv: Venv, folder: Path, redis_url: str) -> ChatResult:
    """Start the venv's stand-in (``litellm-memory standin``) and LiteLLM's own ``litellm``
    command with :func:`write_config`'s config (cwd ``folder``, REDIS_URL ``redis_url``), send
    one user's fact, then a question about it, and return what they saw; the processes are
    stopped and the run's keys deleted."""
    standin_port, proxy_port = free_port(), free_port()
    prefix = "pkg" + uuid.uuid4().hex[:8]
    config = write_config(folder / "config.yaml", standin_port, prefix)
    env = clean_env(REDIS_URL=redis_url)
    processes = []
    user = "pkg-user-" + uuid.uuid4().hex[:6]
    try:
        standin_log, proxy_log = folder / "standin.log", folder / "proxy.log"
        processes.append(
            spawn(
                [venv.bin("litellm-memory"), "standin", "--port", str(standin_port)],
                standin_log,
                cwd=folder,
                env=env,
            )
        )
        processes.append(
            spawn(
                [
                    venv.bin("litellm"),
                    "--config",
                    str(config),
                    "--port",
                    str(proxy_port),
                    "--host",
                    "127.0.0.1",
                ],
                proxy_log,
                cwd=folder,
                env=env,
            )
        )
        standin, proxy = f"http://127.0.0.1:{standin_port}", f"http://127.0.0.1:{proxy_port}"
        wait_http(f"{standin}/v1/models", processes[0], 60, standin_log)
        wait_http(f"{proxy}/health/liveliness", processes[1], 300, proxy_log)
        headers = {"Authorization": f"Bearer {MASTER_KEY}"}
        replies = []
        debug_layers = ""
        with httpx.Client(timeout=120, headers=headers) as http:
            for text in ("My cat is called Miso.", "What is my cat called?"):
                answer = http.post(
                    f"{proxy}/v1/chat/completions",
                    json={
                        "model": "demo",
                        "user": user,
                        "messages": [{"role": "user", "content": text}],
                    },
                    headers={"x-memory-debug": "1"},
                )
                answer.raise_for_status()
                replies.append(str(answer.json()["choices"][0]["message"]["content"]))
                debug_layers = answer.headers.get("x-memory-layers", "")
            upstream = [
                b for b in http.get(f"{standin}/_standin/requests").json() if not _is_extraction(b)
            ]
            users = http.get(f"{proxy}/memory/v1/users").json()
            page = http.get(f"{proxy}/memory/ui")
            script = http.get(f"{proxy}/memory/ui/inspector.js")
        return ChatResult(
            replies,
            upstream,
            users,
            (page.status_code, page.text[:200]),
            script.status_code,
            debug_layers,
        )
    finally:
        terminate_all(processes)
        client = redis.Redis.from_url(redis_url)
        for key in client.scan_iter(match=f"{prefix}:*", count=1000):
            client.delete(key)
        client.close()


def main() -> None:  # pragma: no cover - by hand
    """``python -m tests.support.package_venv VERSION FOLDER``: build, install, chat, print."""
    version, folder = sys.argv[1], Path(sys.argv[2])
    folder.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel(folder / "dist")
    venv = make_venv(folder, wheel, version)
    print(f"installed in {venv.install_s:.0f} s: {installed(venv)}")  # noqa: T201
    from tests.support.redis_url import real_redis_url

    result = chat_twice(venv, folder, real_redis_url())
    print(json.dumps(result.__dict__, indent=1, default=str)[:6000])  # noqa: T201


if __name__ == "__main__":  # pragma: no cover
    main()
