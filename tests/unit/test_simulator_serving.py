"""The serving state behind the simulator's API (serving.py): metrics, token pacing, replies, one generation."""
import io

from sglang_simulator import log, options, serving


def state(*flags):
    args, settings = options.parse_args(["--model-path", "m", *flags], {})
    return serving.ServerState(args, settings, log.Log("info", io.StringIO()))


def test_prompt_tokens_are_words_ids_and_message_texts():
    assert serving.count_words("one two  three") == 3
    assert serving.count_words([5, 6, 7, 8]) == 4
    assert serving.count_words([{"role": "user", "content": "a b"}, {"content": [{"type": "text", "text": "c"}]}]) == 3
    assert serving.count_words(None) == 0


def test_tokens_are_the_words_of_one_sentence_in_turn():
    text = "".join(serving.token_text(index) for index in range(len(serving.WORDS) + 1))
    assert text == " ".join(serving.WORDS) + " " + serving.WORDS[0]


def test_metrics_are_prometheus_text_with_the_model_label():
    metrics = serving.Metrics()
    metrics.start(5)
    metrics.token()
    metrics.token()
    text = metrics.render('k"26', 12.5)
    assert '# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name="k\\"26"} 1.0' in text
    assert 'sglang:prompt_tokens_total{model_name="k\\"26"} 5.0' in text
    # as SGLang: the KV tokens in use move with each token, a request's tokens are counted when it finishes
    assert 'sglang:num_used_tokens{model_name="k\\"26"} 7.0' in text
    assert 'sglang:generation_tokens_total{model_name="k\\"26"} 0.0' in text
    assert 'sglang:gen_throughput{model_name="k\\"26"} 12.5' in text
    metrics.finish(5, 2)
    assert metrics.running == 0 and metrics.requests == 1
    text = metrics.render('k"26', 0.0)
    assert 'generation_tokens_total{model_name="k\\"26"} 2.0' in text and 'num_used_tokens{model_name="k\\"26"} 0.0' in text


def test_throughput_follows_the_performance_model_or_the_fixed_speed():
    modelled = state("--pp-size", "8")
    modelled.metrics.start(1)
    assert modelled.throughput() == modelled.model.throughput(1) > 0
    fixed = state("--sim-tokens-per-second", "20")
    fixed.metrics.start(1)
    fixed.metrics.start(1)
    assert fixed.throughput() == 40.0


def test_a_generation_counts_its_request_and_logs_its_prefill():
    served = state("--sim-tokens-per-second", "0")
    with serving.Generation(served, 7) as generation:
        assert served.metrics.running == 1
        assert list(generation.tokens(3)) == ["Kimi", " K2.6", " is"]
    assert served.metrics.running == 0 and served.metrics.generation_tokens == 3
    assert "Prefill batch, #new-seq: 1, #new-token: 7," in served.log.stream.getvalue()


def test_openai_replies_and_stream_chunks():
    reply = serving.OpenAIReply({"model": "k26"}, True, "served")
    full = reply.full("hi there", serving.usage(2, 2))
    assert full["object"] == "chat.completion" and full["choices"][0]["message"]["content"] == "hi there"
    assert full["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    first, last = reply.chunk(0, "hi", last=False), reply.chunk(1, " there", last=True)
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": "hi"}
    assert last["choices"][0]["finish_reason"] == "length" and last["object"] == "chat.completion.chunk"
    text = serving.OpenAIReply({}, False, "served")
    assert text.model == "served" and text.chunk(0, "a", last=True)["object"] == "text_completion"
