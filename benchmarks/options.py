"""What the ``bench`` commands share: where their data and their Redis come from, which samples
they run, and how they print.

* Data: the repository's multilingual dev set (``benchmarks/data/multiling``, written for this
  project) is in every clone. LoCoMo (Maharana et al., ACL 2024; snap-research/locomo, CC BY-NC
  4.0) is not copied into the repository: ``litellm-memory bench fetch-locomo`` downloads it into
  ``benchmarks/data/locomo/locomo10.json`` (ignored by git), checks that it reads as LoCoMo and
  says its licence.
* Redis (:func:`bench_redis`): ``--redis-url``, else ``LITELLM_MEMORY_REDIS__URL`` /
  ``REDIS_URL``, else the embedded Redis of the ``serve`` running on ``--data-dir``, else
  ``redis://127.0.0.1:6379/0``.
* Samples (:func:`pick_samples`): ``--sample-id ID`` applies to every file, ``--sample-id
  FILE:ID`` to that file only (naming FILE is enough).
* Output: tables at their full width when stdout is no terminal (``print_table`` of the CLI), and
  ``--json -`` writes the report to stdout, the human lines to stderr (:func:`write_json`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from litellm_memory_hook.errors import DatasetError, MemoryHookError
from litellm_memory_hook.tools.cli_common import console
from litellm_memory_hook.tools.cli_errors import fail
from litellm_memory_hook.tools.histories import list_locomo_samples

#: the repository's own benchmark data, beside this module (``benchmarks/data`` of a clone).
BENCH_DATA = Path(__file__).resolve().parent / "data"
#: the multilingual dev set written for this project (LoCoMo format), the benchmarks' default.
MULTILING_DEV = BENCH_DATA / "multiling" / "multiling-dev.json"
#: where LoCoMo comes from: it cannot be copied here (CC BY-NC 4.0), so ``--data`` names it.
LOCOMO_SOURCE = (
    "LoCoMo is not part of this repository (CC BY-NC 4.0): download locomo10.json from "
    "https://github.com/snap-research/locomo and pass it with --data"
)


def default_bench_files() -> list[Path]:
    """The benchmark files used when none is named: the multilingual dev set of a clone.

    Raises:
        DatasetError: the set is not there (an installed wheel has no benchmark data).
    """
    if not MULTILING_DEV.is_file():
        raise DatasetError(
            f"no benchmark data at {MULTILING_DEV} (it ships with a clone of the repository); "
            f"name a LoCoMo-format file. {LOCOMO_SOURCE}"
        )
    return [MULTILING_DEV]


#: where ``bench fetch-locomo`` puts LoCoMo, and where the benchmarks look for it.
LOCOMO_FILE = BENCH_DATA / "locomo" / "locomo10.json"
#: LoCoMo's question-answering file in its authors' repository.
LOCOMO_URL = "https://raw.githubusercontent.com/snap-research/locomo/main/data/locomo10.json"
#: the one-line command that downloads it.
FETCH_COMMAND = "litellm-memory bench fetch-locomo"
#: how a report names LoCoMo.
LOCOMO_CITATION = (
    "LoCoMo: Maharana et al., Evaluating Very Long-Term Conversational Memory of LLM Agents, "
    "ACL 2024 (snap-research/locomo, CC BY-NC 4.0)"
)
#: what a LoCoMo user must know; printed with every download.
LOCOMO_LICENCE = (
    "LoCoMo: Maharana et al., 'Evaluating Very Long-Term Conversational Memory of LLM Agents', "
    "ACL 2024 (github.com/snap-research/locomo), licence CC BY-NC 4.0: cite it where its "
    "figures are reported, non-commercial use only; it is not part of this repository"
)
#: the benchmark files a FILE of ``--sample-id FILE:ID`` may name by their name or stem alone.
KNOWN_FILES = (MULTILING_DEV, LOCOMO_FILE)
#: the sample the LoCoMo benchmarks replay by default.
LOCOMO_DEFAULT_SAMPLE = "conv-26"
#: the value of ``--json`` that writes the report to stdout.
STDOUT = "-"
#: the width of a benchmark's output that goes to no terminal: tables print at their own width.
PIPED_WIDTH = 10_000
#: the default value of ``--data-dir`` (the embedded Redis folder of ``serve``).
DEFAULT_DATA_DIR = Path(".litellm-memory")


# -- Redis ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BenchRedis:
    """The Redis a benchmark runs on, and why that one (``source``, for its first line)."""

    url: str
    source: str


def bench_redis(explicit: str | None, data_dir: Path) -> BenchRedis:
    """The Redis a benchmark writes its throwaway keys to.

    ``explicit`` (``--redis-url``), else the environment's (``LITELLM_MEMORY_REDIS__URL``, the
    flat ``LITELLM_MEMORY_REDIS_URL``, else ``REDIS_URL``), else the embedded Redis of the
    ``serve`` running on ``data_dir`` (its unix socket, when it answers), else
    ``redis://127.0.0.1:6379/0``.

    Raises:
        ConfigError: a ``LITELLM_MEMORY_*`` variable is unknown or invalid.
    """
    from litellm_memory_hook.settings import load_settings, setting_origin

    if explicit:
        return BenchRedis(explicit, "--redis-url")
    settings = load_settings()
    if "url" in settings.redis.model_fields_set:
        name = setting_origin(None, "redis.url") or "REDIS_URL"
        return BenchRedis(settings.redis.url, name)
    from litellm_memory_hook.store.embedded import answers, socket_path
    from litellm_memory_hook.tools.processes import running_serve

    record = running_serve(data_dir)
    socket = socket_path(data_dir)
    if record is not None and answers(socket):
        return BenchRedis(f"unix://{socket}", f"embedded Redis of serve pid {record.pid}")
    return BenchRedis(settings.redis.url, f"default: no REDIS_URL, no serve runs on {data_dir}")


# -- the options and lines every bench command shares ---------------------------------------------

BENCH_REDIS_HELP = (
    "A real Redis (default: LITELLM_MEMORY_REDIS__URL, else REDIS_URL, else the embedded Redis "
    "of the serve running on --data-dir, else redis://127.0.0.1:6379/0); the keys the run "
    "writes (under membench...) are deleted after."
)
BENCH_JSON_HELP = "Write the report to this file; '-': to stdout alone (the tables go to stderr)."
BenchDataDirOption = Annotated[
    Path,
    typer.Option(
        "--data-dir", help="The data folder of a running serve, whose embedded Redis is used."
    ),
]


def bench_url(explicit: str | None, data_dir: Path, out: Console) -> str:
    """The Redis URL a benchmark runs on (:func:`bench_redis`), said in one dim line on ``out``
    when it is a running serve's embedded Redis or the default; a bad setting exits with one
    line."""
    try:
        chosen = bench_redis(explicit, data_dir)
    except MemoryHookError as exc:
        raise fail(str(exc)) from exc
    if chosen.source.startswith(("embedded", "default")):
        out.print(f"redis: {chosen.url} ({chosen.source})", style="dim", soft_wrap=True)
    return chosen.url


def write_plots(write: Callable[..., list[Path]], *args: Any) -> None:
    """Write a benchmark's PNGs (``write(*args)``) and name them; without matplotlib, say how
    to get it."""
    from benchmarks.plots import PLOTS_EXTRA

    try:
        for png in write(*args):
            console.print(f"plot: {png}")
    except ModuleNotFoundError:
        console.print(f"plots skipped: matplotlib is not installed ({PLOTS_EXTRA})")


# -- data and samples -----------------------------------------------------------------------------


def locomo_or_multiling() -> tuple[Path, str]:
    """The file and sample a one-sample benchmark replays by default: LoCoMo's ``conv-26`` when
    ``bench fetch-locomo`` downloaded it, else the multilingual set's first sample."""
    if LOCOMO_FILE.is_file():
        return LOCOMO_FILE, LOCOMO_DEFAULT_SAMPLE
    if not MULTILING_DEV.is_file():
        raise DatasetError(
            f"no benchmark data at {BENCH_DATA} (it ships with a clone of the repository); "
            f"name a LoCoMo-format file with --data, or download LoCoMo: {FETCH_COMMAND}"
        )
    return MULTILING_DEV, list_locomo_samples(MULTILING_DEV)[0]


def missing_locomo(path: Path, what: str) -> str:
    """The message for a LoCoMo file that is not there."""
    return (
        f"no LoCoMo file at {path}: {what} (--data FILE). LoCoMo is not part of this "
        f"repository (CC BY-NC 4.0); download it with: {FETCH_COMMAND}"
    )


def _same_file(named: str, file: Path) -> bool:
    """Whether ``named`` (a FILE of FILE:ID) means ``file``: the same path, name or stem."""
    candidate = Path(named)
    if candidate.exists() and file.exists():
        try:
            return candidate.resolve() == file.resolve()
        except OSError:
            return False
    return named in (str(file), file.name, file.stem)


def split_sample_id(value: str, files: Sequence[Path] = ()) -> tuple[Path | None, str]:
    """``(FILE, ID)`` of a ``--sample-id`` value: ``FILE:ID`` when the part before the last
    ``:`` names one of ``files`` or an existing file, else ``(None, value)`` (a plain id).

    Raises:
        DatasetError: the part before the last ``:`` ends in ``.json`` but names no file.
    """
    head, sep, tail = value.rpartition(":")
    if not sep or not head or not tail:
        return None, value
    for file in files:
        if _same_file(head, file):
            return file, tail
    if Path(head).is_file():
        return Path(head), tail
    if head.lower().endswith(".json"):
        raise DatasetError(f"--sample-id {value}: no file {head}")
    return None, value


def pick_samples(
    files: Sequence[Path], values: Sequence[str], defaults: Sequence[Path] = ()
) -> list[tuple[Path, list[str]]]:
    """Which samples of which files a benchmark runs: ``[(file, sample ids)]``, an empty list
    of ids meaning every sample of the file.

    ``--sample-id ID`` applies to every file; ``--sample-id FILE:ID`` to FILE only (FILE is
    added to ``files`` when it is not one of them; it may be a path, or the name or stem of a
    given file, a default or one of the repository's sets, :data:`KNOWN_FILES`). With no
    ``files`` given: the files named in ``FILE:ID`` values when there are any, else
    ``defaults``. A file no value applies to runs every sample.

    Raises:
        DatasetError: a ``FILE:ID`` names a ``.json`` file that does not exist.
    """
    chosen = list(files)
    plain: list[str] = []
    scoped: list[tuple[Path, str]] = []
    for value in values:
        file, sample = split_sample_id(value, [*chosen, *defaults, *KNOWN_FILES])
        if file is None:
            plain.append(sample)
            continue
        if not any(_same_file(str(file), f) for f in chosen):
            chosen.append(file)
        scoped.append((file, sample))
    if not chosen:
        chosen = list(defaults)
    picked = []
    for file in chosen:
        ids = list(plain)
        ids += [s for f, s in scoped if _same_file(str(f), file) and s not in ids]
        picked.append((file, ids))
    return picked


def one_sample(
    data: Path | None, sample_id: str | None, *, need_locomo: bool = False
) -> tuple[Path, str]:
    """The file and sample of a one-sample benchmark (``bench latency``, ``bench cost``):
    ``--sample-id FILE:ID`` names both; ``--data`` the file; else :func:`locomo_or_multiling`
    (``need_locomo``: LoCoMo's default file, which must be there).

    Raises:
        DatasetError: ``--data`` and FILE of FILE:ID name different files, or a FILE:ID file is
            missing.
    """
    known = [data] if data else []
    file, sample = split_sample_id(sample_id, [*known, *KNOWN_FILES]) if sample_id else (None, "")
    if file is not None and data is not None and not _same_file(str(file), data):
        raise DatasetError(f"--sample-id {sample_id} names another file than --data {data}")
    path = file or data
    if path is None:
        path, default_sample = (
            (LOCOMO_FILE, LOCOMO_DEFAULT_SAMPLE) if need_locomo else locomo_or_multiling()
        )
    else:
        default_sample = LOCOMO_DEFAULT_SAMPLE
    return path, sample or default_sample


# -- output ---------------------------------------------------------------------------------------


def human_console(json_out: Path | None) -> Console:
    """Where a benchmark prints its tables and lines: stdout, or stderr when ``--json -`` puts
    the report on stdout. Not a terminal (piped, redirected): a console :data:`PIPED_WIDTH`
    wide, so no table is cut or folded and no line wrapped at 80 characters."""
    to_stderr = json_out is not None and str(json_out) == STDOUT
    if to_stderr:
        from litellm_memory_hook.tools.cli_common import err_console as base
    else:
        base = console
    if base.is_terminal:
        return base
    return Console(markup=False, emoji=False, stderr=to_stderr, width=PIPED_WIDTH)


def write_json(payload: Any, json_out: Path, out: Console | None = None) -> Path | None:
    """Write a benchmark's report: to stdout alone for ``--json -`` (returns ``None``), else
    to the file (its folder made; says ``json: FILE`` on ``out``; returns the file)."""
    text = json.dumps(payload, indent=2, ensure_ascii=False)
    if str(json_out) == STDOUT:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return None
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(text, encoding="utf-8")
    (out or console).print(f"json: {json_out}", soft_wrap=True, highlight=False)
    return json_out


# -- fetching LoCoMo ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fetched:
    """What ``bench fetch-locomo`` wrote: the file, its samples and its question count."""

    path: Path
    samples: list[str]
    questions: int
    downloaded: bool


def check_locomo(path: Path) -> tuple[list[str], int]:
    """The sample ids and question count of a LoCoMo file that every sample of reads.

    Raises:
        DatasetError: it is not LoCoMo (unreadable, no samples, a sample that does not read,
            no questions).
    """
    from litellm_memory_hook.tools.histories import load_locomo

    samples = list_locomo_samples(path)
    if not samples:
        raise DatasetError(f"{path}: no LoCoMo samples in it")
    questions = sum(len(load_locomo(path, s).qa) for s in samples)
    if not questions:
        raise DatasetError(f"{path}: no questions (qa) in it: not LoCoMo's QA file")
    return samples, questions


def fetch_locomo(url: str, to: Path, *, force: bool = False, timeout_s: float = 120.0) -> Fetched:
    """Download LoCoMo from ``url`` into ``to`` (replaced at once, only once it reads as
    LoCoMo); a file already there that reads is kept unless ``force``.

    Raises:
        DatasetError: the download failed or is not LoCoMo (nothing is written then).
    """
    import httpx

    if to.is_file() and not force:
        samples, questions = check_locomo(to)
        return Fetched(to, samples, questions, downloaded=False)
    try:
        response = httpx.get(url, follow_redirects=True, timeout=timeout_s)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise DatasetError(f"cannot download {url}: {exc}") from exc
    to.parent.mkdir(parents=True, exist_ok=True)
    partial = to.with_name(to.name + ".part")
    partial.write_bytes(response.content)
    try:
        samples, questions = check_locomo(partial)
    except DatasetError as exc:
        partial.unlink(missing_ok=True)
        raise DatasetError(f"{url} is not LoCoMo's QA file: {exc}") from exc
    partial.replace(to)
    return Fetched(to, samples, questions, downloaded=True)
