"""eval/cache.py cache_key: what makes two generations the same entry, and which old entries are never reused."""

import hashlib
import json

from posttrain.eval.cache import cache_key


def old_key(model_hash, prompt_ids, sampling, seed, epoch):  # the key before the draws revision (f209827's parent)
    blob = json.dumps([model_hash, list(prompt_ids), sampling, seed, epoch], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


SAMPLED = {"temperature": 0.7, "max_new_tokens": 8}
GREEDY = {"temperature": 0.0, "max_new_tokens": 8}


def test_sampled_generations_cached_before_the_sampler_fix_are_never_reused():
    assert cache_key("m", [1, 2], SAMPLED, 0, 0) != old_key("m", [1, 2], SAMPLED, 0, 0)


def test_greedy_generations_cached_before_the_sampler_fix_are_still_reused():  # greedy decoding never drew
    assert cache_key("m", [1, 2], GREEDY, 0, 0) == old_key("m", [1, 2], GREEDY, 0, 0)


def test_a_sampling_without_temperature_is_greedy():
    assert cache_key("m", [1, 2], {"max_new_tokens": 8}, 0, 0) == old_key("m", [1, 2], {"max_new_tokens": 8}, 0, 0)


def test_the_caller_sampling_dict_is_left_as_it_was():
    sampling = dict(SAMPLED)
    cache_key("m", [1, 2], sampling, 0, 0)
    assert sampling == SAMPLED


def test_seed_and_epoch_separate_sampled_entries():
    keys = {cache_key("m", [1, 2], SAMPLED, s, e) for s in (0, 1) for e in (0, 1)}
    assert len(keys) == 4
