"""The benchmarks of litellm-memory-hook, run from a clone of the repository (not installed with the
package): ``litellm-memory bench latency|recall|extraction|proxy|cost|stall|fetch-locomo``.

Their data is in ``benchmarks/data`` (the project's multilingual set; LoCoMo is downloaded there
by ``bench fetch-locomo``). Modules: :mod:`.cli` (the command group), :mod:`.commands_hook` and
:mod:`.commands_proxy` (the commands), :mod:`.options` (what the commands share: data, samples,
Redis, output), :mod:`.latency`, :mod:`.recall`, :mod:`.stall`, :mod:`.extraction`,
:mod:`.proxy`, :mod:`.cost` (the benchmarks), :mod:`.keys` (a run's key prefix), :mod:`.plots`.
"""
