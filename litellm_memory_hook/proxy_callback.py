"""The object that config.yaml names: ``litellm_memory_hook.proxy_callback.memory_hook``.

LiteLLM loads a callback path relative to the config file's folder as a file when such a file
exists (a checkout), else imports it (an installed package). Loaded as a file, this module has no
package around it, so it imports the real hook by absolute name, adding the checkout to
``sys.path`` when the package is not installed. Either way there is one hook instance.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

try:
    from litellm_memory_hook.proxy.hook import memory_hook
except ImportError:  # a checkout that was not pip-installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from litellm_memory_hook.proxy.hook import memory_hook

from litellm_memory_hook.proxy.mounting import mount

try:
    mount(memory_hook)  # the /memory/v1 routes, and a clean worker stop at proxy shutdown
except Exception:  # the memory API must never stop the proxy from starting
    logging.getLogger("litellm_memory_hook").exception("memory API: mounting failed")

__all__ = ["memory_hook"]
