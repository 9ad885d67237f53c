"""A tiny expression DSL over onnx.helper, so graphs read like numpy.

    g = Graph('name', opset=17)
    x = g.input('x', [None, 3, None, None])
    y = (x * 2.0 + 1.0).sigmoid()
    g.output(y, 'y', [None, 3, None, None])
    model = g.model()

Only what the mouth synthesis and the tiny lip-sync model need. Constants
are float32 unless given as numpy arrays of another dtype.
"""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Graph:
    def __init__(self, name: str, opset: int = 17):
        self.name = name
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self._n = 0
        self._consts: dict[tuple, str] = {}

    def fresh(self, hint: str = 't') -> str:
        self._n += 1
        return f'{hint}_{self._n}'

    def input(self, name: str, shape, dtype=TensorProto.FLOAT) -> 'V':
        dims = [d if d is not None else f'{name}_d{i}' for i, d in enumerate(shape)]
        self.inputs.append(helper.make_tensor_value_info(name, dtype, dims))
        return V(self, name)

    def output(self, v: 'V', name: str, shape, dtype=TensorProto.FLOAT) -> None:
        self.nodes.append(helper.make_node('Identity', [v.name], [name]))
        self.outputs.append(helper.make_tensor_value_info(name, dtype, shape))

    def const(self, value, dtype=np.float32) -> 'V':
        arr = np.asarray(value, dtype=dtype if not isinstance(value, np.ndarray) else value.dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            name = self.fresh('c')
            self.inits.append(numpy_helper.from_array(arr, name))
            self._consts[key] = name
        return V(self, self._consts[key])

    def op(self, op_type: str, *args, n_out: int = 1, **attrs):
        ins = [a.name if isinstance(a, V) else ('' if a is None else self.const(a).name) for a in args]
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, ins, outs, **attrs))
        vs = [V(self, o) for o in outs]
        return vs[0] if n_out == 1 else vs

    def model(self, doc: str = '') -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid('', self.opset)], producer_name='avatar-platform')
        m.ir_version = 8
        m.doc_string = doc
        onnx.checker.check_model(m, full_check=True)
        return m


def _v(g: Graph, x) -> 'V':
    return x if isinstance(x, V) else g.const(x)


class V:
    def __init__(self, g: Graph, name: str):
        self.g = g
        self.name = name

    # arithmetic
    def __add__(self, o): return self.g.op('Add', self, _v(self.g, o))
    def __radd__(self, o): return self.g.op('Add', _v(self.g, o), self)
    def __sub__(self, o): return self.g.op('Sub', self, _v(self.g, o))
    def __rsub__(self, o): return self.g.op('Sub', _v(self.g, o), self)
    def __mul__(self, o): return self.g.op('Mul', self, _v(self.g, o))
    def __rmul__(self, o): return self.g.op('Mul', _v(self.g, o), self)
    def __truediv__(self, o): return self.g.op('Div', self, _v(self.g, o))
    def __rtruediv__(self, o): return self.g.op('Div', _v(self.g, o), self)
    def __neg__(self): return self.g.op('Neg', self)
    def __pow__(self, o): return self.g.op('Pow', self, _v(self.g, o))
    def __lt__(self, o): return self.g.op('Less', self, _v(self.g, o))
    def __gt__(self, o): return self.g.op('Greater', self, _v(self.g, o))

    # unary
    def exp(self): return self.g.op('Exp', self)
    def log(self): return self.g.op('Log', self)
    def abs(self): return self.g.op('Abs', self)
    def relu(self): return self.g.op('Relu', self)
    def sigmoid(self): return self.g.op('Sigmoid', self)
    def sqrt(self): return self.g.op('Sqrt', self)
    def cos(self): return self.g.op('Cos', self)
    def asin(self): return self.g.op('Asin', self)
    def sq(self): return self * self

    def clip(self, lo=None, hi=None):
        return self.g.op('Clip', self, None if lo is None else _v(self.g, lo), None if hi is None else _v(self.g, hi))

    def max(self, o): return self.g.op('Max', self, _v(self.g, o))
    def min(self, o): return self.g.op('Min', self, _v(self.g, o))

    def reshape(self, shape):
        return self.g.op('Reshape', self, self.g.const(np.asarray(shape, dtype=np.int64)))

    def gather(self, index: int, axis: int):
        return self.g.op('Gather', self, self.g.const(np.asarray(index, dtype=np.int64)), axis=axis)

    def take(self, indices, axis: int):
        return self.g.op('Gather', self, self.g.const(np.asarray(indices, dtype=np.int64)), axis=axis)

    def sum(self, axes, keepdims=1):
        return self.g.op('ReduceSum', self, self.g.const(np.asarray(axes, dtype=np.int64)), keepdims=keepdims)

    def mean(self, axes, keepdims=1):
        return self.g.op('ReduceMean', self, axes=list(axes), keepdims=keepdims)

    def rmin(self, axis: int = 3):  # the least along one axis, kept
        return self.g.op('ReduceMin', self, axes=[axis], keepdims=1)

    def rmax(self, axis: int = 3):  # the greatest along one axis, kept
        return self.g.op('ReduceMax', self, axes=[axis], keepdims=1)

    def cast(self, to):
        return self.g.op('Cast', self, to=to)


def where(c: V, a, b) -> V:
    return c.g.op('Where', c, _v(c.g, a), _v(c.g, b))


def lerp(a, b, t: V) -> V:
    """a + (b - a) * t"""
    g = t.g
    return _v(g, a) + (_v(g, b) - _v(g, a)) * t


def smoothstep(e0, e1, x: V) -> V:
    t = ((x - e0) / (_v(x.g, e1) - e0)).clip(0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


def smoothsteps(x: V, edges, offset, scale) -> list[V]:
    """offset[i] + scale[i] * smoothstep(e0_i, e1_i, x) for each (e0_i, e1_i) of `edges`, at once: x is [N,1,h,w],
    the i-th result channel i of one chain of nodes, split out (each the same to the bit as computed alone)."""
    def channels(vs):
        return x.g.const(np.asarray(vs, np.float32).reshape(1, -1, 1, 1))
    t = ((x - channels([e0 for e0, _ in edges])) / channels([np.float32(e1) - np.float32(e0) for e0, e1 in edges])).clip(0.0, 1.0)
    out = channels(offset) + channels(scale) * (t * t * (3.0 - 2.0 * t))
    return x.g.op('Split', out, axis=1, n_out=len(edges)) if len(edges) > 1 else [out]


def concat(vs, axis: int) -> V:
    return vs[0].g.op('Concat', *vs, axis=axis)
