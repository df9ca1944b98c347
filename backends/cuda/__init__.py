"""The CUDA backend: CUDA C printed with cgen (``emit``), built with nvcc
(``build``); launched with pycuda by :mod:`polyc.gpu_runtime`, or emulated
on the CPU (``emit.emulation_source``)."""
