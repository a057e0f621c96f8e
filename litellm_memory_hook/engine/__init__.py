"""The memory engine: long memory for chat turns over Redis, whatever the client's API.

Before the model call it reads the conversation, plans the turn, fits the window, builds the
layers and assembles the messages (:mod:`.rebuild`, :mod:`.layers`, :mod:`.recall_step`,
sized by :mod:`.options`), and leaves a signed record (:mod:`.record`) naming the turns it
holds (:mod:`.held_turns`); after the reply it writes the turn and schedules its extraction
(:mod:`.commit`, with the outage buffer of :mod:`.write_buffer` and the breakers of
:mod:`.breakers`). :class:`~.memory_engine.MemoryEngine` ties them together; :mod:`.turn` holds
what it is asked and what it answers, :mod:`.identity` whose turn it is.

It speaks chat completions and imports nothing from :mod:`litellm_memory_hook.proxy`: the
LiteLLM hook (:mod:`litellm_memory_hook.proxy.hook`) and the protocol adapters
(:mod:`litellm_memory_hook.protocols`) sit around it. Architecture: docs/design.md.
"""
