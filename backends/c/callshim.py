"""The call shim: a warm kernel call's argument checks and C call without ctypes.

A warm call of a compiled kernel (:class:`polyc.callplan.CallPlan`) needs
the signature of its arguments (to find its plan), the data pointers of its
arrays, and the call of the generated function.  Through ctypes those cost
about 0.3 us per array and 0.5 us per call, more than the rest of a small
kernel's call together.  This module builds, once per machine and
interpreter, a small CPython extension (``_polyc_callshim``) that does both
in C: reading ``PyArrayObject``'s fields (numpy's ``ndarraytypes.h``), and
calling the generated function's address with the GIL released, as ctypes
does.

The extension goes through the kernel cache like any library
(:func:`polyc.backends.c.build.get_or_build`), keyed by its source, the
compiler, the interpreter (``sys.version``, the extension suffix) and
numpy's version.  Where it cannot be built (no ``Python.h``: the
interpreter's development headers are not installed) or loaded, calls take
the ctypes path, which is equivalent and slower; the reason is logged once.
``POLYC_CALL_SHIM=0`` turns it off.

Sources: the CPython C API (``METH_FASTCALL``, ``Py_BEGIN_ALLOW_THREADS``);
numpy's C API for the ``PyArray_DATA``/``PyArray_DIMS`` field accessors.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import sys
import sysconfig
import threading
from pathlib import Path

import numpy as np

from polyc import cache
from polyc.config import Config
from polyc.errors import PolycError

from . import build

log = logging.getLogger(__name__)

MODULE = "_polyc_callshim"

SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/ndarraytypes.h>

typedef void (*polyc_entry)(const void *params, void *const *ptrs, int32_t threads);

static PyObject *ndarray_type;   /* numpy.ndarray, from init() */

static PyObject *shim_init(PyObject *self, PyObject *arg)
{
    if (!PyType_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "init() takes numpy.ndarray");
        return NULL;
    }
    Py_INCREF(arg);
    Py_XSETREF(ndarray_type, arg);
    Py_RETURN_NONE;
}

/* key(args, kinds) -> tuple or None: per argument its value (kind None: an
   exact int) or its shape (kind: a dtype; an exact ndarray of that dtype,
   C-contiguous and aligned); None when an argument fails (the checked path) */
static PyObject *shim_key(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 2 || !PyTuple_Check(a[0]) || !PyTuple_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "key(args: tuple, kinds: tuple)");
        return NULL;
    }
    Py_ssize_t m = PyTuple_GET_SIZE(a[0]), i, d;
    if (m != PyTuple_GET_SIZE(a[1]) || ndarray_type == NULL)
        Py_RETURN_NONE;
    PyObject *key = PyTuple_New(m);
    if (key == NULL)
        return NULL;
    for (i = 0; i < m; i++) {
        PyObject *arg = PyTuple_GET_ITEM(a[0], i), *kind = PyTuple_GET_ITEM(a[1], i);
        if (kind == Py_None) {
            if (!PyLong_CheckExact(arg))
                goto none;
            Py_INCREF(arg);
            PyTuple_SET_ITEM(key, i, arg);
            continue;
        }
        if ((PyObject *)Py_TYPE(arg) != ndarray_type)
            goto none;
        PyArrayObject *x = (PyArrayObject *)arg;
        if ((PyObject *)PyArray_DESCR(x) != kind) {
            int eq = PyObject_RichCompareBool((PyObject *)PyArray_DESCR(x), kind, Py_EQ);
            if (eq < 0) {
                Py_DECREF(key);
                return NULL;
            }
            if (!eq)
                goto none;
        }
        int need = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED;
        if ((PyArray_FLAGS(x) & need) != need)
            goto none;
        int nd = PyArray_NDIM(x);
        PyObject *shape = PyTuple_New(nd);
        if (shape == NULL) {
            Py_DECREF(key);
            return NULL;
        }
        for (d = 0; d < nd; d++) {
            PyObject *e = PyLong_FromSsize_t(PyArray_DIMS(x)[d]);
            if (e == NULL) {
                Py_DECREF(shape);
                Py_DECREF(key);
                return NULL;
            }
            PyTuple_SET_ITEM(shape, d, e);
        }
        PyTuple_SET_ITEM(key, i, shape);
    }
    return key;
none:
    Py_DECREF(key);
    Py_RETURN_NONE;
}

/* run(entry, params, threads, slots, args, results, temps): the data pointer
   of each slot's array (slots: int32 pairs, source 0/1/2 = args/results/temps
   and index), then entry(params, pointers, threads) without the GIL */
static PyObject *shim_run(PyObject *self, PyObject *const *a, Py_ssize_t n)
{
    if (n != 7 || !PyBytes_Check(a[3]) || !PyTuple_Check(a[4]) || !PyList_Check(a[5])
        || !PyList_Check(a[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "run(entry, params, threads, slots: bytes, args: tuple, "
                        "results: list, temps: list)");
        return NULL;
    }
    void *entry = PyLong_AsVoidPtr(a[0]);
    void *params = PyLong_AsVoidPtr(a[1]);
    long threads = PyLong_AsLong(a[2]);
    if (PyErr_Occurred())
        return NULL;
    if (entry == NULL || params == NULL) {
        PyErr_SetString(PyExc_ValueError, "run(): a null entry or parameter address");
        return NULL;
    }
    Py_ssize_t ns = PyBytes_GET_SIZE(a[3]) / (Py_ssize_t)(2 * sizeof(int32_t)), i;
    const int32_t *slots = (const int32_t *)PyBytes_AS_STRING(a[3]);
    void *stack[32];
    void **ptrs = ns <= 32 ? stack : (void **)PyMem_Malloc((size_t)ns * sizeof(void *));
    if (ptrs == NULL)
        return PyErr_NoMemory();
    for (i = 0; i < ns; i++) {
        int32_t src = slots[2 * i], at = slots[2 * i + 1];
        PyObject *obj = NULL;
        if (src == 0 && at >= 0 && at < PyTuple_GET_SIZE(a[4]))
            obj = PyTuple_GET_ITEM(a[4], at);
        else if (src == 1 && at >= 0 && at < PyList_GET_SIZE(a[5]))
            obj = PyList_GET_ITEM(a[5], at);
        else if (src == 2 && at >= 0 && at < PyList_GET_SIZE(a[6]))
            obj = PyList_GET_ITEM(a[6], at);
        if (obj == NULL || ndarray_type == NULL || (PyObject *)Py_TYPE(obj) != ndarray_type) {
            if (ptrs != stack)
                PyMem_Free(ptrs);
            PyErr_Format(PyExc_TypeError, "run(): slot %zd (source %d, index %d) is not "
                         "a numpy.ndarray", i, (int)src, (int)at);
            return NULL;
        }
        ptrs[i] = PyArray_DATA((PyArrayObject *)obj);
    }
    Py_BEGIN_ALLOW_THREADS
    ((polyc_entry)entry)(params, (void *const *)ptrs, (int32_t)threads);
    Py_END_ALLOW_THREADS
    if (ptrs != stack)
        PyMem_Free(ptrs);
    Py_RETURN_NONE;
}

static PyMethodDef shim_methods[] = {
    {"init", (PyCFunction)shim_init, METH_O, "init(numpy.ndarray)"},
    {"key", (PyCFunction)(void (*)(void))shim_key, METH_FASTCALL, "key(args, kinds)"},
    {"run", (PyCFunction)(void (*)(void))shim_run, METH_FASTCALL,
     "run(entry, params, threads, slots, args, results, temps)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef shim_module = {
    PyModuleDef_HEAD_INIT, "_polyc_callshim", "polyc's warm-call shim", -1, shim_methods,
};

PyMODINIT_FUNC PyInit__polyc_callshim(void) { return PyModule_Create(&shim_module); }
"""

_lock = threading.Lock()
_state: dict = {}


def enabled() -> bool:
    """``POLYC_CALL_SHIM``: unset or ``1`` uses the shim, ``0`` the ctypes
    path.  Raises :class:`~polyc.errors.PolycError` for any other value."""
    value = os.environ.get("POLYC_CALL_SHIM", "1").strip()
    if value not in ("0", "1"):
        raise PolycError(f"POLYC_CALL_SHIM={value!r}: use 1 (the C call shim, the "
                          "default) or 0 (calls through ctypes)")
    return value == "1"


def _import(path: Path, meta: dict):
    """Load the built extension (``cache.get_or_build``'s ``load``: ``OSError``
    has the entry rebuilt)."""
    try:
        loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
        spec = importlib.util.spec_from_file_location(MODULE, str(path), loader=loader)
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError as e:
        raise OSError(f"the call shim {path} does not import: {e}") from e
    module.init(np.ndarray)
    return module


def _build(config: Config):
    compiler = build.resolve_compiler(config.cc)
    include = [sysconfig.get_paths()["include"], np.get_include()]
    flags = ["-O2", "-shared", "-fPIC", *(f"-I{d}" for d in include)]
    key = cache.make_key(SOURCE, compiler=compiler, flags=[
        *flags, f"python={sys.version}", f"ext={sysconfig.get_config_var('EXT_SUFFIX')}",
        f"numpy={np.__version__}"])
    return build.get_or_build(SOURCE, key, [*compiler, *flags], [], (), config, load=_import)


def shim(config: Config):
    """The call shim module (functions ``key`` and ``run``, see the C source),
    or ``None`` when it is turned off or cannot be built here (logged once,
    with the reason).  Built at most once per process and compiler."""
    if not enabled():
        return None
    with _lock:
        if config.cc in _state:
            return _state[config.cc]
        try:
            module = _build(config)
        except (PolycError, OSError) as e:
            log.info("polyc's call shim is not available (%s); kernel calls go through "
                     "ctypes, about 2-4 us slower each", str(e).splitlines()[0])
            module = None
        _state[config.cc] = module
        return module
