"""Placements as objects: Shard(0), Replicate(), Partial("sum").

libplan prints a placement in compact form, one entry per mesh axis in mesh
order: "S(0)R", "RS(1)", "S(0)P(sum)", "S(0:1)S(0:0)" (a dim split by two
axes, the second axis first), "S(0|3:2)R" (format 1.1: dim 0 cut in the
proportions 3:2 along the first axis). These classes mirror DTensor's
placements and reprs; `parse` and `format` convert between the two forms.
"""

import math
import re

__all__ = ["Shard", "Replicate", "Partial", "parse", "format",
           "local_shape_and_offset"]


class Placement:
    __slots__ = ()

    def is_shard(self, dim=None):
        return False

    def is_replicate(self):
        return False

    def is_partial(self):
        return False


class Shard(Placement):
    """Dim `dim` split along the axis (torch.chunk layout, or in the
    proportions of `ratios`, one positive weight per index of the axis:
    format 1.1). `level` orders several axes that split the same dim (0
    splits first); None: mesh order. Weights are kept divided by their gcd
    (6:4 is 3:2, the same layout)."""
    __slots__ = ("dim", "level", "ratios")

    def __init__(self, dim, level=None, ratios=None):
        # 1.5 is refused, not cut to 1 (imported here, as _common loads
        # the library)
        from ._common import _int
        self.dim = _int(dim, "Shard: dim")
        self.level = None if level is None else _int(level, "Shard: level")
        self.ratios = None
        if ratios is not None:
            w = [_int(x, "Shard: ratio") for x in ratios]
            if not w or min(w) < 1:
                raise _usage("Shard: ratios are positive integers, not %r"
                             % (list(ratios),))
            g = 0
            for x in w:
                g = math.gcd(g, x)
            self.ratios = tuple(x // g for x in w)

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return (isinstance(other, Shard) and other.dim == self.dim
                and other.level == self.level
                and other.ratios == self.ratios)

    def __hash__(self):
        return hash(("S", self.dim, self.level, self.ratios))

    def __repr__(self):
        extra = "" if self.level is None else ", level=%d" % self.level
        if self.ratios is not None:
            extra += ", ratios=%r" % (list(self.ratios),)
        return "Shard(dim=%d%s)" % (self.dim, extra)

    def compact(self):
        w = "" if self.ratios is None else "|" + ":".join(
            str(x) for x in self.ratios)
        if self.level is None:
            return "S(%d%s)" % (self.dim, w)
        return "S(%d:%d%s)" % (self.dim, self.level, w)


class Replicate(Placement):
    __slots__ = ()

    def is_replicate(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Replicate)

    def __hash__(self):
        return hash("R")

    def __repr__(self):
        return "Replicate()"

    def compact(self):
        return "R"


class Partial(Placement):
    """A partial value: the true value is the reduction (sum, avg, max, min)
    of the ranks' values along the axis."""
    __slots__ = ("reduce_op",)

    def __init__(self, reduce_op="sum"):
        if reduce_op not in ("sum", "avg", "max", "min"):
            raise _usage("Partial: reduce_op must be sum, avg, max or min, "
                         "not %r" % (reduce_op,))
        self.reduce_op = reduce_op

    def is_partial(self):
        return True

    def __eq__(self, other):
        return isinstance(other, Partial) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash(("P", self.reduce_op))

    def __repr__(self):
        return "Partial(%s)" % self.reduce_op

    def compact(self):
        return "P(%s)" % self.reduce_op


_TOKEN = re.compile(r"""\s*(?:
      (?P<r>Replicate\(\s*\)|R)
    | (?:S|Shard)\(\s*(?P<sd>-?\d+)\s*(?::\s*(?P<sl>\d+)\s*)?
        (?:\|\s*(?P<sw>\d+(?:\s*:\s*\d+)*)\s*)?\)
    | (?:Partial|P)(?:\(\s*(?P<po>sum|avg|max|min)?\s*\))?
    )\s*,?""", re.VERBOSE)


def _usage(msg):
    from .errors import UsageError  # a ValueError too
    return UsageError(msg)


def parse(text):
    """Parses a compact or long spelling into a tuple of placements, one per
    mesh axis: parse("S(0)P(sum)") == (Shard(0), Partial("sum"))."""
    if isinstance(text, (tuple, list)):
        return tuple(text)
    if not isinstance(text, str):
        raise _usage("a placement is a str such as 'S(0)R', not %s"
                     % type(text).__name__)
    out = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise _usage("bad placement %r at column %d" % (text, pos + 1))
        if m.group("r"):
            out.append(Replicate())
        elif m.group("sd") is not None:
            w = m.group("sw")
            out.append(Shard(int(m.group("sd")), None if m.group("sl") is None
                             else int(m.group("sl")),
                             None if w is None else
                             [int(x) for x in w.split(":")]))
        else:
            out.append(Partial(m.group("po") or "sum"))
        pos = m.end()
    return tuple(out)


def format(placements):
    """The compact form of a sequence of placements (or of a string)."""
    if isinstance(placements, str):
        placements = parse(placements)
    return "".join(p.compact() for p in placements)


def _chunk(n, k, i, ratios=None):
    """torch.chunk's piece i of a dim of n split k ways: (offset, length);
    with ratios (one weight per piece), piece i is [floor(n W_i / W),
    floor(n W_{i+1} / W)), W_i the sum of the weights before i."""
    if ratios is not None:
        if len(ratios) != k:
            raise _usage("%d ratios for an axis of %d" % (len(ratios), k))
        w, wi = sum(ratios), sum(ratios[:i])
        lo = n * wi // w
        return lo, n * (wi + ratios[i]) // w - lo
    c = -(-n // k) if k else n
    lo = min(i * c, n)
    return lo, min(c, n - lo)


def local_shape_and_offset(shape, placement, mesh_sizes, coords):
    """The block of a tensor that the rank at mesh coordinates `coords`
    holds: (local shape, global offset), torch.chunk semantics (or a
    Shard's ratios, format 1.1), a dim split
    by several axes nested major to minor (or in the order of the levels),
    as libplan lays it out (spec/plan-format.md §3.1). Partial and
    replicated entries keep the whole dim."""
    pl = parse(placement)
    if len(pl) != len(mesh_sizes) or len(coords) != len(mesh_sizes):
        raise _usage("placement %r has %d entries for a %d-axis mesh"
                     % (format(pl), len(pl), len(mesh_sizes)))
    rank = len(shape)
    by_dim = {}
    for axis, p in enumerate(pl):
        if isinstance(p, Shard):
            d = p.dim + rank if p.dim < 0 else p.dim
            if not 0 <= d < rank:
                raise _usage("S(%d) on a rank-%d tensor" % (p.dim, rank))
            by_dim.setdefault(d, []).append((p.level if p.level is not None
                                             else axis, axis, p.ratios))
    size = list(shape)
    offset = [0] * rank
    for d, axes in by_dim.items():
        for _, axis, ratios in sorted(axes, key=lambda x: x[:2]):
            o, n = _chunk(size[d], mesh_sizes[axis], coords[axis], ratios)
            offset[d] += o
            size[d] = n
    return tuple(size), tuple(offset)
