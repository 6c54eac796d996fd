"""Making a file's summary from its content: an outline from CPython's parser when it can, the
full summary or its values alone from libcst's parse when a question needs them.

The project asks for these through the `SummaryMaker` it is given
(`linter.model.project._summary_store`); `SUMMARY_MAKER` is the one every run uses.
"""

from __future__ import annotations

from collections.abc import Callable

from linter._parse import parse_module, parse_module_anew
from linter._source import load_document
from linter.model.assembly._summarize import summarize
from linter.model.project import (
    ModuleContext,
    ModuleSummary,
    SummaryMaker,
    content_digest,
    empty_summary,
    outline,
)
from linter.model.syntax import index_aside, lines_aside, module_index
from linter.model.values import value_records

__all__ = ["SUMMARY_MAKER", "full_summary", "summarise_file", "values_summary"]


def summarise_file(item: tuple[str, bytes, bool]) -> ModuleSummary:
    """Summarise one file as an outline (`linter.model.project._outline`: its per-step reasons and
    AMP
    values are computed when a query needs them, see `full_summary`); a file CPython's parser
    rejects gets libcst's full summary, and one neither can read or parse offers nothing."""
    path, data, has_amp = item
    try:
        text = load_document(path, data).text
        found = outline(path, text, content_digest(data), has_amp=has_amp)
        if found is None:
            module = parse_module(text)
            found = summarize(ModuleContext(path, text, module), path, has_amp=has_amp)
    except Exception:  # the file's own lint reports why; its summary is simply empty
        return empty_summary(path)
    # Written out here, in the worker: the process that stores every summary only hashes it.
    found.keep_text()
    return found


def full_summary(path: str, data: bytes, outlined: ModuleSummary) -> ModuleSummary | None:
    """The full summary of the file an outline stands for, from ``data`` (its content now), or
    None when that content is not what the outline was made from (changed since: its reasons
    are unknown, not guessed)."""
    return _from_parse(
        path,
        data,
        outlined,
        lambda context: summarize(context, path, has_amp=outlined.has_amp),
    )


def values_summary(path: str, data: bytes, outlined: ModuleSummary) -> ModuleSummary | None:
    """A summary of the file an outline stands for that holds only its AMP values, exactly the
    full summary's (`full_summary`, None as there): a question about values needs no per-step
    reason, and summarising the rest is most of a full summary's time (a 3,800-line trainer:
    1.2 s besides its 0.4 s parse, half of it the per-step reasons). In a cold run of the
    55-repository sample, 54 of the 108 full summaries were made for values alone and took 10.1
    of their 13.6 CPU s; made alone, those take 6.0 s."""
    return _from_parse(
        path,
        data,
        outlined,
        lambda context: ModuleSummary(
            path,
            has_amp=outlined.has_amp,
            values=tuple(value_records(context, module_index(context))),
        ),
    )


def _from_parse(
    path: str,
    data: bytes,
    outlined: ModuleSummary,
    make: Callable[[ModuleContext], ModuleSummary],
) -> ModuleSummary | None:
    """``make`` applied to libcst's parse of ``data``, None when ``data`` is not the content the
    outline was made from or cannot be parsed."""
    if content_digest(data) != outlined.deferred:
        return None
    # Made while another module is linted: its parse, index and line map must stay the last.
    with index_aside(), lines_aside():
        try:
            text = load_document(path, data).text
            return make(ModuleContext(path, text, parse_module_anew(text)))
        except Exception:  # as in `summarise_file`: a file that cannot be parsed offers nothing
            return None


#: How every run makes summaries.
SUMMARY_MAKER = SummaryMaker(file=summarise_file, full=full_summary, values=values_summary)
