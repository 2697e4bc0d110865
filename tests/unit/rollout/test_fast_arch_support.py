"""What fast refuses, and when: config.json dicts in, a one-line reason naming the feature out,
and an unsupported model refused at engine construction. Also: `vllm` resolves in the engine
registry without the vllm package, and building it without the package says how to install it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from posttrain.errors import ConfigError, ModelError
from posttrain.rollout.engines.fast.model import check_supported

# trimmed config.json files as the Hub writes them (legacy rope keys included)
SMOLLM2 = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "hidden_size": 576,
           "num_hidden_layers": 30, "rope_scaling": None, "rope_theta": 100000, "tie_word_embeddings": True}
QWEN3 = {"model_type": "qwen3", "hidden_act": "silu", "rope_scaling": None, "sliding_window": None,
         "use_sliding_window": False, "max_window_layers": 28}
GEMMA3_1B = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
             "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "rope_local_base_freq": 10000,
             "rope_scaling": None, "rope_theta": 1000000, "sliding_window": 512, "sliding_window_pattern": 6,
             "final_logit_softcapping": None, "attn_logit_softcapping": None}
LLAMA31 = {"model_type": "llama", "hidden_act": "silu",
           "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192, "rope_type": "llama3"}}


@pytest.mark.parametrize("cfg", [SMOLLM2, QWEN3, GEMMA3_1B, LLAMA31, {"model_type": "qwen2", "hidden_act": "silu"},
                                 {"model_type": "llava", "vision_config": {}, "text_config": {"model_type": "llama"}}])
def test_supported_configs_pass(cfg):
    assert check_supported(cfg) is None


@pytest.mark.parametrize("cfg, needle", [
    ({"model_type": "mixtral"}, "model_type 'mixtral' is not supported (supported: llama"),
    ({"model_type": "gemma3", "text_config": {"model_type": "gemma3_text"}, "vision_config": {}}, "gemma3_text"),
    ({**LLAMA31, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, "rope_scaling type 'dynamic'"),
    ({**QWEN3, "rope_scaling": {"rope_type": "longrope"}}, "rope_scaling type 'longrope'"),
    ({**GEMMA3_1B, "rope_parameters": {"full_attention": {"rope_type": "dynamic"},
                                       "sliding_attention": {"rope_type": "default"}}}, "'dynamic'"),
    ({**SMOLLM2, "hidden_act": "gelu"}, "hidden_act 'gelu'"),
    ({**GEMMA3_1B, "hidden_activation": "gelu"}, "hidden_activation 'gelu'"),
    ({**GEMMA3_1B, "use_bidirectional_attention": True}, "use_bidirectional_attention"),
    ({**QWEN3, "layer_types": ["full_attention", "chunked_attention"]}, "layer type 'chunked_attention'"),
    ({**SMOLLM2, "quantization_config": {"quant_method": "gptq"}}, "quantization_config"),
    ({"model_type": "llava", "vision_config": {}, "text_config": {"model_type": "phi3"}}, "'phi3'"),
])
def test_unsupported_feature_is_named_in_one_line(cfg, needle):
    msg = check_supported(cfg)
    assert msg is not None and needle in msg and "\n" not in msg and msg.startswith("fast engine:")


def test_engine_refuses_unsupported_config_at_construction(tiny):
    from transformers import LlamaConfig, LlamaForCausalLM

    from posttrain.rollout.engines.fast.engine import FastEngine

    _, tok = tiny
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, max_position_embeddings=64,
                      rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    with pytest.raises(ModelError, match="rope_scaling type 'dynamic' is not supported"):
        FastEngine(LlamaForCausalLM(cfg), tok)


def test_vllm_is_registered_without_importing_vllm():
    code = ("import sys; from posttrain.builtins import load_builtins; load_builtins(); "
            "from posttrain.registry import registry; "
            "cls = registry('engine').get('vllm'); print(cls.__name__, 'vllm' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["VLLMEngine", "False"]


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_vllm_without_the_package_is_a_one_line_error_naming_it(tiny):
    from posttrain.rollout import make_engine

    model, tok = tiny
    with pytest.raises(ConfigError) as e:
        make_engine("vllm", model, tok)
    assert "vllm" in str(e.value) and "pip install vllm" in str(e.value) and "\n" not in str(e.value)
