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
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable

from .feedback import Feedback
from .lower import GroupSource

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


class FeedbackMemo:
    """Feedback per group source, computed once per renaming class."""

    def __init__(self, compute: Callable[[GroupSource], Feedback]) -> None:
        self._compute = compute
        self._seen: dict[tuple, tuple[Feedback, list[str]]] = {}
        self.hits = 0

    def __call__(self, src: GroupSource) -> Feedback:
        key, names = canonical(src)
        if key in self._seen:
            fb, old = self._seen[key]
            self.hits += 1
            return renamed(fb, old, names)
        fb = self._compute(src)
        self._seen[key] = (fb, names)
        return fb
