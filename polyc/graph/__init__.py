"""The graph layer: whole programs of numpy calls compiled as fusion groups.

``polyc.jit`` (:mod:`polyc.graph.jit`) traces a function of numpy arrays
into a :class:`Graph` of operations (:mod:`polyc.graph.numpy_api`), the
fusion planner (:mod:`polyc.graph.plan`) groups them from polyhedral
feedback, and each group compiles through the ordinary pipeline to one
kernel.  ``polyc.graph.trace(fn, *args)`` returns the graph itself.
:mod:`polyc.graph.torch_backend` (imported only on demand: it needs torch)
is the ``torch.compile`` backend ``"polyc"`` built on the same path
(``docs/torch.md``).
"""

from .core import Node, Tracer
from .jit import Jitted, jit, trace
from .plan import Graph, Plan

__all__ = ["Graph", "Node", "Tracer", "Jitted", "jit", "trace", "Plan"]
