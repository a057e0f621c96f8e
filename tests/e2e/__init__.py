"""End-to-end tests: real processes (a LiteLLM proxy, the stand-in model, ``serve``, the CLI,
docker's commands, the packaged wheel, a browser). Every test here is marked ``e2e``
(conftest.py)."""
