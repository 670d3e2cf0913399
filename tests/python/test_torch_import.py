"""libplan.torch.plan_from_module: models parallelized by hand become plans.

One torchrun launch (gloo, CPU, 4 processes, tests/python/torchrun/
import_worker.py) runs every case; the driver checks the worker's figures
again, so a worker that printed ok without them fails here too. Cases:
a Megatron MLP (ColwiseParallel, RowwiseParallel) and a transformer block
with sequence parallelism (SequenceParallel, PrepareModuleInput, Rowwise
output Shard(1)) on dp=2 x tp=2; the MLP under FSDP2's fully_shard on
dp=4; the MLP under TP then FSDP on dp=2 x tp=2 (the nested
_StridedShard); a hand plan that misreads an activation (refused). Then
transformers' GPT-2, Llama and Mixtral (on dp=2 x tp=2, Mixtral also on
dp=2 x ep=2) traced with program_from_export, searched, verified and
trained two steps by parallelize_program, and transformers'
Llama parallelized by hand with torchtitan's tensor-parallel recipe for
its Llama 3, imported through the export tracer (skipped, saying so,
where transformers is not installed)."""

import json
import os
import subprocess
import sys
import unittest

from util import BINDING, ROOT
import libplan.torch as lt
from libplan import torch_parallel as tp

NEED_TORCH = "torch (with torch.distributed.tensor) is not installed"
WORKER = os.path.join(ROOT, "tests", "python", "torchrun",
                      "import_worker.py")
LAUNCH_SECONDS = 300
TOL = 1e-5


def _torch_kinds(counts):
    """CommDebugMode's op names (all_gather_into_tensor, _allgather_base_)
    as the lowered plan's kinds."""
    out = {}
    for k, n in counts.items():
        flat = k.replace("_", "")
        for kind in tp.COLLECTIVES:
            if kind.replace("_", "") in flat:
                out[kind] = out.get(kind, 0) + n
                break
        else:
            out[k] = n
    return out


@unittest.skipUnless(lt.available(), NEED_TORCH)
class TestPlanFromModuleUnderTorchrun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        env = dict(os.environ)
        env["PYTHONPATH"] = BINDING
        env.setdefault("OMP_NUM_THREADS", "1")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node", "4", WORKER]
        try:
            r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                               timeout=LAUNCH_SECONDS,
                               cwd=os.path.dirname(WORKER))
        except subprocess.TimeoutExpired as e:
            raise AssertionError("torchrun ran past %d s" % LAUNCH_SECONDS) \
                from e
        cls.proc = r
        cls.lines = [ln for ln in r.stdout.splitlines()
                     if ln.startswith(("ok ", "FAIL "))]
        cls.results = {}
        for ln in cls.lines:
            res = json.loads(ln[ln.index("{"):])
            cls.results[res["case"]] = (ln.startswith("ok "), res)

    def case(self, name):
        detail = "\n".join(self.lines) + "\n" + self.proc.stderr[-3000:]
        self.assertIn(name, self.results, detail)
        ok, res = self.results[name]
        self.assertTrue(ok, detail)
        self.assertNotIn("error", res, detail)
        return res

    def common(self, res, roundtrip=True):
        self.assertLessEqual(res["hand_max_diff"], TOL)
        self.assertIs(res["verify_equal"], True)
        if roundtrip:
            self.assertIsNone(res["roundtrip_refused"])
            for k in tp.COLLECTIVES:
                self.assertEqual(res["roundtrip_run"][k], res["plan"][k], k)
            self.assertLessEqual(res["roundtrip_max_diff"], TOL)

    def test_exit_status(self):
        self.assertEqual(self.proc.returncode, 0,
                         "\n".join(self.lines) + self.proc.stderr[-3000:])

    def test_megatron_mlp(self):
        res = self.case("mlp_tp")
        self.common(res)
        self.assertEqual(res["placements"], {
            "x": "S(0)R", "fc1.weight": "RS(0)", "fc1.bias": "RS(0)",
            "fc2.weight": "RS(1)", "fc2.bias": "RR"})
        # the hand-parallelized forward ran the plan's collectives
        want = {k: n for k, n in res["plan"].items() if n}
        self.assertEqual(_torch_kinds(res["hand_run"]), want)
        self.assertEqual(want, {"all_reduce": 1})

    def test_sequence_parallel_block(self):
        res = self.case("block_sp")
        self.common(res)
        self.assertEqual(res["placements"]["x"], "S(0)S(1)")
        self.assertEqual(res["placements"]["attn.qkv.weight"], "RS(0)")
        self.assertEqual(res["placements"]["attn.proj.weight"], "RS(1)")
        want = {k: n for k, n in res["plan"].items() if n}
        self.assertEqual(_torch_kinds(res["hand_run"]), want)
        self.assertEqual(want, {"all_gather": 2, "reduce_scatter": 2})

    def test_fsdp(self):
        res = self.case("mlp_fsdp")
        self.common(res)
        self.assertEqual(set(res["placements"].values()), {"S(0)"})
        # the plan gathers each parameter; FSDP coalesces a module's
        self.assertEqual(res["plan"]["all_gather"], 4)
        self.assertEqual(_torch_kinds(res["hand_run"]), {"all_gather": 2})

    def test_fsdp_over_tp_nests(self):
        res = self.case("mlp_fsdp_tp")
        self.common(res, roundtrip=False)
        # FSDP's _StridedShard over the column split: tp outer, dp inner
        self.assertEqual(res["placements"]["fc1.weight"], "S(0:1)S(0:0)")
        self.assertEqual(res["placements"]["fc2.weight"], "S(0)S(1)")
        self.assertIn("nesting order", res["roundtrip_refused"])

    def hf(self, name):
        if ("hf:" + name) not in self.results and any(
                ln.startswith("skip hf:") for ln in
                self.proc.stdout.splitlines()):
            self.skipTest("transformers is not installed")
        res = self.case("hf:" + name)
        self.assertIs(res["verify_equal"], True)
        self.assertLessEqual(res["loss_diff"], TOL)
        self.assertLessEqual(res["grad_diff"], TOL)
        # DTensor moves a split from one dim to another (the lowered
        # all-to-all) on gloo by an all-gather and a chunk
        want = dict(res["plan"])
        want["all_gather"] += want["all_to_all"]
        want["all_to_all"] = 0
        for k in tp.COLLECTIVES:
            self.assertEqual(res["run"][k], want[k], k)
        # a megatron plan splits the model over tp: it communicates
        self.assertGreater(sum(res["plan"].values()), 0)
        # the vocab-parallel embedding: the table's rows split over tp
        # (a mesh without tp keeps it replicated)
        self.assertEqual(res["table"][1],
                         "RR" if name.endswith("_ep") else "RS(0)",
                         res["table"])
        return res

    def test_transformers_gpt2(self):
        self.hf("gpt2")

    def test_transformers_llama(self):
        self.hf("llama")

    def test_transformers_mixtral(self):
        res = self.hf("mixtral")
        # the experts' matmuls are projections on tp: the weights' rows
        # (gate/up's and down's output features) split
        self.assertEqual(res["experts"], {
            "model.layers.0.mlp.experts.gate_up_proj": "RS(1)",
            "model.layers.0.mlp.experts.down_proj": "RS(1)"})
        self.assertEqual(res["plan"]["all_to_all"], 0)

    def test_transformers_mixtral_expert_parallel(self):
        res = self.hf("mixtral_ep")
        # on dp=2 x ep=2 the experts split over ep and the tokens reach
        # them by all-to-all
        self.assertEqual(res["experts"], {
            "model.layers.0.mlp.experts.gate_up_proj": "RS(0)",
            "model.layers.0.mlp.experts.down_proj": "RS(0)"})
        self.assertGreater(res["plan"]["all_to_all"], 0)

    def test_transformers_llama_tp_import(self):
        if "hf:llama_tp_import" not in self.results and any(
                ln.startswith("skip hf:") for ln in
                self.proc.stdout.splitlines()):
            self.skipTest("transformers is not installed")
        res = self.case("hf:llama_tp_import")
        self.assertLessEqual(res["hand_max_diff"], TOL)
        self.assertLessEqual(res["roundtrip_max_diff"], TOL)
        self.assertIs(res["verify_equal"], True)
        p = res["placements"]
        for proj in ("q_proj", "k_proj", "v_proj"):
            self.assertEqual(p["model.layers.0.self_attn.%s.weight" % proj],
                             "RS(0)")
        self.assertEqual(p["model.layers.0.self_attn.o_proj.weight"],
                         "RS(1)")
        self.assertEqual(p["model.layers.0.mlp.down_proj.weight"], "RS(1)")
        want = {k: n for k, n in res["plan"].items() if n}
        # one all-reduce per row-parallel projection: 2 layers x 2
        self.assertEqual(want, {"all_reduce": 4})
        self.assertEqual(_torch_kinds(res["hand_run"]), want)
        for k in tp.COLLECTIVES:
            self.assertEqual(res["roundtrip_run"][k], res["plan"][k], k)
        costs = res["modeled_step_s"]
        self.assertEqual(set(costs), {"imported", "megatron_search",
                                      "greedy_search"})
        self.assertTrue(all(c > 0 for c in costs.values()), costs)

    def titan(self, name):
        skip = [ln for ln in self.proc.stdout.splitlines()
                if ln.startswith("skip titan:")]
        if name not in self.results and skip:
            self.skipTest(skip[0].split(" ", 2)[2])
        return self.case(name)

    def test_torchtitan_llama3(self):
        res = self.titan("titan:llama3")
        self.assertIs(res["verify_equal"], True)
        self.assertLessEqual(res["loss_diff"], TOL)
        self.assertLessEqual(res["grad_diff"], TOL)
        for k in tp.COLLECTIVES:
            self.assertEqual(res["run"][k], res["plan"][k], k)
        self.assertGreater(sum(res["plan"].values()), 0)
        self.assertEqual(res["table"][1], "RS(0)", res["table"])

    def test_torchtitan_tp_plan_import(self):
        """torchtitan's own apply_tp on its Llama 3: imported, run, and
        equal to megatron's recipe with sequence parallelism, every
        placement and strategy."""
        res = self.titan("titan:llama3_tp_import")
        self.assertLessEqual(res["hand_max_diff"], TOL)
        self.assertLessEqual(res["roundtrip_max_diff"], TOL)
        self.assertIs(res["verify_equal"], True)
        p = res["placements"]
        self.assertEqual(p["tok_embeddings.weight"], "RS(0)")  # vocab rows
        for w in ("wq", "wk", "wv"):
            self.assertEqual(p["layers.0.attention.%s.weight" % w], "RS(0)")
        self.assertEqual(p["layers.0.attention.wo.weight"], "RS(1)")
        self.assertEqual(p["layers.0.feed_forward.w2.weight"], "RS(1)")
        want = {k: n for k, n in res["plan"].items() if n}
        # sequence parallel: per layer two all-gathers before the column
        # projections and two reduce-scatters after the row ones, one
        # reduce-scatter of the embedding's partial sum, one all-gather
        # before the output layer
        self.assertEqual(want, {"all_gather": 5, "reduce_scatter": 5})
        self.assertEqual(_torch_kinds(res["hand_run"]), want)
        for k in tp.COLLECTIVES:
            self.assertEqual(res["roundtrip_run"][k], res["plan"][k], k)
        self.assertEqual(res["unlike_megatron"], [])
        costs = res["modeled_step_s"]
        self.assertEqual(costs["imported"], costs["megatron_search"])
        self.assertTrue(all(c > 0 for c in costs.values()), costs)

    def test_misread_activation_refused(self):
        res = self.case("mlp_bad")
        self.assertIn("fc2", res["refused"])
        self.assertIn("ColwiseParallel", res["refused"])


if __name__ == "__main__":
    unittest.main()
