"""The bug classes of the mutation tool: each a function over a lowered
program that yields (name, mutated text, expectation, reason).

The expectation is "differs" (the mutant changes the numbers, so the
verifier must answer NOT EQUAL) or "equal" (it provably does not: an axis
of size 1, a relabel that moves no data); the reason says why. A mutant is
written so that it loads (placements redeclared to fit its steps); where
that is not possible the loader's refusal is counted as such.
"""

import re

from lowered import placement, placement_text

REDUCING = ("all_reduce", "reduce_scatter")


def _colls(lw, kinds):
    for i, st in enumerate(lw.steps):
        if st.get("collective") in kinds:
            yield i, st


def _size1(lw, axis):
    return "axis '%s' has size 1: the step moves no data" % axis


def _set_entry(lw, buf, axis, entry):
    pl = placement(lw.buffers[buf]["placement"])
    pl[lw.axis_index(axis)] = entry
    lw.buffers[buf]["placement"] = placement_text(pl)


def _entry(lw, buf, axis):
    return placement(lw.buffers[buf]["placement"])[lw.axis_index(axis)]


def _from_input(lw, buf):
    """An input is made in whatever placement it declares, so redeclaring
    it changes no data: such mutants are not bugs, and are not made."""
    w = lw.writer(buf)
    return w < 0 or "input" in lw.steps[w]


def _where(st):
    """A pipelined step's place (stage, phase): a step a mutant makes in
    place of one, or beside it, runs where that one does."""
    return {k: st[k] for k in ("stage", "phase") if k in st}


def _tag(i, st):
    return "%s@step%d:%s" % (st["collective"], i, st["in"])


def dropped(lw):
    """A collective dropped: its consumers read its input, redeclared in
    the placement the collective made (partial sums taken as the sum)."""
    for i, st in _colls(lw, ("all_reduce", "zero_non_owner", "relabel", "reduce_scatter")):
        if _from_input(lw, st["in"]):
            continue
        m, kind, ax = lw.copy(), st["collective"], st["axis"]
        if kind == "reduce_scatter":
            # the reduction goes, the shard stays: a slice of the partials
            _set_entry(m, st["in"], ax, ("R",))
            m.steps[i] = {"collective": "slice", "axis": ax, "dim": st["dim"], "in": st["in"], "out": st["out"],
                          **_where(st)}
        else:
            m.buffers[st["in"]]["placement"] = lw.buffers[st["out"]]["placement"]
            del m.steps[i]
            del m.buffers[st["out"]]
            m.rename_reads(st["out"], st["in"], i - 1)
        if kind == "relabel":
            yield _tag(i, st), m.text(), "equal", "a relabel moves no data"
        elif lw.axis_size(ax) == 1:
            yield _tag(i, st), m.text(), "equal", _size1(lw, ax)
        else:
            yield _tag(i, st), m.text(), "differs", "%s over '%s' dropped" % (kind, ax)


def duplicated(lw):
    """An all-reduce done twice: its result relabelled as partial and
    reduced again (a sum counts every value once per rank)."""
    for i, st in _colls(lw, ("all_reduce",)):
        m, ax, red = lw.copy(), st["axis"], st["reduce"]
        once, p, twice = st["out"], st["out"] + "#p", st["out"] + "#2"
        tensor = lw.buffers[once]["tensor"]
        m.buffers[p] = {"tensor": tensor, "placement": lw.buffers[st["in"]]["placement"]}
        m.buffers[twice] = {"tensor": tensor, "placement": lw.buffers[once]["placement"]}
        m.rename_reads(once, twice, i)
        m.steps[i + 1 : i + 1] = [
            {"collective": "relabel", "axis": ax, "reduce": red, "in": once, "out": p, **_where(st)},
            {"collective": "all_reduce", "axis": ax, "reduce": red, "in": p, "out": twice, **_where(st)},
        ]
        for k, v in lw.layouts.items():
            m.layouts[k] = v  # the first all-reduce's input stays the layout
        if lw.axis_size(ax) == 1:
            yield _tag(i, st), m.text(), "equal", _size1(lw, ax)
        elif red != "sum":
            yield _tag(i, st), m.text(), "equal", "a second all_reduce(%s) of equal replicas gives them back" % red
        else:
            yield _tag(i, st), m.text(), "differs", "all_reduce over '%s' done twice" % ax


def other_axis(lw):
    """A collective moved to another axis of the same size: its buffers'
    entries for the two axes swap, so the step fits, but the data its input
    holds was made for the original axes."""
    for i, st in _colls(lw, ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "slice")):
        ax = st["axis"]
        if _from_input(lw, st["in"]):
            continue
        for bx, n in lw.axes:
            if bx == ax or n != lw.axis_size(ax):
                continue
            m = lw.copy()
            for b in (st["in"], st["out"]):
                pl = placement(lw.buffers[b]["placement"])
                a, c = lw.axis_index(ax), lw.axis_index(bx)
                pl[a], pl[c] = pl[c], pl[a]
                m.buffers[b]["placement"] = placement_text(pl)
            if m.buffers[st["in"]] == lw.buffers[st["in"]]:
                continue
            m.steps[i] = dict(st, axis=bx)
            if n == 1:
                yield _tag(i, st) + "->" + bx, m.text(), "equal", _size1(lw, ax)
            else:
                yield _tag(i, st) + "->" + bx, m.text(), "differs", "%s over '%s' instead of '%s'" % (st["collective"], bx, ax)


def sum_to_max(lw):
    """A sum reduction turned into max (its input redeclared P(max))."""
    for i, st in _colls(lw, REDUCING):
        if st["reduce"] != "sum" or _from_input(lw, st["in"]):
            continue
        m, ax = lw.copy(), st["axis"]
        _set_entry(m, st["in"], ax, ("P", "max"))
        m.steps[i] = dict(st, reduce="max")
        if lw.axis_size(ax) == 1:
            yield _tag(i, st), m.text(), "equal", _size1(lw, ax)
        else:
            yield _tag(i, st), m.text(), "differs", "%s(max) for %s(sum) over '%s'" % (st["collective"], st["collective"], ax)


def gather_order(lw):
    """A collective's rank order swapped (the group's order reversed): an
    all-gather's or all-to-all's pieces concatenated, or a reduce-scatter's
    pieces handed out, in the reversed order (spec/lowered-format.md)."""
    for i, st in _colls(lw, ("all_gather", "reduce_scatter", "all_to_all")):
        n = lw.axis_size(st["axis"])
        if n < 2:
            continue  # one member: no other order
        m = lw.copy()
        m.steps[i] = dict(st, order=list(range(n - 1, -1, -1)))
        yield _tag(i, st), m.text(), "differs", "%s over '%s' in reversed order" % (
            st["collective"], st["axis"])


def shard_dim(lw):
    """A shard dim changed: an op's output declared with two of its shards'
    dims swapped (S(0)S(1) read as S(1)S(0)) or a dim's nesting reversed,
    over axes of one size, so every block keeps its shape."""
    for name, b in lw.buffers.items():
        w = lw.writer(name)
        # a traced op's output: its consumers read the same local blocks
        # whatever it is declared, and nothing compares it
        if w < 0 or "op" not in lw.steps[w] or b["tensor"] in lw.traced:
            continue
        pl = placement(b["placement"])
        s = [k for k, e in enumerate(pl) if e[0] == "S"]
        for x in s:
            for y in s:
                if y <= x or lw.axes[x][1] != lw.axes[y][1]:
                    continue
                q = list(pl)
                if pl[x][1] != pl[y][1]:
                    q[x], q[y] = ("S", pl[y][1], None), ("S", pl[x][1], None)
                    what = "dims swapped"
                else:
                    lx = 0 if pl[x][2] is None else pl[x][2]
                    ly = 1 if pl[y][2] is None else pl[y][2]
                    q[x], q[y] = ("S", pl[x][1], ly), ("S", pl[y][1], lx)
                    what = "nesting reversed"
                m = lw.copy()
                m.buffers[name]["placement"] = placement_text(q)
                tag = "%s:%s->%s" % (name, b["placement"], placement_text(q))
                if lw.axes[x][1] == 1:
                    yield tag, m.text(), "equal", _size1(lw, lw.axes[x][0])
                else:
                    yield tag, m.text(), "differs", "'%s' written by op '%s' declared %s (%s)" % (
                        name, lw.steps[w]["op"], placement_text(q), what)


def _readers(lw, buf, after):
    for j in range(after + 1, len(lw.steps)):
        st = lw.steps[j]
        if "op" in st and buf in st["in"]:
            yield j, st


def partial_read(lw):
    """A consumer reading the partial instead of the reduced buffer."""
    for i, st in _colls(lw, ("all_reduce",)):
        for j, op in _readers(lw, st["out"], i):
            m, ax = lw.copy(), st["axis"]
            m.steps[j] = dict(op, **{"in": [st["in"] if b == st["out"] else b for b in op["in"]]})
            tag = "%s<-%s" % (op["op"], st["in"])
            if lw.axis_size(ax) == 1:
                yield tag, m.text(), "equal", _size1(lw, ax)
            else:
                yield tag, m.text(), "differs", "op '%s' reads %s, not the all_reduce's %s" % (op["op"], st["in"], st["out"])


def _block(lw, pl):
    """How many ways each dim is cut: equal cuts give equal block shapes
    (for even shards)."""
    cuts = {}
    for (_, n), e in zip(lw.axes, placement(pl)):
        if e[0] == "S":
            cuts[e[1]] = cuts.get(e[1], 1) * n
    return {d: c for d, c in cuts.items() if c > 1}


def _same_data(lw, a, b):
    pa, pb = placement(lw.buffers[a]["placement"]), placement(lw.buffers[b]["placement"])
    # entries may differ only on axes of size 1, or as R against P(avg/max/min)
    # (a relabel: every rank holds the same values)
    for (_, n), x, y in zip(lw.axes, pa, pb):
        if x == y or n == 1:
            continue
        if {x[0], y[0]} == {"R", "P"} and ("P", "sum") not in (x, y):
            continue
        return False
    return True


def wrong_operand(lw):
    """An op reads another buffer of the same tensor with the same block
    shape (not the all-reduce partials, which partial_read covers)."""
    reduced = {st["out"]: st["in"] for _, st in _colls(lw, ("all_reduce",))}
    for j, op in enumerate(lw.steps):
        if "op" not in op:
            continue
        for k, b in enumerate(op["in"]):
            t = lw.buffers[b]["tensor"]
            for c, cb in lw.buffers.items():
                if c == b or cb["tensor"] != t or reduced.get(b) == c:
                    continue
                w = lw.writer(c)
                if w < 0 or w >= j or _block(lw, cb["placement"]) != _block(lw, lw.buffers[b]["placement"]):
                    continue
                m = lw.copy()
                ins = list(op["in"])
                ins[k] = c
                m.steps[j] = dict(op, **{"in": ins})
                tag = "%s[%d]:%s->%s" % (op["op"], k, b, c)
                if _same_data(lw, b, c):
                    yield tag, m.text(), "equal", "%s and %s hold the same values on every rank" % (b, c)
                else:
                    yield tag, m.text(), "differs", "op '%s' reads %s (%s) for %s (%s)" % (
                        op["op"], c, cb["placement"], b, lw.buffers[b]["placement"])


def _without_step(lw, i, st):
    """A copy of lw without collective step i: its output buffer gone, and
    every later read of it reading the collective's input instead."""
    m = lw.copy()
    del m.steps[i]
    del m.buffers[st["out"]]
    m.rename_reads(st["out"], st["in"], i - 1)
    return m


def grad_sync(lw):
    """A gradient sync dropped in a training step: the output names the
    unsynchronised gradient (each rank's partial)."""
    for i, st in _colls(lw, REDUCING):
        t = lw.buffers[st["out"]]["tensor"]
        if not t.startswith("grad/") or lw.outputs.get(t) != st["out"]:
            continue
        m, ax = _without_step(lw, i, st), st["axis"]
        if lw.axis_size(ax) == 1:
            yield _tag(i, st), m.text(), "equal", _size1(lw, ax)
        else:
            yield _tag(i, st), m.text(), "differs", "'%s' delivered unsynchronised over '%s' (%s)" % (
                t, ax, lw.buffers[st["in"]]["placement"])


def _swapped(e, i, j):
    w = list(e[3])
    w[i], w[j] = w[j], w[i]
    return e[:3] + (tuple(w),)


def weight_swap(lw):
    """Two unequal weights of a ratio level swapped (S(0|3:1) written as
    S(0|1:3)): two devices each given the other's piece size. The level
    is swapped where a collective adds it (a slice, reduce-scatter or
    all-to-all hands out the pieces) and in the buffers the collectives
    after it carry it to. Delivered so, the output is not in the
    placement the plan requires: NOT EQUAL. Gathered away before any op
    or output reads it, no value changes: equal. An op that reads the
    swapped blocks no longer fits them (the loader refuses it), so such
    chains are not made; a level an op writes is swapped the same way
    through its op's inputs only at an input, which changes no data."""
    for i, st in _colls(lw, ("slice", "reduce_scatter", "all_to_all")):
        ax = lw.axis_index(st["axis"])
        e = placement(lw.buffers[st["out"]]["placement"])[ax]
        if len(e) < 4:
            continue
        w = e[3]
        pairs = [(a, b) for a in range(len(w)) for b in range(a + 1, len(w)) if w[a] != w[b]]
        for a, b in pairs[:2]:
            m, chain, ok, delivered = lw.copy(), [(i, st["out"])], True, False
            k = 0
            while k < len(chain) and ok:
                at, buf = chain[k]
                k += 1
                pl = placement(m.buffers[buf]["placement"])
                pl[ax] = _swapped(pl[ax], a, b)
                m.buffers[buf]["placement"] = placement_text(pl)
                delivered |= buf in lw.outputs.values()
                for j in range(at + 1, len(lw.steps)):
                    rd = lw.steps[j]
                    ins = rd.get("in")
                    if not (ins == buf or (isinstance(ins, list) and buf in ins)):
                        continue
                    if "op" in rd:
                        ok = False  # the op's blocks would not fit
                        break
                    if placement(lw.buffers[rd["out"]]["placement"])[ax] == e:
                        chain.append((j, rd["out"]))
            if not ok:
                continue
            tag = "%s:%s->%s" % (_tag(i, st), ":".join(map(str, w)),
                                 ":".join(map(str, _swapped(e, a, b)[3])))
            if delivered:
                yield tag, m.text(), "differs", "the weights of '%s' over '%s' swapped (positions %d and %d), delivered so" % (
                    st["out"], st["axis"], a, b)
            else:
                yield tag, m.text(), "equal", "the swapped pieces of '%s' are gathered back before any op reads them" % st["out"]


# ---- pipelines (a lowered file's `pipeline:` section, spec/lowered-format.md)


def _transfers(lw):
    for i, st in enumerate(lw.steps):
        if "transfer" in st:
            yield i, st


def mb_pairing(lw):
    """A receive paired with the wrong microbatch: stage t's transfer of
    microbatch k takes microbatch k + 1's data (`mb_shift: 1`), as a
    runtime that matched its send/recv pairs off by one would."""
    m_count = lw.pipe.get("microbatches", 1)
    for i, st in _transfers(lw):
        m = lw.copy()
        m.steps[i]["mb_shift"] = 1
        tag = "transfer@step%d:%s" % (i, st["transfer"])
        if m_count == 1:
            yield tag, m.text(), "equal", "one microbatch: microbatch k + 1 is microbatch k"
        else:
            yield tag, m.text(), "differs", "stage %d receives '%s' of the next microbatch (from stage %d)" % (
                st["stage"], st["from"], st["from_stage"])


def wrong_stage(lw):
    """A send to the wrong stage: the transfer delivers into the stage
    after the one that reads it (forward) or before it (backward). The
    reading stage then reads a buffer it never received, which the
    loader refuses at the step (a static check: no run needed)."""
    n = lw.pipe.get("stages", 1)
    for i, st in _transfers(lw):
        to = st["stage"] + (1 if st["phase"] == "RECV_F" else -1)
        if not 0 <= to < n:
            continue
        m = lw.copy()
        m.steps[i]["stage"] = to
        yield "transfer@step%d:%s->stage%d" % (i, st["transfer"], to), m.text(), "differs", (
            "'%s' sent to stage %d, read by stage %d" % (st["from"], to, st["stage"]))


def _act(word):
    mm = re.match(r"^(\d+)([A-Z_]+)(\d+)$", word)
    return int(mm.group(1)), mm.group(2), int(mm.group(3))


def early_backward(lw):
    """An action order that runs a stage's backward before its forward's
    receive (before its forward, on the first stage): the rank waits for
    a forward that comes after it in its own order, so the schedule
    deadlocks. The first and the last microbatch of each stage."""
    for r, row in enumerate(lw.actions):
        acts = [_act(w) for w in row]
        stages = sorted({s for s, _, _ in acts})
        for s in stages:
            mbs = sorted({k for st, _, k in acts if st == s})
            for k in sorted({mbs[0], mbs[-1]}):
                back = [j for j, a in enumerate(acts) if a[0] == s and a[2] == k and a[1] in ("B", "I")]
                first = [j for j, a in enumerate(acts) if a[0] == s and a[2] == k and a[1] in ("RECV_F", "F")]
                if not back or not first:
                    continue
                m = lw.copy()
                word = m.actions[r].pop(back[0])
                m.actions[r].insert(first[0], word)
                yield "rank%d:%s" % (r, word), m.text(), "differs", "rank %d runs %s before %s" % (
                    r, word, row[first[0]])


def dropped_accumulation(lw):
    """A gradient accumulation over microbatches dropped: the sum over
    the microbatch axis removed. Where the sum is delivered, the output
    is its input, each microbatch's own gradient (P(sum) over the
    microbatches: not the placement the plan requires); else its input
    and the buffers it came from are redeclared as the sum's result (R
    over the microbatches), as a runtime that overwrote its gradient
    buffer each microbatch would hold it."""
    ax = lw.pipe.get("axis")
    for i, st in _colls(lw, ("all_reduce",)):
        if st["axis"] != ax or _from_input(lw, st["in"]):
            continue
        t = lw.buffers[st["in"]]["tensor"]
        if lw.outputs.get(t) == st["out"]:
            m = _without_step(lw, i, st)
            if lw.axis_size(ax) == 1:
                yield _tag(i, st), m.text(), "equal", _size1(lw, ax)
            else:
                yield _tag(i, st), m.text(), "differs", "'%s' delivered not summed over the %d microbatches (%s)" % (
                    t, lw.axis_size(ax), lw.buffers[st["in"]]["placement"])
            continue
        # the sum's input and the buffers its chain of collectives over
        # other axes came from, back to the op that wrote the gradient,
        # declared R over the microbatches (as the sum's output is)
        chain, w = [st["in"]], lw.writer(st["in"])
        while w >= 0 and lw.steps[w].get("collective") and lw.steps[w]["axis"] != ax:
            chain.append(lw.steps[w]["in"])
            w = lw.writer(lw.steps[w]["in"])
        if w < 0 or "op" not in lw.steps[w]:
            continue
        m = lw.copy()
        for b in chain:
            _set_entry(m, b, ax, _entry(lw, st["out"], ax))
        del m.steps[i]
        m.rename_reads(st["out"], st["in"], i - 1)
        del m.buffers[st["out"]]
        t = lw.buffers[st["in"]]["tensor"]
        if lw.axis_size(ax) == 1:
            yield _tag(i, st), m.text(), "equal", _size1(lw, ax)
        else:
            yield _tag(i, st), m.text(), "differs", "'%s' not summed over the %d microbatches" % (
                t, lw.axis_size(ax))
def _reads(st, buf):
    ins = st.get("in", [])
    return buf == ins or (isinstance(ins, list) and buf in ins)


def wait_late(lw):
    """Communication overlap: a wait moved past the first step that reads
    what it waits for, so the read may see the collective unfinished. The
    simulated run executes a start as its collective (the numbers would
    not change): the static happens-before check of the streams must
    refuse it at load."""
    for i, st in enumerate(lw.steps):
        if "wait" not in st:
            continue
        r = next((j for j in range(i + 1, len(lw.steps)) if _reads(lw.steps[j], st["wait"])), None)
        if r is None:
            continue
        m = lw.copy()
        m.steps.insert(r, m.steps.pop(i))  # now after the reader
        yield "wait-late@step%d:%s" % (i, st["wait"]), m.text(), "differs", "a read before its wait"


def reuse_in_flight(lw):
    """Communication overlap: the input of a started collective written
    again (its memory reused) while the collective is in flight; refused
    at load like a wait too late."""
    for i, st in enumerate(lw.steps):
        if not st.get("stream") or "collective" not in st:
            continue
        w = lw.writer(st["in"])
        if w < 0:
            continue
        m = lw.copy()
        m.steps.insert(i + 1, dict(lw.steps[w]))
        yield "reuse@step%d:%s" % (i, st["in"]), m.text(), "differs", "a buffer reused in flight"


def chunk_order(lw):
    """Communication overlap: two chunks of a decomposed collective
    reassembled in each other's place (their `at` swapped): every slice
    is written once, the numbers differ."""
    first = {}
    for i, st in enumerate(lw.steps):
        ch = st.get("chunk")
        if not isinstance(ch, dict) or ch.get("of", 1) < 2:
            continue
        if st["out"] not in first:
            first[st["out"]] = i
            continue
        j = first.pop(st["out"])
        m = lw.copy()
        a, b = dict(m.steps[j]["chunk"]), dict(m.steps[i]["chunk"])
        a["at"], b["at"] = b["at"], a["at"]
        m.steps[j] = dict(m.steps[j], chunk=a)
        m.steps[i] = dict(m.steps[i], chunk=b)
        yield "chunk-order@step%d:%s" % (j, st["out"]), m.text(), "differs", "chunks out of order"


CLASSES = {
    "dropped": dropped,
    "duplicated": duplicated,
    "other-axis": other_axis,
    "sum-to-max": sum_to_max,
    "gather-order": gather_order,
    "shard-dim": shard_dim,
    "partial-read": partial_read,
    "wrong-operand": wrong_operand,
    "grad-sync": grad_sync,
    "weight-swap": weight_swap,
    "mb-pairing": mb_pairing,
    "wrong-stage": wrong_stage,
    "early-backward": early_backward,
    "dropped-accumulation": dropped_accumulation,
    "wait-late": wait_late,
    "reuse-in-flight": reuse_in_flight,
    "chunk-order": chunk_order,
}
