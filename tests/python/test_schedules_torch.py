"""libplan's pipeline schedules against torch.distributed.pipelining's:
for every shape both accept, each rank runs the same compute actions (F, B,
I, W of a stage and microbatch) in the same order. torch's orders are read
from its schedule classes built on stand-in stages (no process group).
PyTorch's OVERLAP_F_B pair (DualPipeV) counts as its F, then its B, which is
how libplan runs it. GPipe and 1F1B are not compared here: torch's
single-stage classes keep no per-rank order to read."""

import unittest
import warnings

from util import libplan

try:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import torch
        import torch.distributed.pipelining.schedules as tps
except Exception:  # noqa: BLE001 - any failure to import means: skip
    tps = None

NEED = "torch (with torch.distributed.pipelining) is not installed"


class _Stage:
    """What the schedule classes read of a pipeline stage."""

    def __init__(self, index, stages, ranks, rank):
        self.stage_index = index
        self.num_stages = stages
        self.group_size = ranks
        self.group_rank = rank
        self.is_first = index == 0
        self.is_last = index == stages - 1
        self.submod = torch.nn.Linear(1, 1)


def _compute_words(action):
    """torch action -> ["0F1", ...]: compute actions only, pairs unfolded."""
    if action is None:
        return []
    text = str(action)
    if text.startswith("("):  # "(0F3;3B1)OVERLAP_F_B"
        return [w for part in text[1:text.index(")")].split(";")
                for w in _compute_words(part)]
    body = text.lstrip("0123456789")
    kind = body.rstrip("0123456789")
    return [text] if kind in ("F", "B", "I", "W") else []


def _torch_order(cls, ranks, v, m, vshape):
    stages = ranks * v
    order = {}
    for r in range(ranks):
        held = [r, 2 * ranks - 1 - r] if vshape else \
            [r + k * ranks for k in range(v)]
        sched = cls([_Stage(i, stages, ranks, r) for i in held], m)
        order[r] = [w for a in sched.pipeline_order[r]
                    for w in _compute_words(a)]
    return order


def _libplan_order(kind, ranks, v, m):
    s = libplan.Schedule.generate(kind, ranks, ranks * v, m)
    try:
        return {r: ["%d%s%d" % (a.stage, a.kind, a.microbatch)
                    for a in s.actions(r) if a.kind in ("F", "B", "I", "W")]
                for r in range(ranks)}
    finally:
        s.close()


@unittest.skipUnless(tps is not None, NEED)
class TestAgainstTorch(unittest.TestCase):
    KINDS = (  # libplan name, torch class name, stages per rank, V placement
        ("looped-bfs", "ScheduleLoopedBFS", (1, 2, 3), False),
        ("interleaved-zb", "ScheduleInterleavedZeroBubble", (1, 2, 3), False),
        ("interleaved-1f1b", "ScheduleInterleaved1F1B", (2, 3), False),
        ("zbv", "ScheduleZBVZeroBubble", (2,), True),
        ("dualpipev", "ScheduleDualPipeV", (2,), True),
    )

    def test_orders_agree(self):
        compared = {}
        for kind, name, vs, vshape in self.KINDS:
            cls = getattr(tps, name, None)
            if cls is None:
                continue  # an older torch without it
            for ranks in range(1, 5):
                for v in vs:
                    for m in (1, 2, 3, 4, 5, 6, 8):
                        try:
                            with warnings.catch_warnings():
                                warnings.simplefilter("ignore")
                                want = _torch_order(cls, ranks, v, m, vshape)
                        except Exception:  # noqa: BLE001 - torch refuses
                            continue
                        with self.subTest(kind=kind, ranks=ranks, v=v, m=m):
                            self.assertEqual(
                                _libplan_order(kind, ranks, v, m), want)
                        compared[kind] = compared.get(kind, 0) + 1
        # every kind was compared on many shapes (none skipped wholesale)
        for kind, _, _, _ in self.KINDS:
            self.assertGreater(compared.get(kind, 0), 10, kind)

    def test_libplan_refuses_what_torch_refuses_for_v_shapes(self):
        # one stage per rank: the V kinds need two
        for kind in ("zbv", "dualpipev"):
            with self.assertRaises(libplan.InvalidError):
                libplan.Schedule.generate(kind, 4, 4, 8)
        with self.assertRaises(ValueError):
            _torch_order(tps.ScheduleDualPipeV, 4, 2, 7, True)
        with self.assertRaises(libplan.InvalidError):
            libplan.Schedule.generate("dualpipev", 4, 8, 7)


if __name__ == "__main__":
    unittest.main()
