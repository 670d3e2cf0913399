"""The fx tracer on the constructs modern models are written with: each
module is traced unmodified, the program computes the module's output on
one device (libplan's reference run against torch in float32), and a
searched or hand-placed plan of it verifies EQUAL. Then a pre-norm
Llama-style block and a top-2 mixture-of-experts layer, written as plain
PyTorch, traced, searched and verified; their tracing times are printed."""

import time
import unittest

from util import libplan
import libplan.torch as lt
from test_torch import NEED_TORCH, _reference_run

if lt.available():
    import torch
    import torch.nn.functional as F
    from torch import nn


def _trace(module, args):
    t0 = time.monotonic()
    prog = lt.program_from_module(module, args)
    return prog, time.monotonic() - t0


def _output(prog):
    return prog.ops[-1].outputs[0]


class _Case(unittest.TestCase):
    """Helpers: the program equals the module; a plan verifies."""

    def assert_computes(self, module, args, names, tol=1e-5):
        prog, _ = _trace(module, args)
        with prog:
            leaves = dict(module.named_parameters())
            leaves.update(zip(names, args))
            got = _reference_run(prog, leaves, _output(prog))
            with torch.no_grad():
                want = module(*args)
                want = (want[0] if isinstance(want, tuple) else want).double()
            self.assertLess(float((got - want).abs().max()), tol)
            return [o.kind for o in prog.ops]

    def assert_plan_verifies(self, prog, mesh, **kw):
        with libplan.make_plan(prog, mesh, **kw) as plan:
            self.assertTrue(plan.validate().ok, plan.validate())
            for mode in ("exact", "float"):
                r = plan.verify(mode=mode)
                self.assertTrue(r.equal, "%s: %s" % (mode, r.text))

    def assert_search_verifies(self, prog, mesh, strategy="greedy"):
        try:
            plan = libplan.search(prog, mesh, strategy=strategy)
        except libplan.UnsupportedError as e:  # no search here
            self.skipTest(str(e))
        with plan:
            self.assertTrue(plan.validate().ok, plan.validate())
            for mode in ("exact", "float"):
                r = plan.verify(mode=mode)
                self.assertTrue(r.equal, "%s: %s" % (mode, r.text))
            return plan.text()


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestElementwise(_Case):
    """sigmoid, silu, tanh and tensor-number arithmetic."""

    def test_activations_and_numbers(self):
        class M(nn.Module):
            def forward(self, x):
                a = torch.sigmoid(x) * 0.5 + 1.0
                b = 1 - F.silu(x)
                c = torch.tanh(x) / 2 - 0.25
                return a * b + c + x.sigmoid() + nn.functional.sigmoid(x)

        torch.manual_seed(0)
        x = torch.randn(4, 6)
        kinds = self.assert_computes(M(), (x,), ["x"])
        self.assertEqual(kinds.count("sigmoid"), 3)
        self.assertEqual(kinds.count("add_scalar"), 3)
        self.assertIn("silu", kinds)
        self.assertIn("tanh", kinds)
        prog, _ = _trace(M(), (x,))
        with prog:
            self.assertIn("value: -0.25", prog.text())
            rows = "S(0)"
            self.assert_plan_verifies(
                prog, {"dp": 2}, placements={"x": rows},
                strategies={o.name: ([rows] * len(o.inputs), rows)
                            for o in prog.ops},
                outputs={_output(prog): rows})

    def test_sigmoid_module_and_rsub(self):
        m = nn.Sequential(nn.Linear(6, 6), nn.Sigmoid())

        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.f = m

            def forward(self, x):
                return torch.rsub(self.f(x), 2.0) - x

        torch.manual_seed(1)
        kinds = self.assert_computes(M(), (torch.randn(3, 6),), ["x"])
        self.assertEqual(kinds, ["linear", "sigmoid", "scale", "add_scalar",
                                 "sub"])

    def test_number_divided_by_tensor_is_refused(self):
        class M(nn.Module):
            def forward(self, x):
                return 2 / x

        with self.assertRaises(libplan.UnsupportedError) as e:
            lt.program_from_module(M(), (torch.randn(3),))
        self.assertIn("no libplan op", str(e.exception))


class _RMSNorm(nn.Module if lt.available() else object):
    """The hand-written form (Llama's reference code)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim))

    def forward(self, x):
        n = x.float() * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return n.type_as(x) * self.weight


def _rope(seq, dim, theta=10000.0):
    inv = 1.0 / (theta ** (torch.arange(0, dim, 2).float() / dim))
    freqs = torch.outer(torch.arange(seq).float(), inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestNormsAndRotary(_Case):
    def test_hand_written_rmsnorm(self):
        torch.manual_seed(2)
        m = _RMSNorm(8)
        kinds = self.assert_computes(m, (torch.randn(2, 3, 8),), ["x"])
        self.assertEqual(kinds, ["mul", "reduce_mean", "add_scalar", "rsqrt",
                                 "mul", "mul"])
        prog, _ = _trace(m, (torch.randn(2, 3, 8),))
        with prog:
            self.assert_search_verifies(prog, {"dp": 2, "tp": 2})

    def test_nn_rmsnorm(self):
        torch.manual_seed(3)
        m = nn.RMSNorm(8, eps=1e-5)
        with torch.no_grad():
            m.weight.add_(torch.randn(8) * 0.1)
        self.assertEqual(self.assert_computes(m, (torch.randn(4, 8),), ["x"]),
                         ["rmsnorm"])

    def test_rotary_rotate_half(self):
        class Rope(nn.Module):
            def __init__(self):
                super().__init__()
                cos, sin = _rope(5, 8)
                self.register_buffer("cos", cos)
                self.register_buffer("sin", sin)

            def forward(self, q):
                return q * self.cos + _rotate_half(q) * self.sin

        torch.manual_seed(4)
        q = torch.randn(2, 3, 5, 8)
        kinds = self.assert_computes(Rope(), (q,), ["q"])
        self.assertEqual(kinds, ["mul", "split", "split", "scale", "concat",
                                 "mul", "add"])
        prog, _ = _trace(Rope(), (q,))
        with prog:
            text = prog.text()
            self.assertIn("recipe: rope_cos", text)
            self.assertIn("recipe: rope_sin", text)
            self.assert_search_verifies(prog, {"dp": 2, "tp": 2})

    def test_other_buffers_are_refused(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("t", torch.randn(5, 8))

            def forward(self, q):
                return q * self.t

        with self.assertRaises(libplan.UnsupportedError) as e:
            lt.program_from_module(M(), (torch.randn(5, 8),))
        self.assertIn("rope_cos", str(e.exception))


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestAttention(_Case):
    """F.scaled_dot_product_attention (causal, a bool mask, GQA either
    way) and nn.MultiheadAttention as the fused attention op."""

    def test_sdpa_causal_gqa(self):
        class M(nn.Module):
            def forward(self, q, k, v):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                      enable_gqa=True)

        torch.manual_seed(5)
        args = (torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8),
                torch.randn(2, 2, 6, 8))
        self.assertEqual(self.assert_computes(M(), args, ["q", "k", "v"]),
                         ["attention"])
        prog, _ = _trace(M(), args)
        with prog:
            self.assertIn("causal: true", prog.text())
            # context parallelism: the queries sharded along cp, keys whole;
            # heads along tp (kv heads with them)
            qp, kv = "S(2)S(1)", "RS(1)"
            op = prog.ops[0].name
            self.assert_plan_verifies(
                prog, {"cp": 2, "tp": 2},
                placements={"q": qp, "k": kv, "v": kv},
                strategies={op: ([qp, kv, kv], qp)},
                outputs={_output(prog): qp})

    def test_sdpa_mask_and_repeat(self):
        class M(nn.Module):
            def forward(self, q, k, v, mask):
                k = k.repeat_interleave(2, dim=1)
                v = v.repeat_interleave(2, dim=1)
                return F.scaled_dot_product_attention(q, k, v,
                                                      attn_mask=mask,
                                                      scale=0.3)

        torch.manual_seed(6)
        mask = torch.rand(5, 7) > 0.3
        mask[:, 0] = True  # every query sees a key (torch gives NaN else)
        args = (torch.randn(1, 4, 5, 4), torch.randn(1, 2, 7, 4),
                torch.randn(1, 2, 7, 4), mask)
        kinds = self.assert_computes(M(), args, ["q", "k", "v", "mask"])
        self.assertEqual(kinds, ["repeat_interleave", "repeat_interleave",
                                 "attention"])
        prog, _ = _trace(M(), args)
        with prog:
            self.assertIn("scale: 0.3", prog.text())
            self.assert_search_verifies(prog, {"dp": 2, "tp": 2})

    def test_float_mask(self):
        class M(nn.Module):
            def forward(self, q, k, v, bias):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)

        torch.manual_seed(7)
        args = (torch.randn(2, 2, 3, 4), torch.randn(2, 2, 5, 4),
                torch.randn(2, 2, 5, 6), torch.randn(2, 1, 3, 5))
        self.assertEqual(self.assert_computes(M(), args,
                                              ["q", "k", "v", "bias"]),
                         ["attention"])

    def test_multihead_attention(self):
        for batch_first in (True, False):
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.mha = nn.MultiheadAttention(
                        16, 4, batch_first=batch_first)

                def forward(self, x):
                    return self.mha(x, x, x, need_weights=False)[0]

            torch.manual_seed(8)
            m = M().eval()
            x = torch.randn(2, 5, 16) if batch_first else torch.randn(5, 2, 16)
            kinds = self.assert_computes(m, (x,), ["x"])
            self.assertIn("attention", kinds)
            self.assertEqual(kinds.count("linear"), 2)
            prog, _ = _trace(m, (x,))
            with prog:
                self.assertIn("mha.in_proj_weight",
                              [t.name for t in prog.tensors])
                self.assert_search_verifies(prog, {"dp": 2, "tp": 2})

    def test_cross_attention_is_refused(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

            def forward(self, x, y):
                return self.mha(x, y, y)[0]

        with self.assertRaises(libplan.UnsupportedError) as e:
            lt.program_from_module(M(), (torch.randn(1, 3, 8),
                                         torch.randn(1, 4, 8)))
        self.assertIn("self-attention", str(e.exception))


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestEmbeddingAndViews(_Case):
    def test_embedding_and_the_view_family(self):
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.emb = nn.Embedding(11, 8)

            def forward(self, ids):
                h = self.emb(ids)                       # [2, 6, 8]
                h = h.view(2, 6, 2, 4).transpose(1, 2)  # [2, 2, 6, 4]
                h = h.contiguous().permute(0, 2, 1, 3)  # [2, 6, 2, 4]
                h = h.flatten(2).unsqueeze(1)           # [2, 1, 6, 8]
                h = h.squeeze(1).unflatten(-1, (4, 2))  # [2, 6, 4, 2]
                return h.reshape(12, 8) * 2

        torch.manual_seed(9)
        ids = torch.randint(0, 11, (2, 6))
        kinds = self.assert_computes(M(), (ids,), ["ids"])
        self.assertEqual(kinds[0], "embedding")
        self.assertIn("permute", kinds)
        prog, _ = _trace(M(), (ids,))
        with prog:
            self.assertIn("range: [0, 11]", prog.text())
            self.assert_search_verifies(prog, {"dp": 2, "tp": 2})


class LlamaBlock(nn.Module if lt.available() else object):
    """A pre-norm Llama-style block: RMSNorm, q/k/v with grouped-query
    heads, rotary embeddings (rotate_half), causal SDPA, output projection,
    RMSNorm, SwiGLU MLP; residuals around both."""

    def __init__(self, dim=32, heads=4, kv_heads=2, hidden=64, seq=8):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.attention_norm = _RMSNorm(dim)
        self.wq = nn.Linear(dim, heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(heads * self.hd, dim, bias=False)
        self.ffn_norm = nn.RMSNorm(dim, eps=1e-6)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        cos, sin = _rope(seq, self.hd)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.attention_norm(x)
        q = self.wq(h).view(b, s, self.heads, self.hd).transpose(1, 2)
        k = self.wk(h).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        v = self.wv(h).view(b, s, self.kv_heads, self.hd).transpose(1, 2)
        q = q * self.cos + _rotate_half(q) * self.sin
        k = k * self.cos + _rotate_half(k) * self.sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           enable_gqa=True)
        x = x + self.wo(a.transpose(1, 2).reshape(b, s, -1))
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class MoE(nn.Module if lt.available() else object):
    """A top-2 mixture of experts as plain PyTorch: a router's softmax and
    topk, the weights renormalised and scattered into a dense [tokens,
    experts] table, every expert (a SiLU MLP) on every token, stacked and
    weighed."""

    def __init__(self, dim=16, experts=4, hidden=32, k=2):
        super().__init__()
        self.k = k
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, hidden), nn.SiLU(),
                          nn.Linear(hidden, dim)) for _ in range(experts))

    def forward(self, x):
        probs = F.softmax(self.gate(x), dim=-1)
        w, idx = torch.topk(probs, self.k, dim=-1)
        w = w / w.sum(dim=-1, keepdim=True)
        dense = torch.zeros_like(probs).scatter(-1, idx, w)
        ys = torch.stack([e(x) for e in self.experts], dim=-2)
        return (dense.unsqueeze(-1) * ys).sum(dim=-2)


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestModels(_Case):
    def test_llama_block(self):
        torch.manual_seed(10)
        m = LlamaBlock()
        x = torch.randn(2, 8, 32)
        prog, secs = _trace(m, (x,))
        print("\ntracing the Llama-style block: %.2f s, %d ops"
              % (secs, len(prog.ops)))
        with prog:
            kinds = [o.kind for o in prog.ops]
            self.assertEqual(kinds.count("attention"), 1)
            self.assertEqual(kinds.count("rmsnorm"), 1)
            self.assertEqual(kinds.count("rsqrt"), 1)
            self.assertIn("silu", kinds)
            text = prog.text()
            self.assertIn("recipe: rope_cos", text)
            self.assertIn("causal: true", text)
            leaves = dict(m.named_parameters())
            leaves["x"] = x
            got = _reference_run(prog, leaves, _output(prog))
            with torch.no_grad():
                want = m(x).double()
            self.assertLess(float((got - want).abs().max()), 1e-4)
            plan = self.assert_search_verifies(prog, {"dp": 2, "tp": 2},
                                               "megatron")
            self.assertIn("attention", plan)
        self.assertLess(secs, 10)

    def test_moe_layer(self):
        torch.manual_seed(11)
        m = MoE()
        x = torch.randn(2, 5, 16)
        prog, secs = _trace(m, (x,))
        print("\ntracing the MoE layer: %.2f s, %d ops"
              % (secs, len(prog.ops)))
        with prog:
            kinds = [o.kind for o in prog.ops]
            for k in ("softmax", "topk", "scatter_add", "concat"):
                self.assertIn(k, kinds)
            leaves = dict(m.named_parameters())
            leaves["x"] = x
            got = _reference_run(prog, leaves, _output(prog))
            with torch.no_grad():
                want = m(x).double()
            self.assertLess(float((got - want).abs().max()), 1e-5)
            self.assert_search_verifies(prog, {"dp": 2, "tp": 2})
        self.assertLess(secs, 10)

    def test_scatter_into_other_values_is_refused(self):
        class M(nn.Module):
            def forward(self, x, i):
                return x.scatter(-1, i, x)

        with self.assertRaises(libplan.UnsupportedError) as e:
            lt.program_from_module(M(), (torch.randn(2, 3),
                                         torch.zeros(2, 3, dtype=torch.long)))
        self.assertIn("zeros_like", str(e.exception))


if __name__ == "__main__":
    unittest.main()
