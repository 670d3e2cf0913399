"""libplan.torch.program_from_export: torch.export's ATen graph as a
libplan program. Run on one device with libplan's CPU kernels (the
verifier's reference run), the traced program gives the module's output:
a small causal-attention model written here (SDPA with an explicit mask
built from arange, folded into the op's causal flag; position ids from
arange into an embedding), and transformers' GPT-2 and Llama (small
configs, random weights; skipped, saying so, without transformers). A
padding index is refused, naming the node."""

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
