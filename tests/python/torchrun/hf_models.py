"""Hugging Face transformers models built from small configs with random
weights (nothing downloaded), for the export tracer's tests: GPT-2,
Llama (grouped-query attention, rotary embeddings, RMSNorm, SiLU MLP) and
Mixtral (Llama's attention, a top-2 router over 4 SiLU experts).
Word embeddings are untied (a tied table is one parameter under two
names, which a plan would place twice) and Llama and Mixtral have no
padding index (its embedding row gets no gradient, which libplan's
embedding has no attribute for)."""

VOCAB, SEQ, BATCH = 32, 8, 4


def available():
    try:
        import transformers  # noqa: F401
        return True
    except ImportError:
        return False


def build(name):
    import transformers
    transformers.logging.set_verbosity_error()
    if name == "gpt2":
        from transformers import GPT2Config, GPT2LMHeadModel
        cfg = GPT2Config(n_layer=2, n_embd=16, n_head=2, n_positions=SEQ,
                         vocab_size=VOCAB, resid_pdrop=0.0, embd_pdrop=0.0,
                         attn_pdrop=0.0, bos_token_id=0, eos_token_id=0,
                         tie_word_embeddings=False,
                         attn_implementation="sdpa")
        return GPT2LMHeadModel(cfg).eval()
    if name == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM
        cfg = LlamaConfig(num_hidden_layers=2, hidden_size=16,
                          intermediate_size=32, num_attention_heads=4,
                          num_key_value_heads=2, max_position_embeddings=SEQ,
                          vocab_size=VOCAB, bos_token_id=0, eos_token_id=0,
                          pad_token_id=None, tie_word_embeddings=False,
                          attn_implementation="sdpa")
        return LlamaForCausalLM(cfg).eval()
    if name == "mixtral":
        from transformers import MixtralConfig, MixtralForCausalLM
        cfg = MixtralConfig(num_hidden_layers=2, hidden_size=16,
                            intermediate_size=32, num_attention_heads=4,
                            num_key_value_heads=2, num_local_experts=4,
                            num_experts_per_tok=2,
                            max_position_embeddings=SEQ, vocab_size=VOCAB,
                            bos_token_id=0, eos_token_id=0,
                            pad_token_id=None, tie_word_embeddings=False,
                            attn_implementation="sdpa")
        return MixtralForCausalLM(cfg).eval()
    raise KeyError(name)


MODELS = ("gpt2", "llama", "mixtral")
