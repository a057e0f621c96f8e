"""Long memory for any chat model behind a LiteLLM proxy, stored in Redis (no vector database).

The proxy loads :data:`litellm_memory_hook.proxy_callback.memory_hook`; everything else is the
machinery behind it and the ``litellm-memory`` command.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
