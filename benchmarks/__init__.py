"""The benchmarks of litellm-memory-hook, run from a clone of the repository (not installed with the
package): ``litellm-memory bench latency|recall|extraction|proxy|cost|stall|fetch-locomo``.

Their data is in ``benchmarks/data`` (the project's multilingual set; LoCoMo is downloaded there
by ``bench fetch-locomo``). Modules:

* :mod:`.cli` (the command group), :mod:`.commands_hook` and :mod:`.commands_proxy` (the
  commands), :mod:`.options` (what the commands share: data, samples, Redis, output);
* in process, on a real Redis: :mod:`.latency`, :mod:`.recall` (with :mod:`.recall_report`),
  :mod:`.stall`;
* through a real proxy and the stand-in (:mod:`litellm_memory_hook.tools.stack`):
  :mod:`.extraction` (with :mod:`.replay_plan`, :mod:`.evidence`, :mod:`.extraction_report`),
  :mod:`.cost`, :mod:`.proxy` (with :mod:`.proxy_talk`, :mod:`.proxy_write`,
  :mod:`.proxy_report`);
* :mod:`.keys` (a run's key prefix), :mod:`.plots` (the figures, with matplotlib).
"""
