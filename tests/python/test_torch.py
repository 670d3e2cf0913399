"""The PyTorch bridge. The placement mappings and layouts run everywhere
(tuples without torch); tracing and applying need torch and skip without."""

import os
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



def _block(d=16, heads=2, seq=8):
    """A pre-norm transformer block: fused QKV laid out heads-major (the
    48 output rows are [head, (q|k|v), 8], so a column split over tp hands
    each rank whole heads), a causal mask buffer, a GELU MLP."""
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads, self.hd = heads, d // heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d, bias=False)
            self.register_buffer("mask", torch.triu(
                torch.full((seq, seq), -1e9), diagonal=1))

        def forward(self, x):
            B, T, C = x.shape
            qkv = self.qkv(x).view(B, T, self.heads, 3 * self.hd)
            q, k, v = qkv.permute(0, 2, 1, 3).chunk(3, dim=-1)
            att = (q @ k.transpose(-2, -1)) * (self.hd ** -0.5)
            att = torch.softmax(att + self.mask, dim=-1)
            y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, C)
            return self.proj(y)

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(d, 4 * d)
            self.act = nn.GELU()
            self.fc2 = nn.Linear(4 * d, d)

        def forward(self, x):
            return self.fc2(self.act(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(d)
            self.attn = Attention()
            self.ln2 = nn.LayerNorm(d)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    return Block()


# Megatron tensor parallelism with sequence parallelism on dp=2 x tp=2, as in
# examples/transformer-block.plan.yaml, on the traced block's names: dp
# splits the batch; tp the sequence in the norms and residual adds, the heads
# in attention, the MLP's hidden dim. The row-parallel fc2's bias is P(sum)
# on tp: added once to the partial sums.
_SP, _HEADS, _COL = "S(0)S(1)", "S(0)S(1)", "S(0)S(2)"
_BLOCK_PLACEMENTS = {
    "x": _SP, "ln1.weight": "RR", "ln1.bias": "RR",
    "attn.qkv.weight": "RS(0)", "attn.qkv.bias": "RS(0)", "attn.mask": "RR",
    "attn.proj.weight": "RS(1)", "ln2.weight": "RR", "ln2.bias": "RR",
    "mlp.fc1.weight": "RS(0)", "mlp.fc1.bias": "RS(0)",
    "mlp.fc2.weight": "RS(1)", "mlp.fc2.bias": "RP(sum)"}
_BLOCK_STRATEGIES = {
    "ln1": ([_SP, "RR", "RR"], _SP),
    "attn.qkv": (["S(0)R", "RS(0)", "RS(0)"], _COL),
    "attn.view": ([_COL], _COL),
    "attn.permute": ([_COL], _HEADS),
    "attn.chunk": ([_HEADS], [_HEADS] * 3),
    "attn.matmul": ([_HEADS, _HEADS], _HEADS),
    "attn.mul": ([_HEADS], _HEADS),
    "attn.add": ([_HEADS, "RR"], _HEADS),
    "attn.softmax": ([_HEADS], _HEADS),
    "attn.matmul_1": ([_HEADS, _HEADS], _HEADS),
    "attn.permute_1": ([_HEADS], _COL),
    "attn.reshape": ([_COL], _COL),
    "attn.proj": ([_COL, "RS(1)"], "S(0)P(sum)"),
    "add_1": ([_SP, _SP], _SP),
    "ln2": ([_SP, "RR", "RR"], _SP),
    "mlp.fc1": (["S(0)R", "RS(0)", "RS(0)"], _COL),
    "mlp.act": ([_COL], _COL),
    "mlp.fc2": ([_COL, "RS(1)", "RP(sum)"], "S(0)P(sum)"),
    "add_2": ([_SP, _SP], _SP)}


def _reference_run(prog, leaves, output):
    """Runs `prog` on one device with libplan's CPU kernels, the leaves
    given (name -> torch tensor; the rest as the verifier fills them, consts
    by their recipe), and returns `output` as a float64 tensor, through the
    public reference run (plan_ref_run_*, libplan/verify.h)."""
    import ctypes
    import torch
    from libplan import _decls, _lib
    fn = _lib.fn
    run = ctypes.c_void_p()
    # float mode, each tensor in its own dtype (f32, as torch runs it)
    if fn.ref_run_new(ctypes.byref(run), prog._h,
                      ctypes.byref(_decls.RefOptions(1, 0, -1))) != 0:
        raise AssertionError("plan_ref_run_new failed")
    try:
        for name, t in leaves.items():
            i = prog.tensor(name).index
            flat = t.detach().double().reshape(-1)
            assert fn.ref_run_count(run, i) == flat.numel(), name
            buf = fn.ref_run_values(run, i)
            for j, v in enumerate(flat.tolist()):
                buf[j] = v
        if fn.ref_run_exec(run) != 0:
            raise AssertionError("plan_ref_run_exec failed")
        i = prog.tensor(output).index
        buf = fn.ref_run_values(run, i)
        vals = [buf[j] for j in range(fn.ref_run_count(run, i))]
        return torch.tensor(vals, dtype=torch.float64).reshape(
            prog.shape(output))
    finally:
        fn.ref_run_free(run)


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestTraceBlock(unittest.TestCase):
    """A pre-norm transformer block traced with torch.fx: the program
    loads and validates, equals the module on one device, and a Megatron +
    sequence-parallel plan on dp=2 x tp=2 (and one libplan.search finds)
    verifies equal in exact and float mode."""

    @classmethod
    def setUpClass(cls):
        import torch
        torch.manual_seed(0)
        cls.module = _block()
        cls.x = torch.randn(4, 8, 16)
        cls.prog = lt.program_from_module(cls.module, (cls.x,))

    @classmethod
    def tearDownClass(cls):
        cls.prog.close()

    def test_trace_block(self):
        p = self.prog
        self.assertEqual([o.name for o in p.ops], [
            "ln1", "attn.qkv", "attn.view", "attn.permute", "attn.chunk",
            "attn.matmul", "attn.mul", "attn.add", "attn.softmax",
            "attn.matmul_1", "attn.permute_1", "attn.reshape", "attn.proj",
            "add_1", "ln2", "mlp.fc1", "mlp.act", "mlp.fc2", "add_2"])
        kinds = {o.name: o.kind for o in p.ops}
        self.assertEqual(kinds["attn.chunk"], "split")
        self.assertEqual(kinds["attn.mul"], "scale")
        self.assertEqual(kinds["attn.view"], "reshape")
        self.assertEqual(p.op("attn.chunk").outputs,
                         ("chunk.0", "chunk.1", "chunk.2"))
        self.assertEqual(p.shape("chunk.0"), (4, 2, 8, 8))
        self.assertEqual(p.shape("attn.qkv.weight"), (48, 16))
        mask = p.tensor("attn.mask")
        self.assertEqual((mask.role, mask.shape), ("const", (8, 8)))
        text = p.text()
        self.assertIn("recipe: causal_mask", text)
        self.assertIn("transpose_b: true", text)   # k.transpose folded
        self.assertIn("factor: 0.35355339", text)  # hd ** -0.5
        self.assertEqual(p.shape("add_2"), (4, 8, 16))
        with libplan.parse(text) as doc:
            self.assertTrue(doc.validate().ok)

    def test_block_computes_the_module(self):
        import torch
        leaves = dict(self.module.named_parameters())
        leaves["x"] = self.x
        got = _reference_run(self.prog, leaves, "add_2")
        with torch.no_grad():
            want = self.module(self.x).double()
        self.assertLess(float((got - want).abs().max()), 1e-5)

    def test_megatron_plan_verifies(self):
        with libplan.make_plan(self.prog, {"dp": 2, "tp": 2},
                               placements=_BLOCK_PLACEMENTS,
                               strategies=_BLOCK_STRATEGIES,
                               outputs={"add_2": _SP}) as plan:
            self.assertTrue(plan.validate().ok, plan.validate())
            for mode in ("exact", "float"):
                r = plan.verify(mode=mode)
                self.assertTrue(r.equal, "%s: %s" % (mode, r.text))
                # ln -> qkv / fc1 gather the sequence; proj / fc2's partial
                # sums are reduce-scattered onto it
                self.assertEqual(r.collectives["all_gather"], 2)
                self.assertEqual(r.collectives["reduce_scatter"], 2)

    def test_wrong_bias_placement_is_caught(self):
        # fc2's bias replicated on tp would be added once per rank
        st = dict(_BLOCK_STRATEGIES)
        st["mlp.fc2"] = ([_COL, "RS(1)", "RR"], "S(0)P(sum)")
        with libplan.make_plan(self.prog, {"dp": 2, "tp": 2},
                               placements=_BLOCK_PLACEMENTS, strategies=st,
                               outputs={"add_2": _SP}) as plan:
            self.assertFalse(plan.validate().ok)
            r = plan.verify()
            self.assertFalse(r.equal)
            self.assertEqual(r.first_op, "mlp.fc2")

    def test_searched_plan_verifies(self):
        try:
            plan = libplan.search(self.prog, {"dp": 2, "tp": 2},
                                  strategy="megatron")
        except libplan.UnsupportedError as e:  # no plan tool here
            self.skipTest(str(e))
        with plan:
            self.assertTrue(plan.validate().ok)
            for mode in ("exact", "float"):
                self.assertTrue(plan.verify(mode=mode).equal, mode)


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestTraceRouting(unittest.TestCase):
    """A router's top 2 (torch.topk), a gather of other scores by the chosen
    indices and a scatter_add of the weighted picks into an input: topk,
    gather, scatter_add and add. The program equals the module on one
    device, and a plan sharding the rows over dp verifies equal."""

    @classmethod
    def setUpClass(cls):
        import torch

        class Route(torch.nn.Module):
            def forward(self, x, y, z):
                v, i = torch.topk(x, 2)
                g = torch.gather(y, -1, i)
                return z.scatter_add(-1, i, v * g)

        torch.manual_seed(0)
        cls.module = Route()
        cls.args = (torch.randn(4, 6), torch.randn(4, 6), torch.randn(4, 6))
        cls.prog = lt.program_from_module(cls.module, cls.args)

    @classmethod
    def tearDownClass(cls):
        cls.prog.close()

    def test_trace(self):
        self.assertEqual([o.kind for o in self.prog.ops],
                         ["topk", "gather", "mul", "scatter_add", "add"])
        self.assertIn("k: 2", self.prog.text())
        self.assertIn("size: 6", self.prog.text())

    def test_computes_the_module(self):
        import torch
        leaves = dict(zip(("x", "y", "z"), self.args))
        out = [o for o in self.prog.ops][-1].outputs[0]
        got = _reference_run(self.prog, leaves, out)
        with torch.no_grad():
            want = self.module(*self.args).double()
        self.assertLess(float((got - want).abs().max()), 1e-5)

    def test_rows_sharded_plan_verifies(self):
        ops = self.prog.ops
        rows = "S(0)"
        strategies = {o.name: ([rows] * len(o.inputs), [rows] * len(o.outputs)
                               if len(o.outputs) > 1 else rows) for o in ops}
        with libplan.make_plan(
                self.prog, {"dp": 2},
                placements={"x": rows, "y": rows, "z": rows},
                strategies=strategies,
                outputs={ops[-1].outputs[0]: rows}) as plan:
            self.assertTrue(plan.validate().ok, plan.validate())
            for mode in ("exact", "float"):
                self.assertTrue(plan.verify(mode=mode).equal, mode)

    def test_other_dims_refused(self):
        import torch

        class Dim0(torch.nn.Module):
            def forward(self, x):
                return torch.topk(x, 2, dim=0)[0]

        with self.assertRaises(lt.UnsupportedError) as e:
            lt.program_from_module(Dim0(), (torch.randn(4, 6),))
        self.assertIn("other than the last", str(e.exception))


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestTraceGQA(unittest.TestCase):
    """Grouped-query attention's scores: key heads repeated in place
    (repeat_interleave) and a bool mask selecting between the scores and
    another tensor (where). The program equals the module on one device,
    and a plan sharding the heads over tp verifies equal."""

    @classmethod
    def setUpClass(cls):
        import torch

        class GQA(torch.nn.Module):
            def forward(self, q, k, mask, other):
                kr = k.repeat_interleave(2, dim=1)
                s = q @ kr.transpose(-2, -1)
                return torch.where(mask, s, other)

        torch.manual_seed(0)
        cls.module = GQA()
        cls.args = (torch.randn(2, 4, 3, 8), torch.randn(2, 2, 3, 8),
                    torch.rand(3, 3) > 0.5, torch.randn(3))
        cls.prog = lt.program_from_module(cls.module, cls.args)

    @classmethod
    def tearDownClass(cls):
        cls.prog.close()

    def test_trace(self):
        p = self.prog
        self.assertEqual([o.kind for o in p.ops],
                         ["repeat_interleave", "matmul", "where"])
        mask = p.tensor("mask")
        self.assertEqual((mask.dtype, mask.shape), ("i64", (3, 3)))
        self.assertIn("range: [0, 2]", p.text())
        self.assertIn("repeats: 2", p.text())

    def test_computes_the_module(self):
        import torch
        leaves = dict(zip(("q", "k", "mask", "other"), self.args))
        out = [o for o in self.prog.ops][-1].outputs[0]
        got = _reference_run(self.prog, leaves, out)
        with torch.no_grad():
            want = self.module(*self.args).double()
        self.assertLess(float((got - want).abs().max()), 1e-5)

    def test_heads_sharded_plan_verifies(self):
        ops = [o.name for o in self.prog.ops]
        out = self.prog.ops[-1].outputs[0]
        heads = "S(0)S(1)"
        with libplan.make_plan(
                self.prog, {"dp": 2, "tp": 2},
                placements={"q": heads, "k": heads, "mask": "RR",
                            "other": "RR"},
                strategies={ops[0]: ([heads], heads),
                            ops[1]: ([heads, heads], heads),
                            ops[2]: (["RR", heads, "RR"], heads)},
                outputs={out: heads}) as plan:
            self.assertTrue(plan.validate().ok, plan.validate())
            for mode in ("exact", "float"):
                r = plan.verify(mode=mode)
                self.assertTrue(r.equal, "%s: %s" % (mode, r.text))


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestTraceErrors(unittest.TestCase):
    """What the converter cannot express raises UnsupportedError naming
    the fx node and its module path; it never writes a wrong program."""

    def trace_fails(self, body, *want, buffer=None):
        import torch

        class Inner(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(4, 4)
                if buffer is not None:
                    self.register_buffer("buf", buffer)

            def forward(self, x):
                return body(self, self.fc(x))

        class Outer(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = Inner()

            def forward(self, x):
                return self.inner(x)

        with self.assertRaises(libplan.UnsupportedError) as cm:
            lt.program_from_module(Outer(), (torch.randn(2, 4),))
        for w in want:
            self.assertIn(w, str(cm.exception))

    def test_unsupported_function(self):
        import torch
        # (sigmoid traces now: test_trace_models.py)
        self.trace_fails(lambda m, h: torch.sin(h),
                         "fx node sin", "in module inner",
                         "no libplan op")

    def test_number_by_tensor(self):
        # (tensor + number traces now, as add_scalar)
        self.trace_fails(lambda m, h: 1.0 / h, "fx node truediv",
                         "in module inner", "div of a number by a tensor")

    def test_buffer_without_recipe(self):
        import torch
        self.trace_fails(lambda m, h: h + m.buf, "fx node inner_buf",
                         "buffer inner.buf", "recipe",
                         buffer=torch.arange(4.0))

    def test_inplace_on_a_read_value(self):
        import torch.nn.functional as F
        self.trace_fails(lambda m, h: F.relu(h, inplace=True) + h,
                         "fx node relu",
                         "in place", "other nodes read")

    def test_unsupported_module(self):
        import torch

        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv1d(4, 4, 1)

            def forward(self, x):
                return self.conv(x)

        with self.assertRaises(libplan.UnsupportedError) as cm:
            lt.program_from_module(M(), (torch.randn(2, 4, 3),))
        self.assertIn("in module conv", str(cm.exception))
        self.assertIn("Conv1d", str(cm.exception))


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


def _apply_worker(rank, world, store_path, plan_text, queue):
    import torch
    import torch.distributed as dist
    # a file store: no rendezvous port to pick, so no launch running
    # alongside can take it
    store = dist.FileStore(store_path, world)
    dist.init_process_group("gloo", store=store, rank=rank,
                            world_size=world)
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
        dist.barrier()  # every rank done before any tears its links down
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
        import tempfile
        import torch
        tmp = tempfile.TemporaryDirectory(prefix="libplan-apply-")
        self.addCleanup(tmp.cleanup)
        store = os.path.join(tmp.name, "store")
        with lt.program_from_module(_mlp(5), (torch.randn(8, 16),)) as prog:
            plan = libplan.make_plan(prog, {"dp": 2, "tp": 2},
                                     placements=_PLACEMENTS)
            text = plan.text(self_contained=True)
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        procs = [ctx.Process(target=_apply_worker,
                             args=(r, 4, store, text, queue))
                 for r in range(4)]
        for p in procs:
            p.start()
        got = dict(queue.get(timeout=120) for _ in procs)
        for p in procs:
            p.join(30)
        self.assertEqual(got, {r: None for r in range(4)})


if __name__ == "__main__":
    unittest.main()
