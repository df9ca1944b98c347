"""The C/OpenMP backend: ``emit`` (LoopNest -> C source) and ``build`` (compile, cache, load)."""
