"""Feedback of fusion groups memoised up to the names of their tensors.

A program written with a Python loop (``for _ in range(steps): u = step(u)``)
traces into the same operations again and again under new tensor names
(``t1..t9``, then ``t10..t18``, ...), so the fusion planner
(:mod:`polyc.graph.plan`) asks for the feedback of many groups whose
generated TC differs only in those names.  :class:`FeedbackMemo` keys a
group by its TC with every tensor name ``t<id>`` renumbered in order of
first appearance (its temporaries, the node of each statement and its
inlined tensors likewise), and answers a repeated group with the stored
:class:`~polyc.graph.feedback.Feedback` renamed, without lowering it again.

With the disk cache (``Config.disk_cache``) the answers also persist, as
sealed JSON entries ``<key>.feedback.json`` of the cache directory
(:func:`polyc.cache.write_json_entry`), keyed by the canonical group, the
code-generation options (:meth:`~polyc.config.Config.codegen_key`, the same
options the lowered-source cache keys on) and polyc's own sources
(:func:`polyc.pipeline.code_fingerprint`): planning a model again in a new
process (a restarted notebook, a second ``torch.compile``) reads the
verdicts instead of lowering every candidate group again.  A group isl's
scheduler gave up on (``Feedback.abandoned``: a CPU-time limit, so it may
depend on the machine's load) is never stored.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import asdict, fields, replace
from typing import Callable

from .. import __version__
from .. import cache as disk
from ..config import Config
from ..schedule.contraction import Contraction
from .feedback import Feedback
from .lower import GroupSource

log = logging.getLogger(__name__)

#: the format of a stored answer (change it when :class:`Feedback` changes)
FEEDBACK_FORMAT = "polyc-feedback-1"

#: a tensor name of the graph (``t12``), also as the prefix of a helper (``t12_s``)
_NAME = re.compile(r"(?<![A-Za-z0-9_])t(\d+)(?![0-9])")


def canonical(src: GroupSource) -> tuple[tuple, list[str]]:
    """The key of ``src`` up to tensor names, and its tensor names in the
    order the key numbers them."""
    order: dict[str, int] = {}

    def sub(m: re.Match) -> str:
        return f"t{order.setdefault(m.group(0), len(order))}"

    def names(seq) -> tuple[str, ...]:
        return tuple(_NAME.sub(sub, t) for t in seq)
    key = (_NAME.sub(sub, src.text), names(src.temps), names(src.line_nodes),
           names(src.inlined))
    return key, list(order)


def renamed(fb: Feedback, old: list[str], new: list[str]) -> Feedback:
    """``fb`` with the tensor names ``old[k]`` replaced by ``new[k]``."""
    trans = dict(zip(old, new))

    def rn(s: str) -> str:
        return _NAME.sub(lambda m: trans.get(m.group(0), m.group(0)), s)
    return replace(fb, loops={rn(s): b for s, b in fb.loops.items()},
                   writers={rn(s): rn(w) for s, w in fb.writers.items()},
                   inlined=tuple(rn(t) for t in fb.inlined),
                   contracted={rn(t): replace(c, tensor=rn(c.tensor), buffer=rn(c.buffer))
                               for t, c in fb.contracted.items()},
                   error=rn(fb.error))


def _to_json(fb: Feedback, names: list[str]) -> dict:
    d = asdict(fb)
    d["loops"] = {s: list(b) for s, b in fb.loops.items()}
    d["inlined"] = list(fb.inlined)
    d["contracted"] = [asdict(c) | {"sizes": list(c.sizes)} for c in fb.contracted.values()]
    return {"feedback": d, "names": list(names)}


def _from_json(data: dict) -> tuple[Feedback, list[str]] | None:
    """The answer stored by :func:`_to_json`, or ``None`` when the entry is
    not of that shape (then the group is lowered again)."""
    try:
        d = dict(data["feedback"])
        names = [str(n) for n in data["names"]]
        if set(d) != {f.name for f in fields(Feedback)} or d["abandoned"]:
            return None
        contracted = {}
        for c in d["contracted"]:
            c = Contraction(**{**c, "sizes": tuple(int(x) for x in c["sizes"])})
            contracted[c.tensor] = c
        fb = Feedback(**{**d, "loops": {str(s): tuple(int(x) for x in b)
                                        for s, b in d["loops"].items()},
                         "writers": {str(s): str(w) for s, w in d["writers"].items()},
                         "inlined": tuple(str(t) for t in d["inlined"]),
                         "contracted": contracted})
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    return fb, names


class FeedbackMemo:
    """Feedback per group source, computed once per renaming class; with
    ``config`` and its disk cache, also kept across processes (see the
    module docstring)."""

    def __init__(self, compute: Callable[[GroupSource], Feedback],
                 config: Config | None = None) -> None:
        self._compute = compute
        self._seen: dict[tuple, tuple[Feedback, list[str]]] = {}
        self._config = config if config is not None and config.disk_cache else None
        self.hits = 0
        self.disk_hits = 0

    def _disk_key(self, key: tuple) -> str:
        from ..pipeline import code_fingerprint
        text = "\0".join([FEEDBACK_FORMAT, __version__, code_fingerprint(), repr(key),
                          repr(self._config.codegen_key())])
        return hashlib.sha256(text.encode()).hexdigest()

    def _load(self, key: tuple) -> tuple[Feedback, list[str]] | None:
        if self._config is None:
            return None
        k = self._disk_key(key)
        directory = disk.usable_dir(self._config.resolved_cache_dir())
        data = disk.read_json_entry(directory, f"{k}.feedback.json", key=k,
                                    fmt=FEEDBACK_FORMAT)
        return None if data is None else _from_json(data)

    def _store(self, key: tuple, fb: Feedback, names: list[str]) -> None:
        if self._config is None or fb.abandoned:
            return
        k = self._disk_key(key)
        directory = disk.usable_dir(self._config.resolved_cache_dir())
        try:
            disk.write_json_entry(directory, f"{k}.feedback.json", _to_json(fb, names),
                                  key=k, fmt=FEEDBACK_FORMAT)
        except OSError as e:     # (best effort: costs lowering the group again later)
            log.debug("feedback of a group not stored: %s", e)

    def __call__(self, src: GroupSource) -> Feedback:
        key, names = canonical(src)
        if key not in self._seen:
            stored = self._load(key)
            if stored is not None:
                self.disk_hits += 1
                self._seen[key] = stored
        if key in self._seen:
            fb, old = self._seen[key]
            self.hits += 1
            return renamed(fb, old, names)
        fb = self._compute(src)
        self._seen[key] = (fb, names)
        self._store(key, fb, names)
        return fb
