"""libplan.torch.program_from_export: a program from torch.export's graph.

torch.fx's symbolic_trace stops at the Python control flow of models such
as Hugging Face transformers' (mask construction, cache handling);
torch.export runs the model on its example inputs and records the ATen
ops it ran. `program_from_export(module, example_inputs, kwargs)` exports
the module (non-strict) and maps that ATen graph to libplan's ops:

- a value that depends on no input and no parameter (position ids from
  arange, an attention mask built from arange, comparisons, index and
  cumsum; rotary tables from a buffer) is computed once, on the example
  shapes, and folded: a mask SDPA reads that is the causal pattern
  becomes the attention op's `causal`, ids that are arange(n) into an
  embedding become the table's first n rows, and any other folded tensor
  an op reads becomes a const when a recipe gives its values (zeros,
  ones, causal_mask, rope_cos / rope_sin), else UnsupportedError;
- linear, addmm (matmul, then the bias), mm / bmm / matmul, embedding,
  layer_norm, SDPA (causal, GQA), softmax, the pointwise ops (tensor and
  number operands), pow 2 / 3, mean over dims, view / reshape / squeeze /
  unsqueeze, transpose / permute, expand, split / slice (one dim), cat;
  dropout (p=0 or eval), clone, contiguous, alias, a cast to the same
  dtype and export's metadata asserts pass the value through.
- topk, sum, in-place add_ / sub_ / mul_ / div_ (not of a view); an
  experts module (transformers' form: gate_up_proj [e, 2i, h] and
  down_proj [e, h, i] called on tokens, top-k ids and weights) becomes
  the dense form, every expert on every token, once its own forward is
  checked equal to it (docs/python.md).

Names: an op by its module path and node name ("transformer.h.0.attn.
linear"), params by their qualified names, inputs by the argument names.
Needs torch."""

from .builder import ProgramBuilder
from .errors import UnsupportedError, UsageError

__all__ = ["program_from_export"]

_UNARY = {"gelu": "gelu", "relu": "relu", "silu": "silu", "tanh": "tanh",
          "sigmoid": "sigmoid", "exp": "exp", "rsqrt": "rsqrt"}
_BINARY = {"add": "add", "sub": "sub", "mul": "mul", "div": "div"}
_PASS = ("clone", "contiguous", "alias", "detach", "lift_fresh_copy")
_RESHAPE = ("view", "_unsafe_view", "reshape", "unsqueeze", "squeeze",
            "flatten")
# ops whose value depends on their input's shape only, never its values
_SHAPE_ONLY = ("new_ones", "new_zeros", "ones_like", "zeros_like",
               "sym_size", "empty_like", "new_empty")
_SKIP = ("_assert_tensor_metadata", "_assert_scalar", "sym_constrain_range",
         "sym_constrain_range_for_size", "_assert_async")


def _opname(target):
    """aten.add.Tensor -> 'add'; operator.getitem -> 'getitem'."""
    name = getattr(target, "__name__", str(target))
    s = str(target)
    if s.startswith("aten."):
        return s.split(".")[1]
    return name.split(".")[0]


class _Folded:
    """A value computed at export time (no input or parameter reaches
    it)."""
    __slots__ = ("value", "node")

    def __init__(self, value, node):
        self.value, self.node = value, node


class _Complex:
    """A complex value as two real tensors of its shape, its real and
    imaginary parts (libplan has no complex dtype): what view_as_complex
    makes of pairs in the last dim, as rotary embeddings written with
    complex numbers (torchtitan's Llama 3) do."""
    __slots__ = ("re", "im", "shape")

    def __init__(self, re, im, shape):
        self.re, self.im, self.shape = re, im, list(shape)


class _Converter:
    def __init__(self, ep, module, builder):
        import torch
        self.torch = torch
        self.ep, self.b = ep, builder
        self.gm = ep.graph_module
        sig = ep.graph_signature
        self.kind = {}     # placeholder name -> (kind, target)
        for spec in sig.input_specs:
            self.kind[spec.arg.name] = (spec.kind.name, spec.target)
        self.state = dict(ep.state_dict)
        self.consts = dict(getattr(ep, "constants", {}) or {})
        self.vals = {}      # node name -> tensor name | _Folded | tuple
        self.produced = {}  # tensor name -> node (the shape check)
        self.opnames = set()
        self.node = None
        self.path_cache = {}
        self.module = module

    # -- names and errors --
    def path(self, node):
        stack = node.meta.get("nn_module_stack") or {}
        if not stack:
            return ""
        v = list(stack.values())[-1]
        p = v[0] if isinstance(v, tuple) else str(v)
        # export writes L['self'].transformer.h[0]... or a dotted path
        for a, b in (("L['self'].", ""), ("L['self']", ""), ("[", "."),
                     ("]", "")):
            p = p.replace(a, b)
        return p.strip(".")

    def fail(self, why, node=None):
        node = node or self.node
        raise UnsupportedError("export node %s (%s) in module %s: %s"
                               % (node.name, node.target,
                                  self.path(node) or "<root>", why))

    def opname(self, node, suffix=""):
        p = self.path(node)
        base = ("%s.%s" % (p, node.name) if p else node.name) + suffix
        name, i = base, 1
        while name in self.opnames:
            name = "%s_%d" % (base, i)
            i += 1
        self.opnames.add(name)
        return name

    def meta(self, node):
        from .torch import _dtype
        v = node.meta.get("val")
        if v is None or not hasattr(v, "shape"):
            self.fail("the exported value is not a single tensor", node)
        return [int(d) for d in v.shape], _dtype(v.dtype, "node %s"
                                                 % node.name)

    # -- values --
    def value(self, a):
        import torch.fx
        if isinstance(a, torch.fx.Node):
            return self.vals[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(self.value(x) for x in a)
        return a

    def concrete(self, a):
        """A Python argument with folded values substituted (for running
        a folded op)."""
        v = self.value(a)
        if isinstance(v, _Folded):
            return v.value
        if isinstance(v, (list, tuple)):
            return type(v)(self.concrete(x) for x in v)
        return v

    def is_folded(self, a):
        v = self.value(a)
        if isinstance(v, _Folded):
            return True
        if isinstance(v, (list, tuple)):
            return all(self.is_folded(x) for x in v)
        return not isinstance(v, (str, _Complex))

    def tensor(self, a, what="input"):
        v = self.value(a)
        if isinstance(v, str):
            return v
        if isinstance(v, _Folded) and isinstance(v.value,
                                                 self.torch.Tensor):
            return self.const_of(v, a)
        self.fail("its %s is %r, not a tensor" % (what, v))

    def const_of(self, f, node):
        """A folded tensor an op reads, as a const (a recipe must give its
        values)."""
        from .torch import _const_init, _dtype
        name = "const." + node.name
        if name in self.b._tensors or name in self.produced:
            return name
        t = f.value.detach()
        init = _const_init(t) if t.is_floating_point() else None
        core = t
        while init is None and core.dim() > 2 and core.shape[0] == 1:
            # rotary tables broadcast over batch and heads: [1, 1, s, e]
            core = core[0]
            init = _const_init(core) if t.is_floating_point() else None
        if init is None:
            self.fail("it reads %s, a value computed from shapes only that "
                      "no const recipe gives (zeros, ones, causal_mask, "
                      "rope_cos / rope_sin)" % node.name)
        if core is t:
            self.b.const(name, list(t.shape), _dtype(t.dtype, name),
                         init=init)
            return name
        self.b.const(name + ".table", list(core.shape),
                     _dtype(t.dtype, name), init=init)
        self.b.op("reshape", [name + ".table"], name,
                  name=self.opname(node, ".table"), shape=list(t.shape))
        self.produced[name] = None
        return name

    def emit(self, kind, ins, attrs=None, node=None, out=None):
        node = node or self.node
        out = out or node.name
        self.b.op(kind, ins, out, name=self.opname(node, "" if out ==
                                                   node.name else
                                                   out[len(node.name):]),
                  **(attrs or {}))
        self.produced[out] = node if out == node.name else None
        if out == node.name:
            self.vals[node.name] = out
        return out

    def arg(self, node, i, kw, default=None):
        if len(node.args) > i:
            return node.args[i]
        return node.kwargs.get(kw, default)

    # -- the graph --
    def run(self):
        outputs = []
        for node in self.gm.graph.nodes:
            self.node = node
            if node.op == "placeholder":
                self.placeholder(node)
            elif node.op == "call_function":
                self.call(node)
            elif node.op == "output":
                res = node.args[0]
                res = res if isinstance(res, (tuple, list)) else [res]
                for r in res:
                    v = self.value(r)
                    if isinstance(v, str) and v in self.produced:
                        outputs.append(v)
                    elif isinstance(v, str):
                        self.fail("output %s is a leaf passed through" % v)
            else:
                self.fail("a %s node has no libplan op" % node.op)
        return outputs

    def placeholder(self, node):
        from .torch import _dtype
        kind, target = self.kind.get(node.name, ("USER_INPUT", None))
        if kind == "PARAMETER":
            t = self.state[target]
            self.b.param(target, list(t.shape), _dtype(t.dtype, target))
            self.vals[node.name] = target
        elif kind in ("BUFFER", "CONSTANT_TENSOR"):
            t = self.state.get(target)
            if t is None:
                t = self.consts.get(target)
            if t is None:
                self.fail("buffer %s has no value in the export" % target)
            self.vals[node.name] = _Folded(t, node)
        elif kind == "USER_INPUT":
            v = node.meta.get("val")
            if not hasattr(v, "shape"):  # a Python value (None, a flag)
                self.vals[node.name] = _Folded(v, node)
                return
            shape, dt = self.meta(node)
            extra = {}
            if str(v.dtype) == "torch.bool":
                extra["range"] = [0, 2]
            self.b.input(node.name, shape, dt, **extra)
            self.vals[node.name] = node.name
        else:
            self.fail("an input of kind %s has no libplan form" % kind)

    def call(self, node):
        if self.in_experts(node):
            return
        op = _opname(node.target)
        if op in _SKIP:
            self.vals[node.name] = _Folded(None, node)
            return
        args = node.args
        if op in _SHAPE_ONLY or all(self.is_folded(a) for a in
                                    list(args) + list(node.kwargs.values())):
            try:
                v = node.target(*self.concrete(list(args)),
                                **{k: self.concrete(x) for k, x in
                                   node.kwargs.items()})
            except Exception as e:
                self.fail("folding it (it depends on shapes only) failed: %s"
                          % (str(e).splitlines()[0] if str(e) else
                             type(e).__name__))
            self.vals[node.name] = _Folded(v, node)
            return
        fn = getattr(self, "a_" + op, None)
        if fn is None:
            if op in _UNARY:
                return self.emit(_UNARY[op], [self.tensor(args[0])])
            if op in _PASS:
                self.vals[node.name] = self.tensor(args[0])
                return
            if op in _RESHAPE:
                return self.reshape(node)
            self.fail("aten op %s has no libplan mapping" % op)
        fn(node)

    # -- ops --
    def reshape(self, node):
        shape, _ = self.meta(node)
        src = self.tensor(node.args[0])
        if shape == self.meta(node.args[0])[0]:
            self.vals[node.name] = src
            return
        self.emit("reshape", [src], {"shape": shape})

    def a_getitem(self, node):
        v = self.value(node.args[0])
        self.vals[node.name] = v[node.args[1]]

    def a_to(self, node):
        shape, dt = self.meta(node)
        src = node.args[0]
        if self.meta(src)[1] != dt:
            self.fail("a cast from %s to %s has no libplan op"
                      % (self.meta(src)[1], dt))
        self.vals[node.name] = self.tensor(src)

    a__to_copy = a_to

    def a_type_as(self, node):
        self.a_to(node)

    def a_dropout(self, node):
        p = self.concrete(self.arg(node, 1, "p", 0.5))
        train = self.concrete(self.arg(node, 2, "train", True))
        if p and train:
            self.fail("dropout while training has no libplan op")
        self.vals[node.name] = self.tensor(node.args[0])

    def a_linear(self, node):
        ins = [self.tensor(node.args[0]), self.tensor(node.args[1],
                                                      "weight")]
        if self.arg(node, 2, "bias") is not None:
            ins.append(self.tensor(node.args[2], "bias"))
        self.emit("linear", ins)

    def a_addmm(self, node):
        """bias + x @ w (GPT-2's Conv1D): a matmul, then the add."""
        if self.concrete(node.kwargs.get("beta", 1)) != 1 or \
                self.concrete(node.kwargs.get("alpha", 1)) != 1:
            self.fail("addmm with alpha or beta has no libplan op")
        mm = self.emit("matmul", [self.tensor(node.args[1]),
                                  self.tensor(node.args[2])],
                       out=node.name + ".mm")
        self.emit("add", [mm, self.tensor(node.args[0], "bias")])

    def _matmul(self, node):
        self.emit("matmul", [self.tensor(node.args[0]),
                             self.tensor(node.args[1])])

    a_mm = a_bmm = a_matmul = _matmul

    def a_embedding(self, node):
        w, ids = node.args[0], node.args[1]
        pad = self.concrete(self.arg(node, 2, "padding_idx", -1))
        if pad is not None and pad != -1:
            self.fail("an embedding with padding_idx %d (its row gets no "
                      "gradient) has no libplan op; build the model "
                      "without a padding index" % pad)
        vid = self.value(ids)
        if isinstance(vid, _Folded):
            # position ids: arange(n) (broadcast over a batch of 1) reads
            # the table's first n rows
            t = vid.value
            n = t.shape[-1]
            if t.dim() > 2 or (t.dim() == 2 and t.shape[0] != 1) or \
                    not bool((t.reshape(-1) == self.torch.arange(n)).all()):
                self.fail("an embedding of folded ids other than arange(n)")
            table = self.tensor(w, "weight")
            rows = self.meta(w)[0][0]
            src = table
            if n < rows:
                outs = [node.name + ".rows", node.name + ".rest"]
                self.b.op("split", [table], outs,
                          name=self.opname(node, ".rows"), dim=0,
                          sizes=[n, rows - n])
                for o in outs:
                    self.produced[o] = None
                src = outs[0]
            shape, _ = self.meta(node)
            self.emit("reshape", [src], {"shape": shape})
            return
        x = self.tensor(ids)
        decl = self.b._tensors.get(x)
        if decl is not None and decl.get("role") == "input" and \
                "range" not in decl:
            decl["range"] = [0, self.meta(w)[0][0]]
        self.emit("embedding", [self.tensor(w, "weight"), x])

    def a_layer_norm(self, node):
        ns = self.concrete(node.args[1])
        if len(ns) != 1:
            self.fail("layer_norm over %d dims" % len(ns))
        w, b = self.arg(node, 2, "weight"), self.arg(node, 3, "bias")
        if w is None:
            self.fail("layer_norm without a weight has no libplan op")
        ins = [self.tensor(node.args[0]), self.tensor(w, "weight")]
        if b is not None:
            ins.append(self.tensor(b, "bias"))
        eps = self.concrete(self.arg(node, 4, "eps", 1e-5))
        self.emit("layernorm", ins, {"eps": float(eps)})

    def a_rms_norm(self, node):
        ns = self.concrete(node.args[1])
        w = self.arg(node, 2, "weight")
        if len(ns) != 1 or w is None:
            self.fail("rms_norm over other than the last dim or without a "
                      "weight")
        eps = self.concrete(self.arg(node, 3, "eps"))
        if eps is None:
            eps = self.torch.finfo(node.args[0].meta["val"].dtype).eps
        self.emit("rmsnorm", [self.tensor(node.args[0]),
                              self.tensor(w, "weight")], {"eps": float(eps)})

    def a_scaled_dot_product_attention(self, node):
        q, k, v = node.args[:3]
        mask = self.arg(node, 3, "attn_mask")
        if self.concrete(self.arg(node, 4, "dropout_p", 0.0)):
            self.fail("attention dropout has no libplan op")
        causal = bool(self.concrete(self.arg(node, 5, "is_causal", False)))
        scale = self.concrete(self.arg(node, 6, "scale"))
        ins = [self.tensor(q), self.tensor(k), self.tensor(v)]
        if mask is not None:
            mv = self.value(mask)
            if isinstance(mv, _Folded) and self._is_causal(mv.value, q, k):
                causal = True
            else:
                ins.append(self.tensor(mask, "attn_mask"))
        attrs = {}
        if causal:
            attrs["causal"] = True
        if scale is not None:
            attrs["scale"] = float(scale)
        self.emit("attention", ins, attrs)

    def _is_causal(self, m, q, k):
        """A folded mask that is the causal pattern (bool: keep j <= i;
        float: 0 there and a large negative number above)."""
        torch = self.torch
        s, t = self.meta(q)[0][2], self.meta(k)[0][2]
        if m.dim() < 2 or tuple(m.shape[-2:]) != (s, t):
            return False
        keep = torch.ones(s, t, dtype=torch.bool).tril()
        flat = m.reshape(-1, s, t)
        if m.dtype == torch.bool:
            return bool((flat == keep).all())
        return bool((flat.masked_select(keep.expand_as(flat)) == 0).all()) \
            and bool((flat.masked_select(~keep.expand_as(flat)) <
                      -1e4).all())

    def a__softmax(self, node):
        self.emit("softmax", [self.tensor(node.args[0])],
                  {"dim": int(self.concrete(node.args[1]))})

    a_softmax = a__softmax

    def _binary(self, node, kind):
        a, b = node.args[0], node.args[1]
        if node.kwargs.get("alpha", 1) != 1:
            self.fail("alpha has no libplan op")
        ta = isinstance(self.value(a), str) or (
            isinstance(self.value(a), _Folded) and
            isinstance(self.value(a).value, self.torch.Tensor) and
            self.value(a).value.dim() > 0)
        tb = isinstance(self.value(b), str) or (
            isinstance(self.value(b), _Folded) and
            isinstance(self.value(b).value, self.torch.Tensor) and
            self.value(b).value.dim() > 0)
        if ta and tb:
            self.emit(kind, [self.tensor(a), self.tensor(b)])
            return
        x, c = (a, b) if ta else (b, a)
        c = self.concrete(c)
        if isinstance(c, self.torch.Tensor):
            c = c.item()
        c = float(c)
        src = self.tensor(x)
        if kind == "add":
            self.emit("add_scalar", [src], {"value": c})
        elif kind == "sub" and ta:
            self.emit("add_scalar", [src], {"value": -c})
        elif kind == "mul":
            self.emit("scale", [src], {"factor": c})
        elif kind == "div" and ta:
            if c == 0:
                self.fail("division by zero")
            self.emit("scale", [src], {"factor": 1.0 / c})
        else:
            self.fail("%s of a number by a tensor has no libplan op" % kind)

    def a_add(self, node):
        self._binary(node, "add")

    def a_sub(self, node):
        self._binary(node, "sub")

    def a_mul(self, node):
        if any(isinstance(self.value(a), _Complex) for a in node.args[:2]):
            return self._complex_mul(node)
        self._binary(node, "mul")

    def a_div(self, node):
        if node.kwargs.get("rounding_mode"):
            self.fail("rounding_mode has no libplan op")
        self._binary(node, "div")

    def a_neg(self, node):
        self.emit("scale", [self.tensor(node.args[0])], {"factor": -1.0})

    def a_pow(self, node):
        e = self.concrete(node.args[1])
        x = self.tensor(node.args[0])
        if e == 2:
            self.emit("mul", [x, x])
        elif e == 3:
            sq = self.emit("mul", [x, x], out=node.name + ".sq")
            self.emit("mul", [sq, x])
        elif e == -0.5:
            self.emit("rsqrt", [x])
        else:
            self.fail("pow with exponent %r has no libplan op" % (e,))

    def a_mean(self, node):
        dims = self.concrete(self.arg(node, 1, "dim"))
        rank = len(self.meta(node.args[0])[0])
        if dims is None:
            dims = list(range(rank))
        dims = [int(d) for d in (dims if isinstance(dims, (list, tuple))
                                 else [dims])]
        keep = bool(self.concrete(self.arg(node, 2, "keepdim", False)))
        self.emit("reduce_mean", [self.tensor(node.args[0])],
                  {"dims": dims, "keepdim": keep})

    def a_transpose(self, node):
        rank = len(self.meta(node)[0])
        d0, d1 = (int(self.concrete(x)) % rank for x in node.args[1:3])
        perm = list(range(rank))
        perm[d0], perm[d1] = perm[d1], perm[d0]
        self.emit("permute", [self.tensor(node.args[0])], {"perm": perm})

    def a_t(self, node):
        self.emit("permute", [self.tensor(node.args[0])], {"perm": [1, 0]})

    def a_permute(self, node):
        rank = len(self.meta(node)[0])
        perm = [int(d) % rank for d in self.concrete(node.args[1])]
        self.emit("permute", [self.tensor(node.args[0])], {"perm": perm})

    def a_expand(self, node):
        shape, _ = self.meta(node)
        if shape == self.meta(node.args[0])[0]:
            self.vals[node.name] = self.tensor(node.args[0])
            return
        self.emit("expand", [self.tensor(node.args[0])], {"shape": shape})

    # -- complex numbers (a rotary embedding's rotation) --
    def a_view_as_complex(self, node):
        """x of shape [..., n, 2] as the complex [..., n]: its pairs split
        into real and imaginary parts."""
        shape = self.meta(node.args[0])[0]
        if shape[-1] != 2:
            self.fail("view_as_complex of a last dim of %d" % shape[-1])
        re, im = self._split(node, [1, 1], len(shape) - 1)
        parts = []
        for part, t in (("re", re), ("im", im)):
            out = "%s.%s" % (node.name, part)
            self.b.op("reshape", [t], out, name=self.opname(node, "." + part),
                      shape=shape[:-1])
            self.produced[out] = None
            parts.append(out)
        self.vals[node.name] = _Complex(parts[0], parts[1], shape[:-1])

    def a_view_as_real(self, node):
        """The complex [..., n] as [..., n, 2]: its parts interleaved."""
        z = self.value(node.args[0])
        if not isinstance(z, _Complex):
            self.fail("view_as_real of a value that is not a complex one "
                      "libplan computes")
        parts = []
        for part, t in (("re", z.re), ("im", z.im)):
            out = "%s.%s" % (node.name, part)
            self.b.op("reshape", [t], out, name=self.opname(node, "." + part),
                      shape=z.shape + [1])
            self.produced[out] = None
            parts.append(out)
        self.emit("concat", parts, {"dim": len(z.shape)})

    def _complex_parts(self, a, what):
        """(real, imaginary) tensor names of a complex operand: a value
        view_as_complex made, or a folded complex table (a rotary one,
        freqs_cis), made consts."""
        v = self.value(a)
        if isinstance(v, _Complex):
            return v.re, v.im
        if isinstance(v, _Folded) and isinstance(v.value, self.torch.Tensor) \
                and v.value.is_complex():
            return (self._half_rope_const(v.value.real, a, what + "re"),
                    self._half_rope_const(v.value.imag, a, what + "im"))
        self.fail("a complex product with %r, neither a complex value nor "
                  "a complex table" % (v,))

    def _half_rope_const(self, t, node, part):
        """A folded [.., s, .., n] table (dims of 1 around) that is cos or
        sin of position x theta^(-2i/2n): the first half of a rope_cos /
        rope_sin table [s, 2n], declared as that const and split."""
        from .torch import _const_init, _dtype
        name = "const.%s.%s" % (node.name, part)
        if name in self.produced:
            return name
        t = t.detach()
        core = t.reshape([n for n in t.shape if n != 1]) if t.dim() else t
        init = _const_init(self.torch.cat([core, core], -1)) \
            if core.dim() == 2 else None
        if init is None or isinstance(init, str) and \
                not init.startswith("rope_"):
            self.fail("it multiplies by %s, a complex table whose parts no "
                      "rotary recipe gives (cos / sin of position x "
                      "theta^(-2i/d))" % node.name)
        s, n = core.shape
        dt = _dtype(t.dtype, name)
        self.b.const(name + ".table", [s, 2 * n], dt, init=init)
        halves = [name + ".half", name + ".rest"]
        self.b.op("split", [name + ".table"], halves,
                  name=self.opname(node, "." + part + ".half"), dim=1,
                  sizes=[n, n])
        self.b.op("reshape", [halves[0]], name,
                  name=self.opname(node, "." + part), shape=list(t.shape))
        for o in halves + [name]:
            self.produced[o] = None
        return name

    def _complex_mul(self, node):
        """(a + ib)(c + id) = (ac - bd) + i(ad + bc), on the parts."""
        a, b = self._complex_parts(node.args[0], "x")
        c, d = self._complex_parts(node.args[1], "y")
        n = node.name
        terms = {}
        for key, x, y in (("ac", a, c), ("bd", b, d), ("ad", a, d),
                          ("bc", b, c)):
            terms[key] = self.emit("mul", [x, y], out="%s.%s" % (n, key))
        re = self.emit("sub", [terms["ac"], terms["bd"]], out=n + ".re")
        im = self.emit("add", [terms["ad"], terms["bc"]], out=n + ".im")
        z = self.value(node.args[0])
        shape = z.shape if isinstance(z, _Complex) else \
            self.value(node.args[1]).shape
        self.vals[n] = _Complex(re, im, shape)

    def _split(self, node, sizes, dim):
        src = node.args[0]
        shape = self.meta(src)[0]
        dim %= len(shape)
        outs = ["%s.%d" % (node.name, i) for i in range(len(sizes))]
        self.b.op("split", [self.tensor(src)], outs,
                  name=self.opname(node), dim=dim, sizes=list(sizes))
        for o in outs:
            self.produced[o] = None
        return outs

    def a_split(self, node):
        size = int(self.concrete(node.args[1]))
        dim = int(self.concrete(self.arg(node, 2, "dim", 0)))
        n = self.meta(node.args[0])[0][dim]
        sizes = [size] * (n // size) + ([n % size] if n % size else [])
        self.vals[node.name] = tuple(self._split(node, sizes, dim))

    def a_split_with_sizes(self, node):
        sizes = [int(s) for s in self.concrete(node.args[1])]
        dim = int(self.concrete(self.arg(node, 2, "dim", 0)))
        self.vals[node.name] = tuple(self._split(node, sizes, dim))

    def a_slice(self, node):
        shape = self.meta(node.args[0])[0]
        dim = int(self.concrete(self.arg(node, 1, "dim", 0))) % len(shape)
        start = self.concrete(self.arg(node, 2, "start", None))
        end = self.concrete(self.arg(node, 3, "end", None))
        step = self.concrete(self.arg(node, 4, "step", 1))
        if step != 1:
            self.fail("a strided slice has no libplan op")
        lo, hi, _ = slice(start, end).indices(shape[dim])
        if (lo, hi) == (0, shape[dim]):
            self.vals[node.name] = self.tensor(node.args[0])
            return
        if hi <= lo:
            self.fail("an empty slice has no libplan op")
        sizes = [n for n in (lo, hi - lo, shape[dim] - hi) if n > 0]
        outs = self._split(node, sizes, dim)
        self.vals[node.name] = outs[1 if lo > 0 else 0]

    def a_cat(self, node):
        ts = self.value(node.args[0])
        dim = int(self.concrete(self.arg(node, 1, "dim", 0)))
        self.emit("concat", [self.tensor(a) for a in node.args[0]] if
                  isinstance(ts, (list, tuple)) else [], {"dim": dim})

    # -- routing: topk, sum, in-place arithmetic --
    def a_topk(self, node):
        shape = self.meta(node.args[0])[0]
        k = int(self.concrete(self.arg(node, 1, "k")))
        dim = int(self.concrete(self.arg(node, 2, "dim", -1)))
        if dim % len(shape) != len(shape) - 1:
            self.fail("topk along a dim other than the last has no libplan "
                      "op")
        if not self.concrete(self.arg(node, 3, "largest", True)) or \
                not self.concrete(self.arg(node, 4, "sorted", True)):
            self.fail("topk with largest=False or sorted=False has no "
                      "libplan op")
        outs = [node.name + ".values", node.name + ".indices"]
        self.b.op("topk", [self.tensor(node.args[0])], outs,
                  name=self.opname(node), k=k)
        for o in outs:
            self.produced[o] = None
        self.vals[node.name] = tuple(outs)

    def a_sum(self, node):
        if node.kwargs.get("dtype") is not None:
            self.fail("a sum with a dtype has no libplan op")
        dims = self.concrete(self.arg(node, 1, "dim"))
        rank = len(self.meta(node.args[0])[0])
        if dims is None or (isinstance(dims, (list, tuple)) and not dims):
            dims = list(range(rank))
        dims = [int(d) % rank for d in (dims if isinstance(dims, (list,
                                                                  tuple))
                                        else [dims])]
        keep = bool(self.concrete(self.arg(node, 2, "keepdim", False)))
        self.emit("reduce_sum", [self.tensor(node.args[0])],
                  {"dims": dims, "keepdim": keep})

    def _in_place(self, node, kind):
        """x.add_(y) (sub_, mul_, div_; the router's renormalisation): the
        op, and later readers of x read its result. Refused on a view (its
        base would change too) or a leaf."""
        import torch.fx
        x = node.args[0]
        if not isinstance(x, torch.fx.Node) or x.op != "call_function":
            self.fail("an in-place %s of a leaf has no libplan op" % kind)
        src = x
        if _opname(x.target) == "getitem":
            src = x.args[0]
        if _opname(src.target) in _VIEWS:
            self.fail("an in-place %s of a view (of %s) has no libplan op"
                      % (kind, src.name))
        if kind == "div" and node.kwargs.get("rounding_mode"):
            self.fail("rounding_mode has no libplan op")
        self._binary(node, kind)
        self.vals[x.name] = self.vals[node.name]

    def a_add_(self, node):
        self._in_place(node, "add")

    def a_sub_(self, node):
        self._in_place(node, "sub")

    def a_mul_(self, node):
        self._in_place(node, "mul")

    def a_div_(self, node):
        self._in_place(node, "div")

    # -- mixture-of-experts layers --
    def in_experts(self, node):
        """True for a node inside a call of an experts module (see
        _experts_spec), whose nodes are replaced by the dense computation,
        emitted at the call's output node."""
        if getattr(self, "moe_groups", None) is None:
            self.moe_groups = self._experts_groups()
        key = self.moe_of.get(node.name)
        if key is None:
            return False
        g = self.moe_groups[key]
        if node.name == g["out"].name:
            self._emit_experts(g)
        return True

    def _module_at(self, path):
        try:
            return self.module.get_submodule(path) if path else self.module
        except (AttributeError, TypeError):
            return None

    def _experts_groups(self):
        """{stack key: group} for every call of an experts-like module in
        the graph; self.moe_of maps each of its nodes to the key."""
        self.moe_of, groups, members, seen = {}, {}, {}, {}
        for node in self.gm.graph.nodes:
            stack = node.meta.get("nn_module_stack") or {}
            for key, v in stack.items():
                if key not in seen:
                    p = self._norm_path(v[0] if isinstance(v, tuple)
                                        else str(v))
                    mod = self._module_at(p)
                    seen[key] = mod is not None and _experts_like(mod)
                    if seen[key]:
                        groups[key] = {"path": p, "mod": mod}
                        members[key] = []
                if seen[key]:
                    self.moe_of[node.name] = key
                    members[key].append(node)
                    break
        for key, g in groups.items():
            inside = set(n.name for n in members[key])
            ins, outs = [], []
            for n in members[key]:
                for a in n.all_input_nodes:
                    if a.name not in inside and a not in ins:
                        ins.append(a)
                if any(u.name not in inside for u in n.users) and \
                        n not in outs:
                    outs.append(n)
            if len(outs) != 1:
                self.fail("the experts module's call has %d outputs read "
                          "outside it, not 1" % len(outs), members[key][0])
            g["ins"], g["out"] = ins, outs[0]
            g["first"] = members[key][0]
        return groups

    def _norm_path(self, p):
        for a, b in (("L['self'].", ""), ("L['self']", ""), ("[", "."),
                     ("]", "")):
            p = p.replace(a, b)
        return p.strip(".")

    def _emit_experts(self, g):
        """The dense form of an experts call (docs/python.md): every expert
        on every token, the outputs weighed by the top-k weights scattered
        into a dense [tokens, experts] table and summed over the experts."""
        out = g["out"]
        spec = _experts_spec(self, g, out)
        x, idx, w = spec["x"], spec["idx"], spec["w"]
        e, i = spec["experts"], spec["inter"]
        t, h = self.meta(x)[0]
        path = g["path"]

        def op(kind, ins, outs, what, **attrs):
            pre = path + "." if path else ""
            name, j = pre + what, 1
            while name in self.opnames:
                name = "%s%s_%d" % (pre, what, j)
                j += 1
            self.opnames.add(name)
            self.b.op(kind, ins, outs, name=name, **attrs)
            for o in (outs if isinstance(outs, list) else [outs]):
                if o != out.name:
                    self.produced[o] = None
            return outs
        base = out.name + "."
        dense = op("scatter_add", [self.tensor(w), self.tensor(idx)],
                   base + "dense", "dense", size=e)
        dense = op("permute", [dense], base + "dense_t", "dense_t",
                   perm=[1, 0])
        dense = op("reshape", [dense], base + "weights", "weights",
                   shape=[e, t, 1])
        xe = op("expand", [self.tensor(x)], base + "tokens", "tokens",
                shape=[e, t, h])
        tb = not spec["transposed"]
        gu = op("matmul", [xe, self.tensor(spec["gate_up"])],
                base + "gate_up", "gate_up", transpose_b=tb)
        gate, up = op("split", [gu], [base + "gate", base + "up"], "split",
                      dim=2, sizes=[i, i])
        act = op(spec["act"][0], [gate], base + "act", "act",
                 **spec["act"][1])
        hid = op("mul", [act, up], base + "hidden", "hidden")
        y = op("matmul", [hid, self.tensor(spec["down"])], base + "down",
               "down", transpose_b=tb)
        y = op("mul", [y, dense], base + "weighed", "weighed")
        op("reduce_sum", [y], out.name, "combine", dims=[0], keepdim=False)
        self.produced[out.name] = out
        self.vals[out.name] = out.name


# ---- mixture-of-experts layers ---------------------------------------------

# ops whose result may share storage with their input: an in-place op on
# one would change the base too
_VIEWS = _RESHAPE + ("alias", "detach", "contiguous", "to", "transpose", "t",
                     "permute", "expand", "slice", "select", "narrow",
                     "split", "split_with_sizes", "chunk", "unbind",
                     "as_strided", "diagonal", "unfold", "view_as_complex",
                     "view_as_real", "view_as_real_copy")

_ACTS = (("silu", {}), ("gelu", {}), ("gelu", {"approximate": "tanh"}),
         ("relu", {}), ("tanh", {}), ("sigmoid", {}))


def _experts_like(mod):
    """A module holding banks of expert weights: a parameter of its own
    of rank 3 named *_proj ([experts, out, in] as transformers' experts
    modules store them)."""
    return any(n.endswith("_proj") and p.dim() == 3
               for n, p in mod.named_parameters(recurse=False))


def _act_of(torch, fn):
    """The libplan activation (kind, attrs) fn computes, or None."""
    import torch.nn.functional as F
    z = torch.linspace(-4.0, 4.0, 81, dtype=torch.float64)
    try:
        with torch.no_grad():
            got = fn(z)
    except Exception:
        return None
    for kind, attrs in _ACTS:
        if kind == "gelu":
            want = F.gelu(z, approximate=attrs.get("approximate", "none"))
        elif kind == "silu":
            want = F.silu(z)
        else:
            want = getattr(torch, kind)(z)
        if got.shape == want.shape and \
                bool(((got - want).abs() <= 1e-9).all()):
            return kind, attrs
    return None


def _experts_spec(conv, g, out):
    """What the dense form of experts call g needs: the tokens x [t, h],
    the top-k expert ids idx [t, k] and weights w [t, k] (the call's
    inputs), the gate_up_proj and down_proj params, their layout, the
    intermediate size and the activation; UnsupportedError for an experts
    module of another form, and unless the module's own forward, run on
    random tokens and routing, equals the dense form."""
    torch = conv.torch
    mod, first, path = g["mod"], g["first"], g["path"]

    def fail(why):
        conv.fail("experts module %s (%s): %s" % (path, type(mod).__name__,
                                                  why), first)
    params = dict(mod.named_parameters(recurse=False))
    if set(params) != {"gate_up_proj", "down_proj"}:
        fail("its parameters are %s; libplan's dense experts are a fused "
             "gate_up_proj and a down_proj, without biases"
             % sorted(params))
    for attr, want in (("has_bias", False), ("has_gate", True),
                       ("is_concatenated", True),
                       ("has_post_expert_norm", False)):
        if bool(getattr(mod, attr, want)) != want:
            fail("%s is %s; the dense form has %s = %s"
                 % (attr, not want, attr, want))
    transposed = bool(getattr(mod, "is_transposed", False))
    gu, dn = params["gate_up_proj"], params["down_proj"]
    e = int(gu.shape[0])
    if transposed:
        h, i2 = int(gu.shape[1]), int(gu.shape[2])
    else:
        i2, h = int(gu.shape[1]), int(gu.shape[2])
    i = i2 // 2
    want_dn = (e, i, h) if transposed else (e, h, i)
    if i2 % 2 or tuple(int(d) for d in dn.shape) != want_dn:
        fail("gate_up_proj %s and down_proj %s are not the shapes of one "
             "layout ([e, 2i, h] and [e, h, i], or transposed)"
             % (list(gu.shape), list(dn.shape)))
    act = _act_of(torch, getattr(mod, "act_fn", None) or (lambda z: None))
    if act is None:
        fail("its act_fn is none of silu, gelu, gelu tanh, relu, tanh, "
             "sigmoid")
    x = idx = w = None
    names = {}
    for a in g["ins"]:
        kind, target = conv.kind.get(a.name, (None, None))
        if a.op == "placeholder" and kind == "PARAMETER":
            names[target] = a
            continue
        v = conv.vals.get(a.name)
        if not isinstance(v, str):
            if v is None:
                fail("its input %s is not computed before its output"
                     % a.name)
            continue  # folded (shapes only): not an input of the form
        shape, dt = conv.meta(a)
        if dt.startswith("i") or dt.startswith("u"):
            if idx is not None:
                fail("it reads two integer tensors")
            idx = a
        elif len(shape) == 2 and shape[1] == h and x is None and \
                (w is None or shape != conv.meta(w)[0]):
            x = a
        elif w is None:
            w = a
        else:
            fail("it reads more tensors than the tokens, the expert ids and "
                 "the weights")
    for pname in ("gate_up_proj", "down_proj"):
        if "%s.%s" % (path, pname) not in names:
            fail("its %s is not read as the parameter %s.%s"
                 % (pname, path, pname))
    if x is None or idx is None or w is None:
        fail("its inputs are not the tokens [t, h], the expert ids [t, k] "
             "and the weights [t, k]")
    t = conv.meta(x)[0][0]
    k = conv.meta(idx)[0]
    if len(k) != 2 or k[0] != t or conv.meta(w)[0] != k or \
            conv.meta(out)[0] != [t, h] or k[1] == h:
        fail("its inputs %s, %s, %s and output %s are not the tokens [t, h], "
             "the expert ids and the weights [t, k] (k != h) and [t, h]"
             % (conv.meta(x)[0], k, conv.meta(w)[0], conv.meta(out)[0]))
    _check_dense(torch, mod, fail, e, h, i, k[1], transposed, act)
    return {"x": x, "idx": idx, "w": w, "experts": e, "inter": i,
            "transposed": transposed, "act": act,
            "gate_up": names["%s.gate_up_proj" % path],
            "down": names["%s.down_proj" % path]}


def _eager_experts_hint(module):
    """Why an export that failed may have: an experts module run by
    transformers' eager loop (over the experts the routing hit, which
    depends on its values), as a clause for the message ("" if none)."""
    for name, mod in module.named_modules():
        cfg = getattr(mod, "config", None)
        if _experts_like(mod) and \
                getattr(cfg, "_experts_implementation", None) == "eager":
            return ("; experts module %s runs transformers' eager experts "
                    "loop, whose iterations depend on the routing's values: "
                    "set its config's _experts_implementation to "
                    "\"grouped_mm\" or \"batched_mm\", which export"
                    % (name or "<root>"))
    return ""

def _dense_experts(torch, x, idx, w, gu, dn, e, i, transposed, act):
    """The dense form in torch (what the emitted ops compute)."""
    import torch.nn.functional as F
    dense = torch.zeros(x.shape[0], e, dtype=x.dtype,
                        device=x.device).scatter_add(-1, idx, w)
    gu = gu if not transposed else gu.transpose(-2, -1)
    dn = dn if not transposed else dn.transpose(-2, -1)
    gate, up = torch.matmul(x, gu.transpose(-2, -1)).split(i, -1)
    kind, attrs = act
    a = F.gelu(gate, approximate=attrs.get("approximate", "none")) if \
        kind == "gelu" else (F.silu(gate) if kind == "silu" else
                             getattr(torch, kind)(gate))
    y = torch.matmul(a * up, dn.transpose(-2, -1))
    return (y * dense.t()[:, :, None]).sum(0)


def _check_dense(torch, mod, fail, e, h, i, k, transposed, act):
    """The module's forward on random tokens and routing (a generator of
    its own: the global one is left as it was) against the dense form."""
    p = mod.gate_up_proj
    gen = torch.Generator().manual_seed(0)
    t = 7
    x = torch.randn(t, h, generator=gen).to(p.dtype)
    logits = torch.randn(t, e, generator=gen)
    w, idx = torch.topk(torch.softmax(logits, -1), k, dim=-1)
    w = (w / w.sum(-1, keepdim=True)).to(p.dtype)
    x, idx, w = x.to(p.device), idx.to(p.device), w.to(p.device)
    try:
        with torch.no_grad():
            got = mod(x, idx, w)
            want = _dense_experts(torch, x, idx, w, p.detach(),
                                  mod.down_proj.detach(), e, i, transposed,
                                  act)
    except Exception as ex:
        fail("running it on random routing failed: %s"
             % (str(ex).splitlines()[0] if str(ex) else type(ex).__name__))
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        fail("its forward(tokens, ids, weights) does not return [t, h]")
    err = float((got.double() - want.double()).abs().max())
    tol = 1e-4 * (1.0 + float(want.double().abs().max()))
    if not err <= tol:
        fail("its forward differs from the dense form (every expert on "
             "every token: act(x gate^T) * (x up^T), then down^T, weighed by "
             "the top-k weights) by %.3g on random routing" % err)


def program_from_export(module, example_inputs, kwargs=None, name=None):
    """Exports `module` with torch.export (non-strict) on `example_inputs`
    (and `kwargs`, e.g. {"use_cache": False} for a transformers model) and
    returns the libplan Program of its ATen graph (see the module's
    docstring). UnsupportedError names the node, its ATen op and module
    path of anything without a mapping. Needs torch."""
    from . import torch as lt
    lt._require()
    import torch
    what = name or type(module).__name__
    try:
        ep = torch.export.export(module, tuple(example_inputs),
                                 kwargs=dict(kwargs or {}), strict=False)
    except Exception as e:
        raise UnsupportedError("torch.export cannot export %s: %s"
                               % (what, str(e).splitlines()[0] if str(e)
                                  else type(e).__name__) +
                               _eager_experts_hint(module)) from e
    b = ProgramBuilder(what)
    conv = _Converter(ep, module, b)
    outputs = conv.run()
    if not outputs:
        raise UsageError("%s's export has no tensor output" % what)
    b.outputs(outputs)
    prog = b.build(name="<export:%s>" % what)
    for tname, node in conv.produced.items():
        if node is None:
            continue
        want = conv.meta(node)
        t = prog.tensor(tname)
        got = ([int(d) for d in t.shape], t.dtype)
        if want != got:
            prog.close()
            conv.fail("libplan infers %s %s for it, torch exported %s %s"
                      % (got[1], got[0], want[1], want[0]), node)
    return prog


# ---- running the plan of an exported program ------------------------------

def _const_value(init, shape, dtype):
    """A const's values from its recipe (spec/plan-format.md §2.2)."""
    import torch
    recipe, fill, theta = init.get("recipe"), init.get("fill", -1e9), \
        init.get("theta", 10000.0)
    if recipe in ("zeros", "ones"):
        return (torch.zeros if recipe == "zeros" else torch.ones)(
            shape, dtype=dtype)
    if recipe == "causal_mask":
        s, t = shape[-2], shape[-1]
        upper = torch.ones(s, t, dtype=torch.bool).triu(1)
        m = torch.zeros(s, t, dtype=dtype).masked_fill(upper, fill)
        return m.expand(shape).contiguous()
    if recipe in ("rope_cos", "rope_sin"):
        s, e = shape
        pos = torch.arange(s, dtype=torch.float64)[:, None]
        i = torch.arange(e, dtype=torch.float64)[None, :] % (e // 2)
        ang = pos * theta ** (-2.0 * i / e)
        f = torch.cos if recipe == "rope_cos" else torch.sin
        return f(ang).to(dtype)
    raise UnsupportedError("const recipe %r is not run here" % (recipe,))


def _program_consts(plan):
    """{const name: init dict} from the plan's program text."""
    import json
    import re
    out = {}
    pat = re.compile(r'^    ("(?:[^"\\]|\\.)*"|[^:]+): \{.*role: const.*?'
                     r'init: (\{[^}]*\}|[A-Za-z_]+)')
    for line in plan.program.text().splitlines():
        m = pat.match(line)
        if not m:
            continue
        name = json.loads(m.group(1)) if m.group(1).startswith('"') \
            else m.group(1)
        init = m.group(2)
        init = _init_dict(init) if init.startswith("{") else \
            {"recipe": init}
        out[name] = init
    return out


def _init_dict(text):
    """{recipe: rope_cos, theta: 500000} -> a dict."""
    out = {}
    for part in text.strip("{}").split(","):
        k, _, v = part.partition(":")
        k, v = k.strip(), v.strip()
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = v.strip('"')
    return out


def _run_op(F, torch, kind, attrs, xs):
    """One program op on (D)Tensors, as torch computes it."""
    if kind == "linear":
        return F.linear(*xs)
    if kind == "matmul":
        a, b = xs
        if attrs.get("transpose_a"):
            a = a.transpose(-2, -1)
        if attrs.get("transpose_b"):
            b = b.transpose(-2, -1)
        return torch.matmul(a, b)
    if kind in ("add", "sub", "mul", "div"):
        return getattr(torch, kind)(xs[0], xs[1])
    if kind == "scale":
        return xs[0] * attrs.get("factor", 1.0)
    if kind == "add_scalar":
        return xs[0] + attrs.get("value", 0.0)
    if kind == "reshape":
        return xs[0].reshape(attrs["shape"])
    if kind == "permute":
        return xs[0].permute(attrs["perm"])
    if kind == "transpose":
        d = attrs.get("dims", [-2, -1])
        return xs[0].transpose(d[0], d[1])
    if kind == "split":
        # one narrow per part: split's backward concatenates a zero
        # gradient for an unused part that is no DTensor
        dim, out, at = attrs.get("dim", -1), [], 0
        for n in attrs["sizes"]:
            out.append(xs[0].narrow(dim, at, n))
            at += n
        return out
    if kind == "concat":
        return torch.cat(xs, attrs.get("dim", -1))
    if kind == "expand":
        return xs[0].expand(attrs["shape"])
    if kind == "attention":
        q, k, v = xs[:3]
        mask = xs[3] if len(xs) > 3 else None
        if mask is not None and not mask.is_floating_point():
            mask = mask != 0
        scale = attrs.get("scale") or None
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=bool(attrs.get("causal")),
            scale=scale, enable_gqa=q.shape[1] != k.shape[1])
    if kind == "layernorm":
        return F.layer_norm(xs[0], (xs[0].shape[-1],), xs[1],
                            xs[2] if len(xs) > 2 else None,
                            attrs.get("eps", 1e-5))
    if kind == "rmsnorm":
        return F.rms_norm(xs[0], (xs[0].shape[-1],), xs[1],
                          attrs.get("eps", 1e-6))
    if kind == "embedding":
        return F.embedding(xs[1], xs[0])
    if kind == "softmax":
        return torch.softmax(xs[0], attrs.get("dim", -1))
    if kind == "gelu":
        return F.gelu(xs[0], approximate=attrs.get("approximate", "none"))
    if kind in ("relu", "silu", "tanh", "sigmoid", "exp", "rsqrt"):
        return getattr(torch, kind)(xs[0]) if kind != "silu" else \
            F.silu(xs[0])
    if kind in ("reduce_mean", "reduce_sum"):
        f = torch.mean if kind == "reduce_mean" else torch.sum
        return f(xs[0], attrs["dims"], keepdim=attrs.get("keepdim", False))
    if kind in ("topk", "scatter_add"):
        return _run_routing(torch, kind, attrs, xs)
    raise UnsupportedError("op kind %s is not run by parallelize_program"
                           % kind)


def _run_routing(torch, kind, attrs, xs):
    """topk and scatter_add along the last dim, on tensors or on each
    rank's block of DTensors (DTensor's own rules may place them otherwise
    than the plan, or not at all): every placement a legal strategy gives
    them (spec/sharding-rules.md) computes locally what the whole op
    computes there."""
    from .torch import _require
    from .torch_parallel import contiguous_strides
    dt = _require()
    if not isinstance(xs[0], dt.DTensor):
        if kind == "topk":
            return tuple(torch.topk(xs[0], int(attrs["k"]), dim=-1))
        src, idx = xs
        return torch.zeros(tuple(src.shape[:-1]) + (int(attrs["size"]),),
                           dtype=src.dtype, device=src.device).scatter_add(
                               -1, idx.long(), src)
    last = xs[0].dim() - 1
    if kind == "topk":
        x = xs[0]
        for p in x.placements:
            if p.is_partial() or (p.is_shard() and p.dim % x.dim() == last):
                raise UnsupportedError(
                    "topk with its input placed %s: the last dim split or a "
                    "partial sum is no legal strategy" % (x.placements,))
        v, i = torch.topk(x.to_local(grad_placements=x.placements),
                          int(attrs["k"]), dim=-1)
        shape = tuple(x.shape[:-1]) + (int(attrs["k"]),)
        return tuple(dt.DTensor.from_local(
            y, x.device_mesh, x.placements, run_check=False, shape=shape,
            stride=contiguous_strides(shape)) for y in (v, i))
    src, idx = xs
    if not isinstance(idx, dt.DTensor):
        raise UnsupportedError("scatter_add of a DTensor by plain indices")
    out = []
    for ps, pi in zip(src.placements, idx.placements):
        if ps.is_partial() and pi.is_replicate():
            out.append(ps)
        elif ps != pi or ps.is_partial():
            raise UnsupportedError(
                "scatter_add with src placed %s and indices %s: no legal "
                "strategy" % (src.placements, idx.placements))
        elif ps.is_shard() and ps.dim % src.dim() == last:
            out.append(dt.Partial("sum"))  # each rank adds its choices
        else:
            out.append(ps)
    ls = src.to_local(grad_placements=src.placements)
    li = idx.to_local()
    size = int(attrs["size"])
    y = torch.zeros(tuple(ls.shape[:-1]) + (size,), dtype=ls.dtype,
                    device=ls.device).scatter_add(-1, li.long(), ls)
    shape = tuple(src.shape[:-1]) + (size,)
    return dt.DTensor.from_local(y, src.device_mesh, tuple(out),
                                 run_check=False, shape=shape,
                                 stride=contiguous_strides(shape))


def _local_attention(F, dt, mesh, attrs, xs, out_spec, name):
    """The attention op on each rank's block: DTensor has no sharding rule
    for CPU's fused attention, and a split of the batch or the heads
    (q's and k's alike; the mask replicated) computes locally what the
    whole op computes there. Other splits raise UnsupportedError."""
    for x in xs:
        for p in x.placements:
            if p.is_partial() or (p.is_shard() and p.dim not in (0, 1)):
                raise UnsupportedError(
                    "op %s (attention) with inputs placed %s: parallelize_"
                    "program runs attention split on batch or heads only"
                    % (name, [tuple(v.placements) for v in xs]))
    if len(xs) > 3 and any(not p.is_replicate() for p in xs[3].placements):
        raise UnsupportedError("op %s (attention): the mask must be "
                               "replicated" % name)
    ref = xs[0]
    local = [x.to_local(grad_placements=tuple(x.placements)) for x in xs]
    # the key/value heads each local query head reads (grouped-query
    # heads: global query head i reads key head i / (h / hk)), picked
    # from this rank's key/value block
    import torch
    from . import placements as _pl
    from . import torch_parallel as tp
    from .torch import from_dtensor_placements
    coords = tuple(mesh.get_coordinate())

    def first_head(x):
        pl = _pl.parse(from_dtensor_placements(x.placements))
        _, off = _pl.local_shape_and_offset(tuple(x.shape), pl,
                                            list(mesh.shape), coords)
        return off[1]
    h, hk = xs[0].shape[1], xs[1].shape[1]
    qo, ko = first_head(xs[0]), first_head(xs[1])
    if (qo, ko) != (0, 0) or local[0].shape[1] * hk != \
            local[1].shape[1] * h:
        idx = [(qo + i) // (h // hk) - ko for i in range(local[0].shape[1])]
        if min(idx) < 0 or max(idx) >= local[1].shape[1]:
            raise UnsupportedError(
                "op %s (attention): a rank's query heads read key heads "
                "another rank holds" % name)
        sel = torch.tensor(idx, dtype=torch.int64)
        local[1] = local[1].index_select(1, sel)
        local[2] = local[2].index_select(1, sel)
    y = _run_op(F, None, "attention", attrs, local)
    shape = list(ref.shape[:3]) + [xs[2].shape[-1]]
    return dt.DTensor.from_local(y, mesh, out_spec, run_check=False,
                                 shape=tuple(shape),
                                 stride=tp.contiguous_strides(shape))


def parallelize_program(module, plan, mesh=None):
    """Makes `module` run `plan`, whose program came from
    program_from_export (or any program whose params are the module's
    parameters by qualified name): its parameters become DTensors placed
    as the plan says, and its forward runs the plan's program op by op on
    DTensors, every op's inputs and outputs redistributed to its
    strategy's placements, the outputs delivered in the plan's output
    placements (the program's positional inputs in order, or by name);
    gradients are synchronised as parallelize does. Returns the module.
    Needs torch and an initialised process group."""
    from . import torch as lt
    from . import torch_parallel as tp
    from .torch_import import _attrs_of
    dt = lt._require()
    import torch
    import torch.nn.functional as F
    tp._check_plan(plan)
    mesh = mesh if mesh is not None else lt.device_mesh(plan)
    info = tp._Info(plan, dt)
    params = tp._place_state(module, plan, mesh, info)
    module._libplan_sync = tp._install_sync(params, plan, mesh, info)
    prog = plan.program
    attrs = _attrs_of(prog.text())
    inputs = [t.name for t in prog.tensors if t.role == "input"]
    consts = _program_consts(plan)
    out_names = _outputs_of(prog)
    ops = [(o.name, o.kind, tuple(o.inputs), tuple(o.outputs),
            info.ops[o.name][1]) for o in prog.ops]
    dtypes = {"f32": torch.float32, "f64": torch.float64,
              "bf16": torch.bfloat16, "f16": torch.float16}

    def fetch(qname):
        obj = module
        for part in qname.split("."):
            obj = getattr(obj, part)
        return obj

    def forward(*args, **kwargs):
        env = {}
        given = dict(zip(inputs, args))
        for k, v in kwargs.items():
            if k in inputs:
                given[k] = v
        for name in inputs:
            if name not in given:
                raise UsageError("the program's input %s is not given"
                                 % name)
            env[name] = tp._distribute(given[name], info.leaves[name], mesh,
                                       plan, info, name)
        for t in prog.tensors:
            if t.role == "param":
                env[t.name] = fetch(t.name)
            elif t.role == "const":
                v = _const_value(consts.get(t.name, {}), list(t.shape),
                                 dtypes.get(t.dtype, torch.float32))
                env[t.name] = tp._distribute(v, info.leaves[t.name], mesh,
                                             plan, info, t.name)
        moved = {}  # (tensor, placement) -> value: made once a forward,
        # reused by every op that reads it so, as lowering reuses a buffer

        def placed(t, p):
            got = moved.get((t, p))
            if got is None:
                got = moved[(t, p)] = tp._redistribute(
                    env[t], mesh, info.spec(p, env[t].dim()), dt)
            return got
        for name, kind, ins, outs_, st in ops:
            xs = [placed(t, p) for t, p in zip(ins, st.inputs)]
            if kind == "attention" and isinstance(xs[0], dt.DTensor):
                y = _local_attention(F, dt, mesh, attrs.get(name, {}), xs,
                                     info.spec(st.outputs[0], 4), name)
            elif kind == "embedding" and isinstance(xs[0], dt.DTensor) \
                    and tp.rows_split(xs[0]):
                y = tp.row_split_embedding(
                    xs[0], xs[1], mesh,
                    info.spec(st.outputs[0], xs[1].dim() + 1), dt)
            else:
                y = _run_op(F, torch, kind, attrs.get(name, {}), xs)
            ys = list(y) if isinstance(y, (tuple, list)) else [y]
            for t, v, p in zip(outs_, ys, st.outputs):
                env[t] = tp._redistribute(v, mesh, info.spec(p, v.dim()), dt)
        res = [tp._redistribute(env[o], mesh,
                                info.spec(plan.placement(o), env[o].dim()),
                                dt) for o in out_names]
        return res[0] if len(res) == 1 else tuple(res)

    module.forward = forward
    return module


def _outputs_of(prog):
    import json
    import re
    m = re.search(r'^  outputs: \[(.*)\]\s*$', prog.text(), re.M)
    if not m:
        return [prog.ops[-1].outputs[-1]]
    return [json.loads(x) if x.startswith('"') else x
            for x in (s.strip() for s in m.group(1).split(",")) if x]
