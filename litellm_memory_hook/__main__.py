"""``python -m litellm_memory_hook`` runs the ``litellm-memory`` command."""

from litellm_memory_hook.cli import main

main()
