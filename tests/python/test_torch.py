"""The PyTorch bridge. The placement mappings and layouts run everywhere
(tuples without torch); tracing and applying need torch and skip without."""

import unittest

from util import MLP, libplan
import libplan.torch as lt
from libplan.placements import local_shape_and_offset

NEED_TORCH = "torch (with torch.distributed.tensor) is not installed"


class TestPlacements(unittest.TestCase):
    def test_parse_and_format(self):
        S, R, P = libplan.Shard, libplan.Replicate, libplan.Partial
        self.assertEqual(libplan.parse_placement("S(0)P(sum)"), (S(0), P("sum")))
        self.assertEqual(libplan.parse_placement("Shard(1), Replicate()"),
                         (S(1), R()))
        self.assertEqual(libplan.parse_placement("S(0:1)S(0:0)"),
                         (S(0, 1), S(0, 0)))
        self.assertEqual(libplan.parse_placement("RP"), (R(), P("sum")))
        self.assertEqual(libplan.format_placement((S(0), P("avg"))),
                         "S(0)P(avg)")
        self.assertEqual(repr(S(0)), "Shard(dim=0)")
        self.assertEqual(repr(R()), "Replicate()")
        self.assertEqual(repr(P()), "Partial(sum)")
        with self.assertRaises(ValueError):
            libplan.parse_placement("S(x)")
        with self.assertRaises(ValueError):
            P("mean")

    def test_tuples_without_torch(self):
        self.assertEqual(lt.to_dtensor_placements("S(0)P(sum)",
                                                  as_tuples=True),
                         [("Shard", 0), ("Partial", "sum")])
        self.assertEqual(lt.to_dtensor_placements("RS(-1)", ndim=3,
                                                  as_tuples=True),
                         [("Replicate",), ("Shard", 2)])
        self.assertEqual(lt.from_dtensor_placements(
            [("Shard", 0), ("Replicate",)]), "S(0)R")
        self.assertEqual(lt.from_dtensor_placements(
            [libplan.Partial("max"), libplan.Shard(1)]), "P(max)S(1)")
        # nesting in mesh order is DTensor's too; another order is not
        self.assertEqual(lt.to_dtensor_placements("S(0:0)S(0:1)",
                                                  as_tuples=True),
                         [("Shard", 0), ("Shard", 0)])
        with self.assertRaises(libplan.UnsupportedError):
            lt.to_dtensor_placements("S(0:1)S(0:0)")

    def test_layouts_follow_torch_chunk(self):
        # five rows on dp=2 x tp=2 as S(0)S(0): 2, 1, 1, 1 rows
        got = [local_shape_and_offset([5, 3], "S(0)S(0)", [2, 2], c)
               for c in [(0, 0), (0, 1), (1, 0), (1, 1)]]
        self.assertEqual(got, [((2, 3), (0, 0)), ((1, 3), (2, 0)),
                               ((1, 3), (3, 0)), ((1, 3), (4, 0))])
        # the second axis splits first
        got = [local_shape_and_offset([5], "S(0:1)S(0:0)", [2, 2], c)[1]
               for c in [(0, 0), (0, 1), (1, 0), (1, 1)]]
        self.assertEqual(got, [(0,), (3,), (2,), (4,)])
        # torch.chunk leaves trailing ranks empty: 2 rows over 4
        got = [local_shape_and_offset([2], "S(0)", [4], (i,))[0]
               for i in range(4)]
        self.assertEqual(got, [(1,), (1,), (0,), (0,)])
        with libplan.load(MLP) as p:
            self.assertEqual(lt.layout_of(p, "w1", (1, 1)),
                             ((16, 32), (0, 32)))

    def test_torch_calls_say_torch_is_missing(self):
        if lt.available():
            self.skipTest("torch is installed")
        with self.assertRaises(libplan.UnsupportedError):
            lt.device_mesh(libplan.load(MLP))
        with self.assertRaises(libplan.UnsupportedError):
            lt.program_from_module(None, ())


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestTorch(unittest.TestCase):
    def test_dtensor_placements(self):
        from torch.distributed.tensor import Partial, Replicate, Shard
        self.assertEqual(lt.to_dtensor_placements("S(0)P(sum)"),
                         [Shard(0), Partial("sum")])
        self.assertEqual(lt.from_dtensor_placements([Replicate(), Shard(1)]),
                         "RS(1)")

    def test_trace_mlp(self):
        import torch

        class MLPModule(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc1 = torch.nn.Linear(16, 64)
                self.act = torch.nn.GELU()
                self.fc2 = torch.nn.Linear(64, 16)

            def forward(self, x):
                return self.fc2(self.act(self.fc1(x)))

        with lt.program_from_module(MLPModule(), (torch.randn(8, 16),)) as p:
            self.assertEqual([o.name for o in p.ops], ["fc1", "act", "fc2"])
            self.assertEqual(p.shape("fc1.weight"), (64, 16))


if __name__ == "__main__":
    unittest.main()
