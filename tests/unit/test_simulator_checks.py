"""SGLang's checks and error texts as the simulator has them (checks.py), and --sim-check-only."""

import io

import pytest

from simulator_process import port_open
from sglang_simulator import checks, log, options


def parsed(*flags):
    return options.parse_args(["--model-path", "m", *flags], {})[0]


# ---------------------------------------------------------------- in-process

def test_a_layout_sglang_refuses_is_its_assertion_with_its_traceback():
    with pytest.raises(checks.Fatal) as fatal:
        checks.check_server_args(parsed("--tp-size", "3", "--nnodes", "2"))
    text = str(fatal.value)
    assert text.startswith("Traceback (most recent call last):\n")
    assert f'File "{checks.SITE}/sglang/srt/server_args.py", line 1391, in _handle_parallelism' in text
    assert text.endswith("AssertionError: tp_size * pp_size must be divisible by nnodes "
                         "(tp_size=3, pp_size=1, nnodes=2, node_rank=0)")
    with pytest.raises(checks.Fatal, match="node_rank must be in"):
        checks.check_server_args(parsed("--nnodes", "2", "--node-rank", "2", "--pp-size", "2"))


def test_sglangs_warnings_about_a_layout_and_dflash_override():
    args = parsed("--pp-size", "2", "--speculative-algorithm", "DFLASH", "--speculative-num-steps", "3")
    notes = checks.check_server_args(args)
    assert "Pipeline parallelism is incompatible with overlap schedule." in notes
    assert any(note.startswith("DFLASH only supports") for note in notes)
    assert (args.speculative_num_steps, args.speculative_eagle_topk) == (1, 1)
    assert checks.check_server_args(parsed()) == []


def test_what_turns_the_cuda_graphs_off():
    assert checks.plan_cuda_graphs(parsed()) == (True, True, [], [])
    decode, prefill, notes, infos = checks.plan_cuda_graphs(parsed("--attention-backend", "torch_native"))
    assert (decode, prefill, infos) == (False, False, [])
    assert notes == ["Cuda graph is disabled because of using torch native attention backend"]
    assert checks.plan_cuda_graphs(parsed("--cuda-graph-backend-decode", "disabled"))[:2] == (False, True)
    decode, prefill, notes, infos = checks.plan_cuda_graphs(parsed("--pp-size", "8"))
    assert (decode, prefill) == (True, False) and infos[0].startswith("Disabling breakable prefill CUDA graph")
    assert checks.plan_cuda_graphs(parsed("--pp-size", "8", "--cuda-graph-backend-prefill", "breakable"))[:2] == (
        True, True)


def test_each_node_leads_its_own_pipeline_ranks():
    assert checks.local_rank_leads(parsed("--tp-size", "2", "--pp-size", "2")) == [(0, 0), (1, 0)]
    second = parsed("--pp-size", "8", "--nnodes", "2", "--node-rank", "1")
    assert checks.local_rank_leads(second) == [(4, 0), (5, 0), (6, 0), (7, 0)]
    assert checks.rank_label(second, 4, 0) == " PP4 TP0"
    assert checks.rank_label(parsed("--tp-size", "8"), 0, 3) == " TP3"


def test_the_error_texts_are_sglangs_and_torchs():
    assert "OSError: Can't load the configuration of '/m'" in checks.missing_model_error("/m")
    assert checks.out_of_memory_error().startswith("Scheduler hit an exception: Traceback (most recent call last):")
    assert f"total capacity of {checks.GPU_TOTAL_GIB:.2f} GiB" in checks.out_of_memory_error()
    assert "CUDA error: an illegal memory access was encountered" in checks.illegal_memory_access_error()


def test_check_only_masks_the_key_and_reports_a_refused_layout(capsys):
    stream = io.StringIO()
    assert checks.check_only(parsed("--api-key", "secret-1234"), log.Log(stream=stream)) == 0
    out = capsys.readouterr().out
    assert out.startswith("OK: the options parse (server_args={") and "'api_key': '********'" in out
    assert "secret-1234" not in out
    assert checks.check_only(parsed("--tp-size", "3", "--nnodes", "2"), log.Log(stream=stream)) == 1
    assert "AssertionError" in stream.getvalue() and capsys.readouterr().out == ""


# ---------------------------------------------------------------- as a process


def test_check_args_only_parses(start_sim):
    sim = start_sim("--sim-check-only", "--tp-size", "8", config={"served-model-name": "k26"})
    assert sim.wait_exit() == 0
    assert "'served_model_name': 'k26'" in sim.proc.stdout.read().decode()
    assert not port_open(sim.port)


def test_unsupported_layout_fails_with_assertion(start_sim):
    sim = start_sim("--tp-size", "3", "--nnodes", "2")
    assert sim.wait_exit() == 1
    assert "AssertionError" in sim.stderr


def test_missing_absolute_model_path_exits_1(start_sim, tmp_path):
    sim = start_sim("--model-path", str(tmp_path / "absent"), model=False)
    assert sim.wait_exit() == 1
    assert "Can't load the configuration of" in sim.stderr
