"""Reads and writes the lowered-program text that `plan lower` emits.

Not a YAML parser: the writer puts every buffer, step, `layouts:` and
`outputs:` on one flow-style line (spec/lowered-format.md), so this reads
those lines structurally and keeps everything above `buffers:` (the program
and the mesh) verbatim. The mutation tool edits the structure and writes it
back in the writer's layout.
"""

import json
import re

_PLAIN_END = ",]}"


class ParseError(Exception):
    pass


def _skip(s, i):
    while i < len(s) and s[i] == " ":
        i += 1
    return i


def _scalar(s, i):
    if s[i] == '"':
        j = i + 1
        while j < len(s) and s[j] != '"':
            j += 2 if s[j] == "\\" else 1
        return json.loads(s[i : j + 1]), j + 1
    j = i
    while j < len(s) and s[j] not in _PLAIN_END and not (s[j] == ":" and s[j + 1 : j + 2] in (" ", "")):
        j += 1
    text = s[i:j].strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text), j
    return text, j


def _value(s, i):
    i = _skip(s, i)
    if s[i] == "{":
        out, i = {}, _skip(s, i + 1)
        while s[i] != "}":
            key, i = _scalar(s, i)
            i = _skip(s, i)
            if s[i] != ":":
                raise ParseError("expected ':' in %r" % s)
            out[key], i = _value(s, i + 1)
            i = _skip(s, i)
            if s[i] == ",":
                i = _skip(s, i + 1)
        return out, i + 1
    if s[i] == "[":
        out, i = [], _skip(s, i + 1)
        while s[i] != "]":
            v, i = _value(s, i)
            out.append(v)
            i = _skip(s, i)
            if s[i] == ",":
                i = _skip(s, i + 1)
        return out, i + 1
    return _scalar(s, i)


def flow(text):
    """The value of one flow-style YAML line: a map, a list or a scalar."""
    v, i = _value(text, 0)
    if _skip(text, i) != len(text):
        raise ParseError("trailing text in %r" % text)
    return v


def _emit(v, quote_all=False):
    if isinstance(v, dict):
        return "{" + ", ".join("%s: %s" % (_emit_key(k), _emit(x, quote_all)) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_emit(x, quote_all) for x in v) + "]"
    if isinstance(v, int):
        return str(v)
    return json.dumps(v) if quote_all else v


def _emit_key(k):
    return json.dumps(k)


# step keys that hold buffer names (quoted by the writer) and keys that
# hold bare words
_BUF_KEYS = ("input", "in", "out", "bind", "from", "transfer", "wait")


def _emit_step(st):
    parts = []
    for k, v in st.items():
        if k in _BUF_KEYS or k == "op":
            parts.append("%s: %s" % (k, _emit(v, quote_all=True)))
        else:
            parts.append("%s: %s" % (k, _emit(v)))
    return "{" + ", ".join(parts) + "}"


class Lowered:
    """A lowered program: head text, buffers, steps, layouts, outputs."""

    def __init__(self, text):
        lines = text.split("\n")
        try:
            b = lines.index("buffers:")
            s = lines.index("steps:")
        except ValueError as e:
            raise ParseError("no buffers: or steps: section") from e
        self.head = lines[:b]
        self.buffers = {}
        for ln in lines[b + 1 : s]:
            name, j = _scalar(ln.strip(), 0)
            self.buffers[name] = flow(ln.strip()[j:].lstrip()[1:].strip())
        self.steps = []
        i = s + 1
        while i < len(lines) and lines[i].startswith("  - "):
            self.steps.append(flow(lines[i][4:]))
            i += 1
        self.layouts, self.outputs = {}, {}
        # later sections (`required`: the delivered placements the plan
        # requires) are kept as written: mutants change what the program
        # does, never the contract it is checked against
        self.tail = []
        for ln in lines[i:]:
            if ln.startswith("layouts:"):
                self.layouts = flow(ln[len("layouts:") :].strip())
            elif ln.startswith("outputs:"):
                self.outputs = flow(ln[len("outputs:") :].strip())
            elif ln.strip():
                self.tail.append(ln)
        # tensors a manual region's traced ops make (`regions:`): the
        # reference has none of them, so nothing compares their buffers
        self.traced = set()
        in_regions = False
        for ln in self.head:
            if not ln.startswith(" "):
                in_regions = ln.startswith("regions:")
            elif in_regions and ln.startswith("      - {"):
                op = flow(ln.strip()[2:])
                outs = op.get("out", [])
                self.traced.update(outs if isinstance(outs, list) else [outs])
        self.axes = []
        for ln in self.head:
            mm = re.match(r"^  axes: \[(.*)\]$", ln)
            if mm:
                self.axes = [(a.split("=")[0].strip(), int(a.split("=")[1])) for a in mm.group(1).split(",")]
        # a pipelined program: its `pipeline:` fields, and each pipeline
        # rank's action order (self.actions[r], a list of action words),
        # written back in place of the rows (self.rows_at: their head lines)
        self.pipe, self.actions, self.rows_at = {}, [], []
        in_pipe = False
        for k, ln in enumerate(self.head):
            if not ln.startswith(" "):
                in_pipe = ln.startswith("pipeline:")
            elif in_pipe and ln.startswith('    - "'):
                self.rows_at.append(k)
                self.actions.append(json.loads(ln[6:]).split())
            elif in_pipe and re.match(r"^  \w+: \S", ln):
                key, _, val = ln.strip().partition(": ")
                self.pipe[key] = int(val) if re.fullmatch(r"\d+", val) else val

    def copy(self):
        c = Lowered.__new__(Lowered)
        c.head = list(self.head)
        c.buffers = {k: dict(v) for k, v in self.buffers.items()}
        c.steps = [dict(st) for st in self.steps]
        c.layouts = dict(self.layouts)
        c.outputs = dict(self.outputs)
        c.tail = list(self.tail)
        c.axes = list(self.axes)
        c.traced = set(self.traced)
        c.pipe = dict(self.pipe)
        c.actions = [list(r) for r in self.actions]
        c.rows_at = list(self.rows_at)
        return c

    def text(self):
        head = list(self.head)
        for k, row in zip(self.rows_at, self.actions):
            head[k] = "    - " + json.dumps(" ".join(row))
        out = head + ["buffers:"]
        for name, b in self.buffers.items():
            out.append("  %s: {tensor: %s, placement: %s}" % (json.dumps(name), json.dumps(b["tensor"]), json.dumps(b["placement"])))
        out.append("steps:")
        out += ["  - " + _emit_step(st) for st in self.steps]
        out.append("layouts: " + _emit({k: v for k, v in self.layouts.items()}, quote_all=True))
        out.append("outputs: " + _emit({k: v for k, v in self.outputs.items()}, quote_all=True))
        out += self.tail
        return "\n".join(out) + "\n"

    def axis_size(self, name):
        return dict(self.axes)[name]

    def axis_index(self, name):
        return [a for a, _ in self.axes].index(name)

    def set_axis_size(self, name, size):
        """Rewrites the mesh line: a variant of the program on another mesh."""
        self.axes = [(a, size if a == name else n) for a, n in self.axes]
        line = "  axes: [%s]" % ", ".join("%s=%d" % a for a in self.axes)
        self.head = [line if re.match(r"^  axes: \[", ln) else ln for ln in self.head]

    def writer(self, buf):
        """Index of the step that writes buf."""
        for i, st in enumerate(self.steps):
            outs = st.get("out", st.get("input", st.get("bind", st.get("transfer"))))
            if buf == outs or (isinstance(outs, list) and buf in outs):
                return i
        return -1

    def rename_reads(self, old, new, after):
        """Every read of old in the steps after index after, and in layouts
        and outputs, reads new instead."""
        for st in self.steps[after + 1 :]:
            if st.get("in") == old:
                st["in"] = new
            elif isinstance(st.get("in"), list):
                st["in"] = [new if b == old else b for b in st["in"]]
            elif st.get("from") == old:  # a region output's bind step
                st["from"] = new
        for d in (self.layouts, self.outputs):
            for k, v in d.items():
                if v == old:
                    d[k] = new


_PL_RE = re.compile(r"R|P\((\w+)\)|S\((-?\d+)(?::(\d+))?(?:\|(\d+(?::\d+)*))?\)")


def placement(text):
    """A placement string as a list of per-axis entries: ('R',),
    ('P', reduce) or ('S', dim, level or None), with a fourth item, the
    tuple of weights, for a level with shard ratios (S(0|3:1))."""
    out, i = [], 0
    while i < len(text):
        m = _PL_RE.match(text, i)
        if not m:
            raise ParseError("bad placement %r" % text)
        if m.group(0) == "R":
            out.append(("R",))
        elif m.group(1):
            out.append(("P", m.group(1)))
        else:
            e = ("S", int(m.group(2)), None if m.group(3) is None else int(m.group(3)))
            if m.group(4):
                e += (tuple(int(w) for w in m.group(4).split(":")),)
            out.append(e)
        i = m.end()
    return out


def placement_text(entries):
    parts = []
    for e in entries:
        if e[0] == "R":
            parts.append("R")
        elif e[0] == "P":
            parts.append("P(%s)" % e[1])
        else:
            head = "S(%d" % e[1] if e[2] is None else "S(%d:%d" % (e[1], e[2])
            w = "|" + ":".join(str(x) for x in e[3]) if len(e) > 3 else ""
            parts.append(head + w + ")")
    return "".join(parts)
