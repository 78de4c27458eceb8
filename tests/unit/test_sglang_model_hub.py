"""The sglang_model role's download script (roles/sglang_model/files/hf_stage.py), the parts that need no hub."""
import importlib.util
from pathlib import Path
from types import SimpleNamespace

SCRIPT = Path(__file__).resolve().parents[2] / "roles" / "sglang_model" / "files" / "hf_stage.py"
SPEC = importlib.util.spec_from_file_location("hf_stage", SCRIPT)
hf_stage = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(hf_stage)


def sibling(name, size, sha256=None):
    return SimpleNamespace(rfilename=name, size=size, lfs=SimpleNamespace(sha256=sha256, size=size) if sha256 else None)


def test_the_repositorys_files_are_expected_with_their_lfs_hashes_and_hidden_ones_left_out():
    siblings = [sibling(".gitattributes", 1519), sibling("config.json", 3200),
                sibling("model-00001-of-00064.safetensors", 9_800_000_000, "ab" * 32),
                sibling("docs/.hidden/x", 1), sibling("tokenizer/vocab.json", 12)]
    assert hf_stage.expected_files(siblings) == {
        "config.json": {"size": 3200},
        "model-00001-of-00064.safetensors": {"size": 9_800_000_000, "sha256": "ab" * 32},
        "tokenizer/vocab.json": {"size": 12},
    }


def test_only_what_the_directory_lacks_at_its_size_is_still_to_download(tmp_path):
    (tmp_path / "config.json").write_bytes(b"x" * 10)
    (tmp_path / "a.safetensors").write_bytes(b"x" * 5)  # an interrupted download
    expected = {"config.json": {"size": 10}, "a.safetensors": {"size": 50}, "b.safetensors": {"size": 70}}
    assert hf_stage.missing_bytes(expected, str(tmp_path)) == 120
    assert hf_stage.missing_bytes(expected, str(tmp_path / "not-yet")) == 130


def test_the_free_space_is_that_of_the_nearest_directory_that_exists(tmp_path):
    assert hf_stage.free_bytes(str(tmp_path / "a" / "b" / "c")) == hf_stage.shutil.disk_usage(str(tmp_path)).free


def test_the_token_comes_from_its_file_only(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("hf_secret\n")
    assert hf_stage.read_token(["--check", "--token-file", str(token_file)]) == "hf_secret"
    assert hf_stage.read_token(["--check"]) is None
    token_file.write_text("")
    assert hf_stage.read_token(["--token-file", str(token_file)]) is None


def test_a_file_outside_lfs_is_expected_with_the_git_blob_id_the_hub_lists():
    """Issue 50: the hub says what config.json, the tokenizer and the trust-remote-code Python are (their git blob
    id), not only their size."""
    outside = SimpleNamespace(rfilename="modeling_kimi.py", size=12, lfs=None, blob_id="0123456789abcdef" * 2 + "01234567")
    assert hf_stage.expected_files([outside]) == {"modeling_kimi.py": {"size": 12, "git_sha1": outside.blob_id}}
