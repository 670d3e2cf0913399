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
        self.assertEqual(libplan.parse_placement("S(0)P(sum)"),
                         (S(0), P("sum")))
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

    def test_plan_of_a_traced_mlp_shape(self):
        # the program program_from_module writes for the MLP below, built
        # by hand, with the placements the gloo test applies
        b = libplan.ProgramBuilder("MLP")
        b.input("x", [8, 16])
        b.param("fc1.weight", [5, 16])
        b.param("fc1.bias", [5])
        b.op("linear", ["x", "fc1.weight", "fc1.bias"], "fc1", name="fc1")
        b.op("gelu", ["fc1"], "act", name="act")
        b.param("fc2.weight", [16, 5])
        b.param("fc2.bias", [16])
        b.op("linear", ["act", "fc2.weight", "fc2.bias"], "fc2", name="fc2")
        b.outputs(["fc2"])
        with libplan.make_plan(b.build(), {"dp": 2, "tp": 2},
                               placements=_PLACEMENTS) as plan:
            self.assertEqual(plan.placements, _PLACEMENTS)
            got = [lt.layout_of(plan, "fc1.weight", (0, t))[0]
                   for t in (0, 1)]
            self.assertEqual(got, [(3, 16), (2, 16)])
            got = [lt.layout_of(plan, "fc1.bias", c)
                   for c in [(0, 0), (0, 1), (1, 0), (1, 1)]]
            self.assertEqual(got, [((2,), (0,)), ((1,), (2,)),
                                   ((1,), (3,)), ((1,), (4,))])
            self.assertEqual(
                lt.to_dtensor_placements(plan.placement("fc2.weight"),
                                         as_tuples=True),
                [("Replicate",), ("Shard", 1)])

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


def _mlp(hidden):
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(16, hidden)
            self.act = torch.nn.GELU()
            self.fc2 = torch.nn.Linear(hidden, 16)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    return MLP()


# fc1 column parallel over tp with an uneven hidden dim (5 rows: 3 and 2),
# fc2 row parallel; fc1.bias nested over both axes (5 -> 2, 1, 1, 1).
_PLACEMENTS = {"x": "RR", "fc1.weight": "RS(0)", "fc1.bias": "S(0)S(0)",
               "fc2.weight": "RS(1)", "fc2.bias": "RR"}


def _apply_worker(rank, world, port, plan_text, queue):
    import os
    import torch
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        from torch.distributed.tensor import Replicate, distribute_tensor
        plan = libplan.parse(plan_text)
        mesh = lt.device_mesh(plan, "cpu")
        torch.manual_seed(0)
        model = _mlp(5)
        ref = _mlp(5)
        ref.load_state_dict(model.state_dict())
        x = torch.randn(8, 16)
        names = lt.apply(model, plan, mesh)
        assert sorted(names) == sorted(k for k in _PLACEMENTS if k != "x")
        coords = tuple(mesh.get_coordinate())
        params = dict(model.named_parameters())
        full = dict(ref.named_parameters())
        for n in names:
            local = params[n].to_local()
            shape, offset = lt.layout_of(plan, n, coords)
            assert tuple(local.shape) == shape, (n, local.shape, shape)
            block = full[n].detach()[tuple(slice(o, o + s) for o, s in
                                           zip(offset, shape))]
            assert torch.equal(local, block), n
        xd = distribute_tensor(x, mesh, [Replicate()] * mesh.ndim)
        y = model(xd).full_tensor()
        assert torch.allclose(y, ref(x), atol=1e-5), "outputs differ"
        queue.put((rank, None))
    except Exception as e:  # reported to the parent
        queue.put((rank, repr(e)))
    finally:
        dist.destroy_process_group()


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestTorchApply(unittest.TestCase):
    """Applies a plan to an MLP on a 2 x 2 CPU mesh (gloo, 4 processes on
    loopback): every local shard equals the block libplan lays out (uneven
    and nested shards), and the output equals the unsharded module's."""

    def test_apply_on_gloo(self):
        import multiprocessing
        import socket
        import torch
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with lt.program_from_module(_mlp(5), (torch.randn(8, 16),)) as prog:
            plan = libplan.make_plan(prog, {"dp": 2, "tp": 2},
                                     placements=_PLACEMENTS)
            text = plan.text(self_contained=True)
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=_apply_worker,
                             args=(r, 4, port, text, queue))
                 for r in range(4)]
        for p in procs:
            p.start()
        got = dict(queue.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(30)
        self.assertEqual(got, {r: None for r in range(4)})


if __name__ == "__main__":
    unittest.main()
