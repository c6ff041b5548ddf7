"""Language models by their published dimensions: what a serving step of each computes and moves.

A ``ModelSpec`` is a decoder-only transformer as its Hugging Face ``config.json`` gives it
(the key names in brackets): ``layers`` [num_hidden_layers], ``hidden`` [hidden_size],
``heads`` [num_attention_heads], ``kv_heads`` [num_key_value_heads] (grouped-query attention,
Ainslie et al. 2023: every ``heads / kv_heads`` query heads share one key and value head),
``head_dim`` [head_dim, else hidden / heads], ``ffn`` [intermediate_size] of a SwiGLU MLP
(Shazeer 2020: gate and up projections, SiLU(gate) x up, down projection), ``experts``
[num_local_experts, num_experts] routed experts per layer each a SwiGLU MLP of ``expert_ffn``
[intermediate_size for Mixtral, moe_intermediate_size for Qwen3] with ``top_k``
[num_experts_per_tok] of them per token, ``vocab`` [vocab_size], the input embedding and the
output head untied [tie_word_embeddings false] or one matrix (``tied``: Llama-3.2-1B), RMSNorm
before attention and before the MLP and once at the end (Qwen3 also normalises every query and
key head, q_norm and k_norm, over head_dim).

The parameter counts below reproduce each model card's total (tests/mapping/test_models.py),
so the weight bytes a step streams are the published model's, not a rounding of it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer's dimensions (module docstring); weights in ``word`` bytes."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int  # a dense layer's SwiGLU intermediate size (unused when every layer is MoE)
    vocab: int
    experts: int = 0  # routed experts per layer; 0: a dense model
    top_k: int = 0
    expert_ffn: int = 0
    qk_norm: bool = False  # Qwen3: RMSNorm over each query and key head
    tied: bool = False  # the output head is the input embedding's matrix (tie_word_embeddings true)
    word: int = 2  # bytes per weight and activation element (bf16)
    source: str = ""  # where the figures come from

    @property
    def moe(self) -> bool:
        return self.experts > 0

    @property
    def q_width(self) -> int:
        """Elements of a token's queries (heads x head_dim; Qwen3-30B-A3B's is twice its hidden)."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Elements of a token's keys (or values) in one layer: kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    # ------------------------------------------------------------------ parameters, per layer
    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections (no biases), and Qwen3's q/k norms."""
        h = self.hidden
        return h * self.q_width + 2 * h * self.kv_width + self.q_width * h + (2 * self.head_dim if self.qk_norm else 0)

    @property
    def mlp_params(self) -> int:
        """Every parameter of the layer's MLP: the SwiGLU, or all experts and the router."""
        if self.moe:
            return self.experts * 3 * self.hidden * self.expert_ffn + self.hidden * self.experts
        return 3 * self.hidden * self.ffn

    @property
    def active_mlp_params(self) -> int:
        """The MLP parameters one token uses: its top_k experts and the router."""
        if self.moe:
            return self.top_k * 3 * self.hidden * self.expert_ffn + self.hidden * self.experts
        return self.mlp_params

    @property
    def layer_params(self) -> int:
        return self.attention_params + self.mlp_params + 2 * self.hidden  # two RMSNorms

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def vocab_matrices(self) -> int:
        """Vocab x hidden matrices it stores: the input embedding and the output head, or one when tied."""
        return 1 if self.tied else 2

    @property
    def params(self) -> int:
        """Every parameter: layers, input embedding, final norm, output head (unless tied)."""
        return self.layers * self.layer_params + self.vocab_matrices * self.embedding_params + self.hidden

    @property
    def active_params(self) -> int:
        """Parameters one token uses (the model card's "activated" count for an MoE)."""
        per = self.attention_params + self.active_mlp_params + 2 * self.hidden
        return self.layers * per + self.vocab_matrices * self.embedding_params + self.hidden

    # ------------------------------------------------------------------ bytes and FLOPs
    @property
    def weight_bytes(self) -> int:
        return self.params * self.word

    @property
    def kv_bytes_per_token(self) -> int:
        """KV cache bytes one token adds: K and V of every layer."""
        return self.layers * 2 * self.kv_width * self.word

    def experts_hit(self, tokens: int) -> float:
        """Expected experts of a layer that ``tokens`` tokens routed top_k uniformly reach:
        E (1 - (1 - k/E)^n) (each expert is missed by a token with probability 1 - k/E)."""
        if not self.moe or tokens <= 0:
            return 0.0
        return self.experts * (1.0 - (1.0 - self.top_k / self.experts) ** tokens)

    def tp_slice(self, tp: int) -> "ModelSpec":
        """What one chip of a tensor-parallel group of ``tp`` holds (Megatron-LM, Shoeybi et al.
        2019): a ``1/tp`` share of the query heads, of the MLP's (and every expert's) intermediate
        width and of the vocabulary (the output head's columns and the embedding's rows); the
        key/value heads split too, or each kept by ``tp / kv_heads`` chips when fewer than ``tp``
        (as vLLM replicates them). ValueError naming what does not divide."""
        if tp == 1:
            return self
        bad = [f"{k} {v}" for k, v in (("heads", self.heads), ("ffn", self.ffn), ("vocab", self.vocab),
                                        ("expert_ffn", self.expert_ffn)) if v % tp]
        if self.kv_heads >= tp and self.kv_heads % tp or self.kv_heads < tp and tp % self.kv_heads:
            bad.append(f"kv_heads {self.kv_heads}")
        if bad:
            raise ValueError(f"{self.name}: {', '.join(bad)} not divisible among {tp} chips")
        return self.with_(name=f"{self.name}/tp{tp}", heads=self.heads // tp, kv_heads=max(1, self.kv_heads // tp),
                          ffn=self.ffn // tp, vocab=self.vocab // tp, expert_ffn=self.expert_ffn // tp)

    def with_(self, **changes) -> "ModelSpec":
        from dataclasses import replace

        return replace(self, **changes)


# Published configurations (Hugging Face config.json of each model; parameter counts from the
# model cards, reproduced exactly by ModelSpec.params)
MODELS = {m.name: m for m in (
    # meta-llama/Llama-3.1-8B config.json: hidden_size 4096, intermediate_size 14336,
    # num_attention_heads 32, num_key_value_heads 8, num_hidden_layers 32, vocab_size 128256,
    # tie_word_embeddings false, torch_dtype bfloat16 (model card: 8.03 B parameters)
    ModelSpec("llama-3.1-8b", 32, 4096, 32, 8, 128, 14336, 128256,
              source="meta-llama/Llama-3.1-8B config.json"),
    # meta-llama/Llama-3.2-1B config.json: hidden_size 2048, intermediate_size 8192,
    # num_attention_heads 32, num_key_value_heads 8, head_dim 64, num_hidden_layers 16, vocab_size
    # 128256, tie_word_embeddings true, max_position_embeddings 131072, torch_dtype bfloat16 (model
    # card: 1.23 B parameters; counted here 1,235,814,400); the draft model of speculative decoding
    ModelSpec("llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 128256, tied=True,
              source="meta-llama/Llama-3.2-1B config.json"),
    # meta-llama/Llama-2-7b-hf config.json: hidden_size 4096, intermediate_size 11008,
    # num_attention_heads 32, num_key_value_heads 32, num_hidden_layers 32, vocab_size 32000,
    # tie_word_embeddings false (6.74 B parameters): the expert of Samba-CoE (Prabhakar et al., MICRO 2024)
    ModelSpec("llama-2-7b", 32, 4096, 32, 32, 128, 11008, 32000, source="meta-llama/Llama-2-7b-hf config.json"),
    # meta-llama/Llama-3.1-70B config.json: hidden_size 8192, intermediate_size 28672,
    # num_attention_heads 64, num_key_value_heads 8, num_hidden_layers 80, vocab_size 128256
    # (model card: 70.6 B parameters)
    ModelSpec("llama-3.1-70b", 80, 8192, 64, 8, 128, 28672, 128256,
              source="meta-llama/Llama-3.1-70B config.json"),
    # mistralai/Mixtral-8x7B-v0.1 config.json: hidden_size 4096, intermediate_size 14336 (each
    # expert), num_attention_heads 32, num_key_value_heads 8, num_hidden_layers 32,
    # num_local_experts 8, num_experts_per_tok 2, vocab_size 32000 (46.7 B parameters)
    ModelSpec("mixtral-8x7b", 32, 4096, 32, 8, 128, 14336, 32000, experts=8, top_k=2, expert_ffn=14336,
              source="mistralai/Mixtral-8x7B-v0.1 config.json"),
    # Qwen/Qwen3-30B-A3B config.json: hidden_size 2048, head_dim 128, num_attention_heads 32,
    # num_key_value_heads 4, num_hidden_layers 48, num_experts 128, num_experts_per_tok 8,
    # moe_intermediate_size 768, decoder_sparse_step 1 and mlp_only_layers [] (every layer MoE;
    # intermediate_size 6144 unused), vocab_size 151936, tie_word_embeddings false, q_norm and
    # k_norm (model card: 30.5 B parameters, 3.3 B activated)
    ModelSpec("qwen3-30b-a3b", 48, 2048, 32, 4, 128, 6144, 151936, experts=128, top_k=8, expert_ffn=768,
              qk_norm=True, source="Qwen/Qwen3-30B-A3B config.json"),
)}


def model_preset(name: str) -> ModelSpec:
    """A model by name (KeyError naming the known ones)."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {', '.join(MODELS)}") from None
