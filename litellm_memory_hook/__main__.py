"""``python -m litellm_memory_hook`` runs the ``litellm-memory`` command."""

from litellm_memory_hook.tools.cli import main

main()
