"""Programs: the single-device computation a plan distributes, its ops
and tensors."""

import ctypes
from collections import namedtuple

from . import _decls
from ._common import (_Handle, _hash_str, _path, _ranged, _take_out, _text,
                      enc, fn, s)
from .errors import NotFoundError, check


Tensor = namedtuple("Tensor", "index name shape dtype role")
Tensor.__doc__ = "A tensor of a program: its shape (a tuple), dtype and role."


class Op(namedtuple("Op", "index name kind inputs outputs")):
    """An op of a program: inputs and outputs are tensor names."""
    __slots__ = ()


class Program(_Handle):
    """A program: the single-device computation a plan distributes.

    Program.load(path) / Program.parse(text) own the C object; Plan.program
    is a view borrowed from its plan (valid while the plan is open)."""

    _free = staticmethod(lambda p: fn.program_free(p))
    _kind = "program"

    @classmethod
    def load(cls, path):
        out = ctypes.c_void_p()
        check(fn.program_load(ctypes.byref(out), _path(path)))
        return cls(out.value)

    @classmethod
    def parse(cls, text, name="<string>"):
        data = _text(text)
        out = ctypes.c_void_p()
        check(fn.program_load_buffer(ctypes.byref(out), data, len(data),
                                     enc(name, "name")))
        return cls(out.value)

    @property
    def name(self):
        return s(fn.program_name(self._h))

    def hash(self):
        h = _decls.Hash()
        check(fn.program_hash(ctypes.byref(h), self._h))
        return _hash_str(h)

    def __len__(self):
        return fn.program_op_count(self._h)

    def _slots(self, i, f):
        out = []
        while True:
            t = f(self._h, i, len(out))
            if t < 0:
                return tuple(out)
            out.append(s(fn.program_tensor_name(self._h, t)))

    def _index(self, key, find, what):
        """The index `key` (range-checked), or the one of the name `key`
        (-1 when there is none)."""
        if isinstance(key, (str, bytes)):
            return find(self._h, enc(key, what + " name"))
        return _ranged(key, what + " index")

    def op(self, key):
        """An op by index or name (NotFoundError when there is none)."""
        h = self._h
        i = self._index(key, fn.program_op_find, "op")
        if not 0 <= i < fn.program_op_count(h):
            raise NotFoundError("no op %r in the program" % (key,))
        return Op(i, s(fn.program_op_name(h, i)), s(fn.program_op_kind(h, i)),
                  self._slots(i, fn.program_op_input),
                  self._slots(i, fn.program_op_output))

    def tensor(self, key):
        """A tensor by index or name (NotFoundError when there is none)."""
        h = self._h
        i = self._index(key, fn.program_tensor_find, "tensor")
        if not 0 <= i < fn.program_tensor_count(h):
            raise NotFoundError("no tensor %r in the program" % (key,))
        return Tensor(i, s(fn.program_tensor_name(h, i)), self.shape(i),
                      s(fn.program_tensor_dtype(h, i)),
                      s(fn.program_tensor_role(h, i)))

    def shape(self, key):
        h = self._h
        i = self._index(key, fn.program_tensor_find, "tensor")
        dims = (ctypes.c_int64 * 8)()
        r = fn.program_tensor_shape(h, i, dims, 8)
        if r < 0:
            raise NotFoundError("no tensor %r in the program" % (key,))
        return tuple(dims[:r])

    @property
    def ops(self):
        return [self.op(i) for i in range(fn.program_op_count(self._h))]

    @property
    def tensors(self):
        n = fn.program_tensor_count(self._h)
        return [self.tensor(i) for i in range(n)]

    def signatures(self):
        """{"ops": {name: int}, "tensors": {name: int}}: the 64-bit
        signatures plans record for drift reports."""
        h = self._h
        return {
            "ops": {s(fn.program_op_name(h, i)): fn.program_op_signature(h, i)
                    for i in range(fn.program_op_count(h))},
            "tensors": {s(fn.program_tensor_name(h, i)):
                        fn.program_tensor_signature(h, i)
                        for i in range(fn.program_tensor_count(h))},
        }

    def text(self):
        """The program as a standalone document in canonical layout."""
        return _take_out(fn.program_write_buffer, self._h)

    def grad(self, inputs=False):
        """The training program (forward, then backward ops; gradients named
        grad/<param>). InvalidError when the program has no loss."""
        opts = _decls.GradOptions(1, 1 if inputs else 0)
        out = ctypes.c_void_p()
        check(fn.program_grad(ctypes.byref(out), self._h, ctypes.byref(opts)))
        return Program(out.value)

    def __repr__(self):
        if self.closed:
            return "<libplan.Program closed>"
        return "<libplan.Program %r: %d ops, %d tensors>" % (
            self.name, fn.program_op_count(self._h),
            fn.program_tensor_count(self._h))


def load_program(path):
    return Program.load(path)
