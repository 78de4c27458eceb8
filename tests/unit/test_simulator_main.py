"""How the simulator is started (__main__.py): as its package's directory (``python DIR``, as the service, the
launcher, the option check and the precompile run it), or as ``python -m sglang_simulator``."""
import shutil
import subprocess
import sys

from simulator_process import FILES, SIMULATOR

LAUNCHER = FILES / "sglang_launcher.py"
CHECK = ["--model-path", "m", "--sim-check-only"]


def run(argv, cwd, env=None):
    return subprocess.run(argv, cwd=cwd, env={"PATH": "/usr/bin:/bin", **(env or {})}, capture_output=True,
                          text=True, timeout=60, check=False)


def test_it_runs_as_its_directory_from_anywhere(tmp_path):
    done = run([sys.executable, str(SIMULATOR), *CHECK], cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("OK: the options parse"), done.stderr


def test_it_runs_as_a_module(tmp_path):
    done = run([sys.executable, "-m", "sglang_simulator", *CHECK], cwd=tmp_path, env={"PYTHONPATH": str(FILES)})
    assert done.returncode == 0 and done.stdout.startswith("OK: the options parse"), done.stderr


def test_it_runs_through_the_launcher_with_the_key_masked(tmp_path):
    done = run([sys.executable, str(LAUNCHER), str(SIMULATOR), *CHECK, "--api-key", "k26-main-secret-9a"],
               cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("OK: the options parse"), done.stderr
    assert "k26-main-secret-9a" not in done.stdout + done.stderr


def test_an_installed_copy_runs_and_its_folder_shadows_no_other_module(tmp_path):
    """The package's files alone, as the role installs them; a module of the same name as one the simulator imports
    (PyYAML here) planted in the package's folder is never imported: the folder itself is not on sys.path."""
    installed = tmp_path / "simulator" / "sglang_simulator"
    installed.mkdir(parents=True)
    for source in SIMULATOR.iterdir():
        if source.is_file():
            shutil.copy(source, installed / source.name)
    (installed / "yaml.py").write_text("raise ImportError('the planted yaml.py was imported')\n")
    done = run([sys.executable, str(installed), *CHECK], cwd=installed)
    assert done.returncode == 0 and done.stdout.startswith("OK: the options parse"), done.stderr
    done = run([sys.executable, str(LAUNCHER), str(installed), *CHECK], cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("OK: the options parse"), done.stderr
