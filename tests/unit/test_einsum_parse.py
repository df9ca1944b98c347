"""The einsum frontend without a C compiler: parsing (labels, implicit output,
ellipsis, diagonals, broadcasting), numpy's errors (type and exact message,
taken from numpy itself on the same input), lowering to ``ir.Program``
(domains and access relations compared with hand-written isl), and the
lowered program's meaning, checked with a small point-by-point interpreter
against ``numpy.einsum``.  Also the call-level errors of ``polyc.einsum``
that are raised before anything is compiled."""

from __future__ import annotations

import random

import islpy as isl
import numpy as np
import pytest

from polyc import expr as E
from polyc.einsum_call import einsum as polyc_einsum
from polyc.errors import BindingError, DTypeError, EinsumError, PolycError
from polyc.frontend import einsum as fe
from polyc.isl_util import eval_pw_aff

F64 = "float64"


def numpy_error(subscripts, shapes, out_shape=None) -> Exception | None:
    ops = [np.ones(s) for s in shapes]
    kw = {} if out_shape is None else {"out": np.zeros(out_shape)}
    try:
        np.einsum(subscripts, *ops, **kw)
    except Exception as err:  # noqa: BLE001 - we compare whatever numpy raises
        return err
    return None


# --------------------------------------------------------------------------
# parse results
# --------------------------------------------------------------------------

def test_matmul_spec():
    s = fe.parse("ij,jk->ik", [(2, 3), (3, 5)])
    assert s.input_labels == (("i", "j"), ("j", "k"))
    assert s.output_labels == ("i", "k")
    assert s.label_sizes == {"i": 2, "j": 3, "k": 5}
    assert s.labels == ("i", "j", "k")
    assert s.reduction_labels == ("j",)
    assert s.output_shape == (2, 5)
    assert s.broadcast == ((False, False), (False, False))
    assert not s.implicit and s.canonical == "ij,jk->ik"


@pytest.mark.parametrize("subscripts, shapes, output", [
    ("ij,jk", [(2, 3), (3, 4)], ("i", "k")),
    ("ji", [(2, 3)], ("i", "j")),                       # sorted: a transpose
    ("ba,Ab", [(2, 3), (4, 2)], ("A", "a")),            # uppercase before lowercase
    ("Zz,zA", [(2, 3), (3, 4)], ("A", "Z")),
    ("ii", [(3, 3)], ()),                               # trace
    ("i,i", [(3,), (3,)], ()),                          # inner product
    ("ij,ik", [(2, 3), (2, 4)], ("j", "k")),
    ("...ij,...jk", [(7, 2, 3), (3, 4)], ("e0", "i", "k")),  # ellipsis dims first
    ("", [()], ()),
])
def test_implicit_output(subscripts, shapes, output):
    s = fe.parse(subscripts, shapes)
    assert s.implicit and s.output_labels == output
    assert s.output_shape == np.einsum(subscripts, *[np.ones(x) for x in shapes]).shape


def test_ellipsis_expansion_aligns_right():
    s = fe.parse("i...,...j->...ij", [(2, 3, 4, 5), (4, 1, 6)])
    assert s.input_labels == (("i", "e0", "e1", "e2"), ("e1", "e2", "j"))
    assert s.output_labels == ("e0", "e1", "e2", "i", "j")
    assert s.label_sizes == {"i": 2, "e0": 3, "e1": 4, "e2": 5, "j": 6}
    assert s.broadcast == ((False,) * 4, (False, True, False))
    assert s.canonical == "i...,...j->...ij"


def test_ellipsis_between_repeated_labels():
    s = fe.parse("i...i->...i", [(3, 2, 3)])
    assert s.input_labels == (("i", "e0", "i"),)
    assert s.output_labels == ("e0", "i")


def test_diagonal_labels_and_spaces():
    s = fe.parse(" i i -> i ", [(4, 4)])
    assert s.input_labels == (("i", "i"),) and s.output_labels == ("i",)
    assert fe.parse("ii->", [(4, 4)]).reduction_labels == ("i",)


def test_broadcast_flags_size_one_against_other_sizes():
    s = fe.parse("ij,jk->ik", [(2, 1), (3, 5)])
    assert s.label_sizes["j"] == 3 and s.broadcast == ((False, True), (False, False))
    # 1 against 0 broadcasts too; all-ones is no broadcast
    assert fe.parse("i,i", [(1,), (0,)]).broadcast == ((True,), (False,))
    assert fe.parse("i,i", [(1,), (1,)]).broadcast == ((False,), (False,))


def test_key_ignores_sizes_but_not_structure():
    a = fe.parse("ij,jk->ik", [(2, 3), (3, 4)], dtypes=[F64, F64])
    b = fe.parse("ij,jk->ik", [(7, 11), (11, 13)], dtypes=[F64, F64])
    assert a.key == b.key and hash(a.key) == hash(b.key)
    assert fe.parse("ij,jk", [(2, 3), (3, 4)], dtypes=[F64, F64]).key == a.key
    others = [
        fe.parse("ij,jk->ki", [(2, 3), (3, 4)], dtypes=[F64, F64]),
        fe.parse("ij,jk->ik", [(2, 1), (3, 4)], dtypes=[F64, F64]),        # broadcast
        fe.parse("ij,jk->ik", [(2, 3), (3, 4)], dtypes=["float32"] * 2),   # dtype
        fe.parse("...j,jk->...k", [(2, 3), (3, 4)], dtypes=[F64, F64]),    # labels
        fe.parse("...j,jk->...k", [(5, 2, 3), (3, 4)], dtypes=[F64, F64]),  # ndim
    ]
    assert len({a.key, *(o.key for o in others)}) == 1 + len(others)


def test_out_shape_is_validated_but_does_not_change_the_spec():
    s = fe.parse("ij->i", [(1, 3)], out_shape=(5,))
    assert s.output_shape == (1,) and s == fe.parse("ij->i", [(1, 3)])


def test_bytes_subscripts():
    assert fe.parse(b"ij->ji", [(2, 3)]).output_labels == ("j", "i")


def test_sublist_form():
    a, b = np.ones((2, 3)), np.ones((3, 4))
    text, ops = fe.subscripts_from_sublists((a, [0, 1], b, [1, 2], [0, 2]))
    assert text == "AB,BC->AC" and ops == [a, b]
    text, _ = fe.subscripts_from_sublists((a, [Ellipsis, 26, np.int64(51)]))
    assert text == "...az"


# --------------------------------------------------------------------------
# numpy's errors
# --------------------------------------------------------------------------

ERROR_CASES = [
    # operand count against the string
    ("ij,jk", [(2, 3)]),
    ("ij", [(2, 3), (3,)]),
    ("i,->i", [(2,)]),
    # operand subscripts
    ("ijk", [(2, 3)]),
    ("i", [(2, 3)]),
    ("", [(2,)]),
    ("ij,jk->ik", [(2, 3), (4, 5, 6)]),
    ("i.j", [(2, 3)]),
    ("i..", [(2, 3)]),
    ("i....", [(2, 3)]),
    ("i...j...", [(2, 3)]),
    (". ..", [(2,)]),
    ("i1", [(2, 3)]),
    ("i>j", [(2,)]),
    ("i,i\t", [(3,), (3,)]),
    # the output
    ("i->ii", [(2,)]),
    ("i->i->i", [(2,)]),
    ("i->j", [(2,)]),
    ("...->i", [(2, 3)]),
    ("->i", [(2,)]),
    ("i->.", [(2,)]),
    ("i->i.", [(2,)]),
    ("i->1", [(2,)]),
    ("i-j", [(2,)]),
    ("i-", [(2,)]),
    ("i - > i", [(2,)]),
    ("...->", [(2, 3)]),
    ("i...->i", [(2, 3)]),
    ("ab...,...bc->ac", [(2, 3, 4, 5), (7, 5, 3, 6)]),
    # diagonals
    ("ii->i", [(2, 3)]),
    ("i...i->...i", [(3, 2, 4)]),
    ("ii->i", [(3, 0)]),
    ("ii", [(2, 3)]),
    ("iij->j", [(2, 3, 4)]),
    ("ii,i->i", [(2, 3), (2,)]),
    ("ii", [(0, 3)]),
    # broadcasting, with numpy's remapped shapes
    ("ij,jk->ik", [(2, 3), (4, 5)]),
    ("...,...", [(2, 3), (4, 3)]),
    ("...i,...i", [(2, 3), (4, 5, 3)]),
    ("i,i", [(2,), (0,)]),
    ("ii,i", [(3, 3), (4,)]),
    ("ij,jk,kl", [(3, 2), (4, 5), (5, 6)]),
    ("i...,...j", [(3, 2, 4), (5, 6)]),
    ("i...j,k...->...", [(2, 3, 4, 5), (6, 2, 4)]),
    ("i...k,j...k->ij...", [(2, 3, 4, 5), (6, 3, 5)]),
    ("abc,bca,cab", [(2, 3, 4), (3, 4, 2), (4, 2, 5)]),
    ("...,...->...", [(2, 1, 3), (5, 2)]),
    ("bA,Ab->", [(4, 3), (3, 2)]),
]

OUT_ERROR_CASES = [
    ("i->i", [(5,)], (5, 2)),            # rank
    ("ij->", [(3, 5)], (3,)),
    ("i,i", [(3,), (3,)], (3,)),
    ("i->i", [(5,)], (4,)),              # broadcast, out listed last
    ("ij,jk->ik", [(5, 3), (3, 2)], (4, 2)),
    ("i,j", [(3,), (5,)], (3, 4)),
    ("ij,j->i", [(3, 2), (4,)], (3,)),
    ("a,a", [(3,), (4,)], ()),
    ("ii->i", [(2, 3)], (2,)),           # with out=, the general diagonal message
    ("i->i", [(5,)], (1,)),              # out would need a reduction
    ("ij,ij->ij", [(2, 3), (2, 3)], (1, 1)),
    ("ij,ij->ij", [(2, 3), (2, 3)], (2, 1)),
    ("i->i", [(0,)], (1,)),
    ("ij,ij->ij", [(2, 3), (4, 3)], (1, 1)),
]


@pytest.mark.parametrize("subscripts, shapes", ERROR_CASES)
def test_numpy_errors(subscripts, shapes):
    expected = numpy_error(subscripts, shapes)
    assert isinstance(expected, ValueError), "numpy accepts this case; fix the table"
    with pytest.raises(EinsumError) as info:
        fe.parse(subscripts, shapes)
    assert isinstance(info.value, ValueError) and isinstance(info.value, PolycError)
    assert str(info.value) == str(expected)


@pytest.mark.parametrize("subscripts, shapes, out_shape", OUT_ERROR_CASES)
def test_numpy_out_errors(subscripts, shapes, out_shape):
    expected = numpy_error(subscripts, shapes, out_shape)
    assert isinstance(expected, ValueError), "numpy accepts this case; fix the table"
    with pytest.raises(EinsumError) as info:
        fe.parse(subscripts, shapes, out_shape=out_shape)
    assert str(info.value) == str(expected)


def test_remapped_shapes_message_text():
    with pytest.raises(EinsumError, match=r"^operands could not be broadcast together with "
                       r"remapped shapes \[original->remapped\]: \(2,3\)->\(2,newaxis,3\) "
                       r"\(4,5\)->\(5,4\) $"):
        fe.parse("ij,jk->ik", [(2, 3), (4, 5)])


def test_non_ascii_subscripts():
    expected = numpy_error("é", [(2,)])
    assert isinstance(expected, ValueError)
    with pytest.raises(EinsumError) as info:
        fe.parse("é", [(2,)])
    assert str(info.value) == str(expected)


def test_operand_count_limits():
    with pytest.raises(EinsumError, match="not enough operands"):
        fe.parse("", [])
    n = fe.MAX_OPERANDS
    expected = numpy_error(",".join("a" * n), [(2,)] * n)
    with pytest.raises(EinsumError) as info:
        fe.parse(",".join("a" * n), [(2,)] * n)
    assert str(info.value) == str(expected)
    fe.parse(",".join("a" * (n - 1)), [(2,)] * (n - 1))


def test_intentional_differences_from_numpy():
    # numpy truncates at NUL and silently accepts; polyc refuses
    with pytest.raises(EinsumError, match="invalid subscript"):
        fe.parse("i\0j", [(2,)])
    # numpy returns a view past the data for a zero-size diagonal; polyc refuses
    assert numpy_error("ii->i", [(0, 3)]) is None
    with pytest.raises(EinsumError, match=r"collapsing index 'i' don't match \(0 != 3\)"):
        fe.parse("ii->i", [(0, 3)])


def _random_case(rng: random.Random):
    if rng.random() < 0.5:
        def part(k):
            p = "".join(rng.choice("abcdAB") for _ in range(rng.randint(0, 3)))
            if rng.random() < 0.3:
                pos = rng.randint(0, len(p))
                p = p[:pos] + "..." + p[pos:]
            return p
        s = ",".join(part(k) for k in range(rng.randint(1, 3)))
        if rng.random() < 0.6:
            s += "->" + part(0)
    else:
        s = "".join(rng.choice("abcAB..,,-> ...") for _ in range(rng.randint(0, 12)))
    nop = s.count(",") + 1 if rng.random() < 0.9 else rng.randint(1, 3)
    shapes = [tuple(rng.choice([0, 1, 1, 2, 2, 3]) for _ in range(rng.randint(0, 4)))
              for _ in range(nop)]
    out = None
    if rng.random() < 0.25:
        out = tuple(rng.choice([0, 1, 2, 3]) for _ in range(rng.randint(0, 3)))
    return s, shapes, out


def test_random_subscripts_agree_with_numpy():
    """Seeded fuzzing: polyc accepts exactly what numpy accepts (outside the
    documented differences), with numpy's message and result shape."""
    rng = random.Random(20240607)
    accepted = 0
    for _ in range(6000):
        s, shapes, out = _random_case(rng)
        expected = numpy_error(s, shapes, out)
        if isinstance(expected, ValueError):
            with pytest.raises(EinsumError) as info:
                fe.parse(s, shapes, out_shape=out)
            assert str(info.value) == str(expected), (s, shapes, out)
            continue
        assert expected is None, (s, shapes, out, expected)
        try:
            spec = fe.parse(s, shapes, out_shape=out)
        except EinsumError as err:  # only the documented zero-size diagonal
            assert "collapsing index" in str(err) and 0 in shapes[0], (s, shapes, out)
            continue
        accepted += 1
        if out is None:
            got = np.einsum(s, *[np.ones(x) for x in shapes]).shape
            assert spec.output_shape == got, (s, shapes)
    assert accepted > 100


# --------------------------------------------------------------------------
# lowering
# --------------------------------------------------------------------------

def _map(text: str) -> isl.Map:
    return isl.Map(text)


def test_lower_matmul():
    p = fe.lower(fe.parse("ij,jk->ik", [(2, 3), (3, 4)]), [F64, F64], F64)
    assert p.name == "einsum" and p.signature == ("op0", "op1")
    assert p.params == ("d_i", "d_j", "d_k")
    assert p.param_bindings == {"d_i": ("op0", 0), "d_j": ("op0", 1), "d_k": ("op1", 1)}
    assert p.source == "ij,jk->ik"
    assert [(t.name, t.role, t.dtype) for t in p.tensors] == [
        ("op0", "input", F64), ("op1", "input", F64), ("out", "output", F64)]
    init, upd = p.statements
    assert (init.name, init.kind, init.op, init.rhs) == ("S0_init", "init", "=", E.Const(0.0))
    assert init.iterators == ("i", "k")
    assert init.domain.is_equal(isl.Set(
        "[d_i, d_j, d_k] -> { S0_init[i, k] : 0 <= i < d_i and 0 <= k < d_k }"))
    assert (upd.name, upd.kind, upd.op) == ("S0", "update", "+")
    assert upd.iterators == ("i", "k", "j") and upd.reduction_iterators == ("j",)
    box = "0 <= i < d_i and 0 <= k < d_k and 0 <= j < d_j"
    assert upd.domain.is_equal(isl.Set(f"[d_i, d_j, d_k] -> {{ S0[i, k, j] : {box} }}"))
    assert upd.write.is_equal(_map(f"[d_i, d_j, d_k] -> {{ S0[i, k, j] -> out[i, k] : {box} }}"))
    reads = {r.get_tuple_name(isl.dim_type.out): r for r in upd.reads}
    assert reads["op0"].is_equal(_map(f"[d_i, d_j, d_k] -> {{ S0[i, k, j] -> op0[i, j] : {box} }}"))
    assert reads["op1"].is_equal(_map(f"[d_i, d_j, d_k] -> {{ S0[i, k, j] -> op1[j, k] : {box} }}"))
    assert reads["out"].is_equal(upd.write)   # the accumulation read
    assert p.context.is_equal(isl.Set("[d_i, d_j, d_k] -> { [] : d_i >= 0 and d_j >= 0 and d_k >= 0 }"))


def test_lower_broadcast_dim_reads_index_zero():
    spec = fe.parse("...i,...i->...", [(1, 3), (5, 3)])
    p = fe.lower(spec, [F64, F64], F64)
    assert p.params == ("d_e0", "d_i")
    assert p.param_bindings == {"d_e0": ("op1", 0), "d_i": ("op0", 1)}
    op0 = p.tensor("op0")
    assert op0.shape[0].is_equal(isl.PwAff("[d_e0, d_i] -> { [] -> [(1)] }"))
    upd = p.statement("S0")
    reads = {r.get_tuple_name(isl.dim_type.out): r for r in upd.reads}
    box = "0 <= e0 < d_e0 and 0 <= i < d_i"
    assert reads["op0"].is_equal(_map(f"[d_e0, d_i] -> {{ S0[e0, i] -> op0[0, i] : {box} }}"))
    assert reads["op1"].is_equal(_map(f"[d_e0, d_i] -> {{ S0[e0, i] -> op1[e0, i] : {box} }}"))
    assert E.to_text(upd.rhs) == "op0(0, i) * op1(e0, i)"


def test_lower_diagonal_and_trace():
    p = fe.lower(fe.parse("ii->i", [(4, 4)]), [F64], F64)
    (s,) = p.statements
    assert (s.kind, s.op, s.iterators) == ("assign", "=", ("i",))
    assert s.reads[0].is_equal(_map("[d_i] -> { S0[i] -> op0[i, i] : 0 <= i < d_i }"))
    assert [str(x) for x in p.tensor("op0").shape] == ["[d_i] -> { [] -> [(d_i)] }"] * 2
    p = fe.lower(fe.parse("ii", [(4, 4)]), ["int64"], "int64")
    init, upd = p.statements
    assert init.rhs == E.Const(0) and isinstance(init.rhs.value, int)
    assert init.domain.is_equal(isl.Set("[d_i] -> { S0_init[] }"))
    assert upd.write.is_equal(_map("[d_i] -> { S0[i] -> out[] : 0 <= i < d_i }"))


def test_lower_scalars_and_rank_zero_output():
    p = fe.lower(fe.parse(",", [(), ()]), ["int32", "int32"], "int32")
    assert p.params == () and p.tensor("out").ndim == 0 and p.tensor("op0").ndim == 0
    (s,) = p.statements
    assert s.kind == "assign" and E.to_text(s.rhs) == "op0() * op1()"
    assert s.domain.is_equal(isl.Set("{ S0[] }"))


def test_lower_three_operands_product_order_and_iterators():
    p = fe.lower(fe.parse("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 5)]), [F64] * 3, F64)
    upd = p.statement("S0")
    assert upd.iterators == ("a", "d", "b", "c") and upd.reduction_iterators == ("b", "c")
    assert E.to_text(upd.rhs) == "op0(a, b) * op1(b, c) * op2(c, d)"


def test_lower_uses_dtypes_from_parse_and_refuses_unsupported():
    spec = fe.parse("i,i->i", [(3,), (3,)], dtypes=["float32", "float32"])
    p = fe.lower(spec)
    assert {t.dtype for t in p.tensors} == {"float32"}
    with pytest.raises(DTypeError, match="bool"):
        fe.lower(fe.parse("i->i", [(3,)]), ["bool"], "bool")
    assert fe.lower(fe.parse("i->i", [(3,)]), ["float16"], "float16").tensors[0].dtype == \
        "float16"
    with pytest.raises(TypeError, match="dtypes"):
        fe.lower(fe.parse("i->i", [(3,)]))


# A point-by-point interpreter of the lowered program: the statements run in
# order, each over its domain's points (isl), with the expression trees
# evaluated in Python.  Small sizes only.

def _run(program, arrays):
    sizes = {}
    for p, (tensor, dim) in program.param_bindings.items():
        sizes[p] = arrays[program.signature.index(tensor)].shape[dim]
    env = dict(zip(program.signature, arrays))
    shape = tuple(eval_pw_aff(x, sizes) for x in program.tensor("out").shape)
    env["out"] = np.full(shape, np.nan)

    def value(e, point):
        if isinstance(e, E.Const):
            return e.value
        if isinstance(e, E.Index):
            return point[e.name]
        if isinstance(e, E.Access):
            return env[e.tensor][tuple(value(i, point) for i in e.indices)]
        assert isinstance(e, E.Binary) and e.op == "*"
        return value(e.lhs, point) * value(e.rhs, point)

    for st in program.statements:
        dom = st.domain
        for i, p in enumerate(program.params):
            dom = dom.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(dom.get_ctx(), sizes[p]))
        points = []
        dom.foreach_point(points.append)
        coords = sorted(tuple(pt.get_coordinate_val(isl.dim_type.set, d).to_python()
                              for d in range(len(st.iterators))) for pt in points)
        for c in coords:
            point = dict(zip(st.iterators, c))
            idx = tuple(value(i, point) for i in st.lhs.indices)
            v = value(st.rhs, point)
            env["out"][idx] = v if st.op == "=" else env["out"][idx] + v
    return env["out"]


@pytest.mark.parametrize("subscripts, shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 1), (3, 2)]),                 # broadcast j
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("i,j->ij", [(2,), (3,)]),
    ("...i,...i->...", [(1, 3), (4, 3)]),
    ("i...,...j->...ij", [(2, 1, 3), (3, 2)]),
    ("i...i->...i", [(3, 2, 3)]),
    (",i->i", [(), (3,)]),
    ("", [()]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
    ("ab,bc,cd->ad", [(2, 3), (3, 2), (2, 2)]),
    ("Aa,aB->AB", [(2, 3), (3, 2)]),
])
def test_lowered_program_computes_numpy_einsum(subscripts, shapes):
    rng = np.random.default_rng(7)
    arrays = [rng.integers(-5, 6, size=s).astype(np.float64) for s in shapes]
    program = fe.lower(fe.parse(subscripts, shapes), [F64] * len(shapes), F64)
    np.testing.assert_array_equal(_run(program, arrays), np.einsum(subscripts, *arrays))


# --------------------------------------------------------------------------
# polyc.einsum's errors raised before compiling (numpy's messages)
# --------------------------------------------------------------------------

def _both(*args, **kw):
    """numpy's exception and polyc's for the same call."""
    try:
        np.einsum(*args, **kw)
        expected = None
    except Exception as err:  # noqa: BLE001
        expected = err
    with pytest.raises(PolycError) as info:
        polyc_einsum(*args, **kw)
    assert expected is not None
    return expected, info.value


@pytest.mark.parametrize("args, kw", [
    (("i,i->i", np.ones(3), np.ones(3)), {"dtype": np.float32}),
    (("i,i->i", np.ones(3, np.int64), np.ones(3, np.int64)), {"dtype": np.float32}),
    (("i,i->i", np.ones(3), np.ones(3)), {"out": np.zeros(3, np.float32)}),
    (("i,i->i", np.ones(3, np.int64), np.ones(3)), {"out": np.zeros(3, np.int64)}),
    (("i,i->i", np.ones(3, np.float32), np.ones(3, np.float32)),
     {"dtype": np.float64, "out": np.zeros(3, np.float32)}),
    (("i,i->i", np.ones(3, np.int32), np.ones(3)), {"casting": "no"}),
])
def test_casting_errors_match_numpy(args, kw):
    expected, got = _both(*args, **kw)
    assert isinstance(expected, TypeError) and isinstance(got, TypeError)
    assert isinstance(got, DTypeError) and str(got) == str(expected)


@pytest.mark.parametrize("args, kw, ours", [
    (("ij",), {}, EinsumError),
    (("i->i", np.ones(3)), {"out": [0.0, 0.0, 0.0]}, BindingError),
    (("i->i", np.ones(3)), {"casting": "bogus"}, EinsumError),
    ((np.ones(3), [60]), {}, EinsumError),
    ((np.ones(3), [0.5]), {}, BindingError),
    ((np.ones(3), 5), {}, BindingError),
    (("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5))), {}, EinsumError),
    (("i,i", 3, 4.5), {}, EinsumError),
])
def test_call_errors_match_numpy(args, kw, ours):
    expected, got = _both(*args, **kw)
    base = ValueError if isinstance(expected, ValueError) else TypeError
    assert isinstance(got, ours) and isinstance(got, base)
    assert str(got) == str(expected)


def test_read_only_out():
    ro = np.zeros(3)
    ro.flags.writeable = False
    expected, got = _both("i->i", np.ones(3), out=ro)
    assert isinstance(got, ValueError) and str(got) == str(expected)


@pytest.mark.parametrize("dtype", [np.bool_, np.complex128, np.uint64])
def test_unsupported_dtypes_are_refused_clearly(dtype):
    a = np.ones(3, dtype=dtype)
    with pytest.raises(DTypeError, match=np.dtype(dtype).name):
        polyc_einsum("i,i->i", a, a)
