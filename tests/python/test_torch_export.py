"""libplan.torch.program_from_export: torch.export's ATen graph as a
libplan program. Run on one device with libplan's CPU kernels (the
verifier's reference run), the traced program gives the module's output:
a small causal-attention model written here (SDPA with an explicit mask
built from arange, folded into the op's causal flag; position ids from
arange into an embedding), and transformers' GPT-2, Llama and Mixtral
(small configs, random weights; skipped, saying so, without transformers;
Mixtral's experts in their dense form). A padding index, an experts
module whose forward is not the dense form and an in-place op on a view
are refused, naming the node or module; an experts module of that form
written here (transposed weights, a loop of its own) traces densely too."""

import os
import sys
import unittest

from util import libplan  # noqa: F401  (the in-tree binding)
import libplan.torch as lt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "torchrun"))

NEED_TORCH = "torch (with torch.distributed.tensor) is not installed"
TOL = 1e-5


def _tiny(vocab=16, d=8, heads=2, seq=6):
    import torch
    from torch import nn
    import torch.nn.functional as F

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, d)
            self.pos = nn.Embedding(seq, d)
            self.qkv = nn.Linear(d, 3 * d)
            self.out = nn.Linear(d, vocab)

        def forward(self, ids):
            b, s = ids.shape
            x = self.tok(ids) + self.pos(torch.arange(s)[None, :])
            q, k, v = self.qkv(x).split(d, dim=-1)
            q, k, v = (t.view(b, s, heads, d // heads).transpose(1, 2)
                       for t in (q, k, v))
            keep = torch.arange(s)[None, :] <= torch.arange(s)[:, None]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
            return self.out(y.transpose(1, 2).reshape(b, s, d))

    return Tiny()


def _check_against_module(case, m, ids, logits):
    import test_torch as tt
    prog = lt.program_from_export(m, (ids,), {"use_cache": False} if
                                  hasattr(m, "config") else None)
    with prog:
        leaves = {[t.name for t in prog.tensors if t.role == "input"][0]:
                  ids}
        names = {t.name for t in prog.tensors}
        for n, p in m.state_dict().items():
            if n in names:
                leaves[n] = p
        got = tt._reference_run(prog, leaves, prog.ops[-1].outputs[0])
        case.assertEqual(tuple(got.shape), tuple(logits.shape))
        case.assertLessEqual(float((got - logits.double()).abs().max()), TOL)
        return prog.text()


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestProgramFromExport(unittest.TestCase):
    def test_tiny_attention_model(self):
        import torch
        torch.manual_seed(0)
        m = _tiny().eval()
        ids = torch.randint(0, 16, (2, 6))
        text = _check_against_module(self, m, ids, m(ids).detach())
        self.assertIn("causal: true", text)  # the folded mask
        self.assertNotIn("arange", text)

    def test_padding_index_refused(self):
        import torch

        class Pad(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.e = torch.nn.Embedding(8, 4, padding_idx=0)

            def forward(self, ids):
                return self.e(ids) * 2.0

        with self.assertRaises(libplan.UnsupportedError) as cm:
            lt.program_from_export(Pad(), (torch.tensor([[1, 2]]),))
        self.assertIn("padding_idx", str(cm.exception))
        self.assertIn("module e", str(cm.exception))

    def test_transformers_models(self):
        import hf_models as hf
        if not hf.available():
            self.skipTest("transformers is not installed")
        import torch
        for name in hf.MODELS:
            with self.subTest(model=name):
                torch.manual_seed(0)
                m = hf.build(name)
                ids = torch.randint(0, hf.VOCAB, (hf.BATCH, hf.SEQ))
                logits = m(ids, use_cache=False).logits.detach()
                _check_against_module(self, m, ids, logits)

    def test_mixtral_dense_experts(self):
        """Mixtral's experts module becomes the dense form: one scatter_add
        of the router's weights, the fused gate/up and the down matmuls
        over every expert, a sum over the experts; no sort or histogram."""
        import hf_models as hf
        if not hf.available():
            self.skipTest("transformers is not installed")
        import torch
        torch.manual_seed(0)
        m = hf.build("mixtral")
        ids = torch.randint(0, hf.VOCAB, (hf.BATCH, hf.SEQ))
        with lt.program_from_export(m, (ids,), {"use_cache": False}) as prog:
            ops = {o.name: o for o in prog.ops}
            pre = "model.layers.0.mlp.experts."
            self.assertEqual(ops[pre + "dense"].kind, "scatter_add")
            self.assertEqual(ops[pre + "gate_up"].kind, "matmul")
            self.assertEqual(list(ops[pre + "gate_up"].inputs)[1],
                             pre + "gate_up_proj")
            self.assertEqual(ops[pre + "act"].kind, "silu")
            self.assertEqual(ops[pre + "combine"].kind, "reduce_sum")
            kinds = [o.kind for o in prog.ops]
            self.assertEqual(kinds.count("topk"), 2)  # a router a layer
            self.assertEqual(kinds.count("scatter_add"), 2)
            self.assertEqual(kinds.count("matmul"), 4)
            shape = prog.tensor(ops[pre + "gate_up"].outputs[0]).shape
            self.assertEqual(list(shape), [4, hf.BATCH * hf.SEQ, 64])

    def test_own_transposed_experts(self):
        """An experts module of the same form written here (weights
        stored transposed, is_transposed; a loop over the experts with
        the routing as masks inside, not transformers' dispatch) behind a
        router: the dense form, within TOL of the module's output."""
        import torch
        from torch import nn
        e, h, i, k = 3, 8, 6, 2

        class Experts(nn.Module):
            is_transposed = True

            def __init__(self):
                super().__init__()
                self.gate_up_proj = nn.Parameter(torch.randn(e, h, 2 * i))
                self.down_proj = nn.Parameter(torch.randn(e, i, h))
                self.act_fn = nn.GELU()

            def forward(self, x, ids, weights):
                out = torch.zeros_like(x)
                for j in range(e):
                    wj = (weights * (ids == j)).sum(-1, keepdim=True)
                    gate, up = (x @ self.gate_up_proj[j]).chunk(2, dim=-1)
                    out = out + wj * ((self.act_fn(gate) * up) @
                                      self.down_proj[j])
                return out

        class Moe(nn.Module):
            def __init__(self):
                super().__init__()
                self.router = nn.Linear(h, e, bias=False)
                self.experts = Experts()

            def forward(self, x):
                p = torch.softmax(self.router(x), dim=-1)
                w, ids = torch.topk(p, k, dim=-1)
                return self.experts(x, ids, w / w.sum(-1, keepdim=True))

        torch.manual_seed(3)
        m = Moe().eval()
        x = torch.randn(10, h)
        import test_torch as tt
        with lt.program_from_export(m, (x,)) as prog:
            kinds = {o.name: o.kind for o in prog.ops}
            self.assertEqual(kinds["experts.act"], "gelu")
            self.assertEqual(kinds["experts.dense"], "scatter_add")
            leaves = dict(m.named_parameters())
            leaves["x"] = x
            got = tt._reference_run(prog, leaves, prog.ops[-1].outputs[0])
            want = m(x).detach().double()
            self.assertLessEqual(float((got - want).abs().max()),
                                 1e-4 * float(want.abs().max()))

    def test_experts_of_another_form_refused(self):
        """An experts module whose gate is not act(gate) * up (its
        _apply_gate replaced): its own forward differs from the dense
        form on random routing, and the tracer says so, naming it."""
        import hf_models as hf
        if not hf.available():
            self.skipTest("transformers is not installed")
        import types
        import torch
        torch.manual_seed(0)
        m = hf.build("mixtral")
        ex = m.model.layers[1].mlp.experts

        def clamped(self, gu):
            gate, up = gu.chunk(2, dim=-1)
            return self.act_fn(gate) * up.clamp(-0.01, 0.01)
        ex._apply_gate = types.MethodType(clamped, ex)
        ids = torch.randint(0, hf.VOCAB, (hf.BATCH, hf.SEQ))
        state = torch.random.get_rng_state()
        with self.assertRaises(libplan.UnsupportedError) as cm:
            lt.program_from_export(m, (ids,), {"use_cache": False})
        msg = str(cm.exception)
        self.assertIn("model.layers.1.mlp.experts", msg)
        self.assertIn("differs from the dense form", msg)
        # the check draws from a generator of its own
        self.assertTrue(torch.equal(state, torch.random.get_rng_state()))

    def test_eager_experts_named(self):
        """transformers' eager experts loop does not export (it iterates
        over the experts the routing hit): the refusal says which module
        and which implementations export."""
        import hf_models as hf
        if not hf.available():
            self.skipTest("transformers is not installed")
        import torch
        torch.manual_seed(0)
        m = hf.build("mixtral")
        m.model.layers[0].mlp.experts.config._experts_implementation = \
            "eager"
        ids = torch.randint(0, hf.VOCAB, (hf.BATCH, hf.SEQ))
        with self.assertRaises(libplan.UnsupportedError) as cm:
            lt.program_from_export(m, (ids,), {"use_cache": False})
        msg = str(cm.exception)
        self.assertIn("torch.export cannot export", msg)
        self.assertIn("model.layers.0.mlp.experts", msg)
        self.assertIn("grouped_mm", msg)

    def test_in_place_on_a_view_refused(self):
        import torch

        class Renorm(torch.nn.Module):
            def forward(self, x):
                y = x.view(2, 4) * 1.0
                z = y.view(8)
                z.div_(2.0)  # y changes too
                return y + 1.0

        with self.assertRaises(libplan.UnsupportedError) as cm:
            lt.program_from_export(Renorm(), (torch.randn(8),))
        self.assertIn("in-place div of a view", str(cm.exception))


    def test_torchtitan_llama3(self):
        """torchtitan's Llama 3: its rotary embedding in complex numbers
        (view_as_complex, a complex product with freqs_cis,
        view_as_real) traced as real ops, the output as torchtitan's."""
        import titan_models as tm
        why = tm.available()
        if why is not None:
            self.skipTest(why)
        import torch
        torch.manual_seed(0)
        m = tm.build()
        ids = torch.randint(0, tm.VOCAB, (tm.BATCH, tm.SEQ))
        text = _check_against_module(self, m, ids, m(ids).detach())
        self.assertIn("recipe: rope_cos", text)
        self.assertNotIn("dtype: c", text)  # no complex tensor

    def test_complex_product_with_a_table_no_recipe_gives(self):
        import torch

        class Rot(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.register_buffer("f", torch.polar(
                    torch.ones(4, 2), torch.rand(4, 2) * 3))

            def forward(self, x):
                z = torch.view_as_complex(x.reshape(2, 4, 2, 2))
                return torch.view_as_real(z * self.f).flatten(2)

        with self.assertRaises(libplan.UnsupportedError) as cm:
            lt.program_from_export(Rot(), (torch.randn(2, 4, 4),))
        self.assertIn("no rotary recipe gives", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
