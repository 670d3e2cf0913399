"""torchtitan's Llama 3 (torchtitan.models.llama3, pinned in
scripts/deps-python.sh) built from a small config with random weights
(nothing downloaded), and torchtitan's own tensor-parallel plan for it
(`apply_tp` of torchtitan.models.llama3.infra.parallelize), for the
export tracer's and the import's tests. Its rotary embedding multiplies
complex numbers (view_as_complex, freqs_cis); the RoPE scaling of Llama
3.1 is set to factor 1 (Llama 3.0's plain rotary), whose tables libplan's
rope_cos / rope_sin recipes give."""

VOCAB, SEQ, BATCH = 32, 8, 4


def available():
    """None when torchtitan's Llama 3 can be imported, else the reason."""
    try:
        from torchtitan.models.llama3.model.model import Transformer  # noqa
        from torchtitan.models.llama3.infra.parallelize import apply_tp  # noqa
        return None
    except Exception as e:  # ImportError, or a missing dependency of it
        return "torchtitan's Llama 3 cannot be imported: %s" % (
            str(e).splitlines()[0] if str(e) else type(e).__name__)


def build():
    import torch
    from torchtitan.models.llama3.model.args import (
        RoPEScalingArgs, TransformerModelArgs)
    from torchtitan.models.llama3.model.model import Transformer
    args = TransformerModelArgs(
        dim=16, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=VOCAB,
        multiple_of=16, max_seq_len=SEQ, rope_theta=500000,
        rope_scaling_args=RoPEScalingArgs(scaling_factor=1.0))
    m = Transformer(args)
    with torch.no_grad():
        m.init_weights()
    return m.eval()


def apply_torchtitan_tp(model, tp_mesh):
    """torchtitan's own tensor-parallel plan for its Llama 3 (vocab-
    parallel embedding, sequence-parallel norms, column-parallel q/k/v
    and w1/w3, row-parallel wo and w2, the output layer column-parallel,
    its logits left split over the vocabulary for the loss), as its
    trainer applies it by default (loss parallel on, no float8)."""
    from torchtitan.models.llama3.infra.parallelize import apply_tp
    apply_tp(model, tp_mesh, loss_parallel=True,
             enable_float8_tensorwise_tp=False)
    return model
