"""PNG plots of the benchmarks, written beside their JSON (matplotlib, Agg, no display needed).

From the rows of ``litellm-memory bench latency --json OUT.json``
(:func:`benchmarks.latency.latency_rows_json`), :func:`write_latency_plots` writes

* ``OUT-hook-time.png``: the pre-call hook's time (p50 and p99, ms) against the stored messages,
  beside the naive approach (load every message, score in Python); both axes logarithmic;
* ``OUT-chars-sent.png``: characters the model receives per request against the conversation's
  length, beside the whole history a client would otherwise resend (rows written before
  ``prompt_chars_p50`` / ``history_chars`` existed get no such plot).

From the report of ``litellm-memory bench recall --json OUT.json``
(:meth:`benchmarks.recall.RecallReport.as_json`, with its cover curve),
:func:`write_recall_plots` writes ``OUT-cover.png``: the share of the labelled evidence that
reaches the model (recent window or recalled lines) against the characters of the recalled
lines per request, this hook beside plain IDF, for the best ``k`` lines and for a character
budget, the hard questions dotted when the data has them, the recent window alone as a
baseline and a star on the product's setting.

matplotlib is an optional dependency (``pip install 'litellm-memory-hook[plots]'``); without it
the ``write_*`` functions raise :class:`ModuleNotFoundError` naming that extra. Only the
object-oriented API is used (no ``pyplot``): no global state, safe in any thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


PLOTS_EXTRA = "pip install 'litellm-memory-hook[plots]'"
HOOK_COLOUR, OTHER_COLOUR, GREY = "#1f77b4", "#d62728", "#7f7f7f"


def _figure(title: str) -> tuple[Figure, Axes]:
    try:
        from matplotlib.figure import Figure
    except ModuleNotFoundError as exc:
        raise ModuleNotFoundError(f"plots need matplotlib: {PLOTS_EXTRA}") from exc
    figure = Figure(figsize=(7.5, 4.8), dpi=110, layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, fontsize=11)
    axes.grid(True, which="major", alpha=0.35)
    axes.grid(True, which="minor", alpha=0.12)
    return figure, axes


def _legend_below(axes: Axes) -> None:
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncols=2, frameon=False, fontsize=9)


def _save(figure: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, format="png", metadata={"Software": None})
    return path


def _beside(json_path: Path, suffix: str) -> Path:
    """``bench/out/latency.json`` -> ``bench/out/latency-<suffix>.png``."""
    return json_path.with_name(f"{json_path.stem}-{suffix}.png")


def _number(row: Mapping[str, Any], name: str) -> float | None:
    value = row.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _series(rows: Sequence[Mapping[str, Any]], name: str) -> tuple[list[float], list[float]]:
    """(messages, value) pairs of the rows that have a positive ``name``."""
    xs, ys = [], []
    for row in rows:
        x, y = _number(row, "messages"), _number(row, name)
        if x is not None and y is not None and x > 0 and y > 0:
            xs.append(x)
            ys.append(y)
    return xs, ys


def _compact(value: float) -> str:
    """1.5 -> ``1.5``, 137942 -> ``138k``, 1377316 -> ``1.38M``."""
    if value >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if value >= 1_000:
        return f"{value / 1_000:.3g}k"
    return f"{value:.2g}" if value < 10 else f"{value:.0f}"


def _label_points(axes: Axes, xs: Sequence[float], ys: Sequence[float], unit: str) -> None:
    for x, y in zip(xs, ys, strict=True):
        text = f"{y / 1000:.3g} s" if unit == "ms" and y >= 1000 else f"{_compact(y)} {unit}"
        axes.annotate(
            text,
            (x, y),
            textcoords="offset points",
            xytext=(5, 6),
            fontsize=8,
            alpha=0.85,
        )
    axes.margins(x=0.12, y=0.12)


def hook_time_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Hook time against stored messages, this hook and the naive approach (log-log).

    Args:
        rows: latency rows (``messages``, ``hook_p50_ms``, ``hook_p99_ms``, ``naive_p50_ms``,
            ``naive_p99_ms``; ``None`` naive values are left out).

    Raises:
        ValueError: no row has a hook time.
    """
    hook_x, hook_p50 = _series(rows, "hook_p50_ms")
    if not hook_x:
        raise ValueError("no latency rows with hook_p50_ms to plot")
    figure, axes = _figure("Pre-call hook time vs stored messages (real Redis)")
    axes.plot(hook_x, hook_p50, "o-", color=HOOK_COLOUR, label="this hook, p50")
    x99, p99 = _series(rows, "hook_p99_ms")
    if x99:
        axes.plot(x99, p99, "o:", color=HOOK_COLOUR, alpha=0.6, label="this hook, p99")
    _label_points(axes, hook_x, hook_p50, "ms")
    naive_x, naive_p50 = _series(rows, "naive_p50_ms")
    if naive_x:
        axes.plot(
            naive_x,
            naive_p50,
            "s-",
            color=OTHER_COLOUR,
            label="naive (read every message, score in Python), p50",
        )
        nx99, n99 = _series(rows, "naive_p99_ms")
        if nx99:
            axes.plot(nx99, n99, "s:", color=OTHER_COLOUR, alpha=0.6, label="naive, p99")
        _label_points(axes, naive_x, naive_p50, "ms")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("stored messages in the conversation")
    axes.set_ylabel("time per request, ms (log)")
    _legend_below(axes)
    return figure


def chars_sent_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Characters per request against the conversation's length: this hook and the full history.

    Args:
        rows: latency rows with ``messages``, ``prompt_chars_p50`` and ``history_chars``.

    Raises:
        ValueError: the rows have no ``prompt_chars_p50`` (written by an older benchmark).
    """
    xs, sent = _series(rows, "prompt_chars_p50")
    if not xs:
        raise ValueError("no latency rows with prompt_chars_p50 to plot")
    figure, axes = _figure("Characters sent per request vs conversation length")
    axes.plot(xs, sent, "o-", color=HOOK_COLOUR, label="this hook (median per request)")
    _label_points(axes, xs, sent, "chars")
    hx, history = _series(rows, "history_chars")
    if hx:
        axes.plot(hx, history, "s--", color=OTHER_COLOUR, label="the full history, resent")
        _label_points(axes, hx, history, "chars")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("stored messages in the conversation")
    axes.set_ylabel("characters per request (log)")
    _legend_below(axes)
    return figure


def write_latency_plots(rows: Sequence[Mapping[str, Any]], json_path: Path) -> list[Path]:
    """Write the latency benchmark's PNGs beside its JSON.

    Args:
        rows: the JSON-ready rows (:func:`benchmarks.latency.latency_rows_json`).
        json_path: where the JSON was written; the PNGs get its name with ``-hook-time`` and
            ``-chars-sent``.

    Returns:
        The PNGs written (no ``-chars-sent`` for rows without ``prompt_chars_p50``).

    Raises:
        ModuleNotFoundError: matplotlib is not installed.
        ValueError: no row has a hook time.
    """
    written = [_save(hook_time_figure(rows), _beside(json_path, "hook-time"))]
    if _series(rows, "prompt_chars_p50")[0]:
        written.append(_save(chars_sent_figure(rows), _beside(json_path, "chars-sent")))
    return written


# -- recall ------------------------------------------------------------------------------------

#: (method, mode) -> (label, colour, marker, line style) of a cover-curve series.
CURVE_STYLE: Mapping[tuple[str, str], tuple[str, str, str, str]] = {
    ("tuned", "budget"): ("this hook, character budget", HOOK_COLOUR, "D", "-"),
    ("tuned", "fixed"): ("this hook, best k lines", HOOK_COLOUR, "o", "--"),
    ("plain-idf", "budget"): ("plain IDF, character budget", GREY, "D", "-"),
    ("plain-idf", "fixed"): ("plain IDF, best k lines", GREY, "o", "--"),
}


def _mode(point: Mapping[str, Any]) -> str:
    """``fixed`` for a ``k=4`` point, ``budget`` for a ``2500 chars`` point."""
    return "fixed" if str(point.get("point", "")).startswith("k=") else "budget"


def _main_point(report: Mapping[str, Any]) -> str | None:
    """The label of the curve point that the report's main figures used (the product's
    setting), e.g. ``2500 chars`` or ``k=4``."""
    recall = (report.get("protocol") or {}).get("recall")
    if not isinstance(recall, Mapping):
        return None
    if recall.get("mode") == "fixed":
        return f"k={recall.get('k')}"
    return f"{recall.get('chars')} chars"


def _window_share(report: Mapping[str, Any]) -> float | None:
    for result in (report.get("results") or {}).values():
        share = (result.get("all") or {}).get("window")
        if isinstance(share, int | float):
            return float(share)
    return None


def _merged_labels(
    series: Sequence[Mapping[str, Any]], xs: Sequence[float], ys: Sequence[float], span: float
) -> list[tuple[str, float, float]]:
    """Point labels (``k=4``, ``2500``), points that (nearly) coincide sharing one label
    (``1500-3000``), so that a saturated curve stays readable."""
    groups: list[list[int]] = []
    for i in range(len(series)):
        last = groups[-1][-1] if groups else None
        if (
            last is not None
            and abs(xs[i] - xs[last]) < 0.04 * span
            and abs(ys[i] - ys[last]) < 0.01
        ):
            groups[-1].append(i)
        else:
            groups.append([i])
    labels = []
    for group in groups:
        names = [str(series[i]["point"]).replace(" chars", "") for i in group]
        text = names[0] if len(names) == 1 else f"{names[0]}-{names[-1]}"
        labels.append((text, xs[group[0]], ys[group[0]]))
    return labels


def cover_figure(report: Mapping[str, Any]) -> Figure:
    """Evidence cover against recalled characters, from a recall report's cover curve.

    One line per method and recall mode (the best ``k`` lines; a character budget), one point
    per setting (x: mean characters of the recalled section per question; y: share of the
    labelled evidence lines in the recent window or recalled); dotted: the same on the ``hard``
    questions when the data has them; the recent window alone as a dashed baseline; a star on
    the setting of the report's main figures.

    Args:
        report: ``RecallReport.as_json()`` with its ``curve`` (``point``, ``method``, ``cover``,
            ``cover_hard``, ``recalled_chars_mean``).

    Raises:
        ValueError: the report has no cover curve.
    """
    curve = [p for p in report.get("curve") or () if isinstance(p, Mapping)]
    if not curve:
        raise ValueError("the recall report has no cover curve (run bench recall with --curve)")
    source = Path(str(report.get("source") or "")).name
    questions = max(int(p.get("questions") or 0) for p in curve)
    title = "Evidence reaching the model vs characters recalled"
    if source:
        title += f"\n{source}, {questions} questions"
    figure, axes = _figure(title)
    from matplotlib.ticker import PercentFormatter  # after _figure: it names the extra

    main = _main_point(report)
    all_x = [float(p["recalled_chars_mean"]) for p in curve]
    x_span = (max(all_x) - min(all_x)) or 1.0
    hard = any(p.get("cover_hard") is not None for p in curve)
    for (method, mode), (label, colour, marker, style) in CURVE_STYLE.items():
        series = sorted(
            (p for p in curve if p.get("method") == method and _mode(p) == mode),
            key=lambda p: float(p["recalled_chars_mean"]),
        )
        if not series:
            continue
        xs = [float(p["recalled_chars_mean"]) for p in series]
        ys = [float(p["cover"]) for p in series]
        width = 2.0 if method == "tuned" else 1.2
        axes.plot(xs, ys, marker=marker, linestyle=style, color=colour, label=label, lw=width)
        if hard:
            hard_ys = [float(p["cover_hard"] or 0.0) for p in series]
            axes.plot(xs, hard_ys, marker=marker, linestyle=":", color=colour, alpha=0.7, lw=1)
        if method == "tuned":
            below = mode == "fixed"
            for text, x, y in _merged_labels(series, xs, ys, x_span):
                offset = (4, -13) if below else (-4, 7)
                axes.annotate(
                    text,
                    (x, y),
                    textcoords="offset points",
                    xytext=offset,
                    ha="left" if below else "right",
                    fontsize=8,
                )
            for p, x, y in zip(series, xs, ys, strict=True):
                if p["point"] == main:
                    axes.plot([x], [y], marker="*", markersize=16, color="#f2b01e", zorder=5)
    if hard:
        axes.plot([], [], linestyle=":", color="black", alpha=0.7, label="dotted: hard questions")
    if main:
        axes.plot(
            [],
            [],
            marker="*",
            linestyle="",
            markersize=12,
            color="#f2b01e",
            label=f"the product's setting ({main})",
        )
    window = _window_share(report)
    if window is not None:
        axes.axhline(window, color="black", linestyle="--", linewidth=1, alpha=0.5)
        axes.annotate(
            f"recent window alone: {window:.0%}",
            (0, window),
            xycoords=("axes fraction", "data"),
            textcoords="offset points",
            xytext=(6, 4),
            fontsize=8,
        )
    axes.set_xlim(left=0)
    axes.set_ylim(0, 1)
    axes.yaxis.set_major_formatter(PercentFormatter(1.0))
    axes.set_xlabel("characters of recalled lines per request (mean)")
    axes.set_ylabel("labelled evidence in window or recalled")
    _legend_below(axes)
    return figure


def write_recall_plots(report: Mapping[str, Any], json_path: Path) -> list[Path]:
    """Write the recall benchmark's PNG beside its JSON (``<name>-cover.png``).

    Args:
        report: the JSON-ready report (``RecallReport.as_json()``) with its cover curve.
        json_path: where the JSON was written.

    Returns:
        The PNG written.

    Raises:
        ModuleNotFoundError: matplotlib is not installed.
        ValueError: the report has no cover curve.
    """
    return [_save(cover_figure(report), _beside(json_path, "cover"))]


__all__ = [
    "PLOTS_EXTRA",
    "chars_sent_figure",
    "cover_figure",
    "hook_time_figure",
    "write_latency_plots",
    "write_recall_plots",
]


# -- cost --------------------------------------------------------------------------------------

#: series name -> (label, colour, line style) of the cost plot
COST_STYLE: Mapping[str, tuple[str, str, str]] = {
    "cache": ("memory, cache layout", HOOK_COLOUR, "-"),
    "seed": ("memory, seed layout", OTHER_COLOUR, "--"),
    "whole history, no memory": ("whole history, no memory", GREY, ":"),
}


def cost_figure(report: Mapping[str, Any], client: str, rate: float = 0.1) -> Figure:
    """Billed-equivalent input characters per request (cached part at ``rate``) against the
    request number, for ``client``'s layouts and the whole-history baseline."""
    figure, axes = _figure(
        f"input per request, cached at {rate}x ({client}-message client)"
        if client == "new"
        else f"input per request, cached at {rate}x (whole-history client)"
    )
    for series in report.get("series") or ():
        if series.get("client") != client and series.get("name") != "whole history, no memory":
            continue
        label, colour, style = COST_STYLE.get(str(series.get("name")), (series["name"], GREY, "-"))
        billed = [(p - c) + rate * c for p, c in series.get("per_request") or ()]
        axes.plot(range(1, len(billed) + 1), billed, style, color=colour, label=label, lw=1.3)
    axes.set_xlabel("request (LoCoMo turn)")
    axes.set_ylabel("billed-equivalent characters")
    _legend_below(axes)
    return figure


def write_cost_plots(report: Mapping[str, Any], json_path: Path) -> list[Path]:
    """Write ``OUT-billed-new.png`` and ``OUT-billed-whole.png`` beside ``bench cost``'s JSON
    (the clients the report holds).

    Raises:
        ModuleNotFoundError: matplotlib is not installed.
    """
    clients = sorted({str(s.get("client")) for s in report.get("series") or ()})
    return [
        _save(cost_figure(report, client), _beside(json_path, f"billed-{client}"))
        for client in clients
    ]
